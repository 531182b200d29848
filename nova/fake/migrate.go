package fake

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// The live migration's memory model. A migration copies the guest's RAM
// at its host pair's bandwidth (SetBandwidth, else
// Config.BandwidthMBps) while the guest dirties it at its dirty rate
// (SetDirtyRate, default 0). While it runs (the running phase, from 20 %
// of its nominal duration), MigrationsInProgress reports
// memory_total_bytes (the flavor's RAM), memory_processed_bytes and
// memory_remaining_bytes. A guest that dirties memory slower than the
// pair copies it takes Config.MigrationOverhead + RAM / (bandwidth -
// dirty) and its remaining memory falls steadily; one that dirties as
// fast or faster never converges: its remaining memory stays at its RAM
// and it runs until ForceCompleteMigration (the rest is copied at the
// pair's bandwidth, as post-copy or a paused guest would) or
// AbortMigration (it ends cancelled, the server ACTIVE on its source).

// never is how far away a migration that does not converge ends.
const never = 100 * 365 * 24 * time.Hour

// Templates of the requests nova/openstack sends for them.
var (
	tInProgress    = get(nova.ServiceCompute, "/servers/{id}/migrations")
	tForceComplete = nova.Template{Service: nova.ServiceCompute, Method: "POST", Path: "/servers/{id}/migrations/{id}/action"}
	tAbort         = nova.Template{Service: nova.ServiceCompute, Method: "DELETE", Path: "/servers/{id}/migrations/{id}"}
)

// SetDirtyRate sets how fast a server dirties its memory, in MB/s (its
// next live migration takes it). nova.ErrNotFound for an unknown server,
// nova.ErrBadRequest for a negative rate.
func (c *Cloud) SetDirtyRate(id string, mbps float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[id]
	if !ok {
		return fmt.Errorf("dirty rate of server %s: %w", id, nova.ErrNotFound)
	}
	if !(mbps >= 0) {
		return fmt.Errorf("dirty rate of server %s: %v MB/s: %w", id, mbps, nova.ErrBadRequest)
	}
	s.dirty = mbps
	return nil
}

// SetBandwidth sets the live-migration bandwidth from one host to
// another, in MB/s (> 0; migrations requested later take it).
func (c *Cloud) SetBandwidth(from, to string, mbps float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !(mbps > 0) {
		return fmt.Errorf("bandwidth %s -> %s: %v MB/s: %w", from, to, mbps, nova.ErrBadRequest)
	}
	if c.pairBW == nil {
		c.pairBW = map[[2]string]float64{}
	}
	c.pairBW[[2]string{from, to}] = mbps
	return nil
}

// bandwidth is the pair's bandwidth (c.mu held).
func (c *Cloud) bandwidth(from, to string) float64 {
	if bw, ok := c.pairBW[[2]string{from, to}]; ok {
		return bw
	}
	return c.cfg.BandwidthMBps
}

// nominal is the migration's duration were nothing forced or aborted
// (for one that does not converge: its phases' scale).
func (m *migration) nominal(overhead time.Duration, ramMB float64) time.Duration {
	rate := m.bw
	if m.dirty < m.bw {
		rate = m.bw - m.dirty
	}
	d := overhead + time.Duration(ramMB/rate*float64(time.Second))
	return max(d, time.Millisecond)
}

// runFrom is when the running phase starts, after start.
func (m *migration) runFrom() time.Duration { return time.Duration(0.20 * float64(m.dur)) }

