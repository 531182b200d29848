package node

import (
	"testing"

	"github.com/dvms-project/dvms/scheduler"
)

// A plan goes back to its leader for a re-plan only when every skipped
// action was skipped because the cloud changed under it; a skip for the
// event's reason (it no longer holds: not solved), an operator's control,
// a failed read or a stop ends the event as before.
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
		{ReasonEvent, false}, {ReasonPaused, false}, {ReasonExcluded, false}, {ReasonAdvise, false},
		{ReasonStopping, false}, {ReasonReadFailed, false}, {ReasonCancelled, false},
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
