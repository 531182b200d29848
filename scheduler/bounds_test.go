package scheduler

import (
	"slices"
	"testing"
	"time"
)

// An initiator held by a leader the runtime refuses leaves the partition
// on its own (nobody else is told: each member judges on its own
// evidence), its event ends leader_refused and is raised again on the next
// tick from the samples that raised it, without a backoff, and no request
// of its goes to the refused key.
func TestRefuseLeaderRetriesTheHeldEvent(t *testing.T) {
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	h2.Step(only(t, overload(t, h1), MsgGrow).Msg)
	up := only(t, h2.Ready(), MsgUpdate).Msg
	// h5 takes the partition over: one version up, itself leader.
	taken := *up.Part
	taken.Version++
	taken.Leader, taken.Nodes = "h5", append(slices.Clone(taken.Nodes), "h5")
	h1.Step(Message{Type: MsgUpdate, From: "h5", PartID: taken.ID, Version: taken.Version, Part: &taken})
	h1.Ready()
	if p := h1.Partition(); p == nil || p.Leader != "h5" {
		t.Fatalf("h1 did not follow the takeover: %+v", p)
	}
	now := t0.Add(time.Minute)
	h1.RefuseLeader(now, "h5", "", "leader h5 refused: test")
	rd := h1.Ready()
	if h1.Partition() != nil {
		t.Fatal("h1 is still in the partition the refused key leads")
	}
	if m := sent(rd, MsgDissolve); len(m) != 0 {
		t.Errorf("h1 told the others %+v: it must leave on its own", m)
	}
	e := records(rd, RecEventEnded)
	if len(e) != 1 || e[0].Class != EndLeaderRefused || e[0].Outcome != Aborted {
		t.Fatalf("event end %+v, want aborted/leader_refused", e)
	}
	if slices.Contains(h1.Members(), "h5") {
		t.Error("the refused key is still in h1's ring")
	}
	h1.Tick(now.Add(500 * time.Millisecond))
	p := h1.Partition()
	if p == nil || p.Events[0].ID == e[0].Event.ID {
		t.Fatalf("the held event was not raised again on the next tick: %+v", p)
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
