package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/fit"
)

// ReviverConfig tunes the unshelving of preempted servers.
type ReviverConfig struct {
	Host string
	// Region names the bus subject of shelve notices.
	Region string
	// Interval between rounds; each round unshelves at most one server.
	// A round that finds no server dvms shelved doubles the wait, up to
	// MaxInterval, until an agent announces a shelve (bus.ShelvedSubject):
	// at rest the listing costs Nova one request per MaxInterval.
	Interval    time.Duration
	MaxInterval time.Duration
	// Headroom is the fraction of the overload thresholds left free after
	// an unshelve (so a server does not come back only to be shelved again).
	Headroom    float64
	Thresholds  scheduler.Thresholds
	DrainReason *regexp.Regexp
	// Timeout bounds one unshelve, request to ACTIVE; Poll is the interval
	// of the status reads meanwhile.
	Timeout time.Duration
	Poll    time.Duration
	// DryRun logs what would be unshelved and does nothing.
	DryRun bool
	// CleanupOnly: preemption is off here, so the reviver only finishes
	// or undoes shelves dvms left behind (preempt turned off since, an
	// agent stopped mid-shelve): one round at start, then one every
	// MaxInterval, at once after a shelve notice from an agent that
	// still preempts.
	CleanupOnly bool
}

// DefaultReviverConfig: a round every 30 s, 10 % headroom.
func DefaultReviverConfig(host string) ReviverConfig {
	return ReviverConfig{Host: host, Region: "RegionOne", Interval: 30 * time.Second, MaxInterval: 15 * time.Minute, Headroom: 0.1, Thresholds: scheduler.DefaultThresholds(),
		DrainReason: DefaultConfig().DrainReason, Timeout: 10 * time.Minute, Poll: 2 * time.Second}
}

// Validate lists every problem.
func (c ReviverConfig) Validate() error {
	var errs []error
	if c.Host == "" {
		errs = append(errs, errors.New("reviver: host is required"))
	}
	if c.Interval <= 0 || c.Timeout <= 0 || c.Poll <= 0 || c.MaxInterval < c.Interval {
		errs = append(errs, errors.New("reviver: interval, timeout and poll must be > 0, max interval >= interval"))
	}
	if c.Headroom < 0 || c.Headroom >= 1 {
		errs = append(errs, fmt.Errorf("reviver: headroom %v must be in [0, 1)", c.Headroom))
	}
	return errors.Join(errs...)
}

// Reviver gives back what preemption took: when its host has room, it
// unshelves there the most important server dvms shelved (metadata
// nova.MetaShelved). Several agents may race for the same server: Nova
// accepts one unshelve and answers the others 409, which they skip.
type Reviver struct {
	cfg   ReviverConfig
	nova  nova.Client
	dem   nova.DemandSource
	view  func() (scheduler.Host, bool)
	clock Clock
	log   zerolog.Logger
	round int
	// found: the last listing found servers dvms shelved.
	found bool
}

// NewReviver returns a reviver for cfg.Host; Run starts it. view is the
// agent's latest sample of its host (Runner.LastSample), so a round costs
// Nova nothing until it lists the shelved servers; nil reads the host from
// Nova each round (five requests).
func NewReviver(cfg ReviverConfig, c nova.Client, d nova.DemandSource, view func() (scheduler.Host, bool), clock Clock, log zerolog.Logger) (*Reviver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c == nil || clock == nil {
		return nil, errors.New("reviver: nova client and clock are required")
	}
	return &Reviver{cfg: cfg, nova: c, dem: d, view: view, clock: clock, log: log.With().Str("part", "unshelve").Logger()}, nil
}

