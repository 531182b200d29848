package node

import (
	"context"
	"regexp"
	"slices"
	"sync"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// The executor re-checks the reason for a plan, not only that
// each move still fits. A plan is computed from snapshots and events other
// agents sent; before its first action the reason of the event it solves
// is re-read from the source of truth, about the event's own host:
//
//   - MAINTENANCE: Nova says the host's nova-compute service is disabled
//     with a reason matching drain_reason_pattern;
//   - OVERLOAD: the host is being drained, or its own latest measurement
//     (its local source, else its agent answering over the bus, an answer
//     signed by that host's key) on the capacity Nova gives it says it is
//     overloaded;
//   - UNDERLOAD: the host is being drained, or its own latest measurement
//     on Nova's capacity says it is underloaded.
//
// When the reason does not hold, no action of the plan runs: a forged
// event moves nothing. The verdict holds for the rest of the plan (its own
// moves lower the host's load).
//
// A host's servers leave only with that host's consent: a move off any
// other host H (a chain making room, another overloaded host of the
// partition, the events of partitions a merge absorbed, which the
// executor is not given) runs only when Nova says H is disabled with a
// drain reason, or H's own measurement now, on the capacity Nova gives H,
// says H is overloaded or underloaded (consent.go). An event a partition
// carries is nobody's word but the partition's: one compromised host
// could write any event for any host into it. So the executor does not
// trust it; it asks H (its signed answer) and Nova. An action without an
// event kind (tools, tests) is not a protocol decision and is not checked.

// reasonFirst is the event's verdict when it is known without a Nova
// read: kept for the plan (known true), or its host's measurement missing
// (ReasonEventUnverified: its agent did not answer); then the re-check
// sends Nova nothing for the action. Otherwise known is false and d is the
// host's measurement, for reasonHolds (nil for a drain: Nova decides).
// The capacity the host's own agent reports is not taken: a compromised
// host could shrink another's (or its own) to fake an overload, so Nova
// gives the capacity.
func (e *Executor) reasonFirst(ctx context.Context, ev scheduler.Event, f *flight) (why skip, known bool, d map[string]nova.Demand) {
	if ev.Kind == scheduler.NoEvent {
		return skip{}, true, nil
	}
	f.mu.Lock()
	why, known = f.reasons[ev.Host]
	f.mu.Unlock()
	if known || ev.Kind == scheduler.Maintenance {
		return why, known, nil
	}
	d, err := e.measureIn(ctx, f, ev.Host)
	if err != nil || d == nil {
		return skip{ReasonEventUnverified, "reason not verified: no measurement of " + ev.Host + " (its agent did not answer)"}, true, nil
	}
	return skip{}, false, d
}

// reasonHolds says why the plan's event no longer justifies its actions
// (empty when it does), from its host's measurement d and Nova; f keeps
// the verdict for the plan, unless the reason could not be verified (the
// next action tries again).
func (e *Executor) reasonHolds(ctx context.Context, ev scheduler.Event, d map[string]nova.Demand, f *flight) skip {
	why := e.eventReason(ctx, ev, d)
	if why.class != ReasonEventUnverified {
		f.mu.Lock()
		f.reasons[ev.Host] = why
		f.mu.Unlock()
	}
	return why
}

// eventReason is the verdict on the event's reason: empty when it holds,
// ReasonEvent when it no longer does (the overload went away, the drain
// was lifted: the workload moved on), ReasonEventUnverified when the reads
// it needs failed (a Nova read on a queued API, the host's agent did not
// answer): not the same thing, and the runner re-plans the second.
func (e *Executor) eventReason(ctx context.Context, ev scheduler.Event, d map[string]nova.Demand) skip {
	src := ev.Host
	// Nova's reads at once: on a queued API the verdict costs one wait,
	// not two in a row (a Maintenance and an Overload need only the host:
	// an overload is its host's own measurement on Nova's capacity).
	var (
		h       nova.Host
		servers []nova.Server
		err     error
		sErr    error
		wg      sync.WaitGroup
	)
	if ev.Kind == scheduler.Underload {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers, sErr = retry(ctx, e, func() ([]nova.Server, error) { return e.nova.Servers(ctx, src) })
		}()
	}
	h, err = retry(ctx, e, func() (nova.Host, error) { return e.nova.Host(ctx, src) })
	wg.Wait()
	if err != nil {
		return skip{ReasonEventUnverified, "reason not verified: re-read of " + src + " failed: " + err.Error()}
	}
	return eventVerdict(e.thr, e.DrainReason, ev, h, servers, sErr, d)
}

