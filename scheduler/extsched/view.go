package extsched

import (
	"sort"
	"sync"
	"time"
)

// View is the region as the summaries tell it. A summary is fresh for
// StaleAfter after it was received (the receiver's clock, so the agents'
// clock skew does not matter). Safe for concurrent use.
type View struct {
	mu         sync.Mutex
	staleAfter time.Duration
	pendingTTL time.Duration
	hosts      map[string]entry
	// pending: flavors this service sent to a host recently, not yet in
	// that host's summaries (a booted server shows in the agent's view at
	// its next refresh, and its demand when the source measures it).
	pending map[string][]reservation
}

type entry struct {
	s        Summary
	received time.Time
}

type reservation struct {
	vcpus, ramMB float64
	at           time.Time
}

// NewView returns an empty view: summaries are stale staleAfter after
// they arrive; a host chosen for a boot carries its flavor for pendingTTL.
func NewView(staleAfter, pendingTTL time.Duration) *View {
	return &View{staleAfter: staleAfter, pendingTTL: pendingTTL, hosts: map[string]entry{}, pending: map[string][]reservation{}}
}

// Update records s, received at now. An older summary of the same agent
// (lower Seq, same or older At) is ignored; it reports whether s was kept.
func (v *View) Update(s Summary, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.hosts[s.Host]; ok && s.At.Before(old.s.At) {
		return false
	}
	v.hosts[s.Host] = entry{s: s, received: now}
	return true
}

// Reserve counts a boot of vcpus/ramMB sent to host at now, for pendingTTL.
func (v *View) Reserve(host string, vcpus, ramMB float64, now time.Time) {
	if v.pendingTTL <= 0 || host == "" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pending[host] = append(v.pending[host], reservation{vcpus: vcpus, ramMB: ramMB, at: now})
}

// HostState is what the view knows of one host at a time.
type HostState struct {
	Host string
	// Known: a summary of the host was received; Fresh: within StaleAfter.
	Known, Fresh bool
	Age          time.Duration
	Summary      Summary
	// MovesIn, MovesOut: moves touching the host, from every fresh
	// summary's plan moves, and the host's own migrating servers.
	MovesIn, MovesOut int
	// PendingVCPUs, PendingRAMMB: boots this service sent to the host
	// within the pending TTL.
	PendingVCPUs, PendingRAMMB float64
}

// States returns the state of hosts at now, in the order given.
func (v *View) States(hosts []string, now time.Time) []HostState {
	v.mu.Lock()
	defer v.mu.Unlock()
	in, out := map[string]int{}, map[string]int{}
	for _, e := range v.hosts {
		if now.Sub(e.received) > v.staleAfter {
			continue
		}
		for h, m := range e.s.PlanMoves {
			in[h] += m.In
			out[h] += m.Out
		}
	}
	states := make([]HostState, len(hosts))
	for i, h := range hosts {
		st := HostState{Host: h, MovesIn: in[h], MovesOut: out[h]}
		if e, ok := v.hosts[h]; ok {
			st.Known, st.Summary, st.Age = true, e.s, now.Sub(e.received)
			st.Fresh = st.Age <= v.staleAfter
			// A migration of the plan is also a migrating server of
			// its source: count the larger, not both.
			st.MovesOut = max(st.MovesOut, e.s.MovesOut)
		}
		rs := v.pending[h][:0]
		for _, r := range v.pending[h] {
			if now.Sub(r.at) < v.pendingTTL {
				rs = append(rs, r)
				st.PendingVCPUs += r.vcpus
				st.PendingRAMMB += r.ramMB
			}
		}
		if len(rs) == 0 {
			delete(v.pending, h)
		} else {
			v.pending[h] = rs
		}
		states[i] = st
	}
	return states
}

// Hosts lists the hosts with a summary, fresh or not, sorted.
func (v *View) Hosts() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.hosts))
	for h := range v.hosts {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}
