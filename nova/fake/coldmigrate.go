package fake

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// Cold migration, as Nova Zed does it with max_concurrent_builds: the
// server goes RESIZE while its guest is copied, then VERIFY_RESIZE on
// the destination (the migration "finished", the source still holding
// its allocation) until ConfirmResize (ACTIVE there, "confirmed") or
// RevertResize (ACTIVE on its source, "reverted"). It takes
// Config.MigrationOverhead plus the flavor's RAM at the pair's bandwidth
// (the fake models no disk); the scheduler's refusals and
// Config.FaultRate end it in error with the server ACTIVE on its source.

// Instance action names of cold migrations.
const (
	actionMigrate       = "migrate"
	actionConfirmResize = "confirmResize"
	actionRevertResize  = "revertResize"
	statusResize        = "RESIZE"
	taskResizeMigrating = "resize_migrating"
	migrationMigrating  = "migrating"
	migrationConfirming = "confirming"
	migrationTypeCold   = "migration"
)

var (
	_ nova.ColdMigrator = (*Cloud)(nil)
	_ nova.ActionLister = (*Cloud)(nil)
	_ nova.ColdMigrator = (*View)(nil)
	_ nova.ActionLister = (*View)(nil)
)

// tInstanceActions is GET /servers/{id}/os-instance-actions.
var tInstanceActions = get(nova.ServiceCompute, "/servers/{id}/os-instance-actions")

// SetNoLiveMigration makes every later live migration of a server fail
// at Nova's pre-check with why ("" lifts it): a server with PCI
// passthrough, or a local disk without block migration. Cold migration,
// shelving are unaffected. nova.ErrNotFound for an unknown server.
func (c *Cloud) SetNoLiveMigration(id, why string) error {
	return c.setServer(id, "no live migration", func(s *server) { s.noLive = why })
}

// setServer applies set to server id (nova.ErrNotFound, with what, for
// an unknown one).
func (c *Cloud) setServer(id, what string, set func(*server)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[id]
	if !ok {
		return fmt.Errorf("%s of server %s: %w", what, id, nova.ErrNotFound)
	}
	set(s)
	return nil
}

// SetMigrationFailure makes every later migration of a server, live or
// cold, that passes scheduling fail while running (the server stays
// ACTIVE on its source); "" lifts it. nova.ErrNotFound for an unknown
// server.
func (c *Cloud) SetMigrationFailure(id, why string) error {
	return c.setServer(id, "migration failure", func(s *server) { s.failMig = why })
}

// Migrate implements nova.ColdMigrator (one POST /servers/{id}/action).
// nova.ErrConflict unless the server is ACTIVE without task;
// nova.ErrBadRequest for an unknown destination or the source itself.
func (c *Cloud) Migrate(ctx context.Context, serverID, dest string) (nova.Receipt, error) {
	return c.migrate(ctx, c.def, serverID, dest)
}

// Migrate implements nova.ColdMigrator.
func (v *View) Migrate(ctx context.Context, serverID, dest string) (nova.Receipt, error) {
	return v.c.migrate(ctx, v, serverID, dest)
}

func (c *Cloud) migrate(ctx context.Context, v *View, serverID, dest string) (nova.Receipt, error) {
	return c.action(ctx, v, "migrate "+serverID, func() (nova.Receipt, error) { return c.doMigrate(ctx, serverID, dest) })
}

func (c *Cloud) doMigrate(ctx context.Context, serverID, dest string) (nova.Receipt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, err := c.actionable(serverID, "cold-migrate", nova.StatusActive)
	if err != nil {
		return nova.Receipt{}, err
	}
	src := c.hosts[s.Host]
	dst, err := c.destination("cold-migrate", serverID, src, dest)
	if err != nil {
		return nova.Receipt{}, err
	}
	now := c.clock.Now()
	rc := c.receipt(ctx, s.ID, actionMigrate)
	c.seq++
	m := &migration{
		Migration: nova.Migration{ID: fmt.Sprint(c.seq), ServerID: s.ID, Source: src.Name, Type: migrationTypeCold,
			Status: "pre-migrating", CreatedAt: now, UpdatedAt: now},
		start: now, srv: s, seq: c.seq, action: len(c.actions[s.ID]) - 1, cold: true,
	}
	dst, why := c.schedule(s, src, dst)
	if dst != nil {
		m.Dest = dst.Name
		m.bw = c.bandwidth(src.Name, dst.Name)
	} else {
		m.bw = c.cfg.BandwidthMBps
	}
	m.dur = m.nominal(c.cfg.MigrationOverhead, float64(s.RAMMB))
	m.end = now.Add(m.dur)
	if why != "" {
		m.fail = "No valid host was found: " + why
		m.end = now.Add(max(c.cfg.MigrationOverhead/2, time.Millisecond))
		c.obs.stats.Refused++
	} else {
		m.claimed = true
		if dest != "" {
			c.checkPlan(s, src, dst, rc.GlobalRequestID)
		}
		dst.incoming[s.ID] = m
		c.claim(dst, s)
		if s.failMig != "" || c.migrationFault() {
			m.fail = "injected fault: cold migration failed"
			m.end = now.Add(time.Duration((0.2 + 0.7*c.faultRand.Float64()) * float64(m.dur)))
		}
	}
	s.mig = m
	s.Status, s.TaskState = statusResize, taskResizeMigrating
	c.migs[s.ID] = append(c.migs[s.ID], m)
	heap.Push(&c.inflight, m)
	c.obs.stats.Started++
	c.checkHosts(dst)
	return rc, nil
}

// coldStatus is a cold migration's status at now while it runs.
func coldStatus(m *migration, now time.Time) string {
	if m.Status == nova.MigrationFinished || m.Status == migrationConfirming || now.Before(m.start.Add(m.dur/10)) {
		return m.Status
	}
	return migrationMigrating
}

