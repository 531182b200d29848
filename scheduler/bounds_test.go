package scheduler

import (
	"slices"
	"testing"
	"time"
)

// heldByH5: h1's overload, joined by h2, then taken over by h5 (one
// version up, itself leader), which h1 follows; up is h2's update.
func heldByH5(t *testing.T) (*Agent, Message) {
	t.Helper()
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	h2.Step(only(t, overload(t, h1), MsgGrow).Msg)
	up := only(t, h2.Ready(), MsgUpdate).Msg
	taken := *up.Part
	taken.Version++
	taken.Leader, taken.Nodes = "h5", append(slices.Clone(taken.Nodes), "h5")
	h1.Step(Message{Type: MsgUpdate, From: "h5", PartID: taken.ID, Version: taken.Version, Part: &taken})
	h1.Ready()
	if p := h1.Partition(); p == nil || p.Leader != "h5" {
		t.Fatalf("h1 did not follow the takeover: %+v", p)
	}
	return h1, up
}

// An initiator held by a leader the runtime refuses leaves the partition
// on its own (nobody else is told: each member judges on its own
// evidence), its event is not ended: it goes on under its own id in a
// fresh partition on the next tick, without a backoff, and no request of
// its goes to the refused key.
func TestRefuseLeaderRetriesTheHeldEvent(t *testing.T) {
	h1, up := heldByH5(t)
	now := t0.Add(time.Minute)
	h1.RefuseLeader(now, "h5", "", "leader h5 refused: test")
	rd := h1.Ready()
	if h1.Partition() != nil {
		t.Fatal("h1 is still in the partition the refused key leads")
	}
	if m := sent(rd, MsgDissolve); len(m) != 0 {
		t.Errorf("h1 told the others %+v: it must leave on its own", m)
	}
	if e := records(rd, RecEventEnded); len(e) != 0 {
		t.Fatalf("event ended %+v: a held event goes on under its own id", e)
	}
	if d := records(rd, RecDissolved); len(d) != 1 || d[0].Class != EndLeaderRefused {
		t.Fatalf("dissolved %+v, want the partition dissolved leader_refused", d)
	}
	if slices.Contains(h1.Members(), "h5") {
		t.Error("the refused key is still in h1's ring")
	}
	h1.Tick(now.Add(500 * time.Millisecond))
	p := h1.Partition()
	if p == nil || p.Events[0].ID != up.Part.Events[0].ID || p.ID == up.Part.ID || p.Leader != "h1" {
		t.Fatalf("the held event did not go on under its id in a fresh partition on the next tick: %+v (was %+v)", p, up.Part)
	}
	if g := only(t, h1.Ready(), MsgGrow); g.To == "h5" {
		t.Error("the new request went to the refused key")
	}
	// Not its leader: nothing happens.
	h1.RefuseLeader(now, "h3", "", "test")
	if h1.Partition() == nil {
		t.Error("h1 left a partition the refused key does not lead")
	}
}

// The held event whose condition is gone by the next tick ends
// leader_refused (not left in flight).
func TestRefuseLeaderEndsAVanishedEvent(t *testing.T) {
	h1, up := heldByH5(t)
	now := t0.Add(time.Minute)
	for i := range 10 { // held, h1's overload goes: every sample of its window says so
		h1.Observe(now.Add(time.Duration(i-10)*time.Second), hostWith("h1", 1))
	}
	h1.RefuseLeader(now, "h5", "", "leader h5 refused: test")
	h1.Ready()
	h1.Tick(now.Add(time.Second))
	e := records(h1.Ready(), RecEventEnded)
	if len(e) != 1 || e[0].Event.ID != up.Part.Events[0].ID || e[0].Class != EndLeaderRefused || e[0].Outcome != Aborted {
		t.Fatalf("event end %+v, want %s aborted/leader_refused", e, up.Part.Events[0].ID)
	}
	if p := h1.Partition(); p != nil {
		t.Fatalf("a partition %+v for a condition that is gone", p)
	}
}

// A refusal forgives the retry backoff: the ends a key caused before it
// was refused (its takeovers at a fair leader's next version drop the
// initiator: a conflicting leader, a snapshot sent to the key) doubled
// it; the next try waits retry_backoff at most.
func TestRefuseLeaderForgivesTheBackoff(t *testing.T) {
	h1 := newAgent(t, "h1")
	h1.Tick(t0)
	h1.Ready()
	base := h1.cfg.RetryBackoff
	h1.backoff, h1.retryAt = 8*base, t0.Add(4*base)
	h1.RefuseLeader(t0, "h5", "", "leader h5 refused: test")
	if h1.backoff != base || h1.retryAt.After(t0.Add(base)) {
		t.Fatalf("after the refusal: backoff %s, next try at +%s; want %s and at most +%s", h1.backoff, h1.retryAt.Sub(t0), base, base)
	}
}