// eventVerdict is eventReason's verdict on what it read: the event's
// host h and its servers from Nova (sErr: that listing failed), and the
// host's own measurement d (nil: its agent did not answer). A step
// function shared by the executor and the virtual clock (PlanCheck);
// drain nil is DefaultConfig's.
func eventVerdict(thr scheduler.Thresholds, drain *regexp.Regexp, ev scheduler.Event, h nova.Host, servers []nova.Server, sErr error, d map[string]nova.Demand) skip {
	src := ev.Host
	if drain == nil {
		drain = DefaultConfig().DrainReason
	}
	if h.Service.Disabled() && drain.MatchString(h.Service.DisabledReason) {
		return skip{}
	}
	if ev.Kind == scheduler.Maintenance {
		return skipf(ReasonEvent, "reason does not hold: %s is not being drained (service %s, reason %q)", src, h.Service.Status, h.Service.DisabledReason)
	}
	if d == nil {
		return skip{ReasonEventUnverified, "reason not verified: no measurement of " + src + " (its agent did not answer)"}
	}
	if sErr != nil {
		return skip{ReasonEventUnverified, "reason not verified: re-read of " + src + "'s servers failed: " + sErr.Error()}
	}
	if ev.Kind == scheduler.Overload {
		// Its own measurement on Nova's capacity, as consentVerdict.
		host := measured(h, d, drain)
		if thr.Overloaded(host) {
			return skip{}
		}
		cpu, ram := host.Demand()
		return skipf(ReasonEvent, "reason does not hold: %s is neither drained nor overloaded by its own measurement (cpu %.1f/%.0f, ram %.0f/%.0f)", src, cpu, host.CPUs, ram, host.RAMMB)
	}
	host := ToHost(h, servers, d, drain)
	if ev.Kind == scheduler.Underload {
		if thr.Underloaded(&host) {
			return skip{}
		}
		return skipf(ReasonEvent, "reason does not hold: %s is not underloaded by its own measurement", src)
	}
	if thr.Overloaded(&host) {
		return skip{}
	}
	cpu, ram := host.Demand()
	return skipf(ReasonEvent, "reason does not hold: %s is neither drained nor overloaded by its own measurement (cpu %.1f/%.0f, ram %.0f/%.0f)", src, cpu, host.CPUs, ram, host.RAMMB)
}

// Relieved says whether the plan's OVERLOAD event is over although the
// re-checks skipped part of the plan: its host's own latest measurement
// (its local source, else its agent over the bus; no Nova request), on
// the capacity of the plan's snapshot, is no longer overloaded. False
// when it cannot tell (any other kind, no measurement, host not in the
// snapshot). The runner then ends the event solved rather than aborted:
// the moves done were enough.
func (e *Executor) Relieved(ctx context.Context, ev scheduler.Event, plan scheduler.Plan) bool {
	if ev.Kind != scheduler.Overload || !slices.ContainsFunc(plan.Snapshot, func(h scheduler.Host) bool { return h.Name == ev.Host }) {
		return false
	}
	d, err := e.measure(ctx, ev.Host)
	if err != nil {
		return false
	}
	return RelievedBy(e.thr, ev, plan, d)
}

// RelievedBy is Relieved's verdict on the event host's measurement d: a
// step function shared by the runner and the virtual clock.
func RelievedBy(thr scheduler.Thresholds, ev scheduler.Event, plan scheduler.Plan, d map[string]nova.Demand) bool {
	i := slices.IndexFunc(plan.Snapshot, func(h scheduler.Host) bool { return h.Name == ev.Host })
	if ev.Kind != scheduler.Overload || i < 0 || len(d) == 0 {
		return false
	}
	h := plan.Snapshot[i]
	h.Servers = make([]scheduler.Server, 0, len(d))
	for id, v := range d {
		h.Servers = append(h.Servers, scheduler.Server{ID: id, CPU: v.CPU, RAM: v.RAMMB})
	}
	return !thr.Overloaded(&h)
}
