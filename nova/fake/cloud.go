package fake

import (
	"container/heap"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// Action is one instance action of a server, as os-instance-actions
// (`openstack server event list`) shows it.
type Action struct {
	// Name is Nova's action name: live-migration, shelve, shelveOffload,
	// unshelve.
	Name string
	// GlobalRequestID is the X-OpenStack-Request-ID the caller sent
	// (nova.RequestID of its ctx), "" when none.
	GlobalRequestID string
	// LocalRequestID is the id Nova answered with (req-<uuid>), the
	// request_id column of `openstack server event list`.
	LocalRequestID string
	// Start is when Nova accepted the request.
	Start time.Time
	// Message is "" while the action is fine, else why it failed (for
	// instance "No valid host was found: ...").
	Message string
}

type host struct {
	nova.Host // capacity and service; VCPUsUsed/RAMMBUsed are filled from usedV/usedR on read
	// servers holds the servers whose Host is this one; a migrating
	// server stays on its source until the move completes.
	servers map[string]*server
	// incoming holds the migrations that claimed an allocation here and
	// have not ended, by server ID.
	incoming map[string]*migration
	// resized holds the servers whose cold migration from here waits in
	// VERIFY_RESIZE elsewhere: their allocation stays here until
	// confirmed (coldmigrate.go).
	resized       map[string]*server
	usedV, usedR  int  // placement allocations, moves in and out included
	overcommitted bool // reported already; report again only after it cleared
	// laneFree is when the host's live-migration lane frees: Nova's
	// max_concurrent_live_migrations = 1 runs one outgoing migration at a
	// time and keeps the others queued.
	laneFree time.Time
}

type server struct {
	nova.Server
	demand  nova.Demand
	dirty   float64    // MB/s of memory the guest dirties (SetDirtyRate)
	grp     *group     // its server group, nil when none
	mig     *migration // the migration in flight, nil when none
	noLive  string     // why it cannot live-migrate (SetNoLiveMigration)
	failMig string     // why its migrations fail while running (SetMigrationFailure)
	// created is when it was added (Nova's "created"): the group index
	// of nova/openstack is listed again when a newer server is listed.
	created time.Time
}

type group struct {
	nova.ServerGroup
	members map[string]*server
}

// migration phases, as fractions of a move's nominal duration.
var phases = []struct {
	until  float64
	status string
}{
	{0.02, nova.MigrationAccepted},
	{0.05, nova.MigrationQueued},
	{0.20, nova.MigrationPreparing},
	{0.90, nova.MigrationRunning},
	{1.00, nova.MigrationPostMigrating},
}

type migration struct {
	nova.Migration // Status is set once the migration ended
	start, end     time.Time
	dur            time.Duration // nominal duration, for the phases
	// The memory model (migrate.go): the pair's bandwidth and the
	// guest's dirty rate (MB/s); stuck: dirty >= bw, the copy never
	// converges and the migration runs until forced or aborted.
	bw, dirty    float64
	stuck        bool
	forced       bool
	forcedAt     time.Time
	forcedRemain float64 // MB left when forced
	forcedDone   float64 // MB processed when forced
	cancel       bool    // aborted: ends cancelled
	// cold: a cold migration (ColdMigrate): it ends "finished" with the
	// server in VERIFY_RESIZE on Dest, the source's allocation held until
	// ConfirmResize ("confirmed") or RevertResize ("reverted").
	cold    bool
	claimed bool   // passed scheduling: holds an allocation on Dest
	fail    string // why it ends in error, "" if it completes
	srv     *server
	seq     uint64
	action  int // index of its instance action
	index   int // in the heap
}

// view returns the record as os-migrations would show it at now.
func (m *migration) view(now time.Time) nova.Migration {
	v := m.Migration
	if m.Terminal() {
		return v
	}
	if !m.claimed { // waiting for the scheduler, which will say no
		return v
	}
	if m.cold {
		v.Status = coldStatus(m, now)
		return v
	}
	if now.Before(m.start) { // behind the source's running migration
		v.Status = nova.MigrationQueued
		return v
	}
	el := now.Sub(m.start)
	if (m.stuck || m.forced || m.cancel) && el >= m.runFrom() {
		// Copying until forced to the end, or aborted.
		v.Status = nova.MigrationRunning
		v.UpdatedAt = m.start.Add(m.runFrom())
		return v
	}
	prev := 0.0
	for _, p := range phases {
		if float64(el) < p.until*float64(m.dur) {
			v.Status = p.status
			v.UpdatedAt = m.start.Add(time.Duration(prev * float64(m.dur)))
			return v
		}
		prev = p.until
	}
	v.Status = nova.MigrationPostMigrating
	return v
}

type migHeap []*migration

func (h migHeap) Len() int { return len(h) }
func (h migHeap) Less(i, j int) bool {
	if !h[i].end.Equal(h[j].end) {
		return h[i].end.Before(h[j].end)
	}
	return h[i].seq < h[j].seq
}
func (h migHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *migHeap) Push(x any)   { m := x.(*migration); m.index = len(*h); *h = append(*h, m) }
func (h *migHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return m
}

// Cloud is a simulated Nova Zed: compute hosts with placement
// accounting and service state, servers with measured demand, live
// migrations driven by the injected Clock, shelve / offload / unshelve,
// instance actions with request ids, injected faults and a safety
// observer. It implements nova.Client and nova.DemandSource.
//
// All methods are safe for concurrent use; one mutex guards the state.
// Reads cost O(servers on the host) (Hosts: O(hosts)); every call first
// applies what fell due by the clock's Now. Setup methods (AddHost,
// AddServer, SetDemand, ...) never inject faults.
type Cloud struct {
	mu        sync.Mutex
	cfg       Config
	clock     Clock
	ids       *rand.Rand // UUIDs and local request ids
	faultRand *rand.Rand // fault draws
	hosts     map[string]*host
	hostOrder []*host // by name, for deterministic choices
	servers   map[string]*server
	groups    map[string]*group
	migs      map[string][]*migration // by server, oldest first
	pairBW    map[[2]string]float64   // live-migration bandwidth by (from, to), MB/s (SetBandwidth)
	inflight  migHeap
	actions   map[string][]Action
	seq       uint64
	instances uint64 // the last instance id (Nova's database id)

	obs observer

	meter *nova.Meter // every API request, by caller
	def   *View       // the cloud's own methods: caller ""
	api   *API        // the API's queue (Config.APIRate, APILatency)
}

// New returns an empty cloud reading time from clock. Fields of cfg that
// do not pass Validate are replaced by their defaults: callers that take
// cfg from users validate it first.
func New(cfg Config, clock Clock) *Cloud {
	cfg = cfg.withDefaults()
	c := &Cloud{
		cfg: cfg, clock: clock,
		ids:       rand.New(rand.NewSource(cfg.Seed)),
		faultRand: rand.New(rand.NewSource(cfg.Seed ^ 0x5eed_fa17)),
		hosts:     map[string]*host{}, servers: map[string]*server{}, groups: map[string]*group{},
		migs: map[string][]*migration{}, actions: map[string][]Action{},
		obs:   observer{moved: map[[2]string]bool{}, seen: map[string]map[string]demandRead{}},
		meter: nova.NewMeter(), api: &API{Rate: cfg.APIRate, Latency: cfg.APILatency},
	}
	c.def = c.Client("")
	return c
}

// Config returns the configuration in use (defaults applied).
func (c *Cloud) Config() Config { return c.cfg }

// ---- setup ----

// AddHost adds a compute host with h's capacity, zone and service. An
// empty service status / state means enabled / up; an empty service ID
// gets a UUID. Adding a host that exists updates its capacity, zone and
// service and keeps its servers and allocations (an inventory change):
// the observer reports the host if its allocations no longer fit.
func (c *Cloud) AddHost(h nova.Host) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	if h.Service.Status == "" {
		h.Service.Status = nova.ServiceEnabled
	}
	if h.Service.State == "" {
		h.Service.State = nova.ServiceUp
		if h.Service.ForcedDown {
			h.Service.State = nova.ServiceDown
		}
	}
	if h.Service.ID == "" {
		h.Service.ID = c.uuid()
	}
	if h.Service.UpdatedAt.IsZero() {
		h.Service.UpdatedAt = c.clock.Now()
	}
	h.Service.Host = h.Name
	h.VCPUsUsed, h.RAMMBUsed = 0, 0
	if old, ok := c.hosts[h.Name]; ok {
		old.Host = h
		c.checkHosts(old)
		return
	}
	nh := &host{Host: h, servers: map[string]*server{}, incoming: map[string]*migration{}}
	c.hosts[h.Name] = nh
	i := sort.Search(len(c.hostOrder), func(i int) bool { return c.hostOrder[i].Name >= h.Name })
	c.hostOrder = slices.Insert(c.hostOrder, i, nh)
}

