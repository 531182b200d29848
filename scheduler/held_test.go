package scheduler

import (
	"strings"
	"testing"
	"time"
)

// A host whose overload holds while the agent raises no event records
// why, once per change: paused, excluded, backing off after an event
// ended unsolved, its time window closed; once the event is raised (or
// the condition goes), a new hold is recorded again.
func TestHeldRecordsWhyNoEvent(t *testing.T) {
	a := newAgent(t, "h1")
	hot := func(now time.Time, n int) Ready {
		for range n {
			a.Observe(now, hostWith("h1", 6))
		}
		return a.Ready()
	}
	one := func(rd Ready, c HoldClass, words string) {
		t.Helper()
		hs := records(rd, RecHeld)
		if len(hs) != 1 || hs[0].Hold != c || hs[0].Event.Kind != Overload || hs[0].Event.Host != "h1" || hs[0].Event.ID != "" || !strings.Contains(hs[0].Reason, words) {
			t.Fatalf("want one held record %s (%q), got %+v", c, words, hs)
		}
	}

	a.Control(true, false)
	one(hot(t0, 2*a.cfg.K), HoldPaused, "paused")
	if rd := hot(t0, 3); len(records(rd, RecHeld)) != 0 || a.Partition() != nil {
		t.Fatalf("held again while nothing changed, or raised while paused: %+v", rd.Records)
	}
	a.Control(false, true)
	one(hot(t0, 1), HoldExcluded, "dvms include h1")

	a.Control(false, false)
	if rd := hot(t0, 1); len(records(rd, RecHeld)) != 0 || len(records(rd, RecEventRaised)) != 1 {
		t.Fatalf("free again: want the event raised, no hold: %+v", rd.Records)
	}
	// The event ends unsolved: the agent backs off.
	a.end(Unsolvable, EndNoSolution, "no solution", nil)
	a.Ready()
	one(hot(t0.Add(time.Second), a.cfg.K), HoldBackoff, "ended unsolved, next try at")
	if p := a.Partition(); p != nil {
		t.Fatalf("raised during the backoff: %+v", p)
	}

	// A closed window.
	b := newAgent(t, "h1")
	b.cfg.Windows = mustWindows(t, "overload=22:00-06:00 UTC")
	noon := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	a = b
	one(hot(noon, a.cfg.K), HoldWindowClosed, "opens at 2026-03-02T22:00:00Z")
	// The condition goes and comes back: recorded again.
	for range a.cfg.N {
		a.Observe(noon, hostWith("h1", 1))
	}
	a.Ready()
	one(hot(noon, a.cfg.K), HoldWindowClosed, "is closed")
}
