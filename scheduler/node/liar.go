package node

// A destination's word (DESIGN §5.5, insiders): the executor judges a
// destination by its own agent's answer to a demand query, and a host
// whose agent under-reports looks empty and attracts servers. The one
// honest witness of a destination's demand is the source of a server
// moved into it: that server's demand, measured on its source right
// before the move, travels with it (a live migration copies every page
// the guest touched, and its load with it). So:
//
//   - within a plan, a server moved into a destination is judged there at
//     no less than what it carried (the plan's later re-checks of moves
//     into that destination cannot be talked down by its answer);
//   - a second move into a destination waits until one move into it is
//     done and its answer checked (below): moves pipelined into a liar
//     would all be judged by its word;
//   - once a move is done, the destination is asked once for its demand
//     (one agent query, no Nova request) and, when it reports the server
//     it just received at under liarRAM of the RAM it carried, the
//     destination is caught: the executor's agent no longer takes it as
//     a destination for distrustFor (its planner marks it disabled, its
//     re-checks skip moves into it: ReasonDestinationDistrusted). RAM
//     only: a live migration copies the guest's pages, so its RAM on the
//     destination is what it was on the source; its CPU may drop on its
//     own (an honest host was blamed for it in a simulated run), so a
//     lie about CPU alone is met by the floor above, not by blame.
//
// Before any move, a destination's word is weighed against its servers'
// flavors and its partition's other hosts (scheduler/plausible.go): a
// host whose word is implausibly low is no destination of the plan (its
// planner marks it disabled, the re-check skips a move into it:
// ReasonDestinationImplausible), so a liar no longer takes the first move
// of each plan before the check above catches it.
//
// The blame is this agent's alone (an agent cannot make others distrust a
// host: a liar could then blame honest hosts) and bounded in time (a
// false blame costs the host its standing as this agent's destination
// for an hour, nothing else).

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

const (
	// liarRAM: a destination reporting a server it just received under
	// this fraction of the RAM it used on its source is caught.
	liarRAM = 0.5
	// distrustFor: how long a caught destination is no destination.
	distrustFor = time.Hour
)

// ReasonDestinationDistrusted: the destination under-reported a server
// this agent moved into it (liar.go).
const ReasonDestinationDistrusted ReasonClass = "destination_distrusted"

// distrust is the executor's blame of destinations: host -> until when.
type distrust struct {
	mu    sync.Mutex
	until map[string]time.Time
	why   map[string]string
}

func (d *distrust) blame(host string, until time.Time, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.until == nil {
		d.until, d.why = map[string]time.Time{}, map[string]string{}
	}
	d.until[host], d.why[host] = until, why
}

// of says why host is distrusted at now ("" when it is not).
func (d *distrust) of(host string, now time.Time) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if u, ok := d.until[host]; ok {
		if now.Before(u) {
			return d.why[host]
		}
		delete(d.until, host)
		delete(d.why, host)
	}
	return ""
}

