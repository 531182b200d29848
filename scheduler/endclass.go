package scheduler

import "strings"

// EndClass sorts why an event (or its partition) ended into a few
// classes, beside the outcome and the human reason (Record.Class,
// Message.Class): what records, metrics, `dvms events` and the
// simulator's report count by, where the reason text is for people. Like
// the executor's node.ReasonClass for actions, the set is bounded: a
// metric label of it has few values. Each class belongs to one outcome
// (Outcome of EndClass).
type EndClass string

// The classes, by outcome.
const (
	// EndUnknown: a record or message of an older agent, whose reason no
	// rule of DeriveEndClass recognises.
	EndUnknown EndClass = "unknown"

	// Solved.

	// EndExecuted: every action of the plan was done.
	EndExecuted EndClass = "executed"
	// EndForceCompleted: every action was done, at least one live
	// migration after the completion policy forced it to complete.
	EndForceCompleted EndClass = "force_completed"
	// EndNothingToDo: the plan was empty (nothing to do, or nothing left
	// after the moves of earlier plans).
	EndNothingToDo EndClass = "nothing_to_do"
	// EndRelieved: re-checks skipped actions, but the moves done for the
	// event were enough: its host is no longer overloaded.
	EndRelieved EndClass = "relieved"

	// Unsolvable.

	// EndNoSolution: no solution after the full tours and a last look.
	EndNoSolution EndClass = "no_solution"

	// Failed.

	// EndActionFailed: an action of the plan failed.
	EndActionFailed EndClass = "action_failed"
	// EndMigrationAborted: the completion policy aborted a live migration
	// that did not converge (the server stays on its source).
	EndMigrationAborted EndClass = "migration_aborted"

	// Aborted.

	// EndVanished: nothing was moved and the event no longer holds: its
	// condition went away by itself (Vanished). Not solved, not a failure.
	EndVanished EndClass = "vanished"
	// EndSkipped: the executor's re-checks skipped actions while the
	// event still held (the cloud changed under the plan), and the
	// re-plans ran out or could not help.
	EndSkipped EndClass = "skipped"
	// EndUnverified: a re-check could not be verified (a read failed, the
	// event's host did not answer): the event is raised again later.
	EndUnverified EndClass = "unverified"
	// EndAdvise: advise mode: the plan was re-checked, not sent to Nova.
	EndAdvise EndClass = "advise"
	// EndPaused and EndExcluded: an operator's control held the plan back.
	EndPaused   EndClass = "paused"
	EndExcluded EndClass = "excluded"
	// EndStopping: the leader (or the agent executing) is stopping.
	EndStopping EndClass = "stopping"
	// EndSolvedOthers: a merged partition's plan solved other events of
	// the union first; this one is raised again at once.
	EndSolvedOthers EndClass = "solved_others"
	// EndMemberLost: the initiator or the leader crashed, the initiator
	// was removed (no snapshot in time, it refused), or this agent was
	// removed from the partition. The initiator's own event, if no plan
	// of the partition ran, goes on in a fresh partition instead (at most
	// maxGoOn times: goOn) and ends so only if its condition is gone by
	// then or after those.
	EndMemberLost EndClass = "member_lost"
	// EndTimeout: no word from the leader in time (the initiator's
	// untried event goes on as for EndMemberLost).
	EndTimeout EndClass = "partition_timeout"
	// EndRequestLost: the partition's request made no progress.
	EndRequestLost EndClass = "request_lost"
	// EndFork: this agent's copy of the partition was a fork; the
	// partition goes on at a later version.
	EndFork EndClass = "fork"
	// EndAbsorbedLost: the partition was absorbed by a merge whose
	// message was lost.
	EndAbsorbedLost EndClass = "absorbed_lost"
	// EndLeaderRefused: the partition's leader exceeded its bounds at
	// this agent's edge (it led too long or too many partitions), which
	// left; its event is raised again at once (RefuseLeader).
	EndLeaderRefused EndClass = "leader_refused"
	// EndLeftForOwners: a drain left servers on its host for their owners
	// (their maintenance action is notify): the host is not drained; the
	// event is raised again after its backoff while the servers stay.
	EndLeftForOwners EndClass = "left_for_owners"
	// EndNotWorth: the plan's moves cost more than it gained (the move
	// cost, movecost.go): it was refused; the event is raised again after
	// the retry backoff if it still holds.
	EndNotWorth EndClass = "not_worth"
	// EndCooling: the overloaded host stays overloaded without the
	// servers moved onto it within the server cooldown (cooling.go); the
	// event is raised again after the retry backoff if it still holds.
	EndCooling EndClass = "cooling"
)

