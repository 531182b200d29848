package node

import (
	"fmt"

	"github.com/dvms-project/dvms/scheduler"
)

// PlanOutcome is how a plan's execution ends its event: Failed when an
// action failed; Solved when every action was done, or when some were
// skipped and the event no longer holds after the moves done for it
// (earlier: the partition's plans before a re-plan moved something);
// Aborted as scheduler.Vanished when nothing was moved and the event no
// longer holds (its condition went away by itself); a re-plan (replan
// true) when the skips are replannable's, the agent is not stopping
// (live) and the event still holds; else Aborted, with the class of the
// first skip that is not replannable's. relieved asks the
// event's host's own measurement (no Nova request), only when needed.
// c sorts the end (scheduler.EndClass; for a re-plan, the class should
// the re-plans run out). A step function: the runner and the virtual clock
// (scheduler/detsim) both end their plans with it.
func PlanOutcome(res ExecResult, earlier, live bool, relieved func() bool) (o scheduler.Outcome, c scheduler.EndClass, reason string, replan bool) {
	reason = fmt.Sprintf("%d done, %d skipped, %d failed", res.Done, res.Skipped, res.Failed) + completionNote(res)
	switch {
	case res.Failed > 0:
		if actedFor(res, ActionFailed, ReasonMigrationAborted) {
			return scheduler.Failed, scheduler.EndMigrationAborted, reason, false
		}
		return scheduler.Failed, scheduler.EndActionFailed, reason, false
	case res.Skipped == 0:
		if actedFor(res, ActionDone, ReasonForceCompleted) {
			return scheduler.Solved, scheduler.EndForceCompleted, reason, false
		}
		return scheduler.Solved, scheduler.EndExecuted, reason, false
	}
	moved := res.Done > 0 || earlier
	gone := actedFor(res, ActionSkipped, ReasonEvent) // the re-check found the event no longer holds
	replan = !gone && replannable(res) && live
	over := gone || (moved || replan) && relieved()
	switch {
	case over && moved:
		return scheduler.Solved, scheduler.EndRelieved, reason + "; the event's host is no longer overloaded by its own measurement", false
	case replan && !over:
		return 0, scheduler.EndSkipped, reason, true
	case over:
		return scheduler.Aborted, scheduler.EndVanished, reason + "; " + scheduler.Vanished + " (its host's own measurement, or Nova for a drain)", false
	}
	rc := notReplannable(res)
	if rc != "" {
		reason += "; skipped for " + string(rc)
	}
	return scheduler.Aborted, skippedEnd(rc), reason, false
}

// skippedEnd is the end class of a plan aborted because an action was
// skipped for rc (notReplannable's class, "" when every skip was
// replannable's).
func skippedEnd(rc ReasonClass) scheduler.EndClass {
	switch rc {
	case ReasonAdvise:
		return scheduler.EndAdvise
	case ReasonPaused:
		return scheduler.EndPaused
	case ReasonExcluded:
		return scheduler.EndExcluded
	case ReasonStopping:
		return scheduler.EndStopping
	case ReasonReadFailed, ReasonEventUnverified:
		return scheduler.EndUnverified
	case ReasonLeftForOwner:
		return scheduler.EndLeftForOwners
	}
	return scheduler.EndSkipped
}

// completionNote says which live migrations of res the completion policy
// ended: "; force_completed N" and "; migration_aborted N: <first reason>"
// ("" when none), so the event's end reason says it.
func completionNote(res ExecResult) string {
	var forced, aborted int
	first := ""
	for _, ar := range res.Actions {
		switch ar.Class {
		case ReasonForceCompleted:
			forced++
		case ReasonMigrationAborted:
			if aborted++; first == "" {
				first = ar.Action.Server + ": " + ar.Reason
			}
		}
	}
	note := ""
	if forced > 0 {
		note += fmt.Sprintf("; %s %d", ReasonForceCompleted, forced)
	}
	if aborted > 0 {
		note += fmt.Sprintf("; %s %d (%s)", ReasonMigrationAborted, aborted, first)
	}
	return note
}

// replannable: every action the re-checks skipped was skipped because
// the cloud changed under the plan (a destination that no longer fits,
// a server that moved or got busy), none because the event's reason no
// longer holds, an operator's control, a stop, or a re-check that could
// not be verified (a read failed or timed out, the event's host did not
// answer three queries: its classes read_failed and event_unverified): a
// plan made on fresh snapshots may still solve the event
// (Agent.PlanSkipped). An unverified re-check is retried where it is cheap
// (the queries, the verdict at the next action) but not re-planned: a
// re-plan needs the same silent agent's snapshot and sends a queued API
// a new plan's reads; the event is raised again after its backoff.
func replannable(res ExecResult) bool { return notReplannable(res) == "" }

// notReplannable is the class of the first action skipped for a reason
// that is not replannable's ("" when there is none).
func notReplannable(res ExecResult) ReasonClass {
	for _, ar := range res.Actions {
		if ar.Outcome != ActionSkipped {
			continue
		}
		switch ar.Class {
		case ReasonOverload, ReasonPlacement, ReasonServerChanged, ReasonServerGroup,
			ReasonDestinationDisabled, ReasonDestinationBusy, ReasonConflict, ReasonDestinationDistrusted, ReasonDestinationImplausible:
		default:
			return ar.Class
		}
	}
	return ""
}

// actedFor says whether an action of res ended o for class c.
func actedFor(res ExecResult, o ActionOutcome, c ReasonClass) bool {
	for _, ar := range res.Actions {
		if ar.Outcome == o && ar.Class == c {
			return true
		}
	}
	return false
}

// doneActions are the actions Nova did.
func doneActions(res ExecResult) []scheduler.Action {
	var out []scheduler.Action
	for _, ar := range res.Actions {
		if ar.Outcome == ActionDone {
			out = append(out, ar.Action)
		}
	}
	return out
}