// AddGroup registers a server group (or replaces its name and policy).
// Servers join it through AddServer with Server.Group.ID set.
func (c *Cloud) AddGroup(g nova.ServerGroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.group(g)
}

func (c *Cloud) group(g nova.ServerGroup) *group {
	if old, ok := c.groups[g.ID]; ok {
		if g.Policy != "" {
			old.ServerGroup = g
		}
		return old
	}
	ng := &group{ServerGroup: g, members: map[string]*server{}}
	c.groups[g.ID] = ng
	return ng
}

// AddServer boots server s as Nova would have: ACTIVE on s.Host,
// claiming s.VCPUs / s.RAMMB in placement. It refuses (nova.ErrNotFound,
// nova.ErrConflict, nova.ErrBadRequest) an unknown host, a duplicate or
// empty ID, and a server that does not fit the host's allocatable
// capacity. A server with Status SHELVED_OFFLOADED and Host "" is added
// offloaded. s.Group, if set, joins the group with that ID (registered
// on the fly if unknown). An empty s.InstanceName gets Nova's default,
// instance-%08x of a counter. The server's demand starts at 0 CPU and its
// full RAM; change it with SetDemand.
func (c *Cloud) AddServer(s nova.Server) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	if s.ID == "" {
		return fmt.Errorf("add server %q: empty id: %w", s.Name, nova.ErrBadRequest)
	}
	if _, dup := c.servers[s.ID]; dup {
		return fmt.Errorf("add server %s: id in use: %w", s.ID, nova.ErrConflict)
	}
	if s.VCPUs < 0 || s.RAMMB < 0 {
		return fmt.Errorf("add server %s: negative flavor: %w", s.ID, nova.ErrBadRequest)
	}
	var h *host
	if s.Host == "" && s.Status == nova.StatusShelvedOffloaded {
		// offloaded: no host, no allocation
	} else {
		var ok bool
		if h, ok = c.hosts[s.Host]; !ok {
			return fmt.Errorf("add server %s: host %q: %w", s.ID, s.Host, nova.ErrNotFound)
		}
		if !fits(h, s.VCPUs, s.RAMMB) {
			return fmt.Errorf("add server %s on %s: no valid host: placement has %d/%.0f VCPU and %d/%.0f MB allocated: %w",
				s.ID, s.Host, h.usedV, h.AllocatableVCPUs(), h.usedR, h.AllocatableRAMMB(), nova.ErrConflict)
		}
		if s.Status == "" || s.Status == nova.StatusShelvedOffloaded || s.Status == nova.StatusMigrating {
			s.Status = nova.StatusActive
		}
	}
	s.TaskState = ""
	s.Metadata = cloneMeta(s.Metadata)
	c.instances++
	if s.InstanceName == "" {
		s.InstanceName = fmt.Sprintf("instance-%08x", c.instances) // Nova's default instance_name_template
	}
	sv := &server{Server: s, demand: nova.Demand{RAMMB: float64(s.RAMMB)}, created: c.clock.Now()}
	if s.Group != nil {
		sv.grp = c.group(*s.Group)
		sv.grp.members[s.ID] = sv
		sv.Group = nil // the view builds it from grp
	}
	c.servers[s.ID] = sv
	c.obs.expected++
	if h != nil {
		c.place(h, sv)
		c.claim(h, sv)
		c.checkHosts(h)
	} else {
		c.obs.offloaded++
		c.checkHosts()
	}
	return nil
}

