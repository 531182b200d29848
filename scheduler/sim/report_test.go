package sim

import (
	"testing"

	"github.com/dvms-project/dvms/scheduler"
)

// An aborted event whose overload vanished before anything moved is
// counted apart: the raw share of events solved keeps it in its
// denominator, the second share leaves it out, and both are reported.
func TestSolvedShareWithoutVanished(t *testing.T) {
	st := &stats{ended: map[scheduler.Outcome]int{scheduler.Solved: 96}, abortedBy: map[string]int{}, inFlight: map[string]bool{}}
	for _, reason := range []string{
		"0 done, 1 skipped, 0 failed; " + scheduler.Vanished + " (its host's own measurement, or Nova for a drain)",
		"nothing to do on fresh snapshots after 1 re-plan(s), " + scheduler.Vanished,
		"1 done, 1 skipped, 0 failed; skipped for read_failed",
		"0 done, 2 skipped, 0 failed (after 2 re-plan(s))",
	} {
		st.record("h1", scheduler.Record{Kind: scheduler.RecEventEnded, Outcome: scheduler.Aborted, Reason: reason, Event: scheduler.Event{ID: reason}})
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