// memory is the migration's memory progress at now, in MB: processed
// and remaining; ok false outside the running phase.
func (m *migration) memory(now time.Time) (processed, remaining float64, ok bool) {
	if m.Terminal() || !m.claimed || now.Before(m.start) {
		return 0, 0, false
	}
	ram := float64(m.srv.RAMMB)
	el := now.Sub(m.start) - m.runFrom()
	if el < 0 {
		return 0, 0, false
	}
	if m.forced && !now.Before(m.forcedAt) {
		span := m.end.Sub(m.forcedAt).Seconds()
		f := 1.0
		if span > 0 {
			f = min(1, now.Sub(m.forcedAt).Seconds()/span)
		}
		copied := f * m.forcedRemain
		return m.forcedDone + copied, m.forcedRemain - copied, true
	}
	if m.stuck {
		return m.bw * el.Seconds(), ram, true
	}
	runLen := time.Duration(0.70 * float64(m.dur))
	if el >= runLen {
		return 0, 0, false // post-migrating
	}
	f := el.Seconds() / runLen.Seconds()
	return ram * f * m.bw / (m.bw - m.dirty), ram * (1 - f), true
}

// setEnd moves m's end to end and the migrations queued behind it on
// its source's lane by as much (c.mu held).
func (c *Cloud) setEnd(m *migration, end time.Time) {
	old := m.end
	delta := end.Sub(old)
	m.end = end
	heap.Fix(&c.inflight, m.index)
	if !m.claimed {
		return
	}
	for _, o := range c.inflight {
		if o != m && o.claimed && o.Source == m.Source && !o.start.Before(old) {
			o.start, o.end = o.start.Add(delta), o.end.Add(delta)
			heap.Fix(&c.inflight, o.index)
		}
	}
	if src := c.hosts[m.Source]; src != nil && !src.laneFree.Before(old) {
		src.laneFree = src.laneFree.Add(delta)
	}
}

// MigrationsInProgress implements nova.Client: the server's migrations
// not ended, with their memory progress (GET /servers/{id}/migrations).
func (c *Cloud) MigrationsInProgress(ctx context.Context, serverID string) ([]nova.MigrationProgress, error) {
	return c.inProgress(ctx, c.def, serverID)
}

func (c *Cloud) inProgress(ctx context.Context, v *View, serverID string) ([]nova.MigrationProgress, error) {
	b, err := c.begin(ctx, v, callRead, "migrations in progress of "+serverID, tInProgress)
	if err != nil {
		return nil, err
	}
	out, err := c.doInProgress(serverID)
	b.answer(classOf(err))
	return out, b.end(err)
}

func (c *Cloud) doInProgress(serverID string) ([]nova.MigrationProgress, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	if _, ok := c.servers[serverID]; !ok {
		return nil, fmt.Errorf("migrations in progress of %s: %w", serverID, nova.ErrNotFound)
	}
	now := c.clock.Now()
	ms := c.migs[serverID]
	out := []nova.MigrationProgress{}
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		v := m.view(now)
		if v.Terminal() || v.Status == nova.MigrationAccepted {
			continue // Nova lists queued, preparing, running and post-migrating ones
		}
		p := nova.MigrationProgress{ID: v.ID, Status: v.Status, Source: v.Source, Dest: v.Dest, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt}
		if done, left, ok := m.memory(now); ok {
			const mb = 1 << 20
			p.MemoryTotal = int64(m.srv.RAMMB) * mb
			p.MemoryProcessed, p.MemoryRemaining = int64(done*mb), int64(left*mb)
		}
		out = append(out, p)
	}
	return out, nil
}

// current is the server's migration in flight with id migrationID
// (c.mu held): ErrNotFound for an unknown server; ErrConflict when the
// server is not migrating (Nova: InstanceInvalidState, 409);
// notCurrent when it is migrating but under another migration.
func (c *Cloud) current(op, serverID, migrationID string, notCurrent error) (*migration, error) {
	s, ok := c.servers[serverID]
	if !ok {
		return nil, fmt.Errorf("%s %s of %s: %w", op, migrationID, serverID, nova.ErrNotFound)
	}
	if s.mig == nil {
		return nil, fmt.Errorf("%s %s of %s: cannot %s instance while it is in task_state None: %w", op, migrationID, serverID, op, nova.ErrConflict)
	}
	if s.mig.ID != migrationID {
		return nil, fmt.Errorf("%s %s of %s: no such migration in progress: %w", op, migrationID, serverID, notCurrent)
	}
	return s.mig, nil
}

