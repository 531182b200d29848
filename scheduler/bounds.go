package scheduler

import "time"

// Bounds on one key (trust against insiders): the runtime's edge
// (scheduler/node, bounds.go) tracks how long and how often each key leads
// the partitions this agent is in, and refuses a key past its bounds. Its
// one entry into the state machine is RefuseLeader.

// RefuseLeader makes this agent stay out of partitions led by leader (over
// its bounds at the runtime's edge, why says which): the partition it is
// in, if leader leads it, is dissolved (an Aborted end, EndLeaderRefused),
// and its own event, if the partition carried it, is raised again at
// once, not after a backoff: the event was held, not found unsolvable.
// leader leaves this agent's ring, so no request of this agent goes to it,
// until the runtime calls MemberUp. The agent never refuses itself.
func (a *Agent) RefuseLeader(now time.Time, leader, why string) {
	if leader == a.cfg.ID {
		return
	}
	if now.After(a.now) {
		a.now = now
	}
	if p := a.part; p != nil && p.Leader == leader {
		held, backoff := a.active, a.backoff
		a.dissolve(Aborted, EndLeaderRefused, why)
		if held != nil && a.active == nil {
			a.retryAt, a.backoff = a.now, backoff
		}
	}
	a.MemberDown(leader) // out of the ring: no request goes to it
}
