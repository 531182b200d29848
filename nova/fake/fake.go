package fake

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// Clock is the fake's time source.
type Clock interface{ Now() time.Time }

// ManualClock is a clock tests advance by hand.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock starts at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now implements Clock.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Config tunes the simulated cloud.
type Config struct {
	Seed int64
	// BandwidthMBps and MigrationOverhead give a live migration's
	// duration: overhead + RAM / bandwidth.
	BandwidthMBps     float64
	MigrationOverhead time.Duration
	// FaultRate is the probability that an API call fails (500, 409 or
	// timeout) and that a migration ends in error.
	FaultRate float64
	// OverloadCPU and OverloadRAM (fractions of physical capacity) are the
	// observer's limits for a destination at the start of a migration.
	OverloadCPU, OverloadRAM float64
}

// DefaultConfig: 1000 MB/s, 1 s overhead, no faults, limits at 100 %.
func DefaultConfig() Config {
	return Config{BandwidthMBps: 1000, MigrationOverhead: time.Second, OverloadCPU: 1, OverloadRAM: 1}
}

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	if c.BandwidthMBps <= 0 {
		errs = append(errs, errors.New("fake: bandwidth must be > 0"))
	}
	if c.MigrationOverhead < 0 {
		errs = append(errs, errors.New("fake: migration overhead must be >= 0"))
	}
	if c.FaultRate < 0 || c.FaultRate > 1 {
		errs = append(errs, errors.New("fake: fault rate must be in [0, 1]"))
	}
	if c.OverloadCPU <= 0 || c.OverloadRAM <= 0 {
		errs = append(errs, errors.New("fake: overload limits must be > 0"))
	}
	return errors.Join(errs...)
}

// Action is one instance action, as `openstack server event list` shows.
type Action struct {
	Name            string
	GlobalRequestID string
	LocalRequestID  string
	Start           time.Time
	Message         string
}

// Violation is a safety property broken (DESIGN §8).
type Violation struct {
	At      time.Time
	Message string
}

func (v Violation) String() string { return v.At.Format("15:04:05.000") + " " + v.Message }

// Stats counts migrations.
type Stats struct {
	Started, Completed, Failed, InFlight int
}

type host struct {
	nova.Host
	servers      map[string]*server
	usedV, usedR int // placement allocations, servers moving in included
	// demandSeq counts demand changes of the host's servers; readSeq is
	// its value at the last Demand read. They tell a plan's fault from
	// demand that moved after the executor's re-check.
	demandSeq, readSeq int
}

type server struct {
	nova.Server
	demand nova.Demand
	mig    *migration
}

type migration struct {
	nova.Migration
	start, end time.Time
	fail       string // why it will end in error, "" if it succeeds
	srv        *server
	index      int
}

type migHeap []*migration

func (h migHeap) Len() int           { return len(h) }
func (h migHeap) Less(i, j int) bool { return h[i].end.Before(h[j].end) }
func (h migHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *migHeap) Push(x any)        { m := x.(*migration); m.index = len(*h); *h = append(*h, m) }
func (h *migHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	*h = old[:len(old)-1]
	return m
}

// Cloud is the simulated Nova. All methods are safe for concurrent use.
type Cloud struct {
	mu       sync.Mutex
	cfg      Config
	clock    Clock
	rng      *rand.Rand
	hosts    map[string]*host
	servers  map[string]*server
	groups   map[string]*nova.ServerGroup
	migs     map[string][]*migration // by server, oldest first
	inflight migHeap
	actions  map[string][]Action
	moved    map[[2]string]bool // (global request id, server): migrated in that plan
	expected int
	lastLost int
	viol     []Violation
	drift    []Violation
	stats    Stats
	faults   int
	seq      int
}

// New returns an empty cloud. An invalid cfg is replaced field by field
// with defaults (the caller validates what it exposes).
func New(cfg Config, clock Clock) *Cloud {
	d := DefaultConfig()
	if cfg.BandwidthMBps <= 0 {
		cfg.BandwidthMBps = d.BandwidthMBps
	}
	if cfg.OverloadCPU <= 0 {
		cfg.OverloadCPU = d.OverloadCPU
	}
	if cfg.OverloadRAM <= 0 {
		cfg.OverloadRAM = d.OverloadRAM
	}
	return &Cloud{
		cfg: cfg, clock: clock, rng: rand.New(rand.NewSource(cfg.Seed)),
		hosts: map[string]*host{}, servers: map[string]*server{}, groups: map[string]*nova.ServerGroup{},
		migs: map[string][]*migration{}, actions: map[string][]Action{}, moved: map[[2]string]bool{},
	}
}

