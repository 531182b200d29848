package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// reviver unshelves what preemption shelved once capacity returns.
type reviver interface {
	Run(ctx context.Context, t bus.Transport, busy func() bool) error
}

// newReviver: with unshelve_interval > 0, the agent unshelves
// dvms-shelved servers onto its own host when it has room, and finishes
// or undoes a shelve left half done on it. Without [scheduler] preempt
// it only cleans up (a round at start, then every 15 min or on a shelve
// notice): preemption may have been on before, or on elsewhere.
func newReviver(cfg fileConfig, c nova.Client, d nova.DemandSource, view func() (scheduler.Host, bool), log zerolog.Logger) (reviver, error) {
	if cfg.UnshelveEvery <= 0 {
		return nil, nil
	}
	rc := node.DefaultReviverConfig(cfg.Agent.ID)
	rc.Region, rc.MaxInterval = cfg.Runtime.Region, max(cfg.UnshelveEvery, rc.MaxInterval)
	rc.Interval, rc.Headroom, rc.Thresholds = cfg.UnshelveEvery, cfg.UnshelveMargin, cfg.Agent.Thresholds
	rc.DrainReason, rc.DryRun, rc.CleanupOnly = cfg.Runtime.DrainReason, cfg.Runtime.Exec.DryRun, !cfg.Agent.Preempt
	rc.Timeout, rc.Poll = cfg.Runtime.Exec.MigrationTimeout, cfg.Runtime.Exec.Poll
	r, err := node.NewReviver(rc, c, d, view, node.Wall{}, log)
	if err != nil {
		return nil, err
	}
	return r, nil
}
