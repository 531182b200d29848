package fake

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler/fit"
)

// Kinds of Violation, one per safety property of DESIGN §8 the cloud
// can see.
const (
	// KindServersLost: a server is missing or duplicated.
	KindServersLost = "servers-lost"
	// KindOvercommit: a host's placement allocations exceed its
	// allocatable capacity (servers moving in and out counted on both
	// ends), or the accounting disagrees with the servers.
	KindOvercommit = "placement-overcommit"
	// KindOverload: at the start of a live migration to a named host, the
	// destination's demand (servers on it, moves in flight towards it and
	// this server) exceeds Config.OverloadCPU / OverloadRAM of its
	// physical capacity, and did too by the demand the plan last read of
	// those servers (else it is drift, see Cloud.Drift).
	KindOverload = "plan-overloads-destination"
	// KindMigratedTwice: one server migrated twice under one global
	// request id (one plan).
	KindMigratedTwice = "migrated-twice-in-one-plan"
)

// Violation is one safety property found broken.
type Violation struct {
	At      time.Time // cloud time it was seen
	Kind    string    // one of the Kind constants
	Message string    // what, where, with the numbers
}

// String formats v for logs and test failures.
func (v Violation) String() string {
	return v.At.Format("15:04:05.000") + " " + v.Kind + ": " + v.Message
}

// Stats counts what the cloud did.
type Stats struct {
	Started   int // live migrations accepted (202)
	Completed int // ... ended completed
	Failed    int // ... ended in error (NoValidHost and injected)
	Refused   int // ... of which refused by scheduling (NoValidHost)
	InFlight  int // ... not ended yet
	Faults    int // faults injected (API calls and migrations)
	Forced    int // live migrations forced to complete (ForceCompleteMigration)
	Cancelled int // live migrations aborted (AbortMigration), ended cancelled
}

// observer holds the safety bookkeeping (guarded by Cloud.mu).
type observer struct {
	expected  int // servers added minus deleted
	placed    int // entries over every host's server index
	offloaded int // servers without a host
	lastLost  int
	moved     map[[2]string]bool // (global request id, server) that moved
	// seen: the demand of each server as each plan (global request id)
	// last read it, and as anyone last read it (""); seenOrder: the
	// plans kept, oldest first (see checkPlan).
	seen      map[string]map[string]demandRead
	seenOrder []string
	viol      []Violation
	drift     []Violation
	stats     Stats
}

func (c *Cloud) violate(kind, format string, args ...any) {
	c.obs.viol = append(c.obs.viol, Violation{At: c.clock.Now(), Kind: kind, Message: fmt.Sprintf(format, args...)})
}

// lost is how far the server indexes are from the servers that exist.
func (o *observer) lost() int {
	d := o.expected - o.placed - o.offloaded
	if d < 0 {
		return -d
	}
	return d
}

// checkHosts runs after every mutation: conservation (O(1), from the
// index counters) and placement on the hosts the mutation touched. Each
// problem is reported when it appears, not again at every check.
func (c *Cloud) checkHosts(hs ...*host) {
	if n := c.obs.lost(); n != c.obs.lastLost {
		if n != 0 {
			c.violate(KindServersLost, "servers not conserved: %d exist, %d on hosts and %d offloaded", c.obs.expected, c.obs.placed, c.obs.offloaded)
		}
		c.obs.lastLost = n
	}
	for _, h := range hs {
		if h == nil {
			continue
		}
		over := fit.Overcommitted(fit.Use{VCPUs: float64(h.usedV), RAMMB: float64(h.usedR)}, c.limit(h))
		if over && !h.overcommitted {
			c.violate(KindOvercommit, "host %s overcommitted in placement: %d/%.0f VCPU and %d/%.0f MB allocated",
				h.Name, h.usedV, h.AllocatableVCPUs(), h.usedR, h.AllocatableRAMMB())
		}
		h.overcommitted = over
	}
}

// limit is what h accepts, judged by the rule the scheduler plans with
// (scheduler/fit, which imports nothing: nova stays ignorant of DVMS):
// demand up to Config.OverloadCPU / OverloadRAM of its physical capacity,
// allocations up to its allocatable placement capacity.
func (c *Cloud) limit(h *host) fit.Limit {
	return fit.HostLimit(float64(h.VCPUs), float64(h.RAMMB), c.cfg.OverloadCPU, c.cfg.OverloadRAM, h.AllocatableVCPUs(), h.AllocatableRAMMB())
}

// over reports whether demand cpu/ram exceeds the overload limits of h.
func (c *Cloud) over(h *host, cpu, ram float64) bool {
	return fit.Overloaded(fit.Use{CPU: cpu, RAM: ram}, c.limit(h))
}

