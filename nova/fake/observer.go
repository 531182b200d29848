package fake

import (
	"fmt"
	"slices"
	"time"

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
	// physical capacity.
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
}

// observer holds the safety bookkeeping (guarded by Cloud.mu).
type observer struct {
	expected  int // servers added minus deleted
	placed    int // entries over every host's server index
	offloaded int // servers without a host
	lastLost  int
	moved     map[[2]string]bool // (global request id, server) that moved
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
func (c *Cloud) checkPlan(s *server, src, dst *host, global string) {
	cpu, ram := demandOf(dst)
	for _, m := range dst.incoming {
		if m.srv != s {
			cpu += m.srv.demand.CPU
			ram += m.srv.demand.RAMMB
		}
	}
	cpu += s.demand.CPU
	ram += s.demand.RAMMB
	if c.over(dst, cpu, ram) {
		msg := fmt.Sprintf("plan overloads destination %s with %s: demand %.2f/%.2f cores, %.0f/%.0f MB (request %q)",
			dst.Name, s.ID, cpu, float64(dst.VCPUs)*c.cfg.OverloadCPU, ram, float64(dst.RAMMB)*c.cfg.OverloadRAM, global)
		if dst.demandSeq != seenBy(dst, global) || src.demandSeq != seenBy(src, global) || c.incomingDrift(s, dst, global) {
			c.obs.drift = append(c.obs.drift, Violation{At: c.clock.Now(), Kind: KindOverload,
				Message: msg + "; demand changed since the executor last read it"})
		} else {
			c.violate(KindOverload, "%s", msg)
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

// incomingDrift reports whether the demand of a server the same plan
// (global request id) is already moving to dst changed since the plan
// read that server's source: the plan counted that move at the demand it
// read, so demand risen since is the workload's, not the plan's.
func (c *Cloud) incomingDrift(s *server, dst *host, global string) bool {
	if global == "" {
		return false
	}
	for _, m := range dst.incoming {
		if m.srv == s {
			continue
		}
		acts := c.actions[m.srv.ID]
		if m.action >= len(acts) || acts[m.action].GlobalRequestID != global {
			continue // another plan's: the plan answers for seeing it
		}
		if from := c.hosts[m.Source]; from != nil && from.demandSeq != seenBy(from, global) {
			return true
		}
	}
	return false
}

// maxReadBy bounds host.readBy; past it the oldest plans' reads are
// forgotten and seenBy falls back to the last read by anyone.
const maxReadBy = 32

// seenBy is h's demandSeq as the plan with the given global request id
// last read it, else (no id, or no read under it kept) as anyone last
// read it. A read by another caller (a monitor, another plan) after the
// plan's re-check does not make the plan answerable for demand that
// changed in between.
func seenBy(h *host, global string) int {
	if seq, ok := h.readBy[global]; ok && global != "" {
		return seq
	}
	return h.readSeq
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
// because demand changed after the executor last read it (Demand of the
// source or the destination): the workload moved, not the plan. They
// are reported here, apart from Violations.
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