// endClasses maps each class to its outcome; EndUnknown has none.
var endClasses = map[EndClass]Outcome{
	EndExecuted: Solved, EndForceCompleted: Solved, EndNothingToDo: Solved, EndRelieved: Solved,
	EndNoSolution:   Unsolvable,
	EndActionFailed: Failed, EndMigrationAborted: Failed,
	EndVanished: Aborted, EndSkipped: Aborted, EndUnverified: Aborted, EndAdvise: Aborted,
	EndPaused: Aborted, EndExcluded: Aborted, EndStopping: Aborted, EndSolvedOthers: Aborted,
	EndMemberLost: Aborted, EndTimeout: Aborted, EndRequestLost: Aborted, EndFork: Aborted,
	EndAbsorbedLost: Aborted, EndLeaderRefused: Aborted, EndLeftForOwners: Aborted, EndNotWorth: Aborted,
	EndCooling: Aborted,
}

// Outcome is the outcome the class belongs to (0 for EndUnknown and
// for a class this version does not know).
func (c EndClass) Outcome() Outcome { return endClasses[c] }

// Known says whether c is a class of this version.
func (c EndClass) Known() bool { _, ok := endClasses[c]; return ok }

// Of is c when it is a class of this version under outcome o, else the
// class derived from o and reason: a record or message of an older agent
// (no class), or one whose class this version does not know or that
// belongs to another outcome (a newer or forged sender). So a class read
// from the bus or another agent stays in the bounded set.
func (c EndClass) Of(o Outcome, reason string) EndClass {
	if c.Known() && c.Outcome() == o {
		return c
	}
	return DeriveEndClass(o, reason)
}

// DeriveEndClass is the class of an end an older agent recorded or sent
// without one, from its outcome and reason as that agent wrote them. It
// is for compatibility only: this version carries the class beside the
// reason and never reads its own text. EndUnknown when no rule matches
// (the reason is only for people).
func DeriveEndClass(o Outcome, reason string) EndClass {
	has := func(s string) bool { return strings.Contains(reason, s) }
	switch o {
	case Solved:
		switch {
		case has("no longer overloaded"):
			return EndRelieved
		case strings.HasPrefix(reason, "nothing"):
			return EndNothingToDo
		case has(string(EndForceCompleted)):
			return EndForceCompleted
		case has(" done, "):
			return EndExecuted
		}
	case Unsolvable:
		return EndNoSolution
	case Failed:
		if has(string(EndMigrationAborted)) {
			return EndMigrationAborted
		}
		return EndActionFailed
	case Aborted:
		rules := []struct {
			text string
			c    EndClass
		}{
			{Vanished, EndVanished},
			{"skipped for advise", EndAdvise},
			{"skipped for paused", EndPaused},
			{"skipped for excluded", EndExcluded},
			{"skipped for stopping", EndStopping},
			{"skipped for read_failed", EndUnverified},
			{"skipped for event_unverified", EndUnverified},
			{"is stopping", EndStopping},
			{"solved other events", EndSolvedOthers},
			{"partition timeout", EndTimeout},
			{"request lost", EndRequestLost},
			{"fork of ", EndFork},
			{"not worth it", EndNotWorth},
			{"moved within the server cooldown", EndCooling},
			{"absorption message was lost", EndAbsorbedLost},
			{"crashed", EndMemberLost},
			{"initiator ", EndMemberLost},
			{"removed from the partition", EndMemberLost},
			{" skipped, ", EndSkipped},
		}
		for _, r := range rules {
			if has(r.text) {
				return r.c
			}
		}
	}
	return EndUnknown
}

// ParseOutcome is the Outcome whose String is s (0 when none: "none").
func ParseOutcome(s string) Outcome {
	for o := Solved; o <= Aborted; o++ {
		if o.String() == s {
			return o
		}
	}
	return 0
}