// ---- setup ----

// AddHost adds a compute host (capacity and service from h).
func (c *Cloud) AddHost(h nova.Host) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.Service.Status == "" {
		h.Service.Status = nova.ServiceEnabled
	}
	if h.Service.State == "" {
		h.Service.State = nova.ServiceUp
	}
	if h.Service.ID == "" {
		h.Service.ID = c.uuid()
	}
	h.Service.Host = h.Name
	c.hosts[h.Name] = &host{Host: h, servers: map[string]*server{}}
}

// AddGroup registers a server group.
func (c *Cloud) AddGroup(g nova.ServerGroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gg := g
	c.groups[g.ID] = &gg
}

// AddServer boots a server ACTIVE on s.Host, claiming its allocation.
func (c *Cloud) AddServer(s nova.Server) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hosts[s.Host]
	if !ok {
		return fmt.Errorf("add server %s: host %q: %w", s.ID, s.Host, nova.ErrNotFound)
	}
	if _, dup := c.servers[s.ID]; dup {
		return fmt.Errorf("add server %s: %w", s.ID, nova.ErrConflict)
	}
	if !fits(h, s.VCPUs, s.RAMMB) {
		return fmt.Errorf("add server %s on %s: no valid host (placement full)", s.ID, s.Host)
	}
	if s.Status == "" {
		s.Status = nova.StatusActive
	}
	if s.Group != nil {
		if g, ok := c.groups[s.Group.ID]; ok {
			s.Group = g
		}
	}
	sv := &server{Server: s, demand: nova.Demand{RAMMB: float64(s.RAMMB)}}
	c.servers[s.ID] = sv
	h.servers[s.ID] = sv
	h.usedV += s.VCPUs
	h.usedR += s.RAMMB
	c.expected++
	return nil
}

// DeleteServer removes a server and frees its allocation.
func (c *Cloud) DeleteServer(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[id]
	if !ok {
		return fmt.Errorf("delete %s: %w", id, nova.ErrNotFound)
	}
	if s.mig != nil {
		return fmt.Errorf("delete %s: migrating: %w", id, nova.ErrConflict)
	}
	if h := c.hosts[s.Host]; h != nil {
		delete(h.servers, id)
		h.usedV -= s.VCPUs
		h.usedR -= s.RAMMB
	}
	delete(c.servers, id)
	c.expected--
	c.check()
	return nil
}

// SetDemand sets what a server really uses.
func (c *Cloud) SetDemand(id string, d nova.Demand) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.servers[id]; ok {
		if s.demand != d {
			if h := c.hosts[s.Host]; h != nil {
				h.demandSeq++
			}
		}
		s.demand = d
	}
}

// SetServiceForcedDown marks a host's compute service down (as
// `openstack compute service set --down`), or up again.
func (c *Cloud) SetServiceForcedDown(name string, down bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hosts[name]
	if !ok {
		return fmt.Errorf("service of %s: %w", name, nova.ErrNotFound)
	}
	h.Service.ForcedDown = down
	h.Service.State = nova.ServiceUp
	if down {
		h.Service.State = nova.ServiceDown
	}
	return nil
}

// ---- observer ----

// Advance applies everything due by now (migrations ending).
func (c *Cloud) Advance() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
}

// Violations returns the safety violations seen so far.
func (c *Cloud) Violations() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.viol)
}

// Drift returns destinations found overloaded at a migration's start
// because demand changed after the last read of it (the executor's
// re-check): the workload moved, not the plan. Reported apart from
// Violations.
func (c *Cloud) Drift() []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.drift)
}

// ServersLost is how many servers are missing (or duplicated) compared
// with those added minus those deleted.
func (c *Cloud) ServersLost() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost()
}

func (c *Cloud) lost() int {
	n := 0
	for _, h := range c.hosts {
		n += len(h.servers)
	}
	for _, s := range c.servers {
		if s.Host == "" {
			n++ // offloaded
		}
	}
	if d := c.expected - n; d != 0 {
		if d < 0 {
			return -d
		}
		return d
	}
	return 0
}

// Stats returns migration counts.
func (c *Cloud) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s := c.stats
	s.InFlight = len(c.inflight)
	return s
}

// FaultsInjected is the number of injected faults.
func (c *Cloud) FaultsInjected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.faults
}

// Actions returns a server's instance actions, oldest first.
func (c *Cloud) Actions(id string) []Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.actions[id])
}

// Overloaded reports whether a host's demand exceeds the observer's limits.
func (c *Cloud) Overloaded(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hosts[name]
	if !ok {
		return false
	}
	cpu, ram := demandOf(h)
	return cpu > float64(h.VCPUs)*c.cfg.OverloadCPU+1e-9 || ram > float64(h.RAMMB)*c.cfg.OverloadRAM+1e-9
}

