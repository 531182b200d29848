package node

import (
	"regexp"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// The executor's decisions as step functions (DESIGN §5.5): what an
// action's re-check reads goes in, the verdict comes out; the reads, the
// clock and the goroutines stay in Executor. The executor and the virtual
// clock (scheduler/detsim, which observes its own ground truth instead of
// reading Nova) call the same functions:
//
//   - judge: may the action start (executor.go);
//   - eventVerdict: does the plan's event still hold (executor_reason.go);
//   - RelievedBy: is an OVERLOAD over although actions were skipped;
//   - PlanOutcome: how the plan's execution ends its event (outcome.go).
//
// PlanCheck exposes the first two, with the plan's state they need (what
// it has in flight, its latest readings, its event's verdict), to a caller
// that observes the cloud itself.

// newFlight is the re-check state of a plan about to run.
func newFlight(plan scheduler.Plan) *flight {
	f := &flight{flying: map[string]map[string]*reservation{}, groups: map[string]map[string]int{}, snap: map[string]snapped{},
		read: map[string]nova.Demand{}, reasons: map[string]skip{}, vouched: map[string]bool{}}
	for _, h := range plan.Snapshot {
		for _, s := range h.Servers {
			f.snap[s.ID] = snapped{host: h.Name, d: nova.Demand{CPU: s.CPU, RAMMB: s.RAM}}
		}
	}
	f.wordRef, f.wordRefOK = scheduler.WordReference(plan.Snapshot)
	return f
}

// Observed is what one action's re-check reads, as the executor reads it
// from Nova and from the hosts' agents (Executor.readAll).
type Observed struct {
	// Server is the server to act on; Migrations its migrations, newest
	// first (live migrations only).
	Server     nova.Server
	Migrations []nova.Migration
	// Dest is the destination with placement's usage, DestServers the
	// servers Nova lists on it (live migrations only).
	Dest        nova.Host
	DestServers []nova.Server
	// SrcDemand and DestDemand are the source's and the destination's
	// own measurements (live migrations only).
	SrcDemand, DestDemand map[string]nova.Demand
	// Event is the event's host as Nova lists it, EventServers its
	// servers and EventDemand its own measurement (nil: its agent did not
	// answer); read only while the plan has no verdict on its event yet
	// (PlanCheck.EventKnown).
	Event        nova.Host
	EventServers []nova.Server
	EventDemand  map[string]nova.Demand
	// Source is the action's source host as Nova lists it, read while
	// the plan does not know the source's consent yet
	// (PlanCheck.ConsentKnown); SrcDemand is then read for a shelve too.
	Source nova.Host
}

// Verdict is a re-check's answer: the action runs when Class is "".
type Verdict struct {
	Class  ReasonClass
	Reason string
	// Reads are the Nova reads the executor's re-check made for it
	// (Executor.readAll); the virtual clock prices them with nova/fake's
	// cost model.
	Reads []Read
}

// Read is one nova.Client call: its method name ("Migrations" of a
// server with none: "MigrationsNone") and the host it reads ("" for a
// server's).
type Read struct{ Method, Host string }

// PlanCheck is one plan's re-check state for a caller that observes the
// cloud itself (the virtual clock). Not safe for concurrent use.
type PlanCheck struct {
	f     *flight
	thr   scheduler.Thresholds
	drain *regexp.Regexp
	ev    scheduler.Event
}

// NewPlanCheck returns the re-check state of plan, run for ev, judged
// with thr; drain nil is DefaultConfig's drain reason.
func NewPlanCheck(ev scheduler.Event, plan scheduler.Plan, thr scheduler.Thresholds, drain *regexp.Regexp) *PlanCheck {
	return &PlanCheck{f: newFlight(plan), thr: thr, drain: drain, ev: ev}
}

// EventKnown says whether the plan already has a verdict on its event
// (kept for the rest of the plan, as the executor keeps it): then a
// re-check needs no read of the event's host.
func (p *PlanCheck) EventKnown() bool {
	if p.ev.Kind == scheduler.NoEvent {
		return true
	}
	_, ok := p.f.reasons[p.ev.Host]
	return ok
}

// ConsentKnown says whether the plan already has a verdict on the
// consent of host, the source of an action (consent.go): then a re-check
// needs no read of it.
func (p *PlanCheck) ConsentKnown(host string) bool {
	_, ok := p.f.consentKnown(p.ev, host)
	return ok
}

// Judge is the executor's verdict on action a given what its re-check
// read (o). An action that may start is taken as started and accepted by
// Nova: its load is held on its destination for the rest of the plan,
// as the executor holds a move done.
func (p *PlanCheck) Judge(a scheduler.Action, o Observed) Verdict {
	r := &reads{server: o.Server, migrations: o.Migrations, dest: o.Dest, destServers: o.DestServers,
		srcDemand: o.SrcDemand, destDemand: o.DestDemand}
	var calls []Read
	cons, consKnown := p.f.consentKnown(p.ev, a.From)
	if consKnown && cons.why != "" {
		return Verdict{Class: cons.class, Reason: cons.why} // readAll: nothing read
	}
	if !p.EventKnown() {
		if p.ev.Kind != scheduler.Maintenance && o.EventDemand == nil {
			// reasonFirst: no measurement of the event's host, nothing read.
			return Verdict{Class: ReasonEventUnverified, Reason: "reason not verified: no measurement of " + p.ev.Host + " (its agent did not answer)"}
		}
		if p.ev.Kind != scheduler.Maintenance {
			p.f.note(o.EventDemand)
		}
		why := eventVerdict(p.thr, p.drain, p.ev, o.Event, o.EventServers, nil, o.EventDemand)
		if why.class != ReasonEventUnverified {
			p.f.reasons[p.ev.Host] = why
		}
		r.reason = why
		// eventReason reads the host (and an underloaded one's servers).
		calls = append(calls, Read{"Host", p.ev.Host})
		if p.ev.Kind == scheduler.Underload {
			calls = append(calls, Read{"Servers", p.ev.Host})
		}
	} else {
		r.reason = p.f.reasons[p.ev.Host]
		r.decided = r.reason.why != ""
	}
	if !r.decided {
		calls = append(calls, Read{Method: "Server"})
		if a.Kind == scheduler.LiveMigrate {
			migs := "Migrations"
			if len(o.Migrations) == 0 {
				migs = "MigrationsNone"
			}
			calls = append(calls, Read{Method: migs}, Read{"Host", a.To}, Read{"Servers", a.To})
		}
	}
	if a.Kind == scheduler.LiveMigrate {
		p.f.note(o.SrcDemand)
		p.f.note(o.DestDemand)
	}
	r.consent = cons
	if !r.decided && !consKnown {
		if a.Kind != scheduler.LiveMigrate {
			p.f.note(o.SrcDemand)
		}
		calls = append(calls, Read{"Host", a.From})
		r.consent = consentVerdict(p.thr, p.drain, a.From, o.Source, nil, o.SrcDemand)
		p.f.keepConsent(a.From, r.consent)
	}
	_, held, sk := judge(p.thr, a, p.f, r)
	p.f.accept(held)
	return Verdict{Class: sk.class, Reason: sk.why, Reads: calls}
}
