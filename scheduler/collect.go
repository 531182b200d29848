package scheduler

// Snapshot collection and solving (DESIGN §5.2.2–3): the leader gathers
// every member's snapshot, asks for a solution and acts on it.

import (
	"fmt"
	"slices"
)

// collect starts gathering snapshots (leader).
func (a *Agent) collect() {
	l := a.lead
	l.phase, l.snapSince, l.progress, l.snapAsked = phCollecting, a.now, a.now, false
	l.snaps = map[string]Host{a.cfg.ID: a.snapshot()}
	a.maybeSolve()
}

func (a *Agent) snapshot() Host {
	if !a.hasHost || a.stale {
		// Unknown: never a destination, nothing moved off it.
		return Host{Name: a.cfg.ID, Disabled: true}
	}
	return a.host
}

// onSnapshot (leader): a member's snapshot for the version collected.
func (a *Agent) onSnapshot(m Message) {
	l := a.lead
	if l.phase != phCollecting || m.PartID != a.part.ID || m.Version != a.part.Version || !a.part.has(m.From) {
		return
	}
	l.snaps[m.From] = *m.Host
	a.maybeSolve()
}

func (a *Agent) maybeSolve() {
	l := a.lead
	for _, n := range a.part.Nodes {
		if _, ok := l.snaps[n]; !ok {
			return
		}
	}
	hosts := make([]Host, 0, len(a.part.Nodes))
	for _, n := range a.part.Nodes {
		hosts = append(hosts, l.snaps[n])
	}
	if len(a.part.Moved) > 0 {
		hosts = applyDone(hosts, a.part.Moved)
	}
	l.phase = phSolving
	relief := a.reliefHeadroom()
	fewer := relief > 0 && a.mayGrowForRelief()
	a.rd.Solve = append(a.rd.Solve, SolveRequest{
		PartID: a.part.ID, Version: a.part.Version, Limits: a.cfg.Limits, Timeout: a.cfg.SolveTimeout,
		// Preemption is the last resort: only once the partition cannot
		// grow (Blocked after a full tour — a re-plan of such a partition
		// too —, or the whole ring).
		Problem: Problem{Events: slices.Clone(a.part.Events), Hosts: hosts, Thresholds: a.cfg.Thresholds, Headroom: a.cfg.ConsolidationHeadroom, ReliefHeadroom: relief, FewerMoves: fewer,
			MoveCost: a.cfg.MoveCost, MoveCostPerSecond: a.cfg.MoveCostPerSecond,
			Preempt: a.cfg.Preempt && (a.part.State == Blocked || a.part.Replans > 0 && a.part.Tours > 0 || len(a.part.Nodes) >= len(a.ring))},
	})
}

// releaseUnused drops from the partition, as its plan starts, the members
// the plan does not touch (neither source nor destination of an action),
// other than the leader and the hosts of the events it carries, and
// returns them. They are free again for other partitions while the plan
// runs, which takes seconds to minutes: a partition that grew for relief
// headroom, or through a saturated cloud, holds only what it uses.
func (a *Agent) releaseUnused(plan Plan) []string {
	p := a.part
	keep := map[string]bool{a.cfg.ID: true, p.Initiator: true}
	for _, e := range p.Events {
		keep[e.Host] = true
	}
	for _, step := range plan.Steps {
		for _, act := range step {
			keep[act.From], keep[act.To] = true, true
		}
	}
	var released []string
	p.Peak = p.size()
	p.Nodes = slices.DeleteFunc(p.Nodes, func(n string) bool {
		if !keep[n] {
			released = append(released, n)
			return true
		}
		return false
	})
	return released
}

// askMissing sends the partition again to the members whose snapshot has
// not come, halfway to SnapshotTimeout: a member answers every update of
// its partition with its snapshot, so one lost message (the update or
// the snapshot) does not remove a member, nor end the event when that
// member is its initiator.
func (a *Agent) askMissing() {
	a.lead.snapAsked = true
	up := a.update()
	for _, n := range a.missingSnaps() {
		a.send(n, up)
	}
}

// missingSnaps lists the members whose snapshot has not come.
func (a *Agent) missingSnaps() []string {
	var missing []string
	for _, n := range a.part.Nodes {
		if _, ok := a.lead.snaps[n]; !ok {
			missing = append(missing, n)
		}
	}
	return missing
}

func (a *Agent) snapshotTimeout() {
	for _, n := range a.missingSnaps() {
		if a.part == nil {
			return
		}
		a.removeMember(n, "no snapshot in time")
	}
}

// SolveDone reports the solver's result for a SolveRequest; plan is the
// ordered plan (BuildPlan) when sol.OK, planErr why none could be built.
func (a *Agent) SolveDone(partID string, version uint64, sol Solution, plan Plan, planErr error) {
	l := a.lead
	if l == nil || a.part.ID != partID || a.part.Version != version || l.phase != phSolving {
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
	// The moves would cost more than they gain (NotWorth), or only
	// cooling servers could relieve the host (Cooling, cooling.go): no
	// larger partition does better; the event is raised again after the
	// backoff if it still holds.
	var end EndClass
	switch {
	case sol.NotWorth:
		end = EndNotWorth
	case sol.Cooling:
		end = EndCooling
	}
	if end != "" {
		a.record(Record{Kind: RecNoSolution, Event: p.Events[0], Reason: sol.Reason})
		a.dissolve(Aborted, end, sol.Reason)
		return
	}
	if a.growForRelief(sol, planErr) {
		return // passed over: a solution that only fits
	}
	switch {
	case sol.OK && planErr == nil && plan.Len() == 0 && p.Replans > 0 && len(p.Moved) == 0:
		// Nothing was moved and nothing is left to do: the event
		// vanished by itself, which is not solving it.
		a.record(Record{Kind: RecPlanned, Event: ev, Reason: sol.Reason})
		a.dissolve(Aborted, EndVanished, fmt.Sprintf("nothing to do on fresh snapshots after %d re-plan(s), %s", p.Replans, Vanished))
	case sol.OK && planErr == nil && plan.Len() == 0:
		l.solved = sol.Solved
		a.record(Record{Kind: RecPlanned, Event: ev, Reason: sol.Reason})
		reason := "nothing to do"
		if p.Replans > 0 {
			reason = fmt.Sprintf("nothing left to do after %d re-plan(s)", p.Replans)
		}
		a.dissolve(Solved, EndNothingToDo, reason)
	case sol.OK && planErr == nil:
		l.solved = sol.Solved
		released := a.releaseUnused(plan)
		p.State = Finishing
		p.Version++
		l.phase, a.planRan = phExecuting, true
		up := a.update()
		up.Carried = a.carry(plan) // the moving servers' profiles (peak.go)
		a.expect(up.Carried)
		a.broadcast(up)
		up.Carried = nil
		for _, n := range released {
			a.send(n, up) // not a member any more: it frees itself (onUpdate)
		}
		a.record(Record{Kind: RecPlanned, Event: ev, Moves: plan.Len(), Reason: sol.Reason})
		a.rd.Execute = append(a.rd.Execute, ExecRequest{PartID: p.ID, Version: p.Version, Event: ev, Plan: plan, Moved: len(p.Moved)})
	default:
		reason := sol.Reason
		if planErr != nil {
			reason = planErr.Error()
		}
		a.record(Record{Kind: RecNoSolution, Event: p.Events[0], Reason: reason})
		if l.lastLook {
			a.dissolve(Unsolvable, EndNoSolution, fmt.Sprintf("no solution after %d full tours and a last look", p.Tours))
			return
		}
		a.forward()
	}
}
