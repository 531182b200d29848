package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/extsched"
)

// Host summaries for `dvms scheduler-api`: the agent publishes
// what it knows of its host on bus.SummarySubject every
// SummaryConfig.Interval, and at once (checked every monitor interval)
// when it changed enough for a scheduler to care. Everything comes from
// the cached view and the last sample: no Nova request.

// SummaryConfig configures the summaries.
type SummaryConfig struct {
	// Interval between summaries at rest (0: none published).
	Interval time.Duration
	// Change: a summary is published early when demand or usage moved by
	// more than this fraction of capacity, or a state changed.
	Change float64
	// Site of the host ("" = one site).
	Site string
}

// DefaultSummaryConfig returns the defaults: every 30 s, early on a 10 % move.
func DefaultSummaryConfig() SummaryConfig {
	return SummaryConfig{Interval: 30 * time.Second, Change: 0.1}
}

// Validate lists every problem.
func (c SummaryConfig) Validate() error {
	var errs []error
	if c.Interval < 0 {
		errs = append(errs, errors.New("summary_interval must be >= 0"))
	}
	if c.Change <= 0 {
		errs = append(errs, errors.New("summary change fraction must be > 0"))
	}
	return errors.Join(errs...)
}

// planMoves counts the moves of the plan this agent executes, by host.
type planMoves struct {
	mu    sync.Mutex
	moves map[string]extsched.Moves
}

// add counts plan's moves (sign +1 when it starts, -1 when it ended).
func (p *planMoves) add(plan scheduler.Plan, sign int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.moves == nil {
		p.moves = map[string]extsched.Moves{}
	}
	bump := func(h string, in, out int) {
		if h == "" {
			return
		}
		m := p.moves[h]
		m.In, m.Out = m.In+in*sign, m.Out+out*sign
		if m == (extsched.Moves{}) {
			delete(p.moves, h)
		} else {
			p.moves[h] = m
		}
	}
	for _, step := range plan.Steps {
		for _, a := range step {
			bump(a.From, 0, 1)
			bump(a.To, 1, 0)
		}
	}
}

func (p *planMoves) snapshot() map[string]extsched.Moves {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.moves) == 0 {
		return nil
	}
	out := make(map[string]extsched.Moves, len(p.moves))
	for h, m := range p.moves {
		out[h] = m
	}
	return out
}

// migrating reports whether a server of the cached view is being moved
// (ToHost's reasons for a fixed server: Nova's MIGRATING status or
// migrating task state).
func migrating(s scheduler.Server) bool {
	return s.FixedReason == "status MIGRATING" || s.FixedReason == "task state migrating"
}

// Summary is the agent's summary of its host now; ok is false before the
// first sample.
func (r *Runner) Summary(site string) (extsched.Summary, bool) {
	r.lastMu.Lock()
	h, ok, sampled := r.last, r.hasLast, r.lastWhen
	r.lastMu.Unlock()
	if !ok {
		return extsched.Summary{}, false
	}
	cpu, ram := h.Demand()
	s := extsched.Summary{
		V: 1, Host: r.agent.ID(), Site: site, At: r.d.Clock.Now(), SampledAt: sampled,
		CPUDemand: cpu, RAMDemand: ram, CPUs: h.CPUs, RAMMB: h.RAMMB,
		AllocVCPUs: h.AllocVCPUs, AllocRAMMB: h.AllocRAMMB, UsedVCPUs: h.UsedVCPUs, UsedRAMMB: h.UsedRAMMB,
		Servers: len(h.Servers), Disabled: h.Disabled, Draining: h.Draining,
		PlanMoves: r.moves.snapshot(),
	}
	for _, sv := range h.Servers {
		if migrating(sv) {
			s.MovesOut++
		}
	}
	if p := r.Partition(); p != nil {
		s.Partition = p.State.String()
	}
	return s, true
}

// summaryDue says whether s is to be published, after last if sent: when
// the interval is over or it changed; never when its sample is older than
// the interval (the monitor cannot read its host: the scheduler-api will
// call this host stale rather than trust an old view).
func summaryDue(cfg SummaryConfig, sent bool, last, s extsched.Summary) bool {
	if s.At.Sub(s.SampledAt) > cfg.Interval {
		return false
	}
	return !sent || s.At.Sub(last.At) >= cfg.Interval || extsched.Changed(last, s, cfg.Change)
}

// PublishSummaries publishes the host's summary until ctx ends (see the
// top of this file). The caller owns the goroutine.
func (r *Runner) PublishSummaries(ctx context.Context, cfg SummaryConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Interval == 0 {
		return nil
	}
	subj := bus.SummarySubject(r.cfg.Region, r.agent.ID())
	t := r.d.Clock.NewTicker(min(r.cfg.Monitor, cfg.Interval))
	defer t.Stop()
	var last extsched.Summary
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		s, ok := r.Summary(cfg.Site)
		if !ok || !summaryDue(cfg, seq > 0, last, s) {
			continue
		}
		seq++
		s.Seq = seq
		data, err := s.Encode()
		if err == nil {
			err = r.d.Bus.Publish(ctx, subj, data)
		}
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn().Err(err).Msg("summary not published")
			}
			continue
		}
		last = s
	}
}