// DeleteServer deletes a server and frees its allocation. A migrating
// server cannot be deleted here (nova.ErrConflict): Nova would abort the
// move first.
func (c *Cloud) DeleteServer(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	s, ok := c.servers[id]
	if !ok {
		return fmt.Errorf("delete server %s: %w", id, nova.ErrNotFound)
	}
	if s.mig != nil {
		return fmt.Errorf("delete server %s: migrating: %w", id, nova.ErrConflict)
	}
	var touched []*host
	if h := c.hosts[s.Host]; h != nil {
		c.unplace(h, s)
		c.release(h, s)
		touched = append(touched, h)
	} else {
		c.obs.offloaded--
	}
	if s.grp != nil {
		delete(s.grp.members, id)
	}
	delete(c.servers, id)
	delete(c.migs, id)
	c.obs.expected--
	c.checkHosts(touched...)
	return nil
}

// SetDemand sets what a server really uses (what Demand reports). It
// returns nova.ErrNotFound for an unknown server.
func (c *Cloud) SetDemand(id string, d nova.Demand) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[id]
	if !ok {
		return fmt.Errorf("demand of server %s: %w", id, nova.ErrNotFound)
	}
	s.demand = d
	return nil
}

// SetLocked locks a server (as `openstack server lock`) or unlocks it.
func (c *Cloud) SetLocked(id string, locked bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[id]
	if !ok {
		return fmt.Errorf("lock server %s: %w", id, nova.ErrNotFound)
	}
	s.Locked = locked
	return nil
}

