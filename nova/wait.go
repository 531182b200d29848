package nova

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultMigrationPoll is WaitMigration's poll interval when given 0.
const DefaultMigrationPoll = 2 * time.Second

// WaitMigration follows the newest migration of a server created at or
// after since until it reaches a terminal status (completed, error,
// failed, cancelled), reading c.Migrations every poll. It returns that
// migration; a migration that ended in error is returned with a nil
// error (check Succeeded). Transient read failures (ErrUnavailable) are
// polled through; other errors end the wait.
//
// When ctx ends first it returns the last migration seen (zero if none)
// and an error wrapping ErrTimeout and ctx.Err(). Pass a since a little
// before the action was asked (Nova stamps created_at with its own
// clock), or the zero time to follow whatever is newest.
func WaitMigration(ctx context.Context, c Client, serverID string, since time.Time, poll time.Duration) (Migration, error) {
	if poll <= 0 {
		poll = DefaultMigrationPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var last Migration
	var lastErr error
	for {
		ms, err := c.Migrations(ctx, serverID)
		switch {
		case err == nil:
			lastErr = nil
			if len(ms) > 0 && !ms[0].CreatedAt.Before(since) { // newest first
				last = ms[0]
				if last.Terminal() {
					return last, nil
				}
			}
		case errors.Is(err, ErrUnavailable) && ctx.Err() == nil:
			lastErr = err
		default:
			if ctx.Err() != nil {
				return last, fmt.Errorf("migration of %s: %w (last status %q): %w", serverID, ErrTimeout, last.Status, ctx.Err())
			}
			return last, fmt.Errorf("follow migration of %s: %w", serverID, err)
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return last, fmt.Errorf("migration of %s: %w (last status %q, last error %v): %w", serverID, ErrTimeout, last.Status, lastErr, ctx.Err())
			}
			return last, fmt.Errorf("migration of %s: %w (last status %q): %w", serverID, ErrTimeout, last.Status, ctx.Err())
		case <-t.C:
		}
	}
}
