package node

import (
	"strings"
	"testing"

	"github.com/dvms-project/dvms/scheduler"
)

// A plan goes back to its leader for a re-plan only when every skipped
// action was skipped because the cloud changed under it; a skip for the
// event's reason (it no longer holds: not solved), a re-check that could
// not be verified (a read failed, the event's host did not answer), an
// operator's control or a stop ends the event as before.
func TestReplannable(t *testing.T) {
	done := ActionResult{Action: scheduler.Action{Server: "s1"}, Outcome: ActionDone, Class: ReasonNone}
	skipped := func(c ReasonClass) ActionResult {
		return ActionResult{Action: scheduler.Action{Server: "s2"}, Outcome: ActionSkipped, Class: c}
	}
	for _, tc := range []struct {
		class ReasonClass
		want  bool
	}{
		{ReasonOverload, true}, {ReasonPlacement, true}, {ReasonServerChanged, true},
		{ReasonDestinationBusy, true}, {ReasonDestinationDisabled, true}, {ReasonServerGroup, true}, {ReasonConflict, true},
		{ReasonEvent, false}, {ReasonReadFailed, false}, {ReasonEventUnverified, false}, {ReasonPaused, false}, {ReasonExcluded, false}, {ReasonAdvise, false},
		{ReasonStopping, false}, {ReasonCancelled, false},
	} {
		t.Run(string(tc.class), func(t *testing.T) {
			res := ExecResult{Actions: []ActionResult{done, skipped(ReasonOverload), skipped(tc.class)}, Done: 1, Skipped: 2}
			if got := replannable(res); got != tc.want {
				t.Fatalf("replannable = %v, want %v", got, tc.want)
			}
			if d := doneActions(res); len(d) != 1 || d[0].Server != "s1" {
				t.Fatalf("done actions %+v", d)
			}
		})
	}
}

// How a plan's execution ends its event: an event that no longer holds is
// solved when something was moved for it, vanished when nothing was; one
// that could not be verified is aborted as such, not as vanished.
func TestPlanOutcome(t *testing.T) {
	done := ActionResult{Outcome: ActionDone, Class: ReasonNone}
	skipped := func(c ReasonClass) ActionResult { return ActionResult{Outcome: ActionSkipped, Class: c} }
	failed := ActionResult{Outcome: ActionFailed, Class: ReasonFailed}
	for _, tc := range []struct {
		name              string
		actions           []ActionResult
		earlier, relieved bool
		want              scheduler.Outcome // 0: a re-plan
		vanished          bool
	}{
		{name: "all done", actions: []ActionResult{done}, want: scheduler.Solved},
		{name: "one failed", actions: []ActionResult{done, failed}, want: scheduler.Failed},
		{name: "event gone, nothing moved", actions: []ActionResult{skipped(ReasonEvent)}, want: scheduler.Aborted, vanished: true},
		{name: "event gone after an earlier plan's moves", actions: []ActionResult{skipped(ReasonEvent)}, earlier: true, want: scheduler.Solved},
		{name: "event unverified", actions: []ActionResult{skipped(ReasonEventUnverified)}, want: scheduler.Aborted},
		{name: "unverified, though relieved", actions: []ActionResult{skipped(ReasonEventUnverified)}, relieved: true, want: scheduler.Aborted},
		{name: "read failed after a move, relieved", actions: []ActionResult{done, skipped(ReasonReadFailed)}, relieved: true, want: scheduler.Solved},
		{name: "read failed, still overloaded", actions: []ActionResult{done, skipped(ReasonReadFailed)}, want: scheduler.Aborted},
		{name: "destination full, relieved by the move done", actions: []ActionResult{done, skipped(ReasonOverload)}, relieved: true, want: scheduler.Solved},
		{name: "destination full, still overloaded", actions: []ActionResult{skipped(ReasonOverload)}, want: 0},
		{name: "paused", actions: []ActionResult{skipped(ReasonPaused)}, want: scheduler.Aborted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ExecResult{Actions: tc.actions}
			for _, a := range tc.actions {
				switch a.Outcome {
				case ActionDone:
					res.Done++
				case ActionSkipped:
					res.Skipped++
				default:
					res.Failed++
				}
			}
			o, reason, replan := planOutcome(res, tc.earlier, true, func() bool { return tc.relieved })
			if replan != (tc.want == 0) || !replan && o != tc.want {
				t.Fatalf("%v %q (re-plan %v), want %v", o, reason, replan, tc.want)
			}
			if got := scheduler.IsVanished(reason); got != tc.vanished {
				t.Fatalf("reason %q vanished = %v, want %v", reason, got, tc.vanished)
			}
		})
	}
	// A stopping agent does not re-plan.
	o, _, replan := planOutcome(ExecResult{Actions: []ActionResult{skipped(ReasonOverload)}, Skipped: 1}, false, false, func() bool { return false })
	if replan || o != scheduler.Aborted {
		t.Fatalf("stopping: %v, re-plan %v; want aborted", o, replan)
	}
}

// The event's end reason says what the completion policy did: a plan
// whose migration was aborted fails with migration_aborted and the
// server's reason; one whose migration was forced is solved with
// force_completed.
func TestPlanOutcomeSaysForcedAndAborted(t *testing.T) {
	forced := ActionResult{Action: scheduler.Action{Server: "s1"}, Outcome: ActionDone, Class: ReasonForceCompleted, Reason: "force_complete by dvms: not converging"}
	aborted := ActionResult{Action: scheduler.Action{Server: "s2"}, Outcome: ActionFailed, Class: ReasonMigrationAborted, Reason: "abort by dvms (...): server ACTIVE on h1 (its source)"}
	o, reason, _ := planOutcome(ExecResult{Actions: []ActionResult{forced}, Done: 1}, false, true, func() bool { return false })
	if o != scheduler.Solved || reason != "1 done, 0 skipped, 0 failed; force_completed 1" {
		t.Errorf("forced: %s %q", o, reason)
	}
	o, reason, _ = planOutcome(ExecResult{Actions: []ActionResult{forced, aborted}, Done: 1, Failed: 1}, false, true, func() bool { return false })
	if o != scheduler.Failed || !strings.HasPrefix(reason, "1 done, 0 skipped, 1 failed; force_completed 1; migration_aborted 1 (s2: abort by dvms") ||
		!strings.Contains(reason, "ACTIVE on h1") {
		t.Errorf("aborted: %s %q", o, reason)
	}
}