// SetServiceForcedDown forces a host's nova-compute service down (as
// `openstack compute service set --down`), or lifts that. Live
// migrations to a down host end in error; the scheduler skips it.
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
	h.Service.UpdatedAt = c.clock.Now()
	return nil
}

// Advance applies everything due by the clock's Now (migrations
// ending). Every other method does it first; simulators call it to
// settle the cloud before reading the observer.
func (c *Cloud) Advance() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
}

// ---- read helpers for simulators and tests (no faults, no ctx) ----

// HostState is one host as a simulator sees it.
type HostState struct {
	Host     nova.Host   // capacity, placement usage, service
	Demand   nova.Demand // sum of the demand of the servers on it
	Servers  int         // servers on it (migrating away included)
	Incoming int         // migrations in flight towards it
}

// Snapshot returns every host's state, by host name.
func (c *Cloud) Snapshot() []HostState {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	out := make([]HostState, 0, len(c.hostOrder))
	for _, h := range c.hostOrder {
		cpu, ram := demandOf(h)
		out = append(out, HostState{Host: h.view(), Demand: nova.Demand{CPU: cpu, RAMMB: ram}, Servers: len(h.servers), Incoming: len(h.incoming)})
	}
	return out
}

// ServersOn returns the servers on a host, by ID (nil for an unknown host).
func (c *Cloud) ServersOn(name string) []nova.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	h, ok := c.hosts[name]
	if !ok {
		return nil
	}
	return h.serverViews()
}

// HostDemand returns the summed demand of the servers on a host, and
// false for an unknown host.
func (c *Cloud) HostDemand(name string) (nova.Demand, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	h, ok := c.hosts[name]
	if !ok {
		return nova.Demand{}, false
	}
	cpu, ram := demandOf(h)
	return nova.Demand{CPU: cpu, RAMMB: ram}, true
}

// Overloaded reports whether a host's demand exceeds the observer's
// limits (Config.OverloadCPU / OverloadRAM of its physical capacity).
func (c *Cloud) Overloaded(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	h, ok := c.hosts[name]
	if !ok {
		return false
	}
	cpu, ram := demandOf(h)
	return c.over(h, cpu, ram)
}

// OverloadedHosts counts the hosts Overloaded reports, under one lock
// (a simulator's per-second census of 10,000 hosts took 10,000).
func (c *Cloud) OverloadedHosts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	n := 0
	for _, h := range c.hostOrder {
		if cpu, ram := demandOf(h); c.over(h, cpu, ram) {
			n++
		}
	}
	return n
}

// Created returns when a server was added (Nova's "created"), and false
// for an unknown server. nova/fakeapi serves it: nova/openstack lists the
// server groups again when it sees a server newer than its group index.
func (c *Cloud) Created(id string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[id]
	if !ok {
		return time.Time{}, false
	}
	return s.created, true
}

// Actions returns a server's instance actions, oldest first (kept after
// the server is deleted, as Nova keeps them).
func (c *Cloud) Actions(serverID string) []Action {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance()
	return slices.Clone(c.actions[serverID])
}

// ---- state changes (c.mu held) ----

func (c *Cloud) place(h *host, s *server) {
	h.servers[s.ID] = s
	c.obs.placed++
}

func (c *Cloud) unplace(h *host, s *server) {
	if _, ok := h.servers[s.ID]; ok {
		delete(h.servers, s.ID)
		c.obs.placed--
	}
}

func (c *Cloud) claim(h *host, s *server) {
	h.usedV += s.VCPUs
	h.usedR += s.RAMMB
}

func (c *Cloud) release(h *host, s *server) {
	h.usedV -= s.VCPUs
	h.usedR -= s.RAMMB
}

// advance ends every migration due by now, in end order.
func (c *Cloud) advance() {
	now := c.clock.Now()
	for len(c.inflight) > 0 && !c.inflight[0].end.After(now) {
		c.finish(heap.Pop(&c.inflight).(*migration))
	}
}

