package fake

import (
	"container/heap"
	"context"
	"errors"
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
func (c *Cloud) Hosts(ctx context.Context) ([]nova.Host, error) { return c.listHosts(ctx, c.def) }

func (c *Cloud) listHosts(ctx context.Context, v *View) ([]nova.Host, error) {
	b, err := c.begin(ctx, v, callRead, "list hosts", tServicesAll)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.advance()
	out := make([]nova.Host, 0, len(c.hostOrder))
	for _, h := range c.hostOrder {
		out = append(out, h.view())
	}
	b.add(nova.ClassOK, tProvidersAll)
	for _, h := range out {
		b.capacity(h.Name)
	}
	c.mu.Unlock()
	return out, b.end(nil)
}

// Services implements nova.Client: the nova-compute service of every host.
func (c *Cloud) Services(ctx context.Context) ([]nova.Service, error) {
	return c.listServices(ctx, c.def)
}

func (c *Cloud) listServices(ctx context.Context, v *View) ([]nova.Service, error) {
	b, err := c.begin(ctx, v, callRead, "list services", tServicesAll)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.advance()
	out := make([]nova.Service, 0, len(c.hostOrder))
	for _, h := range c.hostOrder {
		out = append(out, h.view().Service)
	}
	c.mu.Unlock()
	return out, b.end(nil)
}

// Host implements nova.Client (nova.ErrNotFound for an unknown host).
func (c *Cloud) Host(ctx context.Context, name string) (nova.Host, error) {
	return c.getHost(ctx, c.def, name)
}

func (c *Cloud) getHost(ctx context.Context, v *View, name string) (nova.Host, error) {
	b, err := c.begin(ctx, v, callRead, "get host "+name, tServicesHost)
	if err != nil {
		return nova.Host{}, err
	}
	c.mu.Lock()
	c.advance()
	h, ok := c.hosts[name]
	var out nova.Host
	if ok {
		out = h.view()
		if !v.rps[name] { // nova/openstack remembers each host's provider
			b.add(nova.ClassOK, tProvidersName)
			v.rps[name] = true
		}
		b.capacity(name)
	} else {
		err = fmt.Errorf("host %s: %w", name, nova.ErrNotFound) // an empty service list
	}
	c.mu.Unlock()
	return out, b.end(err)
}

// Servers implements nova.Client: the servers whose host is name, by ID.
// A migrating server is listed on its source until the move completes;
// an offloaded one on no host. nova.ErrNotFound for an unknown host.
func (c *Cloud) Servers(ctx context.Context, name string) ([]nova.Server, error) {
	return c.listServers(ctx, c.def, name)
}

func (c *Cloud) listServers(ctx context.Context, v *View, name string) ([]nova.Server, error) {
	b, err := c.begin(ctx, v, callRead, "list servers on "+name, tServersHost)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.advance()
	h, ok := c.hosts[name]
	var out []nova.Server
	if ok {
		out = h.serverViews()
		for range pages(len(out)) - 1 {
			b.add(nova.ClassOK, tServersNext)
		}
		if len(out) > 0 {
			var newest time.Time
			for _, sv := range h.servers {
				if sv.created.After(newest) {
					newest = sv.created
				}
			}
			b.groupIndex(newest)
		}
	} else {
		err = fmt.Errorf("servers on %s: %w", name, nova.ErrNotFound) // Nova lists none
	}
	c.mu.Unlock()
	return out, b.end(err)
}

// Server implements nova.Client (nova.ErrNotFound for an unknown server).
func (c *Cloud) Server(ctx context.Context, id string) (nova.Server, error) {
	return c.getServer(ctx, c.def, id)
}

func (c *Cloud) getServer(ctx context.Context, v *View, id string) (nova.Server, error) {
	b, err := c.begin(ctx, v, callRead, "get server "+id, tServer)
	if err != nil {
		return nova.Server{}, err
	}
	c.mu.Lock()
	c.advance()
	s := c.servers[id]
	var out nova.Server
	if s != nil {
		out = s.view()
		b.serverGroup(s)
	} else {
		b.answer(nova.ClassNotFound)
		err = fmt.Errorf("server %s: %w", id, nova.ErrNotFound)
	}
	c.mu.Unlock()
	return out, b.end(err)
}

// Demand implements nova.DemandSource: the demand set with SetDemand of
// every server on host. Reading it also tells the observer which demand
// of each server the caller saw, under its global request id (see Drift).
func (c *Cloud) Demand(ctx context.Context, name string) (map[string]nova.Demand, error) {
	if _, err := c.gate(ctx, callRead, "demand of "+name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	h, ok := c.hosts[name]
	if !ok {
		return nil, fmt.Errorf("demand of %s: %w", name, nova.ErrNotFound)
	}
	out := make(map[string]nova.Demand, len(h.servers))
	for id, s := range h.servers {
		out[id] = s.demand
	}
	c.obs.saw(nova.RequestID(ctx), c.clock.Now(), out)
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
// completed over Config.MigrationOverhead + RAM / Config.BandwidthMBps,
// one migration per source host at a time (Nova's default
// max_concurrent_live_migrations = 1: later ones stay queued);
// then the server is ACTIVE on the destination and the source's
// allocation is freed. With Config.FaultRate a migration may instead end
// in error while running, the server staying on its source.
func (c *Cloud) LiveMigrate(ctx context.Context, serverID, dest string) (nova.Receipt, error) {
	return c.liveMigrate(ctx, c.def, serverID, dest)
}

func (c *Cloud) liveMigrate(ctx context.Context, v *View, serverID, dest string) (nova.Receipt, error) {
	return c.action(ctx, v, "live-migrate "+serverID, func() (nova.Receipt, error) { return c.doLiveMigrate(ctx, serverID, dest) })
}

// doLiveMigrate is LiveMigrate once charged.
func (c *Cloud) doLiveMigrate(ctx context.Context, serverID, dest string) (nova.Receipt, error) {
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
	dst, err := c.destination("live-migrate", serverID, src, dest)
	if err != nil {
		return nova.Receipt{}, err
	}
	now := c.clock.Now()
	rc := c.receipt(ctx, s.ID, actionLiveMigration)
	c.seq++
	m := &migration{
		Migration: nova.Migration{ID: fmt.Sprint(c.seq), ServerID: s.ID, Source: src.Name, Type: "live-migration",
			Status: nova.MigrationAccepted, CreatedAt: now, UpdatedAt: now},
		start: now, srv: s, seq: c.seq, action: len(c.actions[s.ID]) - 1,
	}
	if dst != nil {
		m.bw = c.bandwidth(src.Name, dst.Name)
	} else {
		m.bw = c.cfg.BandwidthMBps
	}
	m.dirty = s.dirty
	dur := m.nominal(c.cfg.MigrationOverhead, float64(s.RAMMB))
	m.dur = dur
	dst, why := c.schedule(s, src, dst)
	precheck := why == "" && s.noLive != ""
	if precheck {
		why = s.noLive // SetNoLiveMigration: the compute pre-check says no
	}
	if dst != nil {
		m.Dest = dst.Name
		m.bw = c.bandwidth(src.Name, dst.Name) // Nova's scheduler picked it
		dur = m.nominal(c.cfg.MigrationOverhead, float64(s.RAMMB))
		m.dur = dur
	}
	if why != "" {
		// The conductor's scheduling fails fast: the migration ends in
		// error and nothing moves.
		m.fail = "No valid host was found: " + why
		if precheck {
			m.fail = "Migration pre-check error: " + why
		}
		m.end = now.Add(max(c.cfg.MigrationOverhead/2, time.Millisecond))
		c.obs.stats.Refused++
	} else {
		m.claimed = true
		// Nova runs one live migration per source at a time
		// (max_concurrent_live_migrations = 1): this one stays queued
		// until the source's lane frees.
		if src.laneFree.After(now) {
			m.start = src.laneFree
		}
		m.end = m.start.Add(dur)
		m.stuck = m.dirty >= m.bw
		if m.stuck {
			m.end = m.start.Add(never) // until forced or aborted
		}
		if dest != "" {
			c.checkPlan(s, src, dst, rc.GlobalRequestID)
		}
		dst.incoming[s.ID] = m
		c.claim(dst, s)
		if s.failMig != "" || c.migrationFault() {
			// Fails while running, somewhere in the running phase.
			m.fail = "injected fault: live migration failed"
			m.stuck = false
			f := 0.2 + 0.7*c.faultRand.Float64()
			m.end = m.start.Add(time.Duration(f * float64(dur)))
		}
		src.laneFree = m.end
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

// destination is the host a migration request names (nil for "":
// Nova's scheduler picks); nova.ErrBadRequest for an unknown host or the
// source itself, as the API answers (c.mu held).
func (c *Cloud) destination(op, serverID string, src *host, dest string) (*host, error) {
	if dest == "" {
		return nil, nil
	}
	dst, ok := c.hosts[dest]
	if !ok {
		return nil, fmt.Errorf("%s %s: compute host %s not found: %w", op, serverID, dest, nova.ErrBadRequest)
	}
	if dst == src {
		return nil, fmt.Errorf("%s %s: destination %s is the source: %w", op, serverID, dest, nova.ErrBadRequest)
	}
	return dst, nil
}

// schedule is the conductor's verdict on moving s from src to dst (nil:
// its scheduler picks one): the destination, and why it refuses ("" when
// it does not) (c.mu held).
func (c *Cloud) schedule(s *server, src, dst *host) (*host, string) {
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
	return dst, why
}

// Migrations implements nova.Client: the server's migrations, newest
// first, with their status at the clock's Now (nova.ErrNotFound for an
// unknown server).
func (c *Cloud) Migrations(ctx context.Context, serverID string) ([]nova.Migration, error) {
	return c.migrations(ctx, c.def, serverID)
}

func (c *Cloud) migrations(ctx context.Context, v *View, serverID string) ([]nova.Migration, error) {
	b, err := c.begin(ctx, v, callRead, "migrations of "+serverID, tMigrations)
	if err != nil {
		return nil, err
	}
	out, err := c.doMigrations(ctx, serverID)
	if len(out) == 0 {
		// An empty list: nova/openstack reads the server to tell "no
		// migrations" from "no such server".
		c.mu.Lock()
		b.server(c.servers[serverID])
		c.mu.Unlock()
	}
	return out, b.end(err)
}

// doMigrations is Migrations once charged.
func (c *Cloud) doMigrations(ctx context.Context, serverID string) ([]nova.Migration, error) {
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
	return c.shelve(ctx, c.def, serverID)
}

func (c *Cloud) shelve(ctx context.Context, v *View, serverID string) (nova.Receipt, error) {
	return c.action(ctx, v, "shelve "+serverID, func() (nova.Receipt, error) { return c.doShelve(ctx, serverID) })
}

// doShelve is Shelve once charged.
func (c *Cloud) doShelve(ctx context.Context, serverID string) (nova.Receipt, error) {
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
	return c.shelveOffload(ctx, c.def, serverID)
}

func (c *Cloud) shelveOffload(ctx context.Context, v *View, serverID string) (nova.Receipt, error) {
	return c.action(ctx, v, "shelve-offload "+serverID, func() (nova.Receipt, error) { return c.doShelveOffload(ctx, serverID) })
}

// doShelveOffload is ShelveOffload once charged.
func (c *Cloud) doShelveOffload(ctx context.Context, serverID string) (nova.Receipt, error) {
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
	return c.unshelve(ctx, c.def, serverID, name)
}

func (c *Cloud) unshelve(ctx context.Context, v *View, serverID, name string) (nova.Receipt, error) {
	return c.action(ctx, v, "unshelve "+serverID, func() (nova.Receipt, error) { return c.doUnshelve(ctx, serverID, name) })
}

// doUnshelve is Unshelve once charged.
func (c *Cloud) doUnshelve(ctx context.Context, serverID, name string) (nova.Receipt, error) {
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
	return c.setServiceStatus(ctx, c.def, name, disabled, reason)
}

func (c *Cloud) setServiceStatus(ctx context.Context, v *View, name string, disabled bool, reason string) error {
	b, err := c.begin(ctx, v, callAction, "set service of "+name, tServicesHost)
	if err != nil {
		return err
	}
	err = c.doSetServiceStatus(ctx, name, disabled, reason)
	if !errors.Is(err, nova.ErrNotFound) { // an empty service list: no PUT
		b.add(classOf(err), tServicePut)
	}
	return b.end(err)
}

// doSetServiceStatus is SetServiceStatus once charged.
func (c *Cloud) doSetServiceStatus(ctx context.Context, name string, disabled bool, reason string) error {
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
	return c.setServerMetadata(ctx, c.def, serverID, key, value)
}

func (c *Cloud) setServerMetadata(ctx context.Context, v *View, serverID, key, value string) error {
	b, err := c.begin(ctx, v, callAction, "set metadata of "+serverID, tMetadata(key, value))
	if err != nil {
		return err
	}
	c.mu.Lock()
	s := c.servers[serverID]
	absent := s == nil
	if s != nil {
		_, has := s.Metadata[key]
		absent = !has
	}
	c.mu.Unlock()
	err = c.doSetServerMetadata(ctx, serverID, key, value)
	b.answer(classOf(err))
	if value == "" && absent && (err == nil || errors.Is(err, nova.ErrNotFound)) {
		// Nova answers 404 for a missing key; nova/openstack then reads
		// the server to tell it from a missing server.
		b.answer(nova.ClassNotFound)
		c.mu.Lock()
		b.server(c.servers[serverID])
		c.mu.Unlock()
	}
	return b.end(err)
}

// doSetServerMetadata is SetServerMetadata once charged.
func (c *Cloud) doSetServerMetadata(ctx context.Context, serverID, key, value string) error {
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

// ShelvedServers implements nova.Client: every SHELVED and
// SHELVED_OFFLOADED server, by ID.
func (c *Cloud) ShelvedServers(ctx context.Context) ([]nova.Server, error) {
	return c.shelvedServers(ctx, c.def)
}

func (c *Cloud) shelvedServers(ctx context.Context, v *View) ([]nova.Server, error) {
	b, err := c.begin(ctx, v, callRead, "list shelved servers", tShelved)
	if err != nil {
		return nil, err
	}
	out, err := c.doShelvedServers(ctx)
	for range pages(len(out)) - 1 {
		b.add(nova.ClassOK, tShelvedNext)
	}
	return out, b.end(err)
}

// doShelvedServers is ShelvedServers once charged.
func (c *Cloud) doShelvedServers(ctx context.Context) ([]nova.Server, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	var out []nova.Server
	for _, s := range c.servers {
		if s.Status == nova.StatusShelvedOffloaded || s.Status == nova.StatusShelved {
			out = append(out, s.view())
		}
	}
	slices.SortFunc(out, func(a, b nova.Server) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// action charges one POST /servers/{id}/action around do.
func (c *Cloud) action(ctx context.Context, v *View, op string, do func() (nova.Receipt, error)) (nova.Receipt, error) {
	b, err := c.begin(ctx, v, callAction, op, tAction)
	if err != nil {
		return nova.Receipt{}, err
	}
	rc, err := do()
	b.answer(classOf(err))
	return rc, b.end(err)
}
