package scheduler

// Ending (DESIGN §5.2.3, §5.5, §5.6): a partition dissolves (solved,
// unsolvable, failed, aborted), frees its members and settles its
// events; an agent retires when its process stops.

import (
	"fmt"
	"slices"
	"time"
)

// Vanished ends the reason of an event Aborted because its condition went
// away by itself: nothing was moved for it, and its host no longer needs
// help by its own measurement (or Nova, for a drain). Reports count such
// events apart (EndVanished): not solved, and not a failure either.
const Vanished = "nothing moved: the event no longer holds"

// PlanDone reports the execution of a plan: Solved when every action was
// done, Failed when one failed, Aborted when re-checks skipped actions
// (the world changed: the event is raised again if it still holds).
// c sorts reason (EndClass).
func (a *Agent) PlanDone(partID string, version uint64, o Outcome, c EndClass, reason string) {
	if !a.leader() || a.part.ID != partID || a.part.Version != version || a.lead.phase != phExecuting {
		return
	}
	if o == Solved && a.part.Replans > 0 {
		reason = fmt.Sprintf("%s (after %d re-plan(s))", reason, a.part.Replans)
	}
	a.dissolve(o, c, reason)
}

func (a *Agent) onDissolve(m Message) {
	p := a.part
	if p == nil || p.ID != m.PartID {
		return
	}
	if m.Version < p.Version && m.From != p.Leader {
		a.drop(m, "stale dissolution")
		return
	}
	if p.State == Finishing && m.From != p.Leader {
		// Only the leader ends a partition whose plan runs (or our own
		// timeout, if it goes silent): a dissolution from anyone else is
		// a fork's, however its version compares (a fork counts its own).
		a.drop(m, "dissolution from a fork while the plan runs")
		return
	}
	if a.leader() && a.lead.phase == phExecuting {
		// A member gave up on us, but our plan is running: the partition
		// lives until the executor reports, so its outcome is recorded.
		// The executor's re-checks protect hosts that left.
		a.drop(m, "dissolution while executing")
		return
	}
	a.end(m.Outcome, m.Class.Of(m.Outcome, m.Reason), m.Reason, m.Solved)
}

// dissolve ends the partition for every member.
func (a *Agent) dissolve(o Outcome, c EndClass, reason string) {
	p := a.part
	var solved []string
	if o == Solved && a.leader() { // only a leader's plan solves
		solved = a.lead.solved
	}
	a.broadcast(Message{Type: MsgDissolve, PartID: p.ID, Version: p.Version, Outcome: o, Reason: reason, Class: c, Solved: solved})
	if a.leader() && (p.State == Blocked || p.Tours > 0) {
		a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbDissolve, Part: *p.clone()})
	}
	a.end(o, c, reason, solved)
}

// end frees this agent and settles its own event if the partition
// carried it. A Solved partition solved only the events in solved (a
// merged partition may solve its initiator's event but not all).
func (a *Agent) end(o Outcome, c EndClass, reason string, solved []string) {
	p := a.part
	if a.goOn(o, c, reason) {
		return
	}
	a.dissolveMine(o, c, reason)
	if a.active == nil {
		return
	}
	ev := *a.active
	carried := slices.ContainsFunc(p.Events, func(e Event) bool { return e.ID == ev.ID })
	if !carried {
		return // our event waits for us to be free
	}
	retryNow := false
	if o == Solved && !slices.Contains(solved, ev.ID) {
		// A merged partition's plan solved other events of the union
		// first (the solver's tiers): nothing says this one has no
		// solution. It ends Aborted and is raised again at once, against
		// the cloud as the plan left it.
		o, c, reason, retryNow = Aborted, EndSolvedOthers, "the merged partition's plan solved other events: raised again", true
	}
	a.active = nil
	a.window = a.window[:0] // fresh samples before the next event
	a.record(Record{Kind: RecEventEnded, Event: ev, Partition: p.ID, Version: p.Version, Size: p.size(), Outcome: o, Reason: reason, Class: c, Nodes: slices.Clone(p.Nodes)})
	if o == Solved {
		a.backoff, a.retryAt = a.cfg.RetryBackoff, time.Time{}
		return
	}
	if retryNow {
		a.retryAt = a.now
		return
	}
	if c == EndNotWorth {
		// Refused for what its relief would gain now (movecost.go):
		// tried again after retry_backoff, not doubled, so an overload
		// that grows or lasts is relieved at the next try that pays,
		// not up to max_retry_backoff later.
		a.retryAt = a.now.Add(a.cfg.RetryBackoff)
		return
	}
	a.retryAt = a.now.Add(a.backoff)
	a.backoff = min(2*a.backoff, a.cfg.MaxRetryBackoff)
}

