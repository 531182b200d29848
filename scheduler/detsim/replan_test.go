package detsim

import (
	"slices"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// DESIGN §5.5, issue 9: demand rises on a plan's destination between the
// snapshot and the move, so the re-check skips the move; the event's host
// is still overloaded. The partition solves again on fresh snapshots and
// moves the server to the host that has room now: the event ends Solved,
// with its host relieved, instead of Aborted (and raised again later).
func TestSkippedPlanReplanned(t *testing.T) {
	c := New(Options{Seed: 1, Recheck: true}, []scheduler.Host{
		host("h1", 4, server("a", 2), server("b", 2), server("c", 1)),
		host("h2", 4, server("d", 3.5)), // no room: the partition grows to h3
		host("h3", 4, server("e", 0)),
	})
	set := func(h, id string, cpu float64) {
		i := c.find(h, id)
		c.Hosts[h].Servers[i].CPU = cpu
	}
	changed := false
	c.Filter = func(_, _ string, m scheduler.Message) bool {
		if !changed && m.Type == scheduler.MsgUpdate && m.Part.State == scheduler.Finishing {
			// The plan (a move to h3, the only host with room) starts:
			// h3 fills up before the move, h2 empties.
			changed = true
			set("h3", "e", 3.5)
			set("h2", "d", 0.5)
		}
		return true
	}
	var end *Rec
	c.RunUntil(time.Minute, func() bool {
		for i := range c.Records {
			if c.Records[i].Kind == scheduler.RecEventEnded {
				end = &c.Records[i]
				return true
			}
		}
		return false
	})
	if !changed || end == nil {
		t.Fatalf("no plan started (%v) or no event ended (%v)", changed, end)
	}
	if len(c.Violations) > 0 {
		t.Fatalf("violations: %v", c.Violations)
	}
	if end.Outcome != scheduler.Solved || len(c.Overloaded()) > 0 {
		t.Fatalf("event ended %s (%s) with %v overloaded, want solved with none", end.Outcome, end.Reason, c.Overloaded())
	}
	if c.Count(scheduler.RecReplanning, 0) != 1 {
		t.Errorf("%d re-plans, want 1", c.Count(scheduler.RecReplanning, 0))
	}
	if !slices.ContainsFunc(c.Moves, func(m Move) bool { return m.From == "h1" && m.To == "h2" }) || slices.ContainsFunc(c.Moves, func(m Move) bool { return m.To == "h3" }) {
		t.Errorf("moves %+v, want h1 -> h2 only", c.Moves)
	}
}
