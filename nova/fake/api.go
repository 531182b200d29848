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

// Nova's instance action names.
const (
	actionLiveMigration = "live-migration"
	actionShelve        = "shelve"
	actionShelveOffload = "shelveOffload"
	actionUnshelve      = "unshelve"
)

// taskMigrating is the task state of a server while it moves.
const taskMigrating = "migrating"

var (
	_ nova.Client       = (*Cloud)(nil)
	_ nova.DemandSource = (*Cloud)(nil)
)

// Hosts implements nova.Client: every host by name, with placement usage
// (moves in flight counted on both ends) and service state.
func (c *Cloud) Hosts(ctx context.Context) ([]nova.Host, error) {
	if err := c.gate(ctx, callRead, "list hosts"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	out := make([]nova.Host, 0, len(c.hostOrder))
	for _, h := range c.hostOrder {
		out = append(out, h.view())
	}
	return out, nil
}

// Services implements nova.Client: the nova-compute service of every host.
func (c *Cloud) Services(ctx context.Context) ([]nova.Service, error) {
	if err := c.gate(ctx, callRead, "list services"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	out := make([]nova.Service, 0, len(c.hostOrder))
	for _, h := range c.hostOrder {
		out = append(out, h.view().Service)
	}
	return out, nil
}

// Host implements nova.Client (nova.ErrNotFound for an unknown host).
func (c *Cloud) Host(ctx context.Context, name string) (nova.Host, error) {
	if err := c.gate(ctx, callRead, "get host "+name); err != nil {
		return nova.Host{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	h, ok := c.hosts[name]
	if !ok {
		return nova.Host{}, fmt.Errorf("host %s: %w", name, nova.ErrNotFound)
	}
	return h.view(), nil
}

// Servers implements nova.Client: the servers whose host is name, by ID.
// A migrating server is listed on its source until the move completes;
// an offloaded one on no host. nova.ErrNotFound for an unknown host.
func (c *Cloud) Servers(ctx context.Context, name string) ([]nova.Server, error) {
	if err := c.gate(ctx, callRead, "list servers on "+name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	h, ok := c.hosts[name]
	if !ok {
		return nil, fmt.Errorf("servers on %s: %w", name, nova.ErrNotFound)
	}
	return h.serverViews(), nil
}

// Server implements nova.Client (nova.ErrNotFound for an unknown server).
func (c *Cloud) Server(ctx context.Context, id string) (nova.Server, error) {
	if err := c.gate(ctx, callRead, "get server "+id); err != nil {
		return nova.Server{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[id]
	if !ok {
		return nova.Server{}, fmt.Errorf("server %s: %w", id, nova.ErrNotFound)
	}
	return s.view(), nil
}

// Demand implements nova.DemandSource: the demand set with SetDemand of
// every server on host. Reading it also tells the observer that the
// caller saw the host's current demand (see Drift).
func (c *Cloud) Demand(ctx context.Context, name string) (map[string]nova.Demand, error) {
	if err := c.gate(ctx, callRead, "demand of "+name); err != nil {
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

// LiveMigrate implements nova.Client as Nova Zed's async live migration
// (microversion >= 2.34) does. nova-api refuses synchronously: an
// unknown server (nova.ErrNotFound), a server with a task state or not
// ACTIVE (nova.ErrConflict), a destination that does not exist or is the
// source (nova.ErrBadRequest). Otherwise the answer is 202 and a
// migration record; the server goes MIGRATING with task state
// "migrating". If scheduling fails (destination disabled or down, no
// room in placement, server group policy, or no host at all for dest
// ""), the migration ends in error shortly after, as NoValidHost does,
// and the server stays ACTIVE on its source. Otherwise placement holds
// the server's allocation on both hosts while the migration goes
// accepted -> queued -> preparing -> running -> post-migrating ->
// completed over Config.MigrationOverhead + RAM / Config.BandwidthMBps;
// then the server is ACTIVE on the destination and the source's
// allocation is freed. With Config.FaultRate a migration may instead end
// in error while running, the server staying on its source.
func (c *Cloud) LiveMigrate(ctx context.Context, serverID, dest string) (nova.Receipt, error) {
	if err := c.gate(ctx, callAction, "live-migrate "+serverID); err != nil {
		return nova.Receipt{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[serverID]
	if !ok {
		return nova.Receipt{}, fmt.Errorf("live-migrate %s: %w", serverID, nova.ErrNotFound)
	}
	if s.TaskState != "" || s.Status != nova.StatusActive {
		return nova.Receipt{}, fmt.Errorf("live-migrate %s: server is %s with task state %q: %w", serverID, s.Status, s.TaskState, nova.ErrConflict)
	}
	src := c.hosts[s.Host]
	var dst *host
	if dest != "" {
		if dst, ok = c.hosts[dest]; !ok {
			return nova.Receipt{}, fmt.Errorf("live-migrate %s: compute host %s not found: %w", serverID, dest, nova.ErrBadRequest)
		}
		if dst == src {
			return nova.Receipt{}, fmt.Errorf("live-migrate %s: destination %s is the source: %w", serverID, dest, nova.ErrBadRequest)
		}
	}
	now := c.clock.Now()
	rc := c.receipt(ctx, s.ID, actionLiveMigration)
	c.seq++
	dur := c.cfg.MigrationOverhead + time.Duration(float64(s.RAMMB)/c.cfg.BandwidthMBps*float64(time.Second))
	if dur <= 0 {
		dur = time.Millisecond
	}
	m := &migration{
		Migration: nova.Migration{ID: fmt.Sprint(c.seq), ServerID: s.ID, Source: src.Name, Type: "live-migration",
			Status: nova.MigrationAccepted, CreatedAt: now, UpdatedAt: now},
		start: now, dur: dur, srv: s, seq: c.seq, action: len(c.actions[s.ID]) - 1,
	}
	var why string
	switch {
	case src.Service.State == nova.ServiceDown:
		why = "source compute service " + src.Name + " is down"
	case dst == nil:
		if dst = c.pick(s, src.Name); dst == nil {
			why = "no usable host fits the server"
		}
	case dst.Service.Disabled():
		why = "destination compute service " + dst.Name + " is disabled"
	case dst.Service.State == nova.ServiceDown:
		why = "destination compute service " + dst.Name + " is down"
	case !fits(dst, s.VCPUs, s.RAMMB):
		why = fmt.Sprintf("placement has no room on %s for %d VCPU / %d MB", dst.Name, s.VCPUs, s.RAMMB)
	default:
		why = c.groupRefuses(s, dst)
	}
	if dst != nil {
		m.Dest = dst.Name
	}
	if why != "" {
		// The conductor's scheduling fails fast: the migration ends in
		// error and nothing moves.
		m.fail = "No valid host was found: " + why
		m.end = now.Add(max(c.cfg.MigrationOverhead/2, time.Millisecond))
		c.obs.stats.Refused++
	} else {
		m.claimed = true
		m.end = now.Add(dur)
		if dest != "" {
			c.checkPlan(s, src, dst, rc.GlobalRequestID)
		}
		dst.incoming[s.ID] = m
		c.claim(dst, s)
		if c.migrationFault() {
			// Fails while running, somewhere in the running phase.
			m.fail = "injected fault: live migration failed"
			f := 0.2 + 0.7*c.faultRand.Float64()
			m.end = now.Add(time.Duration(f * float64(dur)))
		}
	}
	s.mig = m
	s.TaskState = taskMigrating
	s.Status = nova.StatusMigrating
	c.migs[s.ID] = append(c.migs[s.ID], m)
	heap.Push(&c.inflight, m)
	c.obs.stats.Started++
	c.checkHosts(dst)
	return rc, nil
}

// Migrations implements nova.Client: the server's migrations, newest
// first, with their status at the clock's Now (nova.ErrNotFound for an
// unknown server).
func (c *Cloud) Migrations(ctx context.Context, serverID string) ([]nova.Migration, error) {
	if err := c.gate(ctx, callRead, "migrations of "+serverID); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	if _, ok := c.servers[serverID]; !ok {
		return nil, fmt.Errorf("migrations of %s: %w", serverID, nova.ErrNotFound)
	}
	now := c.clock.Now()
	ms := c.migs[serverID]
	out := make([]nova.Migration, 0, len(ms))
	for i := len(ms) - 1; i >= 0; i-- {
		out = append(out, ms[i].view(now))
	}
	return out, nil
}

// Shelve implements nova.Client: an ACTIVE server without task state
// goes SHELVED at once and keeps its host and allocation until
// ShelveOffload (as with shelved_offload_time = -1). nova.ErrConflict
// in any other state.
func (c *Cloud) Shelve(ctx context.Context, serverID string) (nova.Receipt, error) {
	if err := c.gate(ctx, callAction, "shelve "+serverID); err != nil {
		return nova.Receipt{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, err := c.actionable(serverID, actionShelve, nova.StatusActive)
	if err != nil {
		return nova.Receipt{}, err
	}
	rc := c.receipt(ctx, serverID, actionShelve)
	s.Status = nova.StatusShelved
	return rc, nil
}

// ShelveOffload implements nova.Client: a SHELVED server goes
// SHELVED_OFFLOADED with no host, and its allocation is freed.
// nova.ErrConflict in any other state.
func (c *Cloud) ShelveOffload(ctx context.Context, serverID string) (nova.Receipt, error) {
	if err := c.gate(ctx, callAction, "shelve-offload "+serverID); err != nil {
		return nova.Receipt{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, err := c.actionable(serverID, actionShelveOffload, nova.StatusShelved)
	if err != nil {
		return nova.Receipt{}, err
	}
	rc := c.receipt(ctx, serverID, actionShelveOffload)
	h := c.hosts[s.Host]
	c.unplace(h, s)
	c.release(h, s)
	h.demandSeq++
	c.obs.offloaded++
	s.Host = ""
	s.Status = nova.StatusShelvedOffloaded
	c.checkHosts(h)
	return rc, nil
}

// Unshelve implements nova.Client. A SHELVED server goes back ACTIVE on
// its host (naming a host is then a conflict, as with microversion
// 2.91). A SHELVED_OFFLOADED server is placed on host, or when host is
// "" on the usable host with the lowest placement load that fits, and
// claims its allocation there. An unknown host is nova.ErrBadRequest. As
// in Nova, a host that is disabled, down or full (NoValidHost) does not
// fail the call: it is accepted, the server stays SHELVED_OFFLOADED and
// the instance action's Message says why.
func (c *Cloud) Unshelve(ctx context.Context, serverID, name string) (nova.Receipt, error) {
	if err := c.gate(ctx, callAction, "unshelve "+serverID); err != nil {
		return nova.Receipt{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[serverID]
	if !ok {
		return nova.Receipt{}, fmt.Errorf("unshelve %s: %w", serverID, nova.ErrNotFound)
	}
	if s.TaskState != "" || (s.Status != nova.StatusShelvedOffloaded && s.Status != nova.StatusShelved) ||
		(s.Status == nova.StatusShelved && name != "") {
		return nova.Receipt{}, fmt.Errorf("unshelve %s: server is %s with task state %q: %w", serverID, s.Status, s.TaskState, nova.ErrConflict)
	}
	var dst *host
	if name != "" {
		if dst, ok = c.hosts[name]; !ok {
			return nova.Receipt{}, fmt.Errorf("unshelve %s: compute host %s not found: %w", serverID, name, nova.ErrBadRequest)
		}
	}
	rc := c.receipt(ctx, serverID, actionUnshelve)
	if s.Status == nova.StatusShelved {
		s.Status = nova.StatusActive
		return rc, nil
	}
	var why string
	switch {
	case dst == nil:
		if dst = c.pick(s, ""); dst == nil {
			why = "no usable host fits the server"
		}
	case !usable(dst):
		why = "compute service " + dst.Name + " is disabled or down"
	case !fits(dst, s.VCPUs, s.RAMMB):
		why = fmt.Sprintf("placement has no room on %s for %d VCPU / %d MB", dst.Name, s.VCPUs, s.RAMMB)
	default:
		why = c.groupRefuses(s, dst)
	}
	if why != "" {
		c.note(serverID, len(c.actions[serverID])-1, "No valid host was found: "+why)
		return rc, nil
	}
	c.obs.offloaded--
	c.place(dst, s)
	c.claim(dst, s)
	dst.demandSeq++
	s.Host = dst.Name
	s.Zone = dst.Zone
	s.Status = nova.StatusActive
	c.checkHosts(dst)
	return rc, nil
}

// actionable returns the server if it exists, has no task state and is
// in status from.
func (c *Cloud) actionable(id, op, from string) (*server, error) {
	s, ok := c.servers[id]
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", op, id, nova.ErrNotFound)
	}
	if s.Status != from || s.TaskState != "" {
		return nil, fmt.Errorf("%s %s: server is %s with task state %q: %w", op, id, s.Status, s.TaskState, nova.ErrConflict)
	}
	return s, nil
}

// SetServiceStatus implements nova.Client: disables the host's
// nova-compute service with reason, or enables it (clearing the
// reason). nova.ErrNotFound for an unknown host.
func (c *Cloud) SetServiceStatus(ctx context.Context, name string, disabled bool, reason string) error {
	if err := c.gate(ctx, callAction, "set service of "+name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
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

// receipt answers an accepted action: the caller's global request id,
// a fresh local one, and an instance action recording both.
func (c *Cloud) receipt(ctx context.Context, serverID, action string) nova.Receipt {
	r := nova.Receipt{GlobalRequestID: nova.RequestID(ctx), LocalRequestID: "req-" + c.uuid()}
	c.actions[serverID] = append(c.actions[serverID], Action{Name: action,
		GlobalRequestID: r.GlobalRequestID, LocalRequestID: r.LocalRequestID, Start: c.clock.Now()})
	return r
}

// SetServerMetadata implements nova.Client: sets (value "" deletes) one
// metadata key. nova.ErrNotFound for an unknown server; nova.ErrConflict,
// as Nova's 409, unless the server is ACTIVE with no task (Nova Zed
// accepts ACTIVE, PAUSED, SUSPENDED and STOPPED, which this cloud does
// not model, and refuses SHELVED and SHELVED_OFFLOADED: mark before
// shelving, unmark after unshelving).
func (c *Cloud) SetServerMetadata(ctx context.Context, serverID, key, value string) error {
	if err := c.gate(ctx, callAction, "set metadata of "+serverID); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[serverID]
	if !ok {
		return fmt.Errorf("set metadata %s of %s: %w", key, serverID, nova.ErrNotFound)
	}
	if s.Status != nova.StatusActive || s.TaskState != "" {
		return fmt.Errorf("set metadata %s of %s: server is %s with task state %q: %w", key, serverID, s.Status, s.TaskState, nova.ErrConflict)
	}
	if value == "" {
		delete(s.Metadata, key)
		return nil
	}
	if s.Metadata == nil {
		s.Metadata = map[string]string{}
	}
	s.Metadata[key] = value
	return nil
}

// ShelvedServers implements nova.Client: every SHELVED_OFFLOADED server,
// by ID.
func (c *Cloud) ShelvedServers(ctx context.Context) ([]nova.Server, error) {
	if err := c.gate(ctx, callRead, "list shelved servers"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	var out []nova.Server
	for _, s := range c.servers {
		if s.Status == nova.StatusShelvedOffloaded {
			out = append(out, s.view())
		}
	}
	slices.SortFunc(out, func(a, b nova.Server) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