func demandOf(h *host) (cpu, ram float64) {
	for _, s := range h.servers {
		cpu += s.demand.CPU
		ram += s.demand.RAMMB
	}
	return cpu, ram
}

func (c *Cloud) violate(format string, args ...any) {
	c.viol = append(c.viol, Violation{At: c.clock.Now(), Message: fmt.Sprintf(format, args...)})
}

// check verifies conservation and placement after a placement change.
func (c *Cloud) check() {
	if n := c.lost(); n != c.lastLost {
		if n != 0 {
			c.violate("servers not conserved: %d missing or duplicated", n)
		}
		c.lastLost = n // report each change once, not at every check
	}
	for _, h := range c.hosts {
		if float64(h.usedV) > h.AllocatableVCPUs()+1e-9 || float64(h.usedR) > h.AllocatableRAMMB()+1e-9 {
			c.violate("host %s overcommitted in placement: %d VCPU / %d MB allocated", h.Name, h.usedV, h.usedR)
		}
	}
}

// ---- time ----

func (c *Cloud) advance() {
	now := c.clock.Now()
	for len(c.inflight) > 0 && !c.inflight[0].end.After(now) {
		m := heap.Pop(&c.inflight).(*migration)
		c.finish(m)
	}
}

func (c *Cloud) finish(m *migration) {
	s := m.srv
	src, dst := c.hosts[m.Source], c.hosts[m.Dest]
	s.mig = nil
	s.TaskState = ""
	s.Status = nova.StatusActive
	m.UpdatedAt = m.end
	if m.fail != "" {
		m.Status = nova.MigrationError
		c.stats.Failed++
		dst.usedV -= s.VCPUs
		dst.usedR -= s.RAMMB
		c.note(s.ID, "live-migration failed: "+m.fail)
		c.check()
		return
	}
	m.Status = nova.MigrationCompleted
	c.stats.Completed++
	delete(src.servers, s.ID)
	src.usedV -= s.VCPUs
	src.usedR -= s.RAMMB
	dst.servers[s.ID] = s
	s.Host = dst.Name
	c.check()
}

func (c *Cloud) note(id, msg string) {
	a := c.actions[id]
	if len(a) > 0 && a[len(a)-1].Message == "" {
		a[len(a)-1].Message = msg
	}
}

// status derives a running migration's status from elapsed time.
func (m *migration) status(now time.Time) string {
	if m.Terminal() {
		return m.Status
	}
	f := float64(now.Sub(m.start)) / float64(m.end.Sub(m.start))
	switch {
	case f < 0.05:
		return nova.MigrationQueued
	case f < 0.2:
		return nova.MigrationPreparing
	case f < 0.9:
		return nova.MigrationRunning
	}
	return nova.MigrationPostMigrating
}

// ---- helpers ----

func fits(h *host, v, r int) bool {
	return float64(h.usedV+v) <= h.AllocatableVCPUs()+1e-9 && float64(h.usedR+r) <= h.AllocatableRAMMB()+1e-9
}

func (c *Cloud) uuid() string {
	b := make([]byte, 16)
	c.rng.Read(b)
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// fault draws an injected API fault ("" for none). Called without the lock.
func (c *Cloud) fault(ctx context.Context, op string) error {
	if c.cfg.FaultRate <= 0 {
		return nil
	}
	c.mu.Lock()
	p := c.rng.Float64()
	kind := c.rng.Intn(3)
	if p >= c.cfg.FaultRate {
		c.mu.Unlock()
		return nil
	}
	c.faults++
	c.mu.Unlock()
	switch kind {
	case 0:
		return fmt.Errorf("%s: injected HTTP 500: %w", op, nova.ErrUnavailable)
	case 1:
		return fmt.Errorf("%s: injected HTTP 409: %w", op, nova.ErrConflict)
	}
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return fmt.Errorf("%s: injected timeout: %w", op, nova.ErrUnavailable)
}

func (c *Cloud) receipt(ctx context.Context, id, name string) nova.Receipt {
	r := nova.Receipt{GlobalRequestID: nova.RequestID(ctx), LocalRequestID: "req-" + c.uuid()}
	c.actions[id] = append(c.actions[id], Action{Name: name, GlobalRequestID: r.GlobalRequestID, LocalRequestID: r.LocalRequestID, Start: c.clock.Now()})
	return r
}

var _ nova.Client = (*Cloud)(nil)
var _ nova.DemandSource = (*Cloud)(nil)
