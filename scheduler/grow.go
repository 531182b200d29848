package scheduler

// Growth and tours (DESIGN §5.2, §5.3): the request travelling to the
// next node outside the partition, first out, joining, and what a
// request that comes back home (a tour) means.

import (
	"fmt"
	"slices"
	"time"
)

// forward sends the partition's request to the next node outside it.
func (a *Agent) forward() {
	a.lead.phase, a.lead.progress = phWaiting, a.now
	next, ok := a.nextOutside(a.part.Initiator, a.cfg.ID, a.part, a.part.Avoid)
	if !ok {
		a.tourDone(false) // no node outside the partition: a tour is trivially complete
		return
	}
	a.send(next, Message{Type: MsgGrow, PartID: a.part.ID, Version: a.part.Version, Part: a.part.clone()})
}

// requestTimeout is how long a leader waits for its request to find a
// node or come back: ProgressTimeout plus HopTimeout for every node
// outside the partition (at most one hop each per tour).
func (a *Agent) requestTimeout() time.Duration {
	outside := max(0, len(a.ring)-len(a.part.Nodes))
	return a.cfg.ProgressTimeout + time.Duration(outside)*a.cfg.HopTimeout
}

// growAdmissible drops a request of a partition that ended or was
// absorbed here, or that went round too often; every role checks first.
func (a *Agent) growAdmissible(m Message) bool {
	p := m.Part
	if e, gone := a.ended[p.ID]; gone && p.Version <= e.version {
		a.drop(m, "partition ended")
		return false
	}
	if _, gone := a.absorbed[p.ID]; gone {
		a.drop(m, "partition absorbed")
		return false
	}
	if limit := 2*len(a.ring) + 2; m.Hops > limit && !(a.leader() && a.part.ID == p.ID) {
		if m.Hops == limit+1 && p.Leader != "" && p.Leader != a.cfg.ID {
			// It went round (first out bounced it between busy
			// partitions): its tour is over, back home, its leader
			// decides, rather than wait a whole request timeout for it.
			m.Hops++
			m.From = a.cfg.ID
			a.rd.Messages = append(a.rd.Messages, Envelope{To: p.Leader, Msg: m})
			return false
		}
		a.drop(m, "too many hops")
		return false
	}
	return true
}

// growOwn makes the checks of a member and a leader: it reports whether
// m is its own partition's request, at its version or newer; another
// partition's it passes on, an older one it drops.
func (a *Agent) growOwn(m Message) bool {
	switch {
	case !a.growAdmissible(m):
		return false
	case a.part.ID != m.Part.ID:
		a.passOn(m)
		return false
	case m.Part.Version < a.part.Version:
		a.drop(m, "stale version")
		return false
	}
	return true
}

// growIdle: a free agent joins the request's partition and leads it,
// unless its host drains, it stops, it is excluded or the partition's
// initiator avoids it (Partition.Avoid): then it passes the request on.
func (a *Agent) growIdle(m Message) {
	if !a.growAdmissible(m) {
		return
	}
	if !a.host.Draining && !a.retired && !a.excluded && !a.adopting && !slices.Contains(m.Part.Avoid, a.cfg.ID) {
		a.join(m.Part)
		return
	}
	a.passOn(m)
}

// growMember: a member passes on another partition's request; its own
// partition's request reached it through another partition.
func (a *Agent) growMember(m Message) {
	if !a.growOwn(m) {
		return
	}
	p, mine := m.Part, a.part
	// The tour is complete only once it passes the leader (where it
	// started); before that it goes on past this partition, else a
	// merged partition, whose members are spread over the ring, would
	// end tours early and give up without having met the other Blocked
	// partitions.
	next, ok := a.nextOutside(p.Initiator, a.cfg.ID, mine, p.Avoid)
	if !ok || a.orderDist(p.Initiator, a.cfg.ID, mine.Leader) < a.orderDist(p.Initiator, a.cfg.ID, next) {
		a.send(mine.Leader, m) // back home: the leader decides
		return
	}
	m.Hops++
	m.From = a.cfg.ID
	a.rd.Messages = append(a.rd.Messages, Envelope{To: next, Msg: m})
}

// growLeader: a leader passes on another partition's request; its own
// request came back home (a tour), or a fork's leader learns the
// partition went on.
func (a *Agent) growLeader(m Message) {
	if !a.growOwn(m) {
		return
	}
	p, mine, l := m.Part, a.part, a.lead
	if p.Leader != a.cfg.ID {
		// Not this leader's request: the partition is led elsewhere too.
		// A request from before a merge (which skips a version for this)
		// made a free node, this one or the sender's leader, lead a fork
		// at an older version.
		if p.Version == mine.Version {
			a.drop(m, "conflicting leader")
			return
		}
		// This agent leads the fork: it lets it go and takes the
		// partition's real request as a free node would, else the
		// request would end here and its leader call it lost.
		a.end(Aborted, EndFork, fmt.Sprintf("fork of %s at version %d: the partition goes on at %d", mine.ID, mine.Version, p.Version), nil)
		a.growIdle(m)
		return
	}
	switch {
	case l.phase != phWaiting:
	case l.merging:
		// The merge decides: committed, the partition grows anew;
		// refused, this tour is finished then (mergeRefused).
		l.back, l.backMet = true, l.backMet || m.Met
	default:
		a.tourDone(m.Met)
	}
}