// ForceCompleteMigration implements nova.Client (2.22): a running
// migration copies what is left at its pair's bandwidth with the guest
// no longer dirtying memory, then completes.
func (c *Cloud) ForceCompleteMigration(ctx context.Context, serverID, migrationID string) error {
	return c.forceComplete(ctx, c.def, serverID, migrationID)
}

func (c *Cloud) forceComplete(ctx context.Context, v *View, serverID, migrationID string) error {
	return c.migrationAction(ctx, v, "force_complete migration "+migrationID+" of "+serverID, tForceComplete,
		func() error { return c.doForceComplete(serverID, migrationID) })
}

// migrationAction charges one force_complete or abort request around do.
func (c *Cloud) migrationAction(ctx context.Context, v *View, op string, t nova.Template, do func() error) error {
	b, err := c.begin(ctx, v, callAction, op, t)
	if err != nil {
		return err
	}
	err = do()
	b.answer(classOf(err))
	return b.end(err)
}

func (c *Cloud) doForceComplete(serverID, migrationID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	m, err := c.current("force_complete", serverID, migrationID, nova.ErrBadRequest)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	if st := m.view(now).Status; st != nova.MigrationRunning || m.forced {
		return fmt.Errorf("force_complete migration %s of %s: migration is %s, not running: %w", migrationID, serverID, st, nova.ErrBadRequest)
	}
	done, left, _ := m.memory(now)
	m.forced, m.forcedAt, m.forcedRemain, m.forcedDone = true, now, left, done
	end := now.Add(max(time.Duration(left/m.bw*float64(time.Second)), time.Millisecond))
	if m.fail != "" || (!m.stuck && m.end.Before(end)) {
		end = m.end // it fails or ends on its own first
	}
	m.stuck = false
	c.obs.stats.Forced++
	c.setEnd(m, end)
	return nil
}

// AbortMigration implements nova.Client (2.24; 2.65: queued and
// preparing too): the migration ends cancelled shortly, the server
// ACTIVE on its source and the destination's allocation freed.
func (c *Cloud) AbortMigration(ctx context.Context, serverID, migrationID string) error {
	return c.abort(ctx, c.def, serverID, migrationID)
}

func (c *Cloud) abort(ctx context.Context, v *View, serverID, migrationID string) error {
	return c.migrationAction(ctx, v, "abort migration "+migrationID+" of "+serverID, tAbort,
		func() error { return c.doAbort(serverID, migrationID) })
}

func (c *Cloud) doAbort(serverID, migrationID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	m, err := c.current("abort", serverID, migrationID, nova.ErrNotFound)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	switch st := m.view(now).Status; {
	case m.cancel:
		return fmt.Errorf("abort migration %s of %s: already aborting: %w", migrationID, serverID, nova.ErrBadRequest)
	case st == nova.MigrationRunning, st == nova.MigrationQueued, st == nova.MigrationPreparing:
	default:
		return fmt.Errorf("abort migration %s of %s: migration is %s: %w", migrationID, serverID, st, nova.ErrBadRequest)
	}
	m.cancel, m.stuck = true, false
	// The copy stops and the destination is cleaned up: a moment.
	c.setEnd(m, now.Add(max(c.cfg.MigrationOverhead/4, time.Millisecond)))
	return nil
}

// MigrationsInProgress implements nova.Client.
func (v *View) MigrationsInProgress(ctx context.Context, serverID string) ([]nova.MigrationProgress, error) {
	return v.c.inProgress(ctx, v, serverID)
}

// ForceCompleteMigration implements nova.Client.
func (v *View) ForceCompleteMigration(ctx context.Context, serverID, migrationID string) error {
	return v.c.forceComplete(ctx, v, serverID, migrationID)
}

// AbortMigration implements nova.Client.
func (v *View) AbortMigration(ctx context.Context, serverID, migrationID string) error {
	return v.c.abort(ctx, v, serverID, migrationID)
}
