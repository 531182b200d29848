package node

import (
	"context"

	"github.com/dvms-project/dvms/scheduler"
)

// An advised plan (advise mode: re-checked, recorded, not sent) that an
// operator approves (`dvms plans approve`) runs through the same
// executor, re-checks included: only the advise mode is lifted, for that
// plan. The operator's other controls still hold (paused, excluded).

type approvedKey struct{}

// ExecuteApproved runs an advised plan an operator approved: as Execute,
// except that advise mode does not hold its actions back. With dry, every
// action is re-checked and recorded as advise mode would (ReasonAdvise
// when its re-check holds), nothing is sent to Nova: the re-check before
// the approval is carried out.
func (e *Executor) ExecuteApproved(ctx context.Context, ev scheduler.Event, plan scheduler.Plan, dry bool) ExecResult {
	return e.Execute(context.WithValue(ctx, approvedKey{}, !dry), ev, plan)
}

// adviseIn is advise for an action run under ctx: an approved plan's
// (ExecuteApproved) is advised only in its dry run.
func (e *Executor) adviseIn(ctx context.Context, a scheduler.Action) bool {
	if run, ok := ctx.Value(approvedKey{}).(bool); ok {
		return !run
	}
	return e.advise(a)
}

// ExecuteApproved runs an advised plan an operator approved through the
// runner's executor (Executor.ExecuteApproved), counted in the runner's
// summaries like the plans it executes.
func (r *Runner) ExecuteApproved(ctx context.Context, ev scheduler.Event, plan scheduler.Plan, dry bool) ExecResult {
	if !dry {
		r.moves.add(plan, +1)
		defer r.moves.add(plan, -1)
	}
	return r.exec.ExecuteApproved(ctx, ev, plan, dry)
}