// passOn sends another partition's request on to the next node outside
// this agent's partition (first out: it skips a busy partition in one hop,
// DESIGN §5.2.4). Two Blocked partitions that meet so are offered a
// merge.
func (a *Agent) passOn(m Message) {
	p, mine := m.Part, a.part
	if mine != nil && mine.State == Blocked && p.State == Blocked {
		into, other := mine, p
		if !MayAbsorb(into.Initiator, other.Initiator) {
			into, other = p, mine
		}
		if MayAbsorb(into.Initiator, other.Initiator) {
			a.send(into.Leader, Message{Type: MsgMergeOffer, PartID: into.ID, Version: into.Version, Other: other.clone()})
			if other == mine {
				// This agent's partition is the one to be absorbed: its
				// leader learns it was met (the travelling partition
				// learns it from Met), so it does not give up while the
				// merge may still commit.
				a.send(mine.Leader, Message{Type: MsgMergeOffer, PartID: mine.ID, Version: mine.Version, Other: into.clone()})
			}
			m.Met = true
		}
	}
	skip := mine
	if skip == nil {
		skip = &Partition{}
	}
	next, ok := a.nextOutside(p.Initiator, a.cfg.ID, skip, p.Avoid)
	if !ok {
		// Every other node is in this agent's partition: the request has
		// passed every node it could find free, so its tour is over and
		// it goes back home, its leader decides. Dropped here instead,
		// its leader would wait a whole request timeout for nothing, and
		// members bounding their leader's time (lead_timeout) would
		// refuse a fair leader for that wait.
		if p.Leader == "" || p.Leader == a.cfg.ID {
			a.drop(m, "no node outside")
			return
		}
		next = p.Leader
	}
	m.Hops++
	m.From = a.cfg.ID
	a.rd.Messages = append(a.rd.Messages, Envelope{To: next, Msg: m})
}

// join makes this free agent the newest member and leader of p.
func (a *Agent) join(p *Partition) {
	np := p.clone()
	if !np.has(a.cfg.ID) { // it was a member once (removed, timed out)
		np.Nodes = append(np.Nodes, a.cfg.ID)
	}
	np.Leader, np.State, np.Tours = a.cfg.ID, Growing, 0
	np.Version++
	a.setPart(np) // a leader now, from a fresh leading
	a.record(Record{Kind: RecJoined})
	a.broadcast(a.update())
	a.collect()
}

// maxTours bounds the tours of a Blocked partition that keeps meeting
// other Blocked partitions without a merge committing.
const maxTours = 6

// tourDone: the request came back without finding a free node. A second
// tour ends the partition (Unsolvable) unless the request met another
// Blocked partition on its way (met): a merge was offered and may still
// commit, so giving up now would lose an event the union of the two could
// solve; it tours again, up to maxTours.
func (a *Agent) tourDone(met bool) {
	p, l := a.part, a.lead
	if a.reliefRequestBack() {
		return // the tour is not counted
	}
	met = met || l.offered
	l.offered = false
	p.Tours++
	if p.Tours >= 2 && (!met || p.Tours >= maxTours) {
		// The snapshots the partition last solved on are as old as its
		// tours (taken when its last node joined) and demand drifts: a
		// last look at fresh ones before the event is given up. No
		// solution then ends it (SolveDone).
		// Same version: a merge absorbing the partition as registered
		// may still commit meanwhile (onAbsorbed then ends the look).
		l.lastLook = true
		a.broadcast(a.update()) // members answer with their snapshot
		a.collect()
		return
	}
	if p.State == Blocked {
		// Still blocked: refresh the registration and tour again.
		a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbRegister, Part: *p.clone(), Lease: a.cfg.Lease})
		a.forward()
		return
	}
	p.State = Blocked
	p.Version++
	a.broadcast(a.update())
	a.record(Record{Kind: RecBlocked, Nodes: slices.Clone(p.Nodes)})
	a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbRegister, Part: *p.clone(), Lease: a.cfg.Lease})
	if a.cfg.Preempt {
		// The partition cannot grow: solve once more, preemption allowed
		// now; without a solution the request tours again (SolveDone).
		a.collect()
		return
	}
	a.forward()
}
