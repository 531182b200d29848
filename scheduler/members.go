package scheduler

// Membership of a partition (DESIGN §5.1, §5.6): versioned updates,
// members that crash, nack or stay silent.

import (
	"slices"
	"time"
)

// MemberDown tells the agent a member is dead: it leaves the ring, and a
// partition that counted on it reacts (DESIGN §5.6).
func (a *Agent) MemberDown(id string) {
	if i, ok := slices.BinarySearch(a.ring, id); ok && id != a.cfg.ID {
		a.ownRing()
		a.ring = slices.Delete(a.ring, i, i+1)
		a.ringChanged()
	}
	p := a.part
	if p == nil || !p.has(id) {
		return
	}
	switch {
	case id == p.Initiator && a.leader():
		a.dissolve(Aborted, EndMemberLost, "initiator "+id+" crashed")
	case id == p.Leader:
		a.dissolve(Aborted, EndMemberLost, "leader "+id+" crashed")
	case a.leader():
		a.removeMember(id, "crashed")
	}
}

func (a *Agent) onUpdate(m Message) {
	p := m.Part
	mine := a.part
	switch {
	case mine == nil || mine.ID != p.ID:
		if p.has(a.cfg.ID) {
			a.send(m.From, Message{Type: MsgNack, PartID: p.ID, Version: p.Version, Reason: "not a member"})
		}
	case mine.State == Finishing && p.Leader != mine.Leader:
		// Our leader planned and may be moving servers of this host: the
		// partition no longer grows, so its leader cannot change. Another
		// leader is a fork's (a request from before a merge), whatever
		// its version (a fork counts its own versions): following it
		// would put this host in two executing partitions.
		a.drop(m, "another leader while the plan runs")
		a.send(m.From, Message{Type: MsgNack, PartID: p.ID, Version: p.Version, Reason: "stale version: the partition went on"})
	case p.Version < mine.Version:
		a.drop(m, "stale version")
		if m.From != mine.Leader {
			// A fork's leader (it joined a request from before a merge):
			// told at once, it ends its fork (removing the initiator
			// ends it) instead of waiting for snapshots that never come.
			a.send(m.From, Message{Type: MsgNack, PartID: p.ID, Version: p.Version, Reason: "stale version: the partition went on"})
		}
	case p.Version == mine.Version && p.Leader != mine.Leader:
		a.send(m.From, Message{Type: MsgNack, PartID: p.ID, Version: p.Version, Reason: "conflicting leader"})
	case !p.has(a.cfg.ID):
		a.leave() // removed by the leader
	default:
		if mine.State == Finishing || p.State == Finishing {
			a.planRan = true // a re-plan makes it Growing again (PlanSkipped)
			a.expect(m.Carried)
		}
		// A leader whose partition a node that joined leads now is a
		// member from here (setPart drops its leading).
		a.setPart(p.clone())
		a.fromLeader = a.now
		// Growing: the new leader collects. Blocked: a leader with
		// preemption on collects again (tourDone); otherwise the snapshot
		// is ignored, one message per member per blocking.
		if (p.State == Growing || p.State == Blocked) && p.Leader != a.cfg.ID {
			a.send(p.Leader, Message{Type: MsgSnapshot, PartID: p.ID, Version: p.Version, Host: ptr(a.snapshot())})
		}
	}
}

// finishingPatience multiplies PartitionTimeout for a member whose
// partition is executing a plan (Finishing).
const finishingPatience = 4

// memberTimeout is how long a member waits for a word from its leader.
// While a plan runs, a member freed too early may join another partition
// and be chosen as a destination there while this plan still moves
// servers to it (two plans on one host); freed too late, it only waits.
// So it waits finishingPatience times longer: a leader that heartbeats
// every tick is silent that long only when it is gone.
func (a *Agent) memberTimeout() time.Duration {
	if a.part != nil && a.part.State == Finishing {
		return finishingPatience * a.cfg.PartitionTimeout
	}
	return a.cfg.PartitionTimeout
}

// removeMember drops a member (leader only); losing the initiator ends
// the partition, since the event was its.
func (a *Agent) removeMember(id, why string) {
	p := a.part
	if id == p.Initiator {
		a.dissolve(Aborted, EndMemberLost, "initiator "+id+" "+why)
		return
	}
	p.Nodes = slices.DeleteFunc(p.Nodes, func(n string) bool { return n == id })
	p.Version++
	a.broadcast(a.update())
	// The removed node too: it frees itself at once (onUpdate) instead
	// of staying bound until PartitionTimeout.
	a.send(id, a.update())
	a.record(Record{Kind: RecMemberRemoved, Reason: "member " + id + " removed: " + why})
	if l := a.lead; l.phase == phCollecting {
		l.snapSince = a.now
		a.maybeSolve()
	} else if l.phase == phSolving {
		a.collect() // the pending solution is for the old version
	}
}
