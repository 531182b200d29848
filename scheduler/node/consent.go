package node

import (
	"context"
	"regexp"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// A host's servers leave only with that host's consent (see
// executor_reason.go). The plan's event host consents by its event's
// verdict (eventVerdict); any other source host H of the plan is judged
// once per plan, at its first action, on what the re-check reads:
//
//   - Nova's view of H (its service and capacity, one read): H disabled
//     with a reason matching drain_reason_pattern consents, whether its
//     agent lives or not;
//   - H's own measurement now (its local source, else its agent's answer
//     over the bus, signed by H's key and bound to it: Runner.receiveAnswer),
//     on the capacity Nova gives H: overloaded or underloaded consents.
//     Its servers are taken as H measures them, not re-listed from Nova:
//     only H can say what H measures, and H saying it must shed load is
//     its consent (a compromised H can move its own servers anyway).
//
// Why not carry each event's signed statement in the partition instead:
// an event copied into a partition may be minutes old by the time a plan
// runs, and its signature would prove only that H once wanted to shed
// load; a measurement asked for now, signed by H, says whether it still
// does, and Nova decides a drain, which H's agent cannot (a dead agent
// signs nothing). It costs one Nova read per source host and plan
// besides the event's, and the source's measurement, which the re-check
// of a live migration makes anyway.
//
// The verdict holds for the rest of the plan (its own moves lower H's
// load), unless it could not be verified (the next action off H tries
// again).

// consentKnown is the consent of host as the plan already knows it
// (known false: it must be read). The event's host and a kindless
// event's actions need none of their own.
func (f *flight) consentKnown(ev scheduler.Event, host string) (why skip, known bool) {
	if ev.Kind == scheduler.NoEvent || host == ev.Host {
		return skip{}, true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	why, known = f.reasons[host]
	return why, known
}

// keepConsent keeps host's verdict for the plan, unless it was not
// verified.
func (f *flight) keepConsent(host string, why skip) {
	if why.class == ReasonEventUnverified {
		return
	}
	f.mu.Lock()
	f.reasons[host] = why
	f.mu.Unlock()
}

// consentVerdict is the verdict on source host src's consent from what
// was read: src as Nova lists it (h; err: that read failed) and its own
// measurement d (nil: its agent did not answer). A step function shared
// by the executor and the virtual clock (PlanCheck); drain nil is
// DefaultConfig's.
func consentVerdict(thr scheduler.Thresholds, drain *regexp.Regexp, src string, h nova.Host, err error, d map[string]nova.Demand) skip {
	if err != nil {
		return skip{ReasonEventUnverified, "consent not verified: re-read of " + src + " failed: " + err.Error()}
	}
	if drain == nil {
		drain = DefaultConfig().DrainReason
	}
	if h.Service.Disabled() && drain.MatchString(h.Service.DisabledReason) {
		return skip{}
	}
	if d == nil {
		return skip{ReasonEventUnverified, "consent not verified: no measurement of " + src + " (its agent did not answer)"}
	}
	host := measured(h, d, drain)
	if thr.Overloaded(host) || thr.Underloaded(host) {
		return skip{}
	}
	cpu, ram := host.Demand()
	return skipf(ReasonNoConsent, "%s did not consent: not drained in Nova (service %s, reason %q), neither overloaded nor underloaded by its own measurement (cpu %.1f/%.0f, ram %.0f/%.0f)",
		src, h.Service.Status, h.Service.DisabledReason, cpu, host.CPUs, ram, host.RAMMB)
}

// measured is host h with Nova's capacity and the servers its own
// measurement d lists.
func measured(h nova.Host, d map[string]nova.Demand, drain *regexp.Regexp) *scheduler.Host {
	host := ToHost(h, nil, nil, drain)
	for id, v := range d {
		host.Servers = append(host.Servers, scheduler.Server{ID: id, CPU: v.CPU, RAM: v.RAMMB})
	}
	return &host
}

// consentReads reads, for the re-check of an action off a host whose
// consent is not known yet, that host as Nova lists it (its measurement
// is the re-check's srcDemand).
func (e *Executor) consentReads(ctx context.Context, host string, r *reads, do func(func())) {
	do(func() {
		r.src, r.srcErr = retry(ctx, e, func() (nova.Host, error) { return e.nova.Host(ctx, host) })
	})
}
