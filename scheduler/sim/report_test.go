package sim

import (
	"bytes"
	"maps"
	"strings"
	"testing"

	"github.com/dvms-project/dvms/scheduler"
)

// An aborted event whose overload vanished before anything moved is
// counted apart: the raw share of events solved keeps it in its
// denominator, the second share leaves it out, and both are reported.
func TestSolvedShareWithoutVanished(t *testing.T) {
	st := &stats{ended: map[scheduler.Outcome]int{scheduler.Solved: 96}, abortedBy: map[string]int{}, inFlight: map[string]bool{}}
	for reason, c := range map[string]scheduler.EndClass{
		"0 done, 1 skipped, 0 failed; " + scheduler.Vanished + " (its host's own measurement, or Nova for a drain)": scheduler.EndVanished,
		"nothing to do on fresh snapshots after 1 re-plan(s), " + scheduler.Vanished:                                scheduler.EndVanished,
		"1 done, 1 skipped, 0 failed; skipped for read_failed":                                                      scheduler.EndUnverified,
		"0 done, 2 skipped, 0 failed (after 2 re-plan(s))":                                                          scheduler.EndSkipped,
	} {
		st.record("h1", scheduler.Record{Kind: scheduler.RecEventEnded, Outcome: scheduler.Aborted, Class: c, Reason: reason, Event: scheduler.Event{ID: reason}})
	}
	var rep Report
	st.fill(&rep)
	e := rep.Events
	if e.Aborted != 4 || e.AbortedVanished != 2 {
		t.Fatalf("aborted %d, vanished %d: want 4 and 2", e.Aborted, e.AbortedVanished)
	}
	if e.SolvedPct != 96 || e.SolvedPctExclVanished != 97.96 {
		t.Fatalf("solved %.2f %% raw, %.2f %% without the vanished: want 96 and 97.96", e.SolvedPct, e.SolvedPctExclVanished)
	}
}

// The report groups ended events by their class, never by their text:
// two timeouts naming different leaders are one line, a vanished event
// is counted as such whatever its words, and every class is counted under
// its outcome.
func TestReportGroupsByClass(t *testing.T) {
	st := &stats{ended: map[scheduler.Outcome]int{}, abortedBy: map[string]int{}, inFlight: map[string]bool{}}
	for i, r := range []scheduler.Record{
		{Outcome: scheduler.Aborted, Class: scheduler.EndTimeout, Reason: "partition timeout: no word from leader compute-00042"},
		{Outcome: scheduler.Aborted, Class: scheduler.EndTimeout, Reason: "partition timeout: no word from leader compute-00007"},
		{Outcome: scheduler.Aborted, Class: scheduler.EndFork, Reason: "fork of p-compute-00001-3 at version 5: the partition goes on at 6"},
		{Outcome: scheduler.Aborted, Class: scheduler.EndVanished, Reason: "words an operator changed"},
		{Outcome: scheduler.Solved, Class: scheduler.EndRelieved, Reason: "1 done, 1 skipped, 0 failed; the event's host is no longer overloaded"},
		{Outcome: scheduler.Solved, Class: scheduler.EndExecuted, Reason: "2 done, 0 skipped, 0 failed"},
		{Outcome: scheduler.Failed, Class: scheduler.EndMigrationAborted, Reason: "0 done, 0 skipped, 1 failed; migration_aborted 1 (s1: ...)"},
	} {
		r.Kind, r.Event = scheduler.RecEventEnded, scheduler.Event{ID: string(rune('a' + i))}
		st.ended[r.Outcome]++
		st.record("h1", r)
	}
	var rep Report
	st.fill(&rep)
	wantAborted := map[string]int{"partition_timeout": 2, "fork": 1, "vanished": 1}
	if !maps.Equal(rep.Events.AbortedBy, wantAborted) || rep.Events.AbortedVanished != 1 {
		t.Fatalf("aborted by class %v, vanished %d: want %v and 1", rep.Events.AbortedBy, rep.Events.AbortedVanished, wantAborted)
	}
	wantEnded := map[string]int{"aborted/partition_timeout": 2, "aborted/fork": 1, "aborted/vanished": 1,
		"solved/relieved": 1, "solved/executed": 1, "failed/migration_aborted": 1}
	if !maps.Equal(rep.Events.EndedBy, wantEnded) {
		t.Fatalf("ended by outcome/class %v, want %v", rep.Events.EndedBy, wantEnded)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "by class:") || !strings.Contains(b.String(), "       2  partition_timeout\n") ||
		!strings.Contains(b.String(), "ended by    aborted/partition_timeout 2, aborted/fork 1,") {
		t.Fatalf("the text report does not list the classes:\n%s", b.String())
	}
}

// The chart's title gives the solve time only when the run measured one:
// the virtual clock's solver times are not wall-clock samples.
func TestChartTitleSolveTime(t *testing.T) {
	title := func(r *Report) string {
		var b strings.Builder
		if err := r.WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	r := &Report{Hosts: 3, Servers: 9, Workload: "random", Seed: 1}
	if s := title(r); strings.Contains(s, "solve p50") {
		t.Fatalf("a run without solve samples shows a solve time: %s", s)
	}
	r.SolveMS.P50 = 2.5
	if s := title(r); !strings.Contains(s, "solve p50 2.5 ms") {
		t.Fatalf("a run's solve time is missing from the title: %s", s)
	}
}

// Events the move cost or the cooldown refused a plan for are the
// operator's policy, not a miss: they do not count among the events that
// had a solution (aborted ones, in the checked share).
func TestWithSolutionLeavesPolicyRefusalsOut(t *testing.T) {
	r := Report{}
	e := &r.Events
	e.Solved, e.Aborted, e.AbortedRefused, e.AbortedChecked, e.AbortedWithGlobal = 90, 20, 10, 10, 5
	r.withSolution()
	if e.WithSolution != 95 || e.SolvedPct != pct(90, 95) {
		t.Fatalf("with a solution %v (%.1f %% solved), want 90 + (20 - 10 refused) x 5/10 = 95", e.WithSolution, e.SolvedPct)
	}
}
