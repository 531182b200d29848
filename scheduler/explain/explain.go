// Package explain answers `dvms explain SERVER|HOST`: from the agents'
// reports (scheduler/status, their journals and held records) it finds the
// decisions that touched a server or a host and says each in words —
// raised, planned, moved, advised, skipped or failed and why, ended and
// why, left alone and why, what holds a host now, and servers moved back
// where dvms took them from, joined across every agent of the region.
package explain

import (
	"fmt"
	"slices"
	"time"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/oscillation"
	"github.com/dvms-project/dvms/scheduler/status"
)

// Row is one decision, one line of `dvms explain`.
type Row struct {
	At       time.Time
	Event    string
	Decision string // raised, planned, moved, advised, skipped, failed, ended, left alone, approved...
	Server   string
	From, To string
	Class    string // the typed reason class (node.ReasonClass, scheduler.EndClass, scheduler.HoldClass)
	Why      string // the class in words
	Detail   string // the agent's own reason, with servers and hosts
	Agent    string // the agent that recorded it
}

// Decisions gathers the decisions that touched target (a host when any
// agent, event or move names it so, else a server id), oldest first,
// with the servers moved back within window.
func Decisions(reps []status.Report, target string, now time.Time, window time.Duration) []Row {
	evs := status.Events(reps)
	host := isHost(reps, evs, target)
	var out []Row
	if host {
		for _, r := range reps {
			for _, h := range r.Held {
				if h.Host == target {
					out = append(out, Row{At: h.At, Decision: "left alone", Class: h.Class, Why: holdWords(h.Class, h.Kind), Detail: h.Reason, Agent: h.Agent})
				}
			}
		}
	}
	for _, e := range evs {
		touches := func(a journal.Action) bool {
			if host {
				return e.Host == target || a.From == target || a.To == target
			}
			return a.Server == target
		}
		var acts []journal.Action
		for _, a := range e.Actions {
			if touches(a) {
				acts = append(acts, a)
			}
		}
		if len(acts) == 0 && !(host && e.Host == target) {
			continue
		}
		out = append(out, eventDecisions(e, acts)...)
	}
	for _, b := range movedBack(evs, window) {
		if b.Server == target || host && (b.From == target || b.To == target) {
			out = append(out, b)
		}
	}
	slices.SortStableFunc(out, func(a, b Row) int { return a.At.Compare(b.At) })
	if host {
		out = append(out, holdsNow(reps, target, now)...)
	}
	return out
}

// isHost: target names an agent, an event's host or a move's end.
func isHost(reps []status.Report, evs []journal.Entry, target string) bool {
	for _, r := range reps {
		if r.Host == target {
			return true
		}
		for _, h := range r.Held {
			if h.Host == target {
				return true
			}
		}
	}
	for _, e := range evs {
		if e.Host == target {
			return true
		}
		for _, a := range e.Actions {
			if a.From == target || a.To == target {
				return true
			}
		}
	}
	return false
}

// eventDecisions are e's raise, plan, the actions acts, the operator's
// Row and its end.
func eventDecisions(e journal.Entry, acts []journal.Action) []Row {
	raised := Row{At: e.Raised, Event: e.ID, Decision: "raised", From: e.Host, Class: e.Kind, Why: e.Kind + " of " + e.Host + " detected by its agent", Agent: e.Host}
	out := []Row{raised}
	if e.Planned != nil {
		out = append(out, Row{At: *e.Planned, Event: e.ID, Decision: "planned", Why: fmt.Sprintf("%d moves planned by %s", e.Moves, e.Leader), Detail: e.PlanReason, Agent: e.Leader})
	}
	for _, a := range acts {
		out = append(out, actionDecision(e, a))
	}
	if ap := e.Approval; ap != nil {
		why := "approved by the operator: re-checked, executed"
		switch ap.State {
		case journal.Rejected:
			why = "rejected by the operator: plan dropped"
		case journal.Refused:
			why = "approval refused: the cloud changed since the plan was advised, nothing sent"
		}
		op := ap.Operator
		if op == "" {
			op = "(unsigned)"
		}
		out = append(out, Row{At: ap.At, Event: e.ID, Decision: "plan " + ap.State, Class: ap.State, Why: why + " (operator " + op + ")", Detail: ap.Reason})
	}
	if e.Ended != nil {
		c := journal.EndClass(e)
		out = append(out, Row{At: *e.Ended, Event: e.ID, Decision: "ended " + e.Outcome, Class: c, Why: endWords(c), Detail: e.Reason, Agent: e.Host})
	}
	return out
}