// maxGoOn bounds the times one event goes on after its partition was
// lost (goOn): a partition that keeps losing its initiator the same way
// ends the event as before.
const maxGoOn = 3

// goOn: this agent's own event, carried by its partition, goes on under
// its own id in a fresh partition on the next tick (as one a refused
// leader held: resumeOrEnd) when the partition was lost before any plan
// of it ran: a member was lost (the leader removed this initiator, which
// is alive: no snapshot in time, a conflicting leader it nacked; or the
// leader crashed), or the leader went silent (partition timeout). The
// event was not tried, nor found unsolvable: ending it and raising it
// again after the retry backoff only lost that time, and a key that
// splits or drops partitions made every event it touched end so. At most
// maxGoOn times per event; its window of samples is kept, and it ends
// with this class if its condition is gone by the next tick. Reports
// whether it went on (the partition is dissolved for this agent).
func (a *Agent) goOn(o Outcome, c EndClass, reason string) bool {
	p, held := a.part, a.active
	if o != Aborted || c != EndMemberLost && c != EndTimeout || held == nil || a.retired || a.goneOn >= maxGoOn ||
		a.planRan || p.State == Finishing || p.Initiator != a.cfg.ID ||
		!slices.ContainsFunc(p.Events, func(e Event) bool { return e.ID == held.ID }) {
		return false
	}
	window := slices.Clone(a.window)
	a.dissolveMine(o, c, reason)
	a.goneOn++
	a.resume, a.resumeEnd, a.resumeWhy, a.window, a.retryAt = held, c, reason, window, a.now
	a.resumeAt = a.now.Add(time.Nanosecond) // not in the tick that ended it
	return true
}

// dissolveMine dissolves the agent's partition for it (its event aside).
func (a *Agent) dissolveMine(o Outcome, c EndClass, reason string) {
	p := a.part
	a.record(Record{Kind: RecDissolved, Outcome: o, Reason: reason, Class: c})
	a.ended[p.ID] = ended{at: a.now, version: p.Version}
	if p.State == Finishing || a.planRan {
		a.stale = true // the plan may have moved servers of this host
	}
	a.setPart(nil) // idle: a leader's leading goes with it
	a.planRan = false
}

// Retire prepares the agent to stop (SIGTERM): from now on it raises no
// event and joins no partition (requests are forwarded as by a busy
// agent). A partition it leads is dissolved at once unless its plan is
// being executed: the runtime lets that plan finish and PlanDone ends the
// partition as usual. A member that does not lead stays until its
// partition ends (dissolve message or partition timeout), so the event it
// may carry is recorded as ended. Retire reports whether the agent must
// keep running for that (the runtime bounds the wait).
func (a *Agent) Retire(now time.Time) (busy bool) {
	a.now, a.retired = now, true
	switch {
	case a.part == nil:
		return false
	case !a.leader() || a.lead.phase == phExecuting:
		return true
	}
	a.dissolve(Aborted, EndStopping, "leader "+a.cfg.ID+" is stopping")
	return false
}

// Control applies the operator's run-time controls (`dvms pause`,
// `dvms exclude`). Paused: the agent raises no new event; it still joins
// partitions (their plans are the executor's to hold back). Excluded: it
// raises no event and joins no partition (requests go past it, as past a
// busy node), so its host is never a source nor a destination of a plan
// made after this. A partition the agent is in already goes on: its
// plan's moves are re-checked against the controls by the executor.
func (a *Agent) Control(paused, excluded bool) {
	a.paused, a.excluded = paused, excluded
}

// Hold holds the agent back (held) or lets it go: held, it raises no
// event and joins no partition (requests go past it, as past a busy
// node). Its runtime holds it while the moves of a plan whose leader it
// gave up on may still run in Nova (scheduler/node, adopt.go), so no
// second plan acts on its host meanwhile.
func (a *Agent) Hold(held bool) { a.adopting = held }

// Held reports whether the agent is held (Hold).
func (a *Agent) Held() bool { return a.adopting }

// Retired reports whether Retire was called.
func (a *Agent) Retired() bool { return a.retired }

// leave frees this agent without telling anyone (it was removed).
func (a *Agent) leave() { a.end(Aborted, EndMemberLost, "removed from the partition", nil) }
