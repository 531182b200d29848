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
		{ReasonDestinationDistrusted, true}, {ReasonDestinationImplausible, true},
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

// How a plan's execution ends its event, and its class: an event that
// no longer holds is solved (relieved) when something was moved for it,
// vanished when nothing was; one that could not be verified is aborted
// as such, not as vanished. Each end's reason, read as an older agent's
// (no class), derives the same class: `dvms events` and the metrics sort
// a mixed fleet's records alike.
func TestPlanOutcome(t *testing.T) {
	done := ActionResult{Outcome: ActionDone, Class: ReasonNone}
	skipped := func(c ReasonClass) ActionResult { return ActionResult{Outcome: ActionSkipped, Class: c} }
	failed := ActionResult{Outcome: ActionFailed, Class: ReasonFailed}
	for _, tc := range []struct {
		name              string
		actions           []ActionResult
		earlier, relieved bool
		want              scheduler.Outcome // 0: a re-plan
		class             scheduler.EndClass
	}{
		{name: "all done", actions: []ActionResult{done}, want: scheduler.Solved, class: scheduler.EndExecuted},
		{name: "one failed", actions: []ActionResult{done, failed}, want: scheduler.Failed, class: scheduler.EndActionFailed},
		{name: "event gone, nothing moved", actions: []ActionResult{skipped(ReasonEvent)}, want: scheduler.Aborted, class: scheduler.EndVanished},
		{name: "event gone after an earlier plan's moves", actions: []ActionResult{skipped(ReasonEvent)}, earlier: true, want: scheduler.Solved, class: scheduler.EndRelieved},
		{name: "event unverified", actions: []ActionResult{skipped(ReasonEventUnverified)}, want: scheduler.Aborted, class: scheduler.EndUnverified},
		{name: "unverified, though relieved", actions: []ActionResult{skipped(ReasonEventUnverified)}, relieved: true, want: scheduler.Aborted, class: scheduler.EndUnverified},
		{name: "read failed after a move, relieved", actions: []ActionResult{done, skipped(ReasonReadFailed)}, relieved: true, want: scheduler.Solved, class: scheduler.EndRelieved},
		{name: "read failed, still overloaded", actions: []ActionResult{done, skipped(ReasonReadFailed)}, want: scheduler.Aborted, class: scheduler.EndUnverified},
		{name: "destination full, relieved by the move done", actions: []ActionResult{done, skipped(ReasonOverload)}, relieved: true, want: scheduler.Solved, class: scheduler.EndRelieved},
		{name: "destination full, still overloaded", actions: []ActionResult{skipped(ReasonOverload)}, want: 0, class: scheduler.EndSkipped},
		{name: "paused", actions: []ActionResult{skipped(ReasonPaused)}, want: scheduler.Aborted, class: scheduler.EndPaused},
		{name: "excluded", actions: []ActionResult{skipped(ReasonExcluded)}, want: scheduler.Aborted, class: scheduler.EndExcluded},
		{name: "advise", actions: []ActionResult{skipped(ReasonAdvise)}, want: scheduler.Aborted, class: scheduler.EndAdvise},
		{name: "stopping", actions: []ActionResult{skipped(ReasonStopping)}, want: scheduler.Aborted, class: scheduler.EndStopping},
		{name: "cancelled", actions: []ActionResult{skipped(ReasonCancelled)}, want: scheduler.Aborted, class: scheduler.EndSkipped},
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
			o, c, reason, replan := PlanOutcome(res, tc.earlier, true, func() bool { return tc.relieved })
			if replan != (tc.want == 0) || !replan && o != tc.want {
				t.Fatalf("%v %q (re-plan %v), want %v", o, reason, replan, tc.want)
			}
			of := o // the class belongs to the outcome; a re-plan's to the abort should the re-plans run out
			if replan {
				of = scheduler.Aborted
			}
			if c != tc.class || c.Outcome() != of {
				t.Fatalf("%v %q: class %q (its outcome %v), want %q", o, reason, c, c.Outcome(), tc.class)
			}
			if replan {
				return
			}
			if got := scheduler.DeriveEndClass(o, reason); got != c {
				t.Fatalf("%v %q read as an older agent's: class %q, want %q", o, reason, got, c)
			}
		})
	}
	// A stopping agent does not re-plan.
	o, c, _, replan := PlanOutcome(ExecResult{Actions: []ActionResult{skipped(ReasonOverload)}, Skipped: 1}, false, false, func() bool { return false })
	if replan || o != scheduler.Aborted || c != scheduler.EndSkipped {
		t.Fatalf("stopping: %v %q, re-plan %v; want aborted, skipped", o, c, replan)
	}
}

// The event's end reason says what the completion policy did: a plan
// whose migration was aborted fails with migration_aborted and the
// server's reason; one whose migration was forced is solved with
// force_completed.
func TestPlanOutcomeSaysForcedAndAborted(t *testing.T) {
	forced := ActionResult{Action: scheduler.Action{Server: "s1"}, Outcome: ActionDone, Class: ReasonForceCompleted, Reason: "force_complete by dvms: not converging"}
	aborted := ActionResult{Action: scheduler.Action{Server: "s2"}, Outcome: ActionFailed, Class: ReasonMigrationAborted, Reason: "abort by dvms (...): server ACTIVE on h1 (its source)"}
	o, c, reason, _ := PlanOutcome(ExecResult{Actions: []ActionResult{forced}, Done: 1}, false, true, func() bool { return false })
	if o != scheduler.Solved || c != scheduler.EndForceCompleted || scheduler.DeriveEndClass(o, reason) != c || reason != "1 done, 0 skipped, 0 failed; force_completed 1" {
		t.Errorf("forced: %s %q %q", o, c, reason)
	}
	o, c, reason, _ = PlanOutcome(ExecResult{Actions: []ActionResult{forced, aborted}, Done: 1, Failed: 1}, false, true, func() bool { return false })
	if o != scheduler.Failed || c != scheduler.EndMigrationAborted || scheduler.DeriveEndClass(o, reason) != c || !strings.HasPrefix(reason, "1 done, 0 skipped, 1 failed; force_completed 1; migration_aborted 1 (s2: abort by dvms") ||
		!strings.Contains(reason, "ACTIVE on h1") {
		t.Errorf("aborted: %s %q %q", o, c, reason)
	}
}