func actionDecision(e journal.Entry, a journal.Action) Row {
	d := Row{At: a.Ended, Event: e.ID, Server: a.Server, From: a.From, To: a.To, Class: a.Class, Detail: a.Reason, Why: actionWords(a)}
	switch {
	case a.Outcome == "done" && a.Kind == scheduler.Shelve.String():
		d.Decision = "shelved"
	case a.Outcome == "done":
		d.Decision = "moved"
	case a.Class == string(node.ReasonAdvise):
		d.Decision = "advised, not moved"
	case a.Outcome == "skipped":
		d.Decision = "skipped, not moved"
	default:
		d.Decision = a.Outcome
	}
	return d
}

// actionWords says an action's reason class in words.
func actionWords(a journal.Action) string {
	switch node.ReasonClass(a.Class) {
	case node.ReasonNone, "":
		if a.Outcome == "done" {
			return a.Kind + " done by Nova"
		}
	case node.ReasonAdvise:
		return "advise mode: re-checked and recorded, not sent to Nova (dvms plans approve runs it)"
	case node.ReasonPaused:
		return "the region was paused by the operator"
	case node.ReasonExcluded:
		return "its source or destination was excluded by the operator"
	case node.ReasonStopping:
		return "the agent executing the plan was stopping"
	case node.ReasonCancelled:
		return "an earlier move of the plan failed: the rest was cancelled"
	case node.ReasonReadFailed:
		return "a re-check read of Nova failed: not moved rather than moved blind"
	case node.ReasonEvent:
		return "the event's reason no longer held (the overload went away, the drain was lifted)"
	case node.ReasonEventUnverified:
		return "the event could not be verified (a Nova read failed, or its host's agent did not answer)"
	case node.ReasonNoConsent:
		return "its source host did not consent (neither drained nor over- or underloaded by its own measurement)"
	case node.ReasonServerChanged:
		return "the server changed since the plan (already moved, busy, migrating or locked)"
	case node.ReasonServerGroup:
		return "its server group's (anti-)affinity forbids the destination"
	case node.ReasonDestinationDisabled:
		return "the destination's compute service was disabled or down"
	case node.ReasonDestinationBusy:
		return "migrations from elsewhere were arriving on the destination"
	case node.ReasonDestinationDistrusted:
		return "the destination's agent had reported a server moved into it at under half the RAM it used on its source: no destination of this agent's plans for an hour"
	case node.ReasonDestinationImplausible:
		return "the destination's agent reported its servers at an implausibly small share of their flavors' RAM against the plan's other hosts: no destination of this plan"
	case node.ReasonPlacement:
		return "the destination no longer fits: not enough placement capacity"
	case node.ReasonOverload:
		return "the destination no longer fits: it would be overloaded"
	case node.ReasonConflict:
		return "Nova refused it with a conflict (the server got busy): nothing done"
	case node.ReasonTimeout:
		return "no end within the migration timeout, or Nova stopped answering: outcome unknown (see its migration list)"
	case node.ReasonFailed:
		return "Nova refused it or it failed"
	case node.ReasonForceCompleted:
		return "done after dvms forced the live migration to complete (it did not converge)"
	case node.ReasonMigrationAborted:
		return "dvms aborted the live migration (it did not converge): the server stays on its source"
	case node.ReasonMaintenanceAction:
		return "done by the server's maintenance action (dvms:maintenance_action), not a live migration"
	case node.ReasonFallback:
		return "done by a later maintenance action: Nova refused or failed an earlier one"
	case node.ReasonLeftForOwner:
		return "left on its host for its owner (maintenance action notify)"
	}
	return a.Outcome
}

// endWords says an event's end class in words.
func endWords(c string) string {
	w, ok := map[scheduler.EndClass]string{
		scheduler.EndExecuted:         "solved: every move of the plan was done",
		scheduler.EndForceCompleted:   "solved: every move done, one forced to complete",
		scheduler.EndNothingToDo:      "solved: nothing to move",
		scheduler.EndRelieved:         "solved: some moves skipped, but the host is no longer overloaded",
		scheduler.EndNoSolution:       "not moved: no destination fits (no plan within the partition's hosts; servers moved within the server cooldown are not moved again, see Detail)",
		scheduler.EndActionFailed:     "a move failed",
		scheduler.EndMigrationAborted: "a live migration was aborted by dvms (did not converge)",
		scheduler.EndVanished:         "not moved: the condition went away by itself",
		scheduler.EndSkipped:          "not moved: the re-checks skipped moves (the cloud changed under the plan) and re-plans did not help",
		scheduler.EndUnverified:       "not moved: a re-check could not be verified; raised again later",
		scheduler.EndAdvise:           "not moved: advise mode (dvms plans lists the plan, dvms plans approve runs it)",
		scheduler.EndPaused:           "not moved: the region was paused by the operator",
		scheduler.EndExcluded:         "not moved: a host was excluded by the operator",
		scheduler.EndStopping:         "not moved: the agent was stopping",
		scheduler.EndSolvedOthers:     "raised again: the merged partition's plan solved other events first",
		scheduler.EndMemberLost:       "ended: a member of the partition was lost",
		scheduler.EndTimeout:          "ended: no word from the partition's leader in time",
		scheduler.EndRequestLost:      "ended: the partition's request made no progress",
		scheduler.EndFork:             "ended: this copy of the partition was a fork",
		scheduler.EndAbsorbedLost:     "ended: absorbed by a merge whose message was lost",
		scheduler.EndLeftForOwners:    "not drained: servers left on the host for their owners (maintenance action notify)",
		scheduler.EndNotWorth:         "not moved: the moves would cost more than they gain (move_cost, move_cost_per_second); raised again after the retry backoff",
		scheduler.EndCooling:          "not moved: only servers moved within the server cooldown could relieve the host (server_cooldown); raised again after the retry backoff",
	}[scheduler.EndClass(c)]
	if !ok {
		return "ended (" + c + ")"
	}
	return w
}