func (c *Cloud) finish(m *migration) {
	s := m.srv
	src, dst := c.hosts[m.Source], c.hosts[m.Dest]
	s.mig = nil
	s.TaskState = ""
	s.Status = nova.StatusActive
	m.UpdatedAt = m.end
	if m.claimed {
		delete(dst.incoming, s.ID)
	}
	if m.cancel {
		m.Status = nova.MigrationCancelled
		c.obs.stats.Cancelled++
		if m.claimed {
			c.release(dst, s)
		}
		c.note(s.ID, m.action, "Migration aborted by the operator (cancelled)")
		c.checkHosts(src, dst)
		return
	}
	if m.fail != "" {
		m.Status = nova.MigrationError
		c.obs.stats.Failed++
		if m.claimed {
			c.release(dst, s)
		}
		c.note(s.ID, m.action, m.fail)
		c.checkHosts(src, dst)
		return
	}
	if m.cold {
		c.finishCold(m)
		return
	}
	m.Status = nova.MigrationCompleted
	c.obs.stats.Completed++
	c.unplace(src, s)
	c.release(src, s)
	c.place(dst, s)
	s.Host = dst.Name
	s.Zone = dst.Zone
	c.checkHosts(src, dst)
}

// note records msg as the outcome of the server's action number i.
func (c *Cloud) note(serverID string, i int, msg string) {
	if as := c.actions[serverID]; i >= 0 && i < len(as) && as[i].Message == "" {
		as[i].Message = msg
	}
}

// ---- helpers ----

func (h *host) view() nova.Host {
	v := h.Host
	v.VCPUsUsed, v.RAMMBUsed = h.usedV, h.usedR
	return v
}

func (h *host) serverViews() []nova.Server {
	out := make([]nova.Server, 0, len(h.servers))
	for _, s := range h.servers {
		out = append(out, s.view())
	}
	slices.SortFunc(out, func(a, b nova.Server) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (s *server) view() nova.Server {
	v := s.Server
	v.Metadata = cloneMeta(s.Metadata)
	if s.grp != nil {
		g := s.grp.ServerGroup
		v.Group = &g
	}
	return v
}

func cloneMeta(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func usable(h *host) bool {
	return !h.Service.Disabled() && h.Service.State != nova.ServiceDown
}

func fits(h *host, v, r int) bool {
	return float64(h.usedV+v) <= h.AllocatableVCPUs()+1e-9 && float64(h.usedR+r) <= h.AllocatableRAMMB()+1e-9
}

// load is a host's placement usage, the larger of its CPU and RAM shares.
func load(h *host) float64 {
	l := 0.0
	if a := h.AllocatableVCPUs(); a > 0 {
		l = float64(h.usedV) / a
	}
	if a := h.AllocatableRAMMB(); a > 0 {
		l = max(l, float64(h.usedR)/a)
	}
	return l
}

func demandOf(h *host) (cpu, ram float64) {
	for _, s := range h.servers {
		cpu += s.demand.CPU
		ram += s.demand.RAMMB
	}
	return cpu, ram
}

// groupRefuses says why s's server group forbids dst, or "".
func (c *Cloud) groupRefuses(s *server, dst *host) string {
	g := s.grp
	if g == nil {
		return ""
	}
	switch g.Policy {
	case nova.PolicyAntiAffinity:
		for _, o := range g.members {
			if o == s {
				continue
			}
			if o.Host == dst.Name || (o.mig != nil && o.mig.claimed && o.mig.Dest == dst.Name) {
				return fmt.Sprintf("server group %s (anti-affinity): member %s is on or moving to %s", g.ID, o.ID, dst.Name)
			}
		}
	case nova.PolicyAffinity:
		for _, o := range g.members {
			if o != s && o.Host != "" && o.Host != dst.Name {
				return fmt.Sprintf("server group %s (affinity): member %s is on %s", g.ID, o.ID, o.Host)
			}
		}
	}
	return ""
}

// pick is the fake's scheduler: the usable host with the lowest
// placement load that fits s and its group policy, other than except;
// nil when none (NoValidHost). Ties go to the first name.
func (c *Cloud) pick(s *server, except string) *host {
	var best *host
	bestLoad := 0.0
	for _, h := range c.hostOrder {
		if h.Name == except || !usable(h) || !fits(h, s.VCPUs, s.RAMMB) || c.groupRefuses(s, h) != "" {
			continue
		}
		if l := load(h); best == nil || l < bestLoad {
			best, bestLoad = h, l
		}
	}
	return best
}

func (c *Cloud) uuid() string {
	var b [16]byte
	c.ids.Read(b[:])
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