// The partitions of an agent's events avoid the keys it refuses
// (Partition.Avoid): a member forwarding the request goes past them, and
// an agent named there does not join it but passes the request on. Its
// other members still have the key in their rings: without this, the
// key joined or claimed the initiator's fresh partition again, the
// initiator (which sends a key it refuses no snapshot) left it again,
// and its event never got a plan.
func TestRefusedKeysAreAvoidedByTheInitiatorsPartitions(t *testing.T) {
	h1, h2, h3 := newAgent(t, "h1"), newAgent(t, "h2"), newAgent(t, "h3")
	h1.RefuseLeader(t0, "h3", "", "leader h3 refused: test")
	h1.Ready()
	grow := only(t, overload(t, h1), MsgGrow)
	if !slices.Equal(grow.Msg.Part.Avoid, []string{"h3"}) {
		t.Fatalf("h1's partition avoids %v, want [h3]", grow.Msg.Part.Avoid)
	}
	if grow.To != "h2" {
		t.Fatalf("h1's request went to %s, want h2", grow.To)
	}

	// h2 joins, finds no solution and forwards the request: past h3.
	h2.Observe(t0, hostWith("h2", 1))
	h2.Ready()
	h2.Step(grow.Msg)
	up := only(t, h2.Ready(), MsgUpdate).Msg
	s1 := hostWith("h1", 6)
	h2.Step(Message{Type: MsgSnapshot, From: "h1", PartID: up.PartID, Version: up.Version, Host: &s1})
	if len(h2.Ready().Solve) != 1 {
		t.Fatal("h2 did not solve with every snapshot in")
	}
	h2.SolveDone(up.PartID, up.Version, Solution{Reason: "test: none"}, Plan{}, nil)
	if g := only(t, h2.Ready(), MsgGrow); g.To != "h4" || !slices.Equal(g.Msg.Part.Avoid, []string{"h3"}) {
		t.Fatalf("h2 forwarded the request to %s avoiding %v, want h4 avoiding [h3]", g.To, g.Msg.Part.Avoid)
	}

	// The avoided agent, free, passes the request on instead of joining.
	h3.Observe(t0, hostWith("h3", 1))
	h3.Ready()
	h3.Step(grow.Msg)
	if h3.Partition() != nil {
		t.Fatal("h3 joined a partition whose initiator avoids it")
	}
	if g := only(t, h3.Ready(), MsgGrow); g.To != "h4" {
		t.Fatalf("h3 passed the request to %s, want h4", g.To)
	}

	// The refusal over (MemberUp), the next partition avoids nobody.
	h1.MemberUp("h3")
	if av := h1.avoid(); av != nil {
		t.Errorf("avoids %v after the refusal ended", av)
	}
}

// An initiator whose partition is lost before any plan of it ran (its
// leader removed it: a conflicting leader it nacked, no snapshot in
// time; or the leader went silent) is alive and its event was not
// tried: the event goes on under its own id in a fresh partition on the
// next tick, not ended and raised again after the backoff, at most
// maxGoOn times; then it ends member_lost as before. Its event whose
// condition is gone by the next tick ends with the class of the loss.
func TestLostPartitionsEventGoesOn(t *testing.T) {
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	grow := only(t, overload(t, h1), MsgGrow).Msg
	evID := grow.Part.Events[0].ID
	h2.Step(grow)
	up := only(t, h2.Ready(), MsgUpdate).Msg
	h1.Step(up)
	h1.Ready()
	now := t0
	for i := range maxGoOn + 1 {
		p := h1.Partition()
		if p == nil || p.Initiator != "h1" || p.Events[0].ID != evID {
			t.Fatalf("loss %d: h1 is in %+v, want a partition of its event %s", i+1, p, evID)
		}
		// Its leader (h2, then whoever) removed it: a member_lost dissolution.
		h1.Step(Message{Type: MsgDissolve, From: p.Leader, PartID: p.ID, Version: p.Version + 1, Outcome: Aborted,
			Class: EndMemberLost, Reason: "initiator h1 conflicting leader"})
		rd := h1.Ready()
		ended := records(rd, RecEventEnded)
		if i == maxGoOn {
			if len(ended) != 1 || ended[0].Class != EndMemberLost {
				t.Fatalf("loss %d (past maxGoOn): ended %+v, want member_lost", i+1, ended)
			}
			break
		}
		if len(ended) != 0 {
			t.Fatalf("loss %d: event ended %+v, want it to go on", i+1, ended)
		}
		now = now.Add(500 * time.Millisecond)
		overloadSamples(h1, 1)
		h1.Tick(now)
		g := only(t, h1.Ready(), MsgGrow)
		if g.Msg.Part.ID == p.ID || g.Msg.Part.Leader != "h1" {
			t.Fatalf("loss %d: not a fresh partition of h1's: %+v", i+1, g.Msg.Part)
		}
	}

	// A fresh event, lost while its condition goes: ends with the loss's class.
	h1 = newAgent(t, "h1")
	overload(t, h1)
	p := h1.Partition()
	for range 10 { // its overload goes: every sample of its window says so
		h1.Observe(t0, hostWith("h1", 1))
	}
	h1.Step(Message{Type: MsgDissolve, From: "h2", PartID: p.ID, Version: p.Version + 1, Outcome: Aborted, Class: EndMemberLost, Reason: "leader h2 crashed"})
	if e := records(h1.Ready(), RecEventEnded); len(e) != 0 {
		t.Fatalf("ended %+v before the next tick", e)
	}
	h1.Tick(t0.Add(time.Second))
	if e := records(h1.Ready(), RecEventEnded); len(e) != 1 || e[0].Class != EndMemberLost || e[0].Outcome != Aborted {
		t.Fatalf("ended %+v, want the vanished event ended member_lost", e)
	}
}