// Distrusted lists the hosts this executor caught under-reporting and
// still distrusts as destinations.
func (e *Executor) Distrusted() []string {
	now := e.clock.Now()
	e.liars.mu.Lock()
	hosts := make([]string, 0, len(e.liars.until))
	for h := range e.liars.until {
		hosts = append(hosts, h)
	}
	e.liars.mu.Unlock()
	out := hosts[:0]
	for _, h := range hosts {
		if e.liars.of(h, now) != "" {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// distrusted is the skip of a move into a distrusted destination.
func (e *Executor) distrusted(a scheduler.Action) skip {
	if a.To == "" {
		return skip{}
	}
	if why := e.liars.of(a.To, e.clock.Now()); why != "" {
		return skipf(ReasonDestinationDistrusted, "destination %s is distrusted: %s", a.To, why)
	}
	return skip{}
}

// carry notes what a server moving into a destination carried (its
// demand as the re-check judged it): the floor it is judged at there for
// the rest of the plan, and what its destination's answer is checked
// against once it arrived (f.mu held).
func (f *flight) carry(server string, d nova.Demand) {
	if f.carried == nil {
		f.carried = map[string]nova.Demand{}
	}
	f.carried[server] = d
}

// floor is d, raised to what server carried into its destination (f.mu
// held).
func (f *flight) floor(server string, d nova.Demand) nova.Demand {
	if c, ok := f.carried[server]; ok {
		d.CPU, d.RAMMB = max(d.CPU, c.CPU), max(d.RAMMB, c.RAMMB)
	}
	return d
}

// lied says how the destination's answer d under-reports the server it
// just received, which carried c ("" when it does not, or d does not
// list it yet).
func lied(server string, c nova.Demand, d map[string]nova.Demand) string {
	got, ok := d[server]
	if !ok {
		return ""
	}
	if c.RAMMB > 0 && got.RAMMB < liarRAM*c.RAMMB {
		return skipf(ReasonDestinationDistrusted, "it reported server %s at %.0f MB of RAM right after it arrived with %.0f MB", server, got.RAMMB, c.RAMMB).why
	}
	return ""
}

// crossCheck asks a's destination, once a's move is done, for its demand
// and blames it when it under-reports the server it received.
func (e *Executor) crossCheck(ctx context.Context, a scheduler.Action, f *flight) {
	f.mu.Lock()
	c, ok := f.carried[a.Server]
	f.mu.Unlock()
	if !ok {
		return
	}
	d, err := e.measure(ctx, a.To)
	if err != nil || d == nil {
		return // no answer: no verdict
	}
	why := lied(a.Server, c, d)
	if why == "" {
		if _, listed := d[a.Server]; listed {
			f.mu.Lock()
			f.vouched[a.To] = true
			f.mu.Unlock()
		}
		return
	}
	{
		e.liars.blame(a.To, e.clock.Now().Add(distrustFor), why)
		e.log.Warn().Str("dest", a.To).Str("server", a.Server).Str("reason", why).Dur("for", distrustFor).
			Msg("destination under-reported a server it received: no destination of this agent's plans for a while")
	}
}

// noDestination is hosts with those named in out marked disabled (no
// destination; what they carry may still move off them), copied when one
// is.
func noDestination(hosts []scheduler.Host, out []string) []scheduler.Host {
	if len(out) == 0 {
		return hosts
	}
	var c []scheduler.Host
	for i, h := range hosts {
		if !h.Disabled && slices.Contains(out, h.Name) {
			if c == nil {
				c = slices.Clone(hosts)
			}
			c[i].Disabled = true
		}
	}
	if c == nil {
		return hosts
	}
	return c
}

// unproven says whether task i moves a server into a destination that
// another move of the plan, started before it and not ended, goes into
// while no move into it was checked (vouched) yet.
func (f *flight) unproven(tasks []*task, i int) bool {
	t := tasks[i]
	if t.a.Kind != scheduler.LiveMigrate {
		return false
	}
	busy := false
	for j, o := range tasks {
		if j != i && o.started && !o.ended && o.a.Kind == scheduler.LiveMigrate && o.a.To == t.a.To {
			busy = true
			break
		}
	}
	if !busy {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.vouched[t.a.To]
}

// Distrusted lists the destinations this agent's executor caught
// under-reporting and still distrusts.
func (r *Runner) Distrusted() []string { return r.exec.Distrusted() }

// ReasonDestinationImplausible: the destination's answer says its servers
// use an implausibly small share of their flavors' RAM against the
// plan's other hosts (scheduler/plausible.go).
const ReasonDestinationImplausible ReasonClass = "destination_implausible"

// implausible is the skip of a move into host, whose servers Nova lists
// as servers and whose agent answered d, when that answer is implausibly
// low against the plan's snapshot (f.mu not held; no answer: no verdict).
func (f *flight) implausible(host string, servers []nova.Server, d map[string]nova.Demand) skip {
	if !f.wordRefOK || d == nil {
		return skip{}
	}
	share, ok := scheduler.RAMShare(len(servers), func(i int) (float64, bool) {
		x, ok := d[servers[i].ID]
		return x.RAMMB, ok
	}, func(i int) int { return servers[i].RAMMB })
	if !ok || !scheduler.Implausible(share, f.wordRef) {
		return skip{}
	}
	return skipf(ReasonDestinationImplausible, "destination %s reports its servers at %.0f %% of their flavors' RAM, the plan's hosts at %.0f %% (their upper quartile): implausibly low", host, 100*share, 100*f.wordRef)
}

// implausibleIn names the hosts of a partition's snapshot whose word is
// implausible against the others' (the planner makes them no
// destination), noting each.
func (e *Executor) implausibleIn(hosts []scheduler.Host) []string {
	out := scheduler.ImplausibleHosts(hosts)
	for _, h := range out {
		e.noteImplausible(h, "its snapshot reports its servers at an implausibly small share of their flavors' RAM")
	}
	return out
}

// implausibleLog: how often one host's implausible word is logged.
const implausibleLog = 10 * time.Minute

// noteImplausible records that host's word was judged implausible, and
// logs it at most once every implausibleLog.
func (e *Executor) noteImplausible(host, why string) {
	now := e.clock.Now()
	e.words.mu.Lock()
	if e.words.last == nil {
		e.words.last = map[string]time.Time{}
	}
	last, seen := e.words.last[host]
	e.words.last[host] = now
	e.words.mu.Unlock()
	if !seen || now.Sub(last) >= implausibleLog {
		e.log.Warn().Str("dest", host).Str("reason", why).Msg("destination's word implausible: no destination of this plan")
	}
}

// words: the hosts whose word this agent judged implausible, when last.
type words struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// Implausible lists the hosts whose word this agent's planner or executor
// ever judged implausible.
func (e *Executor) Implausible() []string {
	e.words.mu.Lock()
	defer e.words.mu.Unlock()
	out := make([]string, 0, len(e.words.last))
	for h := range e.words.last {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// Implausible lists the hosts whose word this agent ever judged
// implausible.
func (r *Runner) Implausible() []string { return r.exec.Implausible() }