// finishCold ends a cold migration's copy: the server waits in
// VERIFY_RESIZE on the destination, listed there, the source's
// allocation still held; or its confirmation: ACTIVE there, the source's
// allocation freed (c.mu held).
func (c *Cloud) finishCold(m *migration) {
	s := m.srv
	src, dst := c.hosts[m.Source], c.hosts[m.Dest]
	if m.Status == migrationConfirming {
		delete(src.resized, s.ID)
		c.release(src, s)
		m.Status = nova.MigrationConfirmed
		c.obs.stats.Completed++
		c.checkHosts(src, dst)
		return
	}
	m.Status = nova.MigrationFinished
	if src.resized == nil {
		src.resized = map[string]*server{}
	}
	src.resized[s.ID] = s
	c.unplace(src, s)
	c.place(dst, s)
	s.Host, s.Zone = dst.Name, dst.Zone
	s.Status, s.TaskState = nova.StatusVerifyResize, ""
	c.checkHosts(src, dst)
}

// resized is the server's finished cold migration, for a confirm or a
// revert (c.mu held).
func (c *Cloud) resized(serverID, op string) (*server, *migration, error) {
	s, err := c.actionable(serverID, op, nova.StatusVerifyResize)
	if err != nil {
		return nil, nil, err
	}
	ms := c.migs[serverID]
	if len(ms) == 0 || ms[len(ms)-1].Status != nova.MigrationFinished {
		return nil, nil, fmt.Errorf("%s %s: no finished migration: %w", op, serverID, nova.ErrConflict)
	}
	return s, ms[len(ms)-1], nil
}

// ConfirmResize implements nova.ColdMigrator: a server in VERIFY_RESIZE
// becomes ACTIVE on its destination and the source's allocation is freed
// a moment later (the migration "confirming" meanwhile, the server still
// VERIFY_RESIZE), as Nova's compute does it; nova.ErrConflict in any
// other state.
func (c *Cloud) ConfirmResize(ctx context.Context, serverID string) (nova.Receipt, error) {
	return c.confirmResize(ctx, c.def, serverID)
}

// ConfirmResize implements nova.ColdMigrator.
func (v *View) ConfirmResize(ctx context.Context, serverID string) (nova.Receipt, error) {
	return v.c.confirmResize(ctx, v, serverID)
}

func (c *Cloud) confirmResize(ctx context.Context, v *View, serverID string) (nova.Receipt, error) {
	return c.action(ctx, v, "confirm resize "+serverID, func() (nova.Receipt, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.advance()
		_, m, err := c.resized(serverID, actionConfirmResize)
		if err != nil {
			return nova.Receipt{}, err
		}
		rc := c.receipt(ctx, serverID, actionConfirmResize)
		// The compute confirms it a moment later (Nova casts it).
		now := c.clock.Now()
		m.Status, m.UpdatedAt = migrationConfirming, now
		m.end = now.Add(max(c.cfg.MigrationOverhead/10, time.Millisecond))
		heap.Push(&c.inflight, m)
		return rc, nil
	})
}

// RevertResize implements nova.ColdMigrator: a server in VERIFY_RESIZE
// goes back ACTIVE on its source at once; nova.ErrConflict otherwise.
func (c *Cloud) RevertResize(ctx context.Context, serverID string) (nova.Receipt, error) {
	return c.revertResize(ctx, c.def, serverID)
}

// RevertResize implements nova.ColdMigrator.
func (v *View) RevertResize(ctx context.Context, serverID string) (nova.Receipt, error) {
	return v.c.revertResize(ctx, v, serverID)
}

func (c *Cloud) revertResize(ctx context.Context, v *View, serverID string) (nova.Receipt, error) {
	return c.action(ctx, v, "revert resize "+serverID, func() (nova.Receipt, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.advance()
		s, m, err := c.resized(serverID, actionRevertResize)
		if err != nil {
			return nova.Receipt{}, err
		}
		rc := c.receipt(ctx, serverID, actionRevertResize)
		src, dst := c.hosts[m.Source], c.hosts[m.Dest]
		delete(src.resized, s.ID)
		c.unplace(dst, s)
		c.release(dst, s)
		c.place(src, s)
		s.Host, s.Zone, s.Status = src.Name, src.Zone, nova.StatusActive
		m.Status, m.UpdatedAt = nova.MigrationReverted, c.clock.Now()
		c.checkHosts(src, dst)
		return rc, nil
	})
}

// ServerActions implements nova.ActionLister: the server's instance
// actions, newest first (one GET; nova.ErrNotFound for a server never
// known).
func (c *Cloud) ServerActions(ctx context.Context, serverID string) ([]nova.ServerAction, error) {
	return c.serverActions(ctx, c.def, serverID)
}

// ServerActions implements nova.ActionLister.
func (v *View) ServerActions(ctx context.Context, serverID string) ([]nova.ServerAction, error) {
	return v.c.serverActions(ctx, v, serverID)
}

func (c *Cloud) serverActions(ctx context.Context, v *View, serverID string) ([]nova.ServerAction, error) {
	b, err := c.begin(ctx, v, callRead, "instance actions of "+serverID, tInstanceActions)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.advance()
	as, ok := c.actions[serverID]
	_, exists := c.servers[serverID]
	out := make([]nova.ServerAction, 0, len(as))
	for _, a := range slices.Backward(as) {
		out = append(out, nova.ServerAction{Action: a.Name, RequestID: a.LocalRequestID, Message: a.Message, Start: a.Start})
	}
	c.mu.Unlock()
	if !ok && !exists {
		return nil, b.end(fmt.Errorf("instance actions of %s: %w", serverID, nova.ErrNotFound))
	}
	return out, b.end(nil)
}
