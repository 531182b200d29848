package node

import (
	"errors"
	"fmt"
	"time"
)

// Completion actions: what the executor does to a live migration that
// does not converge (CompletionConfig.Action). The values are the
// option's (migration_completion_action).
const (
	// CompleteNone leaves it to Nova (its own
	// live_migration_completion_timeout and live_migration_timeout_action).
	CompleteNone = "none"
	// CompleteAbort aborts it (DELETE /servers/{id}/migrations/{mid},
	// 2.24): the server stays ACTIVE on its source.
	CompleteAbort = "abort"
	// CompleteForce forces it to complete (POST
	// /servers/{id}/migrations/{mid}/action {"force_complete": null},
	// 2.22): Nova switches to post-copy where the operator set [libvirt]
	// live_migration_permit_post_copy, else pauses the guest until the
	// copy ends.
	CompleteForce = "force_complete"
	// CompleteForceThenAbort forces it, and aborts it when it is still
	// running AbortAfter later.
	CompleteForceThenAbort = "force_complete_then_abort"
)

// CompletionActions lists the completion actions (the option's choices).
var CompletionActions = []string{CompleteNone, CompleteAbort, CompleteForce, CompleteForceThenAbort}

// CompletionConfig is the executor's policy for a live migration that
// does not converge. It is followed from Nova's in-progress migration
// (GET /servers/{id}/migrations, 2.23 memory_total_bytes,
// memory_processed_bytes, memory_remaining_bytes), one read per
// ExecConfig.Poll: that read replaces the os-migrations read while the
// migration is in progress, so following costs what it cost before.
//
// A migration does not converge when its remaining memory has not come
// down to a new low (by at least 1 % of the guest's memory) for
// StallWindow, or when it runs past TimeoutPerGiB for each GiB of the
// server's RAM (at least 2 GiB, as Nova's
// live_migration_completion_timeout counts). Then Action applies, once.
type CompletionConfig struct {
	// Action is one of CompletionActions.
	Action string
	// StallWindow: no new low of the remaining memory for this long is a
	// migration that does not converge. A migration whose Nova reports no
	// memory figures (a fake virt driver, a driver other than libvirt) is
	// judged by TimeoutPerGiB only.
	StallWindow time.Duration
	// TimeoutPerGiB: a migration running longer than this per GiB of the
	// server's RAM (at least 2 GiB) does not converge. The limit is kept
	// within half of ExecConfig.MigrationTimeout, so the policy acts
	// before the executor gives up following.
	TimeoutPerGiB time.Duration
	// AbortAfter: with CompleteForceThenAbort, a migration still running
	// this long after it was forced is aborted (kept within three
	// quarters of ExecConfig.MigrationTimeout after it started).
	AbortAfter time.Duration
}

// DefaultCompletionConfig aborts a migration that does not converge
// (Nova's own default live_migration_timeout_action is abort: nothing
// pauses a guest unless the operator chose force_complete), after 90 s
// without progress or 100 s per GiB of RAM.
func DefaultCompletionConfig() CompletionConfig {
	return CompletionConfig{Action: CompleteAbort, StallWindow: 90 * time.Second, TimeoutPerGiB: 100 * time.Second, AbortAfter: time.Minute}
}

// Validate lists every problem.
func (c CompletionConfig) Validate() error {
	var errs []error
	ok := false
	for _, a := range CompletionActions {
		ok = ok || c.Action == a
	}
	if !ok {
		errs = append(errs, fmt.Errorf("migration_completion_action %q: want one of %v", c.Action, CompletionActions))
	}
	if c.StallWindow <= 0 || c.TimeoutPerGiB <= 0 || c.AbortAfter <= 0 {
		errs = append(errs, errors.New("migration_stall_window, migration_completion_timeout and migration_abort_after must be > 0"))
	}
	return errors.Join(errs...)
}

// forces and aborts say what the action does.
func (c CompletionConfig) forces() bool {
	return c.Action == CompleteForce || c.Action == CompleteForceThenAbort
}

func (c CompletionConfig) aborts() bool {
	return c.Action == CompleteAbort || c.Action == CompleteForceThenAbort
}
