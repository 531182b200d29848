package scheduler

// Snapshot collection and solving (DESIGN §5.2.2–3): the leader gathers
// every member's snapshot, asks for a solution and acts on it.

import (
	"fmt"
	"slices"
)

// collect starts gathering snapshots (leader).
func (a *Agent) collect() {
	a.phase, a.snapSince, a.progress = phCollecting, a.now, a.now
	a.snaps = map[string]Host{a.cfg.ID: a.snapshot()}
	a.maybeSolve()
}

func (a *Agent) snapshot() Host {
	if !a.hasHost || a.stale {
		// Unknown: never a destination, nothing moved off it.
		return Host{Name: a.cfg.ID, Disabled: true}
	}
	return a.host
}

func (a *Agent) onSnapshot(m Message) {
	if !a.leader() || a.phase != phCollecting || m.PartID != a.part.ID || m.Version != a.part.Version || !a.part.has(m.From) {
		return
	}
	a.snaps[m.From] = *m.Host
	a.maybeSolve()
}

func (a *Agent) maybeSolve() {
	for _, n := range a.part.Nodes {
		if _, ok := a.snaps[n]; !ok {
			return
		}
	}
	hosts := make([]Host, 0, len(a.part.Nodes))
	for _, n := range a.part.Nodes {
		hosts = append(hosts, a.snaps[n])
	}
	if len(a.part.Moved) > 0 {
		hosts = applyDone(hosts, a.part.Moved)
	}
	a.phase = phSolving
	a.rd.Solve = append(a.rd.Solve, SolveRequest{
		PartID: a.part.ID, Version: a.part.Version, Limits: a.cfg.Limits, Timeout: a.cfg.SolveTimeout,
		// Preemption is the last resort: only once the partition cannot
		// grow (Blocked after a full tour — a re-plan of such a partition
		// too —, or the whole ring).
		Problem: Problem{Events: slices.Clone(a.part.Events), Hosts: hosts, Thresholds: a.cfg.Thresholds, Headroom: a.cfg.ConsolidationHeadroom,
			Preempt: a.cfg.Preempt && (a.part.State == Blocked || a.part.Replans > 0 && a.part.Tours > 0 || len(a.part.Nodes) >= len(a.ring))},
	})
}

func (a *Agent) snapshotTimeout() {
	var missing []string
	for _, n := range a.part.Nodes {
		if _, ok := a.snaps[n]; !ok {
			missing = append(missing, n)
		}
	}
	for _, n := range missing {
		if a.part == nil {
			return
		}
		a.removeMember(n, "no snapshot in time")
	}
}

// SolveDone reports the solver's result for a SolveRequest; plan is the
// ordered plan (BuildPlan) when sol.OK, planErr why none could be built.
func (a *Agent) SolveDone(partID string, version uint64, sol Solution, plan Plan, planErr error) {
	if !a.leader() || a.part.ID != partID || a.part.Version != version || a.phase != phSolving {
		return
	}
	p := a.part
	// The plan's event: the first it solves (a merged partition may solve
	// an absorbed partition's event and not its initiator's).
	ev := p.Events[0]
	for _, e := range p.Events {
		if len(sol.Solved) > 0 && e.ID == sol.Solved[0] {
			ev = e
		}
	}
	switch {
	case sol.OK && planErr == nil && plan.Len() == 0 && p.Replans > 0 && len(p.Moved) == 0:
		// Nothing was moved and nothing is left to do: the event
		// vanished by itself, which is not solving it.
		a.record(Record{Kind: RecPlanned, Event: ev, Reason: sol.Reason})
		a.dissolve(Aborted, fmt.Sprintf("nothing to do on fresh snapshots after %d re-plan(s), %s", p.Replans, Vanished))
	case sol.OK && planErr == nil && plan.Len() == 0:
		a.solved = sol.Solved
		a.record(Record{Kind: RecPlanned, Event: ev, Reason: sol.Reason})
		reason := "nothing to do"
		if p.Replans > 0 {
			reason = fmt.Sprintf("nothing left to do after %d re-plan(s)", p.Replans)
		}
		a.dissolve(Solved, reason)
	case sol.OK && planErr == nil:
		a.solved = sol.Solved
		p.State = Finishing
		p.Version++
		a.phase, a.planRan = phExecuting, true
		a.broadcast(a.update())
		a.record(Record{Kind: RecPlanned, Event: ev, Moves: plan.Len(), Reason: sol.Reason})
		a.rd.Execute = append(a.rd.Execute, ExecRequest{PartID: p.ID, Version: p.Version, Event: ev, Plan: plan, Moved: len(p.Moved)})
	default:
		reason := sol.Reason
		if planErr != nil {
			reason = planErr.Error()
		}
		a.record(Record{Kind: RecNoSolution, Event: p.Events[0], Reason: reason})
		if a.lastLook {
			a.dissolve(Unsolvable, fmt.Sprintf("no solution after %d full tours and a last look", p.Tours))
			return
		}
		a.forward()
	}
}
