package fake

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dvms-project/dvms/nova"
)

func (c *Cloud) hostView(h *host) nova.Host {
	v := h.Host
	v.VCPUsUsed, v.RAMMBUsed = h.usedV, h.usedR
	return v
}

func (c *Cloud) serverView(s *server) nova.Server {
	v := s.Server
	if s.Metadata != nil {
		v.Metadata = make(map[string]string, len(s.Metadata))
		for k, x := range s.Metadata {
			v.Metadata[k] = x
		}
	}
	return v
}

// Hosts implements nova.Client.
func (c *Cloud) Hosts(ctx context.Context) ([]nova.Host, error) {
	if err := c.fault(ctx, "list hosts"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	out := make([]nova.Host, 0, len(c.hosts))
	for _, h := range c.hosts {
		out = append(out, c.hostView(h))
	}
	slices.SortFunc(out, func(a, b nova.Host) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Host implements nova.Client.
func (c *Cloud) Host(ctx context.Context, name string) (nova.Host, error) {
	if err := c.fault(ctx, "get host "+name); err != nil {
		return nova.Host{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	h, ok := c.hosts[name]
	if !ok {
		return nova.Host{}, fmt.Errorf("host %s: %w", name, nova.ErrNotFound)
	}
	return c.hostView(h), nil
}

// Servers implements nova.Client: the servers whose host is name
// (a migrating server stays on its source until the move completes).
func (c *Cloud) Servers(ctx context.Context, name string) ([]nova.Server, error) {
	if err := c.fault(ctx, "list servers on "+name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	h, ok := c.hosts[name]
	if !ok {
		return nil, fmt.Errorf("servers on %s: %w", name, nova.ErrNotFound)
	}
	out := make([]nova.Server, 0, len(h.servers))
	for _, s := range h.servers {
		out = append(out, c.serverView(s))
	}
	slices.SortFunc(out, func(a, b nova.Server) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Server implements nova.Client.
func (c *Cloud) Server(ctx context.Context, id string) (nova.Server, error) {
	if err := c.fault(ctx, "get server "+id); err != nil {
		return nova.Server{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[id]
	if !ok {
		return nova.Server{}, fmt.Errorf("server %s: %w", id, nova.ErrNotFound)
	}
	return c.serverView(s), nil
}

// Demand implements nova.DemandSource.
func (c *Cloud) Demand(ctx context.Context, name string) (map[string]nova.Demand, error) {
	if err := c.fault(ctx, "demand of "+name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	h, ok := c.hosts[name]
	if !ok {
		return nil, fmt.Errorf("demand of %s: %w", name, nova.ErrNotFound)
	}
	h.readSeq = h.demandSeq
	out := make(map[string]nova.Demand, len(h.servers))
	for id, s := range h.servers {
		out[id] = s.demand
	}
	return out, nil
}

// LiveMigrate implements nova.Client. The request is validated as
// nova-api does (404, 409, 400); scheduling problems (destination
// disabled, down, full, server group policy) end the migration in error
// as NoValidHost does, leaving the server ACTIVE on its source.
func (c *Cloud) LiveMigrate(ctx context.Context, id, dest string) (nova.Receipt, error) {
	if err := c.fault(ctx, "live-migrate "+id); err != nil {
		return nova.Receipt{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[id]
	if !ok {
		return nova.Receipt{}, fmt.Errorf("live-migrate %s: %w", id, nova.ErrNotFound)
	}
	if s.TaskState != "" || s.Status != nova.StatusActive {
		return nova.Receipt{}, fmt.Errorf("live-migrate %s: server is %s (task %q): %w", id, s.Status, s.TaskState, nova.ErrConflict)
	}
	if dest == "" {
		return nova.Receipt{}, fmt.Errorf("live-migrate %s: the fake needs a named destination: %w", id, nova.ErrBadRequest)
	}
	dst, ok := c.hosts[dest]
	if !ok || dest == s.Host {
		return nova.Receipt{}, fmt.Errorf("live-migrate %s to %q: unknown host or the source: %w", id, dest, nova.ErrBadRequest)
	}
	src := c.hosts[s.Host]
	now := c.clock.Now()
	rc := c.receipt(ctx, id, "live-migration")
	c.seq++
	m := &migration{Migration: nova.Migration{
		ID: fmt.Sprint(c.seq), ServerID: id, Source: src.Name, Dest: dest, Type: "live-migration",
		Status: nova.MigrationAccepted, CreatedAt: now, UpdatedAt: now,
	}, start: now, srv: s}
	dur := c.cfg.MigrationOverhead + time.Duration(float64(s.RAMMB)/c.cfg.BandwidthMBps*float64(time.Second))
	m.end = now.Add(dur)
	switch {
	case dst.Service.Disabled():
		m.fail = "No valid host: destination compute service is disabled"
	case dst.Service.State == nova.ServiceDown:
		m.fail = "No valid host: destination compute service is down"
	case !fits(dst, s.VCPUs, s.RAMMB):
		m.fail = "No valid host: placement has no room on the destination"
	case c.groupRefuses(s, dst):
		m.fail = "No valid host: server group policy " + s.Group.Policy
	case c.cfg.FaultRate > 0 && c.rng.Float64() < c.cfg.FaultRate:
		m.fail = "injected: migration error"
		c.faults++
	}
	if m.fail != "" {
		m.end = now.Add(c.cfg.MigrationOverhead / 2)
	} else {
		// Observer: the plan must not overload the destination, counting
		// every server already moving in.
		cpu, ram := demandOf(dst)
		for _, o := range c.inflight {
			if o.Dest == dest && o.fail == "" {
				cpu += o.srv.demand.CPU
				ram += o.srv.demand.RAMMB
			}
		}
		cpu += s.demand.CPU
		ram += s.demand.RAMMB
		over := cpu > float64(dst.VCPUs)*c.cfg.OverloadCPU+1e-9 || ram > float64(dst.RAMMB)*c.cfg.OverloadRAM+1e-9
		if over && (dst.demandSeq != dst.readSeq || src.demandSeq != src.readSeq) {
			c.drift = append(c.drift, Violation{At: now, Message: fmt.Sprintf("destination %s overloaded by %s after demand changed since it was read: cpu %.2f/%d", dest, id, cpu, dst.VCPUs)})
		} else if over {
			c.violate("plan overloads destination %s with %s: cpu %.2f/%d ram %.0f/%d (request %s)", dest, id, cpu, dst.VCPUs, ram, dst.RAMMB, rc.GlobalRequestID)
		}
		if g := rc.GlobalRequestID; g != "" {
			k := [2]string{g, id}
			if c.moved[k] {
				c.violate("server %s migrated twice in one plan (request %s)", id, g)
			}
			c.moved[k] = true
		}
		dst.usedV += s.VCPUs
		dst.usedR += s.RAMMB
	}
	s.mig = m
	s.TaskState = "migrating"
	s.Status = nova.StatusMigrating
	c.migs[id] = append(c.migs[id], m)
	heap.Push(&c.inflight, m)
	c.stats.Started++
	c.check()
	return rc, nil
}

func (c *Cloud) groupRefuses(s *server, dst *host) bool {
	if s.Group == nil {
		return false
	}
	others := 0
	for _, o := range dst.servers {
		if o.ID != s.ID && o.Group != nil && o.Group.ID == s.Group.ID {
			others++
		}
	}
	switch s.Group.Policy {
	case nova.PolicyAntiAffinity:
		return others > 0
	case nova.PolicyAffinity:
		for _, o := range c.servers {
			if o.ID != s.ID && o.Group != nil && o.Group.ID == s.Group.ID && o.Host != dst.Name {
				return true
			}
		}
	}
	return false
}

// Migrations implements nova.Client (newest first).
func (c *Cloud) Migrations(ctx context.Context, id string) ([]nova.Migration, error) {
	if err := c.fault(ctx, "migrations of "+id); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	if _, ok := c.servers[id]; !ok {
		return nil, fmt.Errorf("migrations of %s: %w", id, nova.ErrNotFound)
	}
	now := c.clock.Now()
	ms := c.migs[id]
	out := make([]nova.Migration, 0, len(ms))
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i].Migration
		m.Status = ms[i].status(now)
		out = append(out, m)
	}
	return out, nil
}

// Shelve implements nova.Client: the server goes SHELVED and keeps its
// host until ShelveOffload.
func (c *Cloud) Shelve(ctx context.Context, id string) (nova.Receipt, error) {
	return c.transition(ctx, id, "shelve", nova.StatusActive, func(s *server) {
		s.Status = nova.StatusShelved
	})
}

// ShelveOffload implements nova.Client: frees the host.
func (c *Cloud) ShelveOffload(ctx context.Context, id string) (nova.Receipt, error) {
	return c.transition(ctx, id, "shelveOffload", nova.StatusShelved, func(s *server) {
		h := c.hosts[s.Host]
		delete(h.servers, s.ID)
		h.usedV -= s.VCPUs
		h.usedR -= s.RAMMB
		s.Host = ""
		s.Status = nova.StatusShelvedOffloaded
	})
}

// Unshelve implements nova.Client: on host, or the enabled host with the
// most room that fits when host is "".
func (c *Cloud) Unshelve(ctx context.Context, id, name string) (nova.Receipt, error) {
	if err := c.fault(ctx, "unshelve "+id); err != nil {
		return nova.Receipt{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[id]
	if !ok {
		return nova.Receipt{}, fmt.Errorf("unshelve %s: %w", id, nova.ErrNotFound)
	}
	if s.Status != nova.StatusShelvedOffloaded {
		return nova.Receipt{}, fmt.Errorf("unshelve %s: server is %s: %w", id, s.Status, nova.ErrConflict)
	}
	var dst *host
	if name != "" {
		h, ok := c.hosts[name]
		if !ok {
			return nova.Receipt{}, fmt.Errorf("unshelve %s to %q: %w", id, name, nova.ErrBadRequest)
		}
		dst = h
	} else {
		best := -1.0
		for _, h := range c.hosts {
			if h.Service.Disabled() || h.Service.State == nova.ServiceDown || !fits(h, s.VCPUs, s.RAMMB) {
				continue
			}
			if room := h.AllocatableVCPUs() - float64(h.usedV); room > best {
				best, dst = room, h
			}
		}
	}
	rc := c.receipt(ctx, id, "unshelve")
	if dst == nil || !fits(dst, s.VCPUs, s.RAMMB) || dst.Service.Disabled() {
		c.note(id, "No valid host for unshelve")
		return rc, nil // accepted, then nothing happens: the server stays offloaded
	}
	dst.servers[id] = s
	dst.usedV += s.VCPUs
	dst.usedR += s.RAMMB
	s.Host = dst.Name
	s.Status = nova.StatusActive
	c.check()
	return rc, nil
}

func (c *Cloud) transition(ctx context.Context, id, op, from string, apply func(*server)) (nova.Receipt, error) {
	if err := c.fault(ctx, op+" "+id); err != nil {
		return nova.Receipt{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[id]
	if !ok {
		return nova.Receipt{}, fmt.Errorf("%s %s: %w", op, id, nova.ErrNotFound)
	}
	if s.Status != from || s.TaskState != "" {
		return nova.Receipt{}, fmt.Errorf("%s %s: server is %s (task %q): %w", op, id, s.Status, s.TaskState, nova.ErrConflict)
	}
	rc := c.receipt(ctx, id, op)
	apply(s)
	c.check()
	return rc, nil
}

// SetServiceStatus implements nova.Client.
func (c *Cloud) SetServiceStatus(ctx context.Context, name string, disabled bool, reason string) error {
	if err := c.fault(ctx, "set service "+name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hosts[name]
	if !ok {
		return fmt.Errorf("service of %s: %w", name, nova.ErrNotFound)
	}
	if disabled {
		h.Service.Status, h.Service.DisabledReason = nova.ServiceDisabled, reason
	} else {
		h.Service.Status, h.Service.DisabledReason = nova.ServiceEnabled, ""
	}
	h.Service.UpdatedAt = c.clock.Now()
	return nil
}