// checkPlan runs when a live migration of s to the named dst claimed
// its allocation: the destination must not be overloaded and s must not
// move twice under one global request id.
//
// An overloaded destination is the plan's fault (a violation) when it is
// overloaded by the demand the plan last read of each server it counts
// (the destination's, those moving in, s), and drift otherwise: then
// demand moved after the plan's reads, and the workload overloaded the
// host, not the plan. A server the plan never read counts at its demand
// now (another plan's move in flight: the plan answers for seeing it).
// Only demand values decide, not which hosts changed: a migration ending
// on the destination, or a server on the source other than s changing,
// is not drift (the move counted on both ends stays counted).
func (c *Cloud) checkPlan(s *server, src, dst *host, global string) {
	now := c.destLoad(s, dst, func(x *server) nova.Demand { return x.demand })
	if c.over(dst, now.CPU, now.RAMMB) {
		read := c.destLoad(s, dst, func(x *server) nova.Demand { return c.obs.seenDemand(global, x) })
		limCPU, limRAM := float64(dst.VCPUs)*c.cfg.OverloadCPU, float64(dst.RAMMB)*c.cfg.OverloadRAM
		msg := fmt.Sprintf("plan overloads destination %s with %s: demand %.2f/%.2f cores, %.0f/%.0f MB, as the plan last read it %.2f cores, %.0f MB (request %q; %s)",
			dst.Name, s.ID, now.CPU, limCPU, now.RAMMB, limRAM, read.CPU, read.RAMMB, global, c.overloadDetail(s, src, dst, global))
		if c.over(dst, read.CPU, read.RAMMB) {
			c.violate(KindOverload, "%s", msg)
		} else {
			c.obs.drift = append(c.obs.drift, Violation{At: c.clock.Now(), Kind: KindOverload,
				Message: msg + "; demand changed since the executor last read it"})
		}
	}
	if global != "" {
		k := [2]string{global, s.ID}
		if c.obs.moved[k] {
			c.violate(KindMigratedTwice, "server %s migrated twice in one plan (request %s)", s.ID, global)
		}
		c.obs.moved[k] = true
	}
}

// destLoad sums, by demand, what dst carries once s moves there: its
// servers, the moves in flight towards it and s.
func (c *Cloud) destLoad(s *server, dst *host, demand func(*server) nova.Demand) nova.Demand {
	var sum nova.Demand
	add := func(x *server) {
		d := demand(x)
		sum.CPU += d.CPU
		sum.RAMMB += d.RAMMB
	}
	for _, x := range dst.servers {
		add(x)
	}
	for _, m := range dst.incoming {
		if m.srv != s {
			add(m.srv)
		}
	}
	add(s)
	return sum
}

// overloadDetail says what made up an overloaded destination, for the
// message: the destination's own servers, each move in flight towards it
// (whose plan, since when), and when the plan last read s and the
// destination.
func (c *Cloud) overloadDetail(s *server, src, dst *host, global string) string {
	var own float64
	for _, x := range dst.servers {
		own += x.demand.CPU
	}
	var b strings.Builder
	fmt.Fprintf(&b, "from %s at %.2f cores, read by the plan %s; %d servers there at %.2f cores",
		src.Name, s.demand.CPU, c.obs.seenAt(global, s), len(dst.servers), own)
	for _, id := range slices.Sorted(maps.Keys(dst.incoming)) {
		m := dst.incoming[id]
		if m.srv == s {
			continue
		}
		whose := "no request id"
		if acts := c.actions[id]; m.action < len(acts) {
			if g := acts[m.action].GlobalRequestID; g == global && g != "" {
				whose = "this plan"
			} else if g != "" {
				whose = g
			}
		}
		fmt.Fprintf(&b, "; moving in: %s from %s at %.2f cores (%s, accepted %s, read by the plan %s)",
			id, m.Source, m.srv.demand.CPU, whose, m.CreatedAt.Format("15:04:05.000"), c.obs.seenAt(global, m.srv))
	}
	return b.String()
}

// demandRead is a server's demand as a Demand call returned it, and when.
type demandRead struct {
	d  nova.Demand
	at time.Time
}

// maxPlansSeen bounds the plans whose reads the observer keeps; past it
// the oldest plan's are forgotten and seenDemand falls back to the last
// read by anyone. It must exceed the plans started while one waits for
// the API: at 10,000 hosts and 500 requests/s, 256 let a plan's reads be
// forgotten before its queued move started, and the destination was then
// judged at the demand its agent read after the plan (321 moves reported
// as violations that were drift). A plan's reads are a few dozen
// servers: 65,536 plans are tens of megabytes at most.
const maxPlansSeen = 1 << 16

// saw records a Demand read: under the global request id (a plan's
// re-check, or a demand query asked for one) and as the last read by
// anyone ("").
func (o *observer) saw(global string, at time.Time, demand map[string]nova.Demand) {
	keep := func(key string) {
		m := o.seen[key]
		if m == nil {
			if len(o.seenOrder) >= maxPlansSeen {
				delete(o.seen, o.seenOrder[0])
				o.seenOrder = o.seenOrder[1:]
			}
			m = map[string]demandRead{}
			o.seen[key] = m
			if key != "" {
				o.seenOrder = append(o.seenOrder, key)
			}
		}
		for id, d := range demand {
			m[id] = demandRead{d: d, at: at}
		}
	}
	keep("")
	if global != "" {
		keep(global)
	}
}

