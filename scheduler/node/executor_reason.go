package node

import (
	"context"
	"fmt"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// Issue 10: the executor re-checks the reason for a move, not only that
// the move still fits. A plan is computed from snapshots and events other
// agents sent; the reason a server must leave its host is re-read from
// the source of truth before the first action off each source host:
//
//   - MAINTENANCE of the event's own host: Nova says the host's
//     nova-compute service is disabled with a reason matching
//     drain_reason_pattern;
//   - UNDERLOAD of the event's own host: the host's own latest measurement
//     says it is underloaded (or it is being drained);
//   - any other move or shelve (OVERLOAD, and hosts a merged partition or
//     the solver's "every overloaded host" tier empties): the source is
//     being drained, or its own latest measurement (its local source, else
//     its agent answering over the bus) says it is overloaded.
//
// A forged event, or a snapshot claiming a host is draining or overloaded,
// moves nothing. The verdict holds for the rest of the plan (the plan's
// own moves lower the source's load). An action without an event kind
// (tools, tests) is not a protocol decision and is not checked.

// reasonHolds says why the move of a off its source is no longer justified
// for ev ("" when it is). f memoizes the verdict per source host.
func (e *Executor) reasonHolds(ctx context.Context, ev scheduler.Event, a scheduler.Action, f *flight) string {
	if ev.Kind == scheduler.NoEvent {
		return ""
	}
	f.mu.Lock()
	why, known := f.reasons[a.From]
	f.mu.Unlock()
	if known {
		return why
	}
	why = e.sourceReason(ctx, ev, a.From)
	f.mu.Lock()
	f.reasons[a.From] = why
	f.mu.Unlock()
	return why
}

func (e *Executor) sourceReason(ctx context.Context, ev scheduler.Event, src string) string {
	h, err := retry(ctx, e, func() (nova.Host, error) { return e.nova.Host(ctx, src) })
	if err != nil {
		return "reason not verified: source re-read failed: " + err.Error()
	}
	drain := e.DrainReason
	if drain == nil {
		drain = DefaultConfig().DrainReason
	}
	draining := h.Service.Disabled() && drain.MatchString(h.Service.DisabledReason)
	if draining {
		return ""
	}
	if ev.Kind == scheduler.Maintenance && src == ev.Host {
		return fmt.Sprintf("reason not verified: %s is not being drained (service %s, reason %q)", src, h.Service.Status, h.Service.DisabledReason)
	}
	d, err := e.measure(ctx, src)
	if err != nil || d == nil {
		return "reason not verified: no measurement of " + src + " (its agent did not answer)"
	}
	servers, err := retry(ctx, e, func() ([]nova.Server, error) { return e.nova.Servers(ctx, src) })
	if err != nil {
		return "reason not verified: source servers re-read failed: " + err.Error()
	}
	host := ToHost(h, servers, d, drain)
	if ev.Kind == scheduler.Underload && src == ev.Host {
		if e.thr.Underloaded(&host) {
			return ""
		}
		return fmt.Sprintf("reason not verified: %s is not underloaded by its own measurement", src)
	}
	if e.thr.Overloaded(&host) {
		return ""
	}
	cpu, ram := host.Demand()
	return fmt.Sprintf("reason not verified: %s is neither drained nor overloaded by its own measurement (cpu %.1f/%.0f, ram %.0f/%.0f)", src, cpu, host.CPUs, ram, host.RAMMB)
}
