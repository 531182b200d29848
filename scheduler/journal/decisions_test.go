package journal

import (
	"fmt"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// Held records are kept apart from the events, the last MaxHeld, and
// reported as updates; an operator's decision on a plan is the entry's
// Approval and a step, and survives Join with the other agents' entries.
func TestHeldAndDecisions(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	j := New("c1", clock)
	var ups []Update
	j.OnUpdate = func(u Update) { ups = append(ups, u) }
	for i := range MaxHeld + 5 {
		j.Record(scheduler.Record{Kind: scheduler.RecHeld, Event: scheduler.Event{Kind: scheduler.Overload, Host: "c1"},
			Hold: scheduler.HoldPaused, Reason: fmt.Sprint("paused ", i)})
	}
	hs := j.Held()
	if len(hs) != MaxHeld || hs[0].Reason != "paused 5" || hs[MaxHeld-1].Class != "paused" || hs[0].Kind != "overload" || hs[0].Agent != "c1" {
		t.Fatalf("held kept: %d, first %+v", len(hs), hs[0])
	}
	if len(j.Snapshot()) != 0 || len(ups) != MaxHeld+5 || ups[0].Record != "held" || ups[0].Class != "paused" {
		t.Fatalf("held records made events (%d) or updates %d %+v", len(j.Snapshot()), len(ups), ups[0])
	}
	if got := FilterHeld(hs, hs[3].At); len(got) != MaxHeld-3 {
		t.Errorf("FilterHeld since the 4th: %d", len(got))
	}

	ev := scheduler.Event{ID: "e1", Kind: scheduler.Overload, Host: "c1", Detected: now}
	raiser := New("c1", clock)
	raiser.Record(scheduler.Record{Kind: scheduler.RecEventRaised, Event: ev})
	leader := New("c2", clock)
	leader.Record(scheduler.Record{Kind: scheduler.RecPlanned, Event: ev, Moves: 1})
	leader.Decide(ev, Approval{State: Refused, Operator: "alice", Command: "x", Reason: "s1 moved"})
	joined := Join(raiser.Snapshot(), leader.Snapshot())
	if len(joined) != 1 || joined[0].Approval == nil || joined[0].Approval.State != Refused || joined[0].Approval.Operator != "alice" {
		t.Fatalf("joined %+v", joined)
	}
	last := joined[0].Steps[len(joined[0].Steps)-1]
	if last.Record != "plan-refused" || last.Reason != "by alice: s1 moved" || last.Agent != "c2" {
		t.Errorf("decision step %+v", last)
	}
}
