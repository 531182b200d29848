package daemon

import (
	"github.com/dvms-project/dvms/scheduler/node"
)

// reviverConfig: with unshelve_interval > 0, the agent unshelves
// dvms-shelved servers onto its own host when it has room, and finishes
// or undoes a shelve left half done on it. Without [scheduler] preempt
// it only cleans up (a round at start, then every 15 min or on a shelve
// notice): preemption may have been on before, or on elsewhere. nil:
// no reviver.
func reviverConfig(cfg Config) *node.ReviverConfig {
	if cfg.UnshelveEvery <= 0 {
		return nil
	}
	rc := node.DefaultReviverConfig(cfg.Agent.ID)
	rc.Region, rc.MaxInterval = cfg.Runtime.Region, max(cfg.UnshelveEvery, rc.MaxInterval)
	rc.Interval, rc.Headroom, rc.Thresholds = cfg.UnshelveEvery, cfg.UnshelveMargin, cfg.Agent.Thresholds
	rc.DrainReason, rc.DryRun, rc.CleanupOnly = cfg.Runtime.DrainReason, cfg.Runtime.Exec.DryRun, !cfg.Agent.Preempt
	rc.Timeout, rc.Poll = cfg.Runtime.Exec.MigrationTimeout, cfg.Runtime.Exec.Poll
	return &rc
}
