package scheduler

// Merges (DESIGN §5.4): two Blocked partitions meet; the one with the
// smaller initiator absorbs the other, decided by the arbiter.

import "slices"

// MayAbsorb is DESIGN §5.4's merge order: a partition whose initiator is
// into may absorb one whose initiator is absorbed only if absorbed >
// into. A total order, so Blocked partitions never wait on each other in
// a cycle. (The arbiter's FSM checks the same rule when it commits.)
func MayAbsorb(into, absorbed string) bool { return absorbed > into }

// absorbedMemory is how many leases an agent remembers a partition it
// knows was absorbed (Agent.absorbed): well beyond the arbiter's
// tombstone, which lives one lease after the last registration.
const absorbedMemory = 10

// onMergeOffer (leader): another Blocked partition met this one.
func (a *Agent) onMergeOffer(m Message) {
	p, o, l := a.part, m.Other, a.lead
	if p.ID != m.PartID || p.State != Blocked || l.phase != phWaiting {
		return
	}
	if l.merging && MayAbsorb(p.Initiator, o.Initiator) {
		return // one merge at a time
	}
	if !MayAbsorb(p.Initiator, o.Initiator) {
		// The other partition may absorb this one: this partition was
		// met, and its tour counts as such (tourDone).
		l.offered = true
		return
	}
	l.merging = true
	a.record(Record{Kind: RecMergeProposed, Reason: "absorb " + o.ID})
	a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbMerge, Part: *p.clone(), Absorb: o.clone()})
}

// ArbiterDone reports the arbiter's answer to a request.
func (a *Agent) ArbiterDone(req ArbiterRequest, res ArbiterResult) {
	switch req.Op {
	case ArbMerge:
		if !a.leader() || a.part.ID != req.Part.ID || !a.lead.merging {
			return
		}
		switch {
		case res.Unknown:
			// Re-read before deciding: the merge may have committed.
			a.rd.Arbiter = append(a.rd.Arbiter, ArbiterRequest{Op: ArbRead, Part: req.Part, Absorb: req.Absorb})
		case res.Committed:
			a.merged(req, res)
		default:
			why := res.Reason
			if res.Err != nil {
				why = res.Err.Error()
			}
			a.mergeRefused(why)
		}
	case ArbRead:
		if !a.leader() || a.part.ID != req.Part.ID || !a.lead.merging {
			return
		}
		if res.Committed && res.Version == req.Part.Version+1 && slices.Contains(res.Nodes, req.Absorb.Nodes[0]) {
			a.merged(req, res)
			return
		}
		a.mergeRefused("outcome unknown; re-read shows no merge")
	case ArbRegister, ArbDissolve:
		if res.Absorbed {
			a.wasAbsorbed(req.Part.ID, res.Into)
		}
	}
}

// mergeRefused: the partition goes on as it was. If its request came
// back meanwhile, that tour is finished now.
func (a *Agent) mergeRefused(why string) {
	l := a.lead
	l.merging = false
	a.record(Record{Kind: RecMergeRefused, Reason: why})
	if l.back {
		met := l.backMet
		l.back, l.backMet = false, false
		a.tourDone(met)
	}
}

// wasAbsorbed: the arbiter says partition id was absorbed into another
// (its Register or Dissolve was refused for that). The absorbing leader's
// MsgAbsorbed did not reach this agent; if it still leads id, it stops at
// once, without dissolving: its members belong to the absorbing
// partition now, which carries its events. It never registers id again.
func (a *Agent) wasAbsorbed(id, into string) {
	a.absorbed[id] = a.now
	if !a.leader() || a.part.ID != id {
		return
	}
	a.end(Aborted, EndAbsorbedLost, "absorbed into "+into+" (the absorption message was lost)", nil)
}

// merged applies a committed merge: the absorbed partition's nodes join.
func (a *Agent) merged(req ArbiterRequest, res ArbiterResult) {
	p, o, l := a.part, req.Absorb, a.lead
	l.merging, l.back, l.backMet = false, false, false
	old := slices.Clone(p.Nodes)
	for _, n := range res.Nodes {
		if !p.has(n) {
			p.Nodes = append(p.Nodes, n)
		}
	}
	// Skip one version: our own request from before the merge may still
	// travel at the old version, and a free node joining it would claim
	// old+1. At old+2 members treat that fork as stale.
	p.Version = max(res.Version, p.Version+1) + 1
	p.State, p.Tours = Growing, 0
	p.Events = append(p.Events, o.Events...)
	p.Moved = append(p.Moved, o.Moved...)
	p.Replans = max(p.Replans, o.Replans)
	a.record(Record{Kind: RecMergeCommitted, Reason: "absorbed " + o.ID, Absorbed: o.ID})
	for _, n := range o.Nodes {
		if n != a.cfg.ID {
			a.send(n, Message{Type: MsgAbsorbed, PartID: p.ID, Version: p.Version, Part: p.clone(), Other: o.clone()})
		}
	}
	for _, n := range old {
		if n != a.cfg.ID {
			a.send(n, a.update())
		}
	}
	a.collect()
}

func (a *Agent) onAbsorbed(m Message) {
	o := m.Other
	mine := a.part
	if mine == nil || mine.ID != o.ID || mine.Version != o.Version {
		a.send(m.From, Message{Type: MsgNack, PartID: m.PartID, Version: m.Version, Reason: "not in the absorbed partition version"})
		return
	}
	a.ended[mine.ID] = ended{at: a.now, version: mine.Version}
	a.absorbed[mine.ID] = a.now
	// A member of the absorbing partition now (a leader stops leading).
	a.setPart(m.Part.clone())
	a.fromLeader = a.now
	a.send(a.part.Leader, Message{Type: MsgSnapshot, PartID: a.part.ID, Version: a.part.Version, Host: ptr(a.snapshot())})
}
