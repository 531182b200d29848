//go:build functional

package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	ctlproto "github.com/dvms-project/dvms/scheduler/control"
)

// operatorControls checks issue 13's run-time controls on the real cloud,
// with the running fleet and the operator key up.sh provisions into the
// agents' keys_dir/operators:
//  1. `dvms mode advise`, then an overload of first: `dvms plans` lists a
//     plan for it (its moves re-checked), and Nova lists no new migration
//     once that event ended;
//  2. `dvms mode enforce`: the plan runs (the agent raises the event again
//     after its backoff), the overload is solved by live migrations off
//     first that Nova lists, and the operators' view matches Nova's;
//  3. `dvms pause`, then an overload of second: no agent raises an event
//     (dvms events, the agents' dvms_events_raised_total) and Nova lists no
//     new migration for a window of three times what the advise phase took
//     from the demand written to its plan listed (at least the K samples
//     an event needs);
//  4. `dvms resume`: the overload of second is solved.
//
// Whatever happens, the region is left resumed and in enforce mode.
func (w *world) operatorControls(f *fleet, bin, first, second string) {
	t := w.t
	cfg := w.agentConfig()
	key := w.operatorKey()
	type ack struct {
		Host, Result, Reason, Mode string
		Paused, Advise             bool
	}
	// signed puts --key before the command's arguments (urfave/cli reads
	// no flag after the first argument).
	signed := func(args []string) []string { return append([]string{args[0], "--key", key}, args[1:]...) }
	// control sends a signed command and checks that every agent answered,
	// none refused, and each holds what ok says.
	control := func(ok func(ack) bool, args ...string) {
		t.Helper()
		start := time.Now()
		out, err := w.dvms(bin, signed(args)...)
		if err != nil {
			t.Fatal(err)
		}
		var acks []ack
		if err := json.Unmarshal(out, &acks); err != nil {
			t.Fatalf("dvms %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		var bad []string
		for _, a := range acks {
			if a.Result == "refused" || !ok(a) {
				bad = append(bad, fmt.Sprintf("%+v", a))
			}
		}
		if len(acks) != len(w.hosts) || len(bad) > 0 {
			t.Fatalf("dvms %s: %d of %d agents answered; wrong answers: %v", strings.Join(args, " "), len(acks), len(w.hosts), bad)
		}
		t.Logf("dvms %s: every agent (%d) took it, answered in %s", strings.Join(args, " "), len(acks), time.Since(start).Round(time.Millisecond))
	}
	t.Cleanup(func() {
		// Later tests expect a region that executes plans.
		for _, args := range [][]string{{"resume"}, {"mode", "enforce"}} {
			if _, err := w.dvms(bin, signed(args)...); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	var st struct {
		Control []struct {
			Paused bool
			Mode   string
			SeenBy string `json:"Seen By"`
		} `json:"control"`
	}
	// controlsAre checks that every agent holds one view of the controls
	// (dvms status) and its /metrics say the same (gauge, 1 per agent).
	controlsAre := func(paused bool, mode, gauge string, want float64) {
		t.Helper()
		out, err := w.dvms(bin, "status")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("status json: %v\n%s", err, out)
		}
		if len(st.Control) != 1 || st.Control[0].Paused != paused || st.Control[0].Mode != mode || len(strings.Fields(st.Control[0].SeenBy)) != len(w.hosts) {
			t.Errorf("dvms status: controls %+v, want one view, paused %v, mode %s, seen by all %d agents", st.Control, paused, mode, len(w.hosts))
		}
		if got := w.fleetMetric(f, gauge); got != want {
			t.Errorf("/metrics: %s sums to %v over the agents, want %v", gauge, got, want)
		}
	}
	type move struct{ Action, Server, From, To, Recheck string }
	type plan struct {
		Event, Kind, Host string
		Moves             []move
	}
	type event struct {
		Event, Kind, Host, Raised, Ended, Outcome string
	}
	events := func(host string) []event {
		t.Helper()
		args := []string{"events"}
		if host != "" {
			args = append(args, "--host", host)
		}
		out, err := w.dvms(bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		var evs []event
		if err := json.Unmarshal(out, &evs); err != nil {
			t.Fatalf("events json: %v\n%s", err, out)
		}
		return evs
	}

	// 1. Advise: a plan, no migration.
	before := w.lastMigration()
	control(func(a ack) bool { return a.Advise && a.Mode == ctlproto.ModeAdvise }, "mode", ctlproto.ModeAdvise)
	controlsAre(false, ctlproto.ModeAdvise, "dvms_advise_mode", float64(len(w.hosts)))
	overloaded := w.overloadOnly(first)
	wrote := time.Now()
	t.Logf("advise: wrote an overload of %s: %v", first, overloaded())
	var advised plan
	if !w.eventually("dvms plans lists a plan for the overload of "+first, 2*time.Minute, func() bool {
		out, err := w.dvms(bin, "plans", "--host", first)
		if err != nil {
			t.Fatal(err)
		}
		var ps []plan
		if err := json.Unmarshal(out, &ps); err != nil {
			t.Fatalf("plans json: %v\n%s", err, out)
		}
		for _, p := range ps {
			holds := 0
			for _, m := range p.Moves {
				if m.From == first && m.Recheck == "holds" {
					holds++
				}
			}
			if p.Kind == "overload" && p.Host == first && holds > 0 {
				advised = p
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no plan for the overload of %s in dvms plans after 2 min; agent logs in %s", first, f.logDir)
	}
	planned := time.Since(wrote)
	t.Logf("advise: plan of event %s: %+v", advised.Event, advised.Moves)
	// Its event ends once the executor re-checked (and held back) every
	// move: anything it would have sent, Nova has by then.
	if !w.eventually("advised event "+advised.Event+" ended", time.Minute, func() bool {
		for _, e := range events(first) {
			if e.Event == advised.Event && e.Ended != "" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("advised event %s did not end within a minute", advised.Event)
	}
	if ms := w.migrationsAfter(before); len(ms) > 0 {
		t.Fatalf("advise mode, yet Nova lists %d new migrations: %+v", len(ms), ms)
	}
	if len(overloaded()) == 0 {
		t.Fatalf("advise mode, yet %s is no longer overloaded", first)
	}

	// 2. Enforce at run time: the plan runs.
	control(func(a ack) bool { return !a.Advise && a.Mode == ctlproto.ModeEnforce }, "mode", ctlproto.ModeEnforce)
	enforced := time.Now()
	controlsAre(false, ctlproto.ModeEnforce, "dvms_advise_mode", 0)
	if !w.eventually("overload of "+first+" solved in enforce mode", 4*time.Minute, func() bool { return len(overloaded()) == 0 }) {
		t.Fatalf("still overloaded 4 min after dvms mode enforce: %v; agent logs in %s", overloaded(), f.logDir)
	}
	solvedIn := time.Since(enforced)
	moved := w.movesOff(first, before)
	w.operatorsView(f, bin, first, "overload")
	t.Logf("CONTROLS advise: plan for %s listed %s after its demand, %d moves, Nova 0 migrations; enforce: solved %s later by %d live migrations",
		first, planned.Round(100*time.Millisecond), len(advised.Moves), solvedIn.Round(100*time.Millisecond), len(moved))

	// 3. Paused: no event, no migration. An absence can only be watched
	// for a while: three times what advise took from the demand to a
	// listed plan (which includes raising the event), and at least three
	// times the K monitor samples an overload needs before it is raised.
	// Nothing in flight first: an event already raised is no new one.
	if !w.eventually("every event of "+first+" ended", time.Minute, func() bool {
		return !slices.ContainsFunc(events(first), func(e event) bool { return e.Ended == "" })
	}) {
		t.Fatalf("events still in flight a minute after the overload of %s was solved", first)
	}
	control(func(a ack) bool { return a.Paused }, "pause")
	paused := time.Now()
	controlsAre(true, ctlproto.ModeEnforce, "dvms_paused", float64(len(w.hosts)))
	window := 3 * max(planned, time.Duration(cfg.Agent.K)*cfg.Runtime.Monitor)
	window = min(window, time.Minute).Round(100 * time.Millisecond)
	known := map[string]bool{}
	for _, e := range events("") {
		known[e.Event] = true
	}
	raised := w.fleetMetric(f, "dvms_events_raised_total")
	before = w.lastMigration()
	overloaded = w.overloadOnly(second)
	t.Logf("paused: wrote an overload of %s: %v; watching %s for an event", second, overloaded(), window)
	var news []event
	if w.eventuallyEvery("an event raised while paused", window, 2*time.Second, func() bool {
		news = nil
		for _, e := range events("") {
			if !known[e.Event] {
				news = append(news, e)
			}
		}
		return len(news) > 0 || w.fleetMetric(f, "dvms_events_raised_total") != raised
	}) {
		t.Fatalf("paused %s ago, the agents raised events: %+v (dvms_events_raised_total %v, was %v)",
			time.Since(paused).Round(time.Second), news, w.fleetMetric(f, "dvms_events_raised_total"), raised)
	}
	if ms := w.migrationsAfter(before); len(ms) > 0 {
		t.Fatalf("paused, yet Nova lists %d new migrations: %+v", len(ms), ms)
	}
	if len(overloaded()) == 0 {
		t.Fatalf("paused, yet %s is no longer overloaded", second)
	}

	// 4. Resumed: solved.
	control(func(a ack) bool { return !a.Paused }, "resume")
	resumed := time.Now()
	controlsAre(false, ctlproto.ModeEnforce, "dvms_paused", 0)
	if !w.eventually("overload of "+second+" solved after dvms resume", 4*time.Minute, func() bool { return len(overloaded()) == 0 }) {
		t.Fatalf("still overloaded 4 min after dvms resume: %v; agent logs in %s", overloaded(), f.logDir)
	}
	solvedIn = time.Since(resumed)
	moved = w.movesOff(second, before)
	raisedAfter := 0
	for _, e := range events(second) {
		if !known[e.Event] && e.Kind == "overload" && e.Host == second {
			raisedAfter++
		}
	}
	if raisedAfter == 0 {
		t.Errorf("dvms events lists no overload event of %s raised after the resume", second)
	}
	t.Logf("CONTROLS pause: no event for %s with %s overloaded, Nova 0 migrations; resume: solved %s later by %d live migrations",
		window, second, solvedIn.Round(100*time.Millisecond), len(moved))
}

// fleetMetric sums name over every agent's /metrics.
func (w *world) fleetMetric(f *fleet, name string) float64 {
	w.t.Helper()
	total := 0.0
	for _, h := range w.hosts {
		total += sum(scrapeAt(w.t, f.metricsAddr(w, h)), name)
	}
	return total
}

// lastMigration is the largest id in `openstack server migration list`
// (0: none).
func (w *world) lastMigration() int {
	w.t.Helper()
	last := 0
	for _, m := range w.migrationList() {
		last = max(last, m.ID)
	}
	return last
}

// migrationsAfter lists Nova's migrations with an id above last.
func (w *world) migrationsAfter(last int) []migrationRow {
	w.t.Helper()
	var out []migrationRow
	for _, m := range w.migrationList() {
		if m.ID > last {
			out = append(out, m)
		}
	}
	return out
}

// movesOff lists Nova's migrations with an id above last once they all
// ended: each must be a completed live migration, at least one off host
// (an overload of host solved; the plan may move other members' servers
// too).
func (w *world) movesOff(host string, last int) []migrationRow {
	w.t.Helper()
	var moved []migrationRow
	w.eventually("Nova's new migrations ended", time.Minute, func() bool {
		moved = w.migrationsAfter(last)
		return !slices.ContainsFunc(moved, func(m migrationRow) bool {
			return !slices.Contains([]string{"completed", "error", "failed", "cancelled"}, m.Status)
		})
	})
	for _, m := range moved {
		if m.Type != "live-migration" || m.Status != "completed" {
			w.t.Errorf("a migration other than a completed live migration: %+v", m)
		}
	}
	if !slices.ContainsFunc(moved, func(m migrationRow) bool { return m.Source == host }) {
		w.t.Fatalf("overload of %s solved without a migration off it in Nova: %+v", host, moved)
	}
	return moved
}