// read is the last read of x's demand by the plan with the given global
// request id; without an id, or when the plan's reads were forgotten,
// the last read by anyone. ok is false when there is none.
func (o *observer) read(global string, x *server) (demandRead, bool) {
	if m, kept := o.seen[global]; kept && global != "" {
		r, ok := m[x.ID]
		return r, ok
	}
	r, ok := o.seen[""][x.ID]
	return r, ok
}

// seenDemand is x's demand as the plan last read it, else x's demand now.
func (o *observer) seenDemand(global string, x *server) nova.Demand {
	if r, ok := o.read(global, x); ok {
		return r.d
	}
	return x.demand
}

// seenAt formats what the plan last read of x, for messages.
func (o *observer) seenAt(global string, x *server) string {
	r, ok := o.read(global, x)
	if !ok {
		return "never"
	}
	return fmt.Sprintf("at %.2f cores at %s", r.d.CPU, r.at.Format("15:04:05.000"))
}

// Violations returns the safety violations seen so far, oldest first.
// A correct scheduler leaves it empty.
func (c *Cloud) Violations() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	return slices.Clone(c.obs.viol)
}

// Drift returns destinations found overloaded at a migration's start
// that the demand the plan last read (Demand, under its request id) of
// the servers counted there did not overload: the workload moved after
// the executor's re-check, not the plan. They are reported here, apart
// from Violations.
func (c *Cloud) Drift() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.obs.drift)
}

// ServersLost is how many servers are missing from (or duplicated in)
// the hosts' indexes and the offloaded set, compared with the servers
// added minus those deleted. 0 for a correct cloud.
func (c *Cloud) ServersLost() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	return c.obs.lost()
}

// Stats returns the cloud's counters.
func (c *Cloud) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s := c.obs.stats
	s.InFlight = len(c.inflight)
	return s
}

// FaultsInjected is the number of faults injected so far (failed API
// calls and migrations ended in error on purpose).
func (c *Cloud) FaultsInjected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.obs.stats.Faults
}

// Audit re-derives the whole state from scratch, O(hosts + servers): every
// server in exactly one host index (its own) or offloaded, and every
// host's allocations equal to its servers' plus the moves in flight
// towards it. It records what it finds as violations (each call
// reports again) and returns them. The per-mutation checks are cheaper
// and rely on counters; Audit is for the end of a test or simulation.
func (c *Cloud) Audit() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	first := len(c.obs.viol)
	seen := make(map[string]string, len(c.servers))
	for _, h := range c.hostOrder {
		v, r := 0, 0
		for id, s := range h.servers {
			if prev, dup := seen[id]; dup {
				c.violate(KindServersLost, "server %s listed on %s and on %s", id, prev, h.Name)
			}
			seen[id] = h.Name
			if c.servers[id] != s {
				c.violate(KindServersLost, "host %s lists %s, which does not exist", h.Name, id)
			}
			if s.Host != h.Name {
				c.violate(KindServersLost, "host %s lists %s, whose host is %q", h.Name, id, s.Host)
			}
			v += s.VCPUs
			r += s.RAMMB
		}
		for _, m := range h.incoming {
			v += m.srv.VCPUs
			r += m.srv.RAMMB
		}
		for _, s := range h.resized {
			v += s.VCPUs
			r += s.RAMMB
		}
		if v != h.usedV || r != h.usedR {
			c.violate(KindOvercommit, "host %s placement accounting: %d VCPU / %d MB allocated, servers account for %d / %d", h.Name, h.usedV, h.usedR, v, r)
		}
		if fit.Overcommitted(fit.Use{VCPUs: float64(v), RAMMB: float64(r)}, c.limit(h)) {
			c.violate(KindOvercommit, "host %s overcommitted: %d/%.0f VCPU and %d/%.0f MB", h.Name, v, h.AllocatableVCPUs(), r, h.AllocatableRAMMB())
		}
	}
	for id, s := range c.servers {
		if _, ok := seen[id]; !ok && s.Host != "" {
			c.violate(KindServersLost, "server %s is on %q but no host lists it", id, s.Host)
		}
	}
	return slices.Clone(c.obs.viol[first:])
}

// Completed is one live migration that completed (Cloud.CompletedMigrations).
type Completed struct {
	Server, From, To string
	Start, End       time.Time
}

// CompletedMigrations lists every live migration completed so far, in
// no particular order: a region-wide observer's record of what moved.
func (c *Cloud) CompletedMigrations() []Completed {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	var out []Completed
	for id, ms := range c.migs {
		for _, m := range ms {
			if m.Status == nova.MigrationCompleted {
				out = append(out, Completed{Server: id, From: m.Source, To: m.Dest, Start: m.start, End: m.end})
			}
		}
	}
	return out
}
