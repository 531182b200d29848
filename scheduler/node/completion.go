package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/migest"
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

// migFollow is what the executor knows of one live migration it
// follows (one goroutine: the action's).
type migFollow struct {
	mid       string    // the migration's id, once listed in progress
	requested time.Time // Nova accepted the request
	began     time.Time // first listed past queued (zero: not yet)
	// Memory progress: the last read with figures, when copying was
	// first and last seen, and the lowest remaining memory and when.
	first, last         nova.MigrationProgress
	firstCopy, lastCopy time.Time
	low                 int64
	lowAt               time.Time
	haveLow             bool
	// verdict: why it does not converge ("" while it does).
	verdict  string
	forced   bool
	forcedAt time.Time
	aborted  bool
	noted    bool // CompleteNone: said once
}

// Completion results, the label values of the completion counter
// (scheduler/agentd/metrics.go): Nova accepted the request; 409, the server is no
// longer migrating: the migration ended meanwhile (Nova also answers 409
// for a server locked meanwhile, or an abort of a queued migration on
// computes older than 2.65: if the migration is still listed at the next
// read, the policy tries again); Nova refused it for the migration's
// state (400: not running yet, or post-migrating already; 404; tried
// again at the next read); any other failure (tried again at the next
// read).
const (
	CompletionAccepted = "accepted"
	CompletionEnded    = "ended"
	CompletionRefused  = "refused"
	CompletionFailed   = "failed"
)

const mib = 1 << 20

// progress takes one read of the migration in progress and applies the
// completion policy (at most one request to Nova).
func (e *Executor) progress(ctx context.Context, a scheduler.Action, f *migFollow, p nova.MigrationProgress, log zerolog.Logger) {
	now := e.clock.Now()
	f.mid = p.ID
	if f.began.IsZero() && p.Status != nova.MigrationQueued && p.Status != nova.MigrationAccepted {
		f.began = now
	}
	if p.HasMemory() && !f.forced && !f.aborted {
		// The figures of the pre-copy only: once forced (post-copy, or
		// a paused guest) or aborted they say nothing of the guest.
		if f.firstCopy.IsZero() {
			f.firstCopy, f.first = now, p
		}
		f.lastCopy, f.last = now, p
		if !f.haveLow || p.MemoryRemaining < f.low-p.MemoryTotal/100 {
			f.low, f.lowAt, f.haveLow = p.MemoryRemaining, now, true
		}
	}
	cc := e.cfg.Completion
	if f.began.IsZero() || f.aborted {
		return
	}
	log = log.With().Str("migration", f.mid).Int64("processed_mb", p.MemoryProcessed/mib).
		Int64("remaining_mb", p.MemoryRemaining/mib).Int64("total_mb", p.MemoryTotal/mib).Logger()
	if f.forced {
		if cc.Action == CompleteForceThenAbort && (now.Sub(f.forcedAt) >= cc.AbortAfter || now.Sub(f.requested) >= 3*e.cfg.MigrationTimeout/4) {
			f.verdict += fmt.Sprintf("; still running %s after force_complete", now.Sub(f.forcedAt).Round(time.Second))
			e.complete(ctx, a, f, CompleteAbort, log)
		}
		return
	}
	if f.verdict = e.notConverging(a, f, now); f.verdict == "" {
		return
	}
	switch {
	case cc.forces():
		e.complete(ctx, a, f, CompleteForce, log)
	case cc.aborts():
		e.complete(ctx, a, f, CompleteAbort, log)
	case !f.noted:
		f.noted = true
		log.Warn().Str("why", f.verdict).Msg("live migration not converging: left to Nova (migration_completion_action = none)")
	}
}

// notConverging says why the migration does not converge at now ("" when
// it does, or cannot tell yet).
func (e *Executor) notConverging(a scheduler.Action, f *migFollow, now time.Time) string {
	cc := e.cfg.Completion
	if f.haveLow && now.Sub(f.lowAt) >= cc.StallWindow {
		return fmt.Sprintf("not converging: %d MB of %d MB still to copy, no new low for %s",
			f.last.MemoryRemaining/mib, f.last.MemoryTotal/mib, now.Sub(f.lowAt).Round(time.Second))
	}
	if lim := e.completionLimit(a); now.Sub(f.began) >= lim {
		return fmt.Sprintf("not converging: running %s, past the limit of %s for %d MB of RAM",
			now.Sub(f.began).Round(time.Second), lim, a.RAMMB)
	}
	return ""
}

// completionLimit is how long a's migration may run: TimeoutPerGiB per
// GiB of its RAM (at least 2 GiB), within half of MigrationTimeout.
func (e *Executor) completionLimit(a scheduler.Action) time.Duration {
	gib := max(2, float64(a.RAMMB)/1024)
	lim := time.Duration(gib * float64(e.cfg.Completion.TimeoutPerGiB))
	return min(lim, e.cfg.MigrationTimeout/2)
}

// complete sends force_complete or abort for f's migration and notes
// what Nova said. A 409 means the server is no longer migrating: the
// migration ended meanwhile, which the next read records as it ended.
func (e *Executor) complete(ctx context.Context, a scheduler.Action, f *migFollow, what string, log zerolog.Logger) {
	var err error
	if what == CompleteForce {
		err = e.nova.ForceCompleteMigration(ctx, a.Server, f.mid)
	} else {
		err = e.nova.AbortMigration(ctx, a.Server, f.mid)
	}
	result := CompletionAccepted
	switch {
	case err == nil:
		if what == CompleteForce {
			f.forced, f.forcedAt = true, e.clock.Now()
		} else {
			f.aborted = true
		}
		log.Warn().Str("why", f.verdict).Msg("live migration " + what + ": sent to nova")
	case errors.Is(err, nova.ErrConflict):
		result = CompletionEnded
		log.Info().Err(err).Msg("live migration " + what + ": it ended meanwhile (409)")
	case errors.Is(err, nova.ErrBadRequest), errors.Is(err, nova.ErrNotFound):
		result = CompletionRefused
		log.Info().Err(err).Msg("live migration " + what + ": refused for its state, tried again at the next read")
	default:
		result = CompletionFailed
		log.Warn().Err(err).Msg("live migration " + what + ": failed, tried again at the next read")
	}
	if e.OnCompletion != nil {
		e.OnCompletion(what, result)
	}
}

// observation is what f taught about a's migration, for the estimator.
func (f *migFollow) observation(a scheduler.Action, end time.Time, completed bool) migest.Observation {
	o := migest.Observation{Server: a.Server, From: a.From, To: a.To, RAMMB: float64(a.RAMMB), Completed: completed}
	from := f.began
	if from.IsZero() {
		from = f.requested
	}
	o.Took = end.Sub(from)
	if f.last.HasMemory() && f.lastCopy.After(f.firstCopy) {
		o.Copying = f.lastCopy.Sub(f.firstCopy)
		o.TotalMB = float64(f.last.MemoryTotal) / mib
		o.CopiedMB = float64(f.last.MemoryProcessed-f.first.MemoryProcessed) / mib
		o.RemainingChangeMB = float64(f.last.MemoryRemaining-f.first.MemoryRemaining) / mib
	}
	return o
}