// holdWords says why a condition raised no event, in words.
func holdWords(c, kind string) string {
	switch scheduler.HoldClass(c) {
	case scheduler.HoldPaused:
		return kind + " left alone: the region is paused by the operator (dvms resume)"
	case scheduler.HoldExcluded:
		return kind + " left alone: the host is excluded by the operator (dvms include)"
	case scheduler.HoldBackoff:
		return kind + " left alone for now: its last event ended unsolved, the agent waits before raising it again"
	case scheduler.HoldWindowClosed:
		return kind + " left alone: its time window ([scheduler] windows) is closed"
	case scheduler.HoldAdopting:
		return kind + " left alone for now: the moves of a lost leader's plan may still run in Nova; the agent follows them to their end first"
	}
	return kind + " left alone (" + c + ")"
}

// holdsNow are what holds host back now, as its agent (or any agent, for
// the region's controls) reports it: paused, excluded, advise mode,
// closed windows.
func holdsNow(reps []status.Report, host string, now time.Time) []Row {
	var r *status.Report
	for i := range reps {
		if reps[i].Host == host {
			r = &reps[i]
		}
	}
	if r == nil {
		return nil
	}
	at := r.Now
	if at.IsZero() {
		at = now
	}
	var out []Row
	add := func(class, why string) {
		out = append(out, Row{At: at, Decision: "now", Class: class, Why: why, Agent: r.Host})
	}
	if r.Control.Paused {
		add("paused", "the region is paused: no event raised, no move started (dvms resume)")
	}
	if r.Excluded {
		add("excluded", host+" is excluded: never a source nor a destination (dvms include "+host+")")
	}
	if r.Advise {
		add("advise", "advise mode: moves from or to "+host+" are planned, not sent (dvms plans; dvms plans approve ID)")
	}
	for _, w := range r.Windows {
		if !w.Open {
			add("window_closed", "window of "+w.String()+": no "+w.Kind+" event is raised until then")
		}
	}
	return out
}

// movedBack lists, region-wide, each live migration dvms did that took a
// server back where its previous one (done by dvms too) took it from,
// within window: a rebalancer going back and forth
// (oscillation.ServerMovedBack, as each agent reports for the moves it
// saw itself; the joined journals see every agent's).
func movedBack(evs []journal.Entry, window time.Duration) []Row {
	type done struct {
		event string
		a     journal.Action
	}
	byServer := map[string][]done{}
	for _, e := range evs {
		for _, a := range e.Actions {
			if a.Outcome == "done" && a.Kind == scheduler.LiveMigrate.String() {
				byServer[a.Server] = append(byServer[a.Server], done{e.ID, a})
			}
		}
	}
	var out []Row
	for _, ms := range byServer {
		slices.SortStableFunc(ms, func(x, y done) int { return x.a.Ended.Compare(y.a.Ended) })
		for i := 1; i < len(ms); i++ {
			prev, back := ms[i-1], ms[i]
			gap := back.a.Ended.Sub(prev.a.Ended)
			if back.a.From != prev.a.To || back.a.To != prev.a.From || gap > window {
				continue
			}
			out = append(out, Row{At: back.a.Ended, Event: back.event, Decision: "moved back", Server: back.a.Server,
				From: back.a.From, To: back.a.To, Class: string(oscillation.ServerMovedBack),
				Why:    fmt.Sprintf("moved back where dvms took it from %s earlier (event %s): an oscillation; [scheduler] server_cooldown keeps a moved server in place", gap.Round(time.Second), prev.event),
				Detail: fmt.Sprintf("%s -> %s by event %s, then %s -> %s by event %s", prev.a.From, prev.a.To, prev.event, back.a.From, back.a.To, back.event)})
		}
	}
	return out
}
