package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/status"
)

// dvms explain from the agents' reports: a host's events (an unsolved
// one: no destination fits), the moves into it, its held records and
// what holds it now; a server's moves only; oldest first.
func TestExplainRows(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	p := func(t time.Time) *time.Time { return &t }
	reps := []status.Report{
		{Host: "c1", Now: at(100), Windows: []status.WindowInfo{{Kind: "underload", Window: "22:00-06:00", Open: false}},
			Held: []journal.Held{{At: at(50), Agent: "c1", Host: "c1", Kind: "overload", Class: "window_closed", Reason: "overload holds, no event raised: its time window (22:00-06:00) is closed"}},
			Events: []journal.Entry{
				{ID: "e1", Kind: "overload", Host: "c1", Agent: "c1", Raised: at(1), Ended: p(at(3)), Outcome: "unsolvable", Class: "no_solution", Reason: "no solution: 2 hosts"},
			}},
		{Host: "c2", Now: at(100), Events: []journal.Entry{
			{ID: "e2", Kind: "overload", Host: "c3", Agent: "c2", Raised: at(10), Planned: p(at(11)), Leader: "c2", Moves: 2, Actions: []journal.Action{
				{Kind: "live-migrate", Server: "s1", From: "c3", To: "c1", Outcome: "done", Class: "none", Ended: at(20)},
				{Kind: "live-migrate", Server: "s2", From: "c3", To: "c2", Outcome: "skipped", Class: "overload", Reason: "destination would be overloaded", Ended: at(21)},
			}},
		}},
	}
	var got []string
	for _, d := range explain(reps, "c1", at(100)) {
		got = append(got, d.Event+"|"+d.Decision+"|"+d.Server+"|"+d.Class)
	}
	want := "e1|raised||overload e1|ended unsolvable||no_solution e2|raised||overload e2|planned|| e2|moved|s1|none |left alone||window_closed |now||window_closed"
	if strings.Join(got, " ") != want {
		t.Errorf("explain c1:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	rows := explain(reps, "c1", at(100))
	if w := rows[1].Why; !strings.Contains(w, "no destination fits") {
		t.Errorf("no_solution in words: %q", w)
	}
	got = nil
	for _, d := range explain(reps, "s2", at(100)) {
		got = append(got, d.Event+"|"+d.Decision+"|"+d.Server+"|"+d.Class+"|"+d.Why)
	}
	if len(got) != 3 || got[2] != "e2|skipped, not moved|s2|overload|the destination no longer fits: it would be overloaded" {
		t.Errorf("explain s2: %q", got)
	}
}
