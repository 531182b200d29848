package explain

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
	for _, d := range Decisions(reps, "c1", at(100), time.Hour) {
		got = append(got, d.Event+"|"+d.Decision+"|"+d.Server+"|"+d.Class)
	}
	want := "e1|raised||overload e1|ended unsolvable||no_solution e2|raised||overload e2|planned|| e2|moved|s1|none |left alone||window_closed |now||window_closed"
	if strings.Join(got, " ") != want {
		t.Errorf("explain c1:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	rows := Decisions(reps, "c1", at(100), time.Hour)
	if w := rows[1].Why; !strings.Contains(w, "no destination fits") {
		t.Errorf("no_solution in words: %q", w)
	}
	got = nil
	for _, d := range Decisions(reps, "s2", at(100), time.Hour) {
		got = append(got, d.Event+"|"+d.Decision+"|"+d.Server+"|"+d.Class+"|"+d.Why)
	}
	if len(got) != 3 || got[2] != "e2|skipped, not moved|s2|overload|the destination no longer fits: it would be overloaded" {
		t.Errorf("explain s2: %q", got)
	}
}

// A server moved c1 -> c3 by one agent's plan and back c3 -> c1 by
// another's is listed "moved back" (region-wide: neither agent saw both
// moves), for the server and for either host; not when the return came
// after the window, nor for a move on to a third host.
func TestExplainMovedBackRegionWide(t *testing.T) {
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	mv := func(server, from, to string, s int) journal.Action {
		return journal.Action{Kind: "live-migrate", Server: server, From: from, To: to, Outcome: "done", Ended: at(s)}
	}
	reps := []status.Report{
		{Host: "c2", Events: []journal.Entry{
			{ID: "e1", Kind: "overload", Host: "c1", Agent: "c2", Raised: at(1), Actions: []journal.Action{mv("s1", "c1", "c3", 10), mv("s2", "c1", "c3", 11)}},
		}},
		{Host: "c3", Events: []journal.Entry{
			{ID: "e2", Kind: "overload", Host: "c3", Agent: "c3", Raised: at(100), Actions: []journal.Action{mv("s1", "c3", "c1", 200), mv("s2", "c3", "c2", 201)}},
		}},
	}
	back := func(target string, window time.Duration) []string {
		var out []string
		for _, d := range Decisions(reps, target, at(300), window) {
			if d.Decision == "moved back" {
				out = append(out, d.Event+"|"+d.Server+"|"+d.From+"|"+d.To+"|"+d.Class)
			}
		}
		return out
	}
	want := "e2|s1|c3|c1|server_moved_back"
	for _, target := range []string{"s1", "c1", "c3"} {
		if got := back(target, time.Hour); strings.Join(got, " ") != want {
			t.Errorf("explain %s: moved back %q, want %q", target, got, want)
		}
	}
	if got := back("s2", time.Hour); len(got) != 0 {
		t.Errorf("explain s2 (moved on to a third host): moved back %q", got)
	}
	if got := back("s1", 189*time.Second); len(got) != 0 {
		t.Errorf("explain s1 with a window shorter than the return: moved back %q", got)
	}
	rows := Decisions(reps, "s1", at(300), time.Hour)
	if r := rows[len(rows)-1]; r.Decision != "moved back" || !strings.Contains(r.Why, "3m10s earlier (event e1)") || !strings.Contains(r.Detail, "c1 -> c3 by event e1, then c3 -> c1 by event e2") {
		t.Errorf("explain s1: last row %+v, want the return in words", r)
	}
}