// Run does rounds until ctx ends: every Interval while servers dvms
// shelved exist, backing off to MaxInterval while none do, and at once
// (next Interval) after a shelve notice on t (nil: no notices). busy
// reports whether the agent is handling an event (in a partition): the
// round is skipped, the partition's plan may be counting on this host's
// room.
func (r *Reviver) Run(ctx context.Context, t bus.Transport, busy func() bool) error {
	notice := make(chan struct{}, 1)
	if t != nil {
		sub, err := t.Subscribe(bus.ShelvedSubject(r.cfg.Region), func(string, []byte) {
			select {
			case notice <- struct{}{}:
			default:
			}
		})
		if err != nil {
			return fmt.Errorf("reviver: subscribe: %w", err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	wait := r.cfg.Interval
	if r.cfg.CleanupOnly {
		wait = 0 // what a stopped agent left behind is seen at start
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-notice:
			wait = r.cfg.Interval
			continue
		case <-r.clock.After(wait):
		}
		if busy != nil && busy() {
			continue
		}
		if _, err := r.Round(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn().Err(err).Msg("unshelve round failed")
		}
		switch {
		case r.found:
			wait = r.cfg.Interval
		case r.cfg.CleanupOnly:
			wait = r.cfg.MaxInterval
		default:
			wait = min(2*wait, r.cfg.MaxInterval)
		}
	}
}

// Round tries once: it returns the id of the server unshelved onto the
// host ("" when none was).
func (r *Reviver) Round(ctx context.Context) (string, error) {
	r.round++
	var h scheduler.Host
	ok := false
	if r.view != nil {
		h, ok = r.view()
	}
	if !ok {
		var err error
		if h, err = Sample(ctx, r.nova, r.dem, r.cfg.Host, r.cfg.DrainReason); err != nil {
			return "", err
		}
	}
	shelved, err := r.nova.ShelvedServers(ctx)
	if err != nil {
		return "", fmt.Errorf("list shelved servers: %w", err)
	}
	// mine: offloaded by dvms, anywhere; here: shelved by dvms on this
	// host but never offloaded (the agent stopped between the two
	// requests, or Nova failed the offload) — only this host's agent
	// finishes or undoes those.
	var mine, here []nova.Server
	for _, s := range shelved {
		if s.Metadata[nova.MetaShelved] == "" || s.Metadata[nova.MetaPin] == "true" || s.Locked {
			continue
		}
		switch {
		case s.Status == nova.StatusShelvedOffloaded:
			mine = append(mine, s)
		case s.Status == nova.StatusShelved && s.Host == r.cfg.Host && s.TaskState == "":
			here = append(here, s)
		}
	}
	r.found = len(mine) > 0 || len(here) > 0
	if len(here) > 0 {
		return r.settle(ctx, h, here[0])
	}
	if len(mine) == 0 || h.Disabled || h.Draining {
		return "", nil
	}
	prio := func(s nova.Server) int { p, _ := strconv.Atoi(s.Metadata[nova.MetaPriority]); return p }
	slices.SortFunc(mine, func(a, b nova.Server) int {
		return cmp.Or(cmp.Compare(prio(b), prio(a)), strings.Compare(a.ID, b.ID))
	})
	var demand map[string]nova.Demand
	if r.dem != nil {
		if demand, err = r.dem.Demand(ctx, r.cfg.Host); err != nil {
			return "", fmt.Errorf("demand of %s: %w", r.cfg.Host, err)
		}
	}
	for _, s := range mine {
		d := r.ranDemand(s, demand)
		if !r.room(h, s, d, true) {
			continue
		}
		return r.unshelve(ctx, s, d, r.cfg.Host)
	}
	return "", nil
}

// ranDemand is a server's demand when it ran: as the source measures it
// if it still answers for it, else its flavor (pessimistic).
func (r *Reviver) ranDemand(s nova.Server, demand map[string]nova.Demand) nova.Demand {
	if v, ok := demand[s.ID]; ok {
		return v
	}
	return nova.Demand{CPU: float64(s.VCPUs), RAMMB: float64(s.RAMMB)}
}

// room reports whether s, demanding d, fits on h by the one rule
// (fit.Check, as the solver and the executor's re-check decide) with the
// headroom left free under the overload thresholds. alloc says whether
// s's placement allocation is still to be added: an offloaded server's
// is, a SHELVED one's is still held on h.
func (r *Reviver) room(h scheduler.Host, s nova.Server, d nova.Demand, alloc bool) bool {
	add := fit.Use{CPU: d.CPU, RAM: d.RAMMB}
	if alloc {
		add.VCPUs, add.RAMMB = float64(s.VCPUs), float64(s.RAMMB)
	}
	return fit.Fits(h.Use(), add, r.cfg.Thresholds.Limit(&h).Scaled(1-r.cfg.Headroom))
}

// settle ends a dvms shelve left half done on this host: the server is
// SHELVED here (its placement allocation still held). With room — the
// host is enabled, not draining, and its demand plus the server's stays
// under the thresholds — it is unshelved in place (the shelve is undone);
// otherwise it is offloaded (the shelve is finished, the host freed) and
// a later round unshelves it wherever there is room.
func (r *Reviver) settle(ctx context.Context, h scheduler.Host, s nova.Server) (string, error) {
	d := nova.Demand{CPU: float64(s.VCPUs), RAMMB: float64(s.RAMMB)}
	if !h.Disabled && !h.Draining && r.room(h, s, d, false) {
		return r.unshelve(ctx, s, d, "")
	}
	log := r.log.With().Str("server", s.ID).Str("host", r.cfg.Host).Str("shelved_by", s.Metadata[nova.MetaShelved]).Logger()
	if r.cfg.DryRun {
		log.Info().Msg("advise: would offload a server dvms left shelved here")
		return "", nil
	}
	ctx = nova.WithRequestID(ctx, RequestID("offload:"+s.Metadata[nova.MetaShelved]+":"+s.ID+":"+strconv.Itoa(r.round)))
	rc, err := r.nova.ShelveOffload(ctx, s.ID)
	if errors.Is(err, nova.ErrConflict) {
		log.Info().Err(err).Msg("offload refused: the server changed meanwhile")
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("shelve-offload %s (left shelved on %s): %w", s.ID, r.cfg.Host, err)
	}
	log.Info().Str("nova_request_id", rc.LocalRequestID).Msg("finished a shelve left half done: offloaded, to be unshelved where there is room")
	return "", nil
}

// unshelve unshelves s onto host (offloaded) or in place (host "": s is
// SHELVED on this agent's host) and follows it to ACTIVE.
func (r *Reviver) unshelve(ctx context.Context, s nova.Server, d nova.Demand, host string) (string, error) {
	mark := s.Metadata[nova.MetaShelved]
	rid := RequestID("unshelve:" + mark + ":" + s.ID + ":" + strconv.Itoa(r.round))
	log := r.log.With().Str("server", s.ID).Str("host", r.cfg.Host).Str("shelved_by", mark).Str("request_id", rid).
		Float64("cpu", d.CPU).Float64("ram_mb", d.RAMMB).Logger()
	if r.cfg.DryRun {
		log.Info().Msg("advise: would unshelve")
		return "", nil
	}
	ctx = nova.WithRequestID(ctx, rid)
	rc, err := r.nova.Unshelve(ctx, s.ID, host)
	if errors.Is(err, nova.ErrConflict) {
		log.Info().Err(err).Msg("unshelve refused: another agent was first")
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("unshelve %s onto %s: %w", s.ID, r.cfg.Host, err)
	}
	log.Info().Str("nova_request_id", rc.LocalRequestID).Msg("unshelve accepted by nova")
	start := r.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-r.clock.After(r.cfg.Poll):
		}
		v, err := r.nova.Server(ctx, s.ID)
		switch {
		case err != nil:
			log.Warn().Err(err).Msg("unshelve: server re-read failed")
		case v.Status == nova.StatusActive && v.TaskState == "":
			if err := r.nova.SetServerMetadata(ctx, s.ID, nova.MetaShelved, ""); err != nil {
				log.Warn().Err(err).Msg("unshelved, but the dvms:shelved mark stays")
			}
			log.Info().Str("on", v.Host).Dur("took", r.clock.Now().Sub(start)).Msg("unshelved")
			return s.ID, nil
		case v.Status == nova.StatusShelvedOffloaded && v.TaskState == "":
			// Nova accepted, then found no valid host (it changed meanwhile).
			log.Warn().Msg("unshelve ended with the server still offloaded (no valid host)")
			return "", nil
		case v.Status == nova.StatusError:
			return "", fmt.Errorf("unshelve %s onto %s: server went to ERROR", s.ID, r.cfg.Host)
		}
		if r.clock.Now().Sub(start) > r.cfg.Timeout {
			return "", fmt.Errorf("unshelve %s onto %s: not ACTIVE after %s (%w)", s.ID, r.cfg.Host, r.cfg.Timeout, nova.ErrTimeout)
		}
	}
}
