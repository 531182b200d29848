package scheduler

import (
	"fmt"
	"slices"
	"time"
)

// Bounds on one key (trust against insiders): the runtime's edge
// (scheduler/node, bounds.go) tracks how long and how often each key leads
// the partitions this agent is in, and refuses a key past its bounds. Its
// one entry into the state machine is RefuseLeader.

// RefuseLeader makes this agent stay out of partitions led by leader (over
// its bounds at the runtime's edge, why says which): it leaves the
// partition it is in if leader leads it (the partition dissolved for it,
// EndLeaderRefused), and its own event, if the partition carried it and
// no plan of it ran, goes on under its own id in a fresh partition on the
// next tick, not after a backoff: the event was held, not found
// unsolvable, and it is not ended (an event that a refused key held is
// not an event dvms failed). It ends Aborted/EndLeaderRefused only if
// its condition no longer holds by then. After a plan ran, the event ends
// leader_refused and a new one is raised at once.
// leader leaves this agent's ring, so no request of this agent goes to it,
// until the runtime calls MemberUp. The agent never refuses itself.
//
// taken, if set, is a partition leader claimed (an update from it the
// edge dropped): if this agent is a member of it (its leader follows
// nobody) and its plan does not run, the
// others may have followed leader (they have not refused it yet), so this
// agent leaves it too, its event raised again at once. The edge bounds how
// often (maxClaimLeaves): a key that claims every partition it hears of
// must not make its refusers leave them all.
func (a *Agent) RefuseLeader(now time.Time, leader, taken, why string) {
	if leader == a.cfg.ID {
		return
	}
	if now.After(a.now) {
		a.now = now
	}
	if a.refused == nil {
		a.refused = map[string]bool{}
	}
	a.refused[leader] = true
	defer a.forgiveBackoff()
	if p := a.part; p != nil && (p.Leader == leader || p.ID == taken && !a.leader() && p.State != Finishing) {
		held, backoff, window := a.active, a.backoff, slices.Clone(a.window)
		ran := a.planRan || p.State == Finishing
		// Only this agent leaves, on its own evidence: each member
		// judges the leader by its own bounds, not by another member's
		// word (which a key could forge against a fair leader).
		if held != nil && !ran && slices.ContainsFunc(p.Events, func(e Event) bool { return e.ID == held.ID }) {
			// Its own event was held, not tried: it goes on under its
			// own id in a fresh partition of this agent on the next
			// tick (resumeOrEnd), not ended and raised again.
			a.dissolveMine(Aborted, EndLeaderRefused, why)
			a.resume, a.window, a.retryAt, a.backoff = held, window, a.now, backoff
			a.resumeEnd, a.resumeWhy = "", ""
			a.MemberDown(leader)
			return
		}
		a.end(Aborted, EndLeaderRefused, why, nil)
		if held != nil && a.active == nil {
			a.retryAt, a.backoff = a.now, backoff
			if !ran {
				// No plan ran: the samples that raised the event still
				// hold, it is raised again on the next tick.
				a.window = window
			}
		}
	}
	a.MemberDown(leader) // out of the ring: no request goes to it
}

// forgiveBackoff puts this agent's retry backoff back to retry_backoff
// once it refuses a key: before the refusal the key's updates, at the
// versions its fair leaders go on at, made them drop this agent from its
// own event's partitions (a conflicting leader, a snapshot sent to the
// key), ending the event unsolved with the backoff doubled each time. Those
// ends were the key's doing, not events dvms found unsolvable: the next
// try waits retry_backoff at most.
func (a *Agent) forgiveBackoff() {
	a.backoff = a.cfg.RetryBackoff
	if next := a.now.Add(a.cfg.RetryBackoff); a.retryAt.After(next) {
		a.retryAt = next
	}
}

// avoid is the Partition.Avoid of this agent's new partitions: the keys
// it refuses, at most MaxAvoid (nil when none).
func (a *Agent) avoid() []string {
	if len(a.refused) == 0 {
		return nil
	}
	keys := make([]string, 0, len(a.refused))
	for k := range a.refused {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[:min(len(keys), MaxAvoid)]
}

// resumeOrEnd (maybeStart, free and not stale): the event a refused
// leader held (RefuseLeader) goes on under its own id in a fresh
// partition when its condition (k, not held back: c) still holds, and
// reports true; else it ends Aborted/EndLeaderRefused and the agent
// raises what holds now as usual.
func (a *Agent) resumeOrEnd(k EventKind, c HoldClass) bool {
	ev := *a.resume
	a.resume = nil
	class, why := EndLeaderRefused, "its partition's leader was refused and its condition no longer holds"
	if a.resumeEnd != "" {
		class, why = a.resumeEnd, a.resumeWhy+"; its condition no longer holds"
		if k == ev.Kind {
			why = a.resumeWhy + "; held back (" + string(c) + ")"
		}
	}
	a.resumeEnd, a.resumeWhy = "", ""
	if k != ev.Kind || c != "" {
		a.active = nil
		a.record(Record{Kind: RecEventEnded, Event: ev, Outcome: Aborted, Class: class, Reason: why, Nodes: []string{a.cfg.ID}, Size: 1})
		return false
	}
	a.resumed++
	a.active = &ev
	a.setPart(&Partition{
		ID: fmt.Sprintf("p-%s-r%d", ev.ID, a.resumed), Version: 1, Initiator: a.cfg.ID, Leader: a.cfg.ID,
		Nodes: []string{a.cfg.ID}, State: Growing, Events: []Event{ev}, Avoid: a.avoid(),
	})
	a.forward()
	return true
}
