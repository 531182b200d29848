package scheduler

// Event detection (DESIGN §4): K-of-N debouncing of the monitor's
// samples, and the partition an event starts (§5.2.1).

import (
	"fmt"
	"slices"
	"time"
)

// Observe feeds one monitor sample of the agent's own host.
func (a *Agent) Observe(now time.Time, h Host) {
	a.now = now
	h.Servers = slices.Clone(h.Servers)
	settling, left := a.settle(h.Servers)
	a.notePeaks(&h)
	a.host, a.hasHost, a.stale = h, true, false
	k := NoEvent
	switch {
	case h.Draining && len(movable(h.Servers)) > 0:
		k = Maintenance
	case a.cfg.Thresholds.Overloaded(&h):
		k = Overload
	case a.cfg.Underload && a.cfg.Thresholds.Underloaded(&h) && !settling:
		// A host that just received servers is not emptied back.
		k = Underload
	}
	a.window = append(a.window, k)
	if len(a.window) > a.cfg.N {
		a.window = a.window[len(a.window)-a.cfg.N:]
	}
	a.noteOverFor(left)
	a.maybeStart()
}

// arrival is when a server was first seen on the host (zero: at the
// agent's first sample) and whether dvms moved it there.
type arrival struct {
	at    time.Time
	moved bool
}

// settle marks the servers that arrived on the host less than the
// consolidation cooldown ago (Settling) and those dvms moved here less
// than the server cooldown ago (Cooling), and reports whether one is
// settling and whether one left since the last sample. Servers present
// at the agent's first sample count as settled and cool (an agent
// restarted forgets the moves before).
//
// A server that arrives while a plan runs or has just run on a
// partition this agent is in counts as moved by dvms: plans move servers
// only between their partition's members. This costs no request to
// Nova; a boot or an operator's migration that lands at that moment
// counts too (it cools, it is not lost).
func (a *Agent) settle(ss []Server) (settling, left bool) {
	first := a.arrived == nil
	if first {
		a.arrived = make(map[string]arrival, len(ss))
	}
	moving := a.stale || a.planRan || (a.part != nil && a.part.State == Finishing)
	any := false
	for k := range ss {
		id := ss[k].ID
		ar, ok := a.arrived[id]
		if !ok {
			if !first {
				ar = arrival{at: a.now, moved: moving}
			}
			a.arrived[id] = ar
		}
		if ar.at.IsZero() {
			continue
		}
		if a.now.Sub(ar.at) < a.cfg.ConsolidationCooldown {
			ss[k].Settling, any = true, true
		}
		if ar.moved && a.now.Sub(ar.at) < a.cfg.ServerCooldown {
			ss[k].Cooling = true
		}
	}
	if len(a.arrived) == len(ss) {
		// Every server remembered is still here (the usual sample): no
		// map to build. Server ids are unique on a host.
		return any, false
	}
	present := make(map[string]bool, len(ss))
	for k := range ss {
		present[ss[k].ID] = true
	}
	for id := range a.arrived {
		if !present[id] {
			delete(a.arrived, id)
			left = true
		}
	}
	return any, left
}

// noteOverFor sets the host's OverFor: how long an overload has held (K
// of the last N samples) on it since a server last left it (left: one
// left since the last sample). An overload that comes back with a swing
// adds up: relief refused for a short one is paid for once it has come
// back often enough (movecost.go). A gap between samples counts at most
// maxOverGap.
func (a *Agent) noteOverFor(left bool) {
	if left {
		a.overFor, a.overAt = 0, time.Time{}
	}
	if a.holds() == Overload {
		if !a.overAt.IsZero() {
			a.overFor += min(a.now.Sub(a.overAt), maxOverGap)
		}
		a.overAt = a.now
	} else {
		a.overAt = time.Time{}
	}
	a.host.OverFor = a.overFor
}

// maxOverGap bounds what one gap between samples adds to OverFor.
const maxOverGap = 10 * time.Second

func movable(ss []Server) []Server {
	var out []Server
	for _, s := range ss {
		if !s.Fixed {
			out = append(out, s)
		}
	}
	return out
}

// holds returns the event kind that holds K of the last N samples.
// Maintenance is the operator's intent: one sample is enough.
func (a *Agent) holds() EventKind {
	if n := len(a.window); n > 0 && a.window[n-1] == Maintenance {
		return Maintenance
	}
	over, under := 0, 0 // counted without a map: every sample of every agent comes here
	for _, k := range a.window {
		switch k {
		case Overload:
			over++
		case Underload:
			under++
		}
	}
	switch {
	case over >= a.cfg.K:
		return Overload
	case under >= a.cfg.K:
		return Underload
	}
	return NoEvent
}

// maybeStart raises the agent's event and starts a partition when it is
// free, has an event and is not backing off.
func (a *Agent) maybeStart() {
	if a.part != nil || a.retired || a.stale {
		return
	}
	// Why a condition that holds raises no event is recorded (held.go);
	// the time windows (Config.Windows) are applied there, the one place
	// every clock comes (the runtime's wall clock, the simulators'
	// virtual one): sampling goes on, a window opens onto the last N
	// samples.
	k := a.holds()
	c := a.holdOf(k)
	a.held(k, c)
	if a.resume != nil && a.now.Before(a.resumeAt) {
		return // goOn: the runtime sees the partition's end first
	}
	if a.resume != nil && a.resumeOrEnd(k, c) {
		return
	}
	if k == NoEvent || c != "" {
		return
	}
	a.seq++
	a.goneOn = 0
	ev := Event{ID: fmt.Sprintf("ev-%s-%s-%d", a.cfg.ID, a.cfg.Incarnation, a.seq), Kind: k, Host: a.cfg.ID, Detected: a.now}
	a.active = &ev
	a.setPart(&Partition{ // a leader now, from a fresh leading
		ID: "p-" + ev.ID, Version: 1, Initiator: a.cfg.ID, Leader: a.cfg.ID,
		Nodes: []string{a.cfg.ID}, State: Growing, Events: []Event{ev}, Avoid: a.avoid(),
	})
	a.record(Record{Kind: RecEventRaised, Event: ev})
	a.forward()
}
