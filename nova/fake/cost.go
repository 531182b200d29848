package fake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// pageSize is nova/openstack's page size for server and server-group
// listings.
const pageSize = 1000

// Templates of the requests nova/openstack sends (nova.PathTemplate form).
var (
	tServicesAll   = get(nova.ServiceCompute, "/os-services?binary")
	tServicesHost  = get(nova.ServiceCompute, "/os-services?binary&host")
	tServicePut    = nova.Template{Service: nova.ServiceCompute, Method: "PUT", Path: "/os-services/{id}"}
	tProvidersAll  = get(nova.ServicePlacement, "/resource_providers")
	tProvidersName = get(nova.ServicePlacement, "/resource_providers?name")
	tInventories   = get(nova.ServicePlacement, "/resource_providers/{id}/inventories")
	tUsages        = get(nova.ServicePlacement, "/resource_providers/{id}/usages")
	tServersHost   = get(nova.ServiceCompute, "/servers/detail?all_tenants&host&limit")
	tServersNext   = get(nova.ServiceCompute, "/servers/detail?all_tenants&host&limit&marker")
	tGroups        = get(nova.ServiceCompute, "/os-server-groups?all_projects&limit&offset")
	tServer        = get(nova.ServiceCompute, "/servers/{id}")
	tGroup         = get(nova.ServiceCompute, "/os-server-groups/{id}")
	tAction        = nova.Template{Service: nova.ServiceCompute, Method: "POST", Path: "/servers/{id}/action"}
	tMigrations    = get(nova.ServiceCompute, "/os-migrations?instance_uuid")
	tShelved       = get(nova.ServiceCompute, "/servers/detail?all_tenants&limit&status")
	tShelvedNext   = get(nova.ServiceCompute, "/servers/detail?all_tenants&limit&marker&status")
)

func get(service, path string) nova.Template {
	return nova.Template{Service: service, Method: "GET", Path: path}
}

// tMetadata is PUT (set) or DELETE (value "") of one metadata key.
func tMetadata(key, value string) nova.Template {
	m := "PUT"
	if value == "" {
		m = "DELETE"
	}
	return nova.Template{Service: nova.ServiceCompute, Method: m, Path: "/servers/{id}/metadata/" + key}
}

// costs is the mapping, one row per nova.Client method: the requests
// nova/openstack (hosts.go, servers.go) sends for it, which the cloud
// charges on its Meter and, with Config.APIRate, queues. The rows are
// the documentation; the methods in api.go charge them, and
// nova/openstack/testing's TestFakeChargesWhatTheClientSends runs one
// call sequence against both and compares the counts, so a change on
// either side fails there. Pages: a listing of n items takes n/1000+1
// requests (nova/openstack stops at a page without a next link, or
// shorter than a full page; server groups at an empty page:
// ceil(n/1000)+1). The group index is cached per caller for
// Config.GroupCacheTTL of the cloud's clock, as nova/openstack caches it
// per client, and each host's inventories for Config.InventoryCacheTTL. Demand is not charged: it stands for a local source
// (cgroup, file, Prometheus).
var costs = []struct{ Method, Requests string }{
	{"Hosts", "os-services?binary + resource_providers + (inventories unless cached + usages) per host"},
	{"Services", "os-services?binary"},
	{"Host", "os-services?binary&host; if the host exists: + resource_providers?name the caller's first time + inventories unless cached + usages"},
	{"Servers", "servers/detail?all_tenants&host&limit pages (then &marker); if any server and the group index is cold: + os-server-groups pages"},
	{"Server", "servers/{id}; if in a group and the group index is cold: + os-server-groups/{id}"},
	{"LiveMigrate, Shelve, ShelveOffload, Unshelve", "POST servers/{id}/action"},
	{"Migrations", "os-migrations?instance_uuid; if none: + Server"},
	{"MigrationsInProgress", "servers/{id}/migrations"},
	{"ForceCompleteMigration", "POST servers/{id}/migrations/{id}/action"},
	{"AbortMigration", "DELETE servers/{id}/migrations/{id}"},
	{"SetServiceStatus", "os-services?binary&host; if the host exists: + PUT os-services/{id}"},
	{"SetServerMetadata", "PUT servers/{id}/metadata/{key}, or DELETE it for \"\"; a DELETE answered 404: + Server"},
	{"ShelvedServers", "servers/detail?all_tenants&limit&status pages (then &marker)"},
}

// pages is how many requests a listing of n items takes.
func pages(n int) int { return n/pageSize + 1 }

// groupPages is how many requests the group index listing takes.
func groupPages(n int) int { return (n+pageSize-1)/pageSize + 1 }

// ---- the API's capacity ----

// API is the region's API as one FIFO queue: Rate requests a second
// (0: unlimited), each waiting for its turn, taking 1/Rate of service,
// and Latency on top (network and the API's own work). The fake cloud
// charges every request on its own (Config.APIRate, APILatency); the
// virtual clock (scheduler/detsim) on one of its own, so both clocks
// model Nova's latency and queue the same way. Safe for concurrent use.
type API struct {
	Rate    float64
	Latency time.Duration

	mu       sync.Mutex
	nextFree time.Time // when the server is free for the next request
	queued   int64     // requests that waited for their turn
	queueMax time.Duration
}

// APIStats says how the API's capacity held.
type APIStats struct {
	Queued   int64         // requests that waited for their turn
	QueueMax time.Duration // the longest such wait (cloud time)
}

// Stats returns the queue's figures.
func (a *API) Stats() APIStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return APIStats{Queued: a.queued, QueueMax: a.queueMax}
}

// Slot reserves the next place in the queue for a request arriving at
// now and returns its latency: the wait for its turn, 1/Rate of service,
// and Latency.
func (a *API) Slot(now time.Time) time.Duration {
	lat := a.Latency
	if a.Rate <= 0 {
		return lat
	}
	svc := time.Duration(float64(time.Second) / a.Rate)
	a.mu.Lock()
	defer a.mu.Unlock()
	start := now
	if a.nextFree.After(now) {
		start = a.nextFree
		a.queued++
		a.queueMax = max(a.queueMax, start.Sub(now))
	}
	a.nextFree = start.Add(svc)
	return start.Sub(now) + svc + lat
}

// APIStats returns the queue's figures.
func (c *Cloud) APIStats() APIStats { return c.api.Stats() }

// Meter returns the meter the cloud charges every API request on.
func (c *Cloud) Meter() *nova.Meter { return c.meter }

// slot reserves the next place in the API's queue for a request arriving
// at the clock's Now and returns its latency (API.Slot).
func (c *Cloud) slot() time.Duration { return c.api.Slot(c.clock.Now()) }

// sleep waits d of the cloud's clock, if the clock can wait (see
// Waiter); a done ctx ends it with ctx's error.
func (c *Cloud) sleep(ctx context.Context, d time.Duration) error {
	w, ok := c.clock.(Waiter)
	if !ok || d <= 0 {
		return nil
	}
	select {
	case <-w.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ---- charging one call ----

// bill is what one nova.Client call costs: its requests, charged on the
// meter when it ends.
type bill struct {
	c    *Cloud
	v    *View
	ctx  context.Context
	reqs []charged
	then int // index of the first request not yet waited for
}

type charged struct {
	t     nova.Template
	lat   time.Duration
	class string
}

// begin charges a call's first request: it waits for its turn and
// latency on the API, then passes the fault gate (Nova answered with an
// injected fault). A call whose ctx is already done sends nothing.
func (c *Cloud) begin(ctx context.Context, v *View, kind int, op string, first nova.Template) (*bill, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", op, nova.ErrUnavailable, err)
	}
	b := &bill{c: c, v: v, ctx: ctx}
	b.add(nova.ClassOK, first)
	if err := b.wait(); err != nil {
		b.reqs[0].class = nova.ClassTransport
		return nil, b.record(fmt.Errorf("%s: %w: %w", op, nova.ErrUnavailable, err))
	}
	if v.free {
		return b, nil
	}
	if class, err := c.gate(ctx, kind, op); err != nil {
		b.reqs[0].class = class
		return nil, b.record(err)
	}
	return b, nil
}

// add appends requests with an answer of class; the ones after the first
// are waited for in end.
func (b *bill) add(class string, ts ...nova.Template) {
	for _, t := range ts {
		b.reqs = append(b.reqs, charged{t: t, class: class})
	}
}

// answer sets the class of the last request so far.
func (b *bill) answer(class string) { b.reqs[len(b.reqs)-1].class = class }

// wait takes the queue's turn of every request not waited for yet, one
// after the other.
func (b *bill) wait() error {
	if b.v.free {
		b.then = len(b.reqs)
		return nil
	}
	for ; b.then < len(b.reqs); b.then++ {
		r := &b.reqs[b.then]
		r.lat = b.c.slot()
		if err := b.c.sleep(b.ctx, r.lat); err != nil {
			b.then++
			return err
		}
	}
	return nil
}

// end waits for the call's remaining requests and charges them all;
// it returns err, or nova.ErrUnavailable if ctx ended first.
func (b *bill) end(err error) error {
	if werr := b.wait(); werr != nil && err == nil {
		b.reqs[b.then-1].class = nova.ClassTransport
		b.reqs = b.reqs[:b.then]
		err = fmt.Errorf("%w: %w", nova.ErrUnavailable, werr)
	}
	return b.record(err)
}

// record charges the requests on the meter and returns err.
func (b *bill) record(err error) error {
	if b.v.free {
		return err
	}
	for _, r := range b.reqs {
		b.c.meter.Record(nova.Request{Caller: b.v.caller, Template: r.t, Latency: r.lat, Class: r.class})
	}
	return err
}

// classOf is the class of the answer that made a call fail.
func classOf(err error) string {
	switch {
	case err == nil:
		return nova.ClassOK
	case errors.Is(err, nova.ErrNotFound):
		return nova.ClassNotFound
	case errors.Is(err, nova.ErrConflict):
		return nova.ClassConflict
	case errors.Is(err, nova.ErrBadRequest):
		return nova.ClassBadRequest
	case errors.Is(err, nova.ErrUnavailable) && strings.Contains(err.Error(), "timeout"):
		return nova.ClassTransport
	}
	return nova.ClassServerError
}

// groupSkew mirrors nova/openstack's margin for clock skew.
const groupSkew = time.Minute

// groupIndex charges the listing of server groups when the caller's
// index is cold or a listed server (the newest created at newest) may be
// missing from it, and marks it warm (c.mu held).
func (b *bill) groupIndex(newest time.Time) {
	now := b.c.clock.Now()
	if b.v.groupsWarm(now, b.c.cfg.GroupCacheTTL) && newest.Before(b.v.groupsAt.Add(-groupSkew)) {
		return
	}
	for range groupPages(len(b.c.groups)) {
		b.add(nova.ClassOK, tGroups)
	}
	b.v.groupsAt, b.v.listed = now, true
}

// capacity charges a host's placement reads: its inventories unless the
// caller read them within InventoryCacheTTL, and its usages (c.mu held).
func (b *bill) capacity(host string) {
	now := b.c.clock.Now()
	if at, ok := b.v.inv[host]; !ok || b.c.cfg.InventoryCacheTTL <= 0 || now.Sub(at) >= b.c.cfg.InventoryCacheTTL {
		b.add(nova.ClassOK, tInventories)
		b.v.inv[host] = now
	}
	b.add(nova.ClassOK, tUsages)
}

// server charges a server read: GET servers/{id}, and its group when the
// caller's group index is cold (c.mu held).
func (b *bill) server(s *server) {
	if s == nil {
		b.add(nova.ClassNotFound, tServer)
		return
	}
	b.add(nova.ClassOK, tServer)
	b.serverGroup(s)
}

// serverGroup charges the read of s's server group, if it has one the
// caller's group index does not hold fresh (c.mu held).
func (b *bill) serverGroup(s *server) {
	if s.grp != nil && !b.v.groupsWarm(b.c.clock.Now(), b.c.cfg.GroupCacheTTL) {
		b.add(nova.ClassOK, tGroup)
	}
}

// ---- callers ----

// View is the cloud as one caller sees it: a nova.Client whose requests
// are charged on the cloud's Meter under the caller's name, with its own
// server-group cache (as each agent has its own nova/openstack client).
// The cloud's own methods are the view of caller "". Safe for concurrent
// use.
type View struct {
	c      *Cloud
	caller string
	free   bool // charges nothing and injects no fault (Uncharged)
	// caches nova/openstack keeps per client, guarded by c.mu
	groupsAt time.Time            // group index listed at
	listed   bool                 // ... ever
	rps      map[string]bool      // hosts whose resource provider is known
	inv      map[string]time.Time // hosts whose inventories were read, when
}

var _ nova.Client = (*View)(nil)

// Client returns the view of caller: `dvms simulate` gives each agent
// its own, so that requests are counted per agent while the agents' code
// sees a plain nova.Client.
func (c *Cloud) Client(caller string) *View {
	return &View{c: c, caller: caller, rps: map[string]bool{}, inv: map[string]time.Time{}}
}

// Uncharged returns a view that charges nothing, never queues and
// injects no fault: what a harness reads to check a run is not a cost
// to Nova.
func (c *Cloud) Uncharged() *View {
	return &View{c: c, free: true, rps: map[string]bool{}, inv: map[string]time.Time{}}
}

// Caller is the view's caller name.
func (v *View) Caller() string { return v.caller }

func (v *View) groupsWarm(now time.Time, ttl time.Duration) bool {
	return v.listed && ttl > 0 && now.Sub(v.groupsAt) < ttl
}

// Hosts implements nova.Client.
func (v *View) Hosts(ctx context.Context) ([]nova.Host, error) { return v.c.listHosts(ctx, v) }

// Services implements nova.Client.
func (v *View) Services(ctx context.Context) ([]nova.Service, error) { return v.c.listServices(ctx, v) }

// Host implements nova.Client.
func (v *View) Host(ctx context.Context, name string) (nova.Host, error) {
	return v.c.getHost(ctx, v, name)
}

// Servers implements nova.Client.
func (v *View) Servers(ctx context.Context, host string) ([]nova.Server, error) {
	return v.c.listServers(ctx, v, host)
}

// Server implements nova.Client.
func (v *View) Server(ctx context.Context, id string) (nova.Server, error) {
	return v.c.getServer(ctx, v, id)
}

// LiveMigrate implements nova.Client.
func (v *View) LiveMigrate(ctx context.Context, serverID, dest string) (nova.Receipt, error) {
	return v.c.liveMigrate(ctx, v, serverID, dest)
}

// Migrations implements nova.Client.
func (v *View) Migrations(ctx context.Context, serverID string) ([]nova.Migration, error) {
	return v.c.migrations(ctx, v, serverID)
}

// Shelve implements nova.Client.
func (v *View) Shelve(ctx context.Context, serverID string) (nova.Receipt, error) {
	return v.c.shelve(ctx, v, serverID)
}

// ShelveOffload implements nova.Client.
func (v *View) ShelveOffload(ctx context.Context, serverID string) (nova.Receipt, error) {
	return v.c.shelveOffload(ctx, v, serverID)
}

// Unshelve implements nova.Client.
func (v *View) Unshelve(ctx context.Context, serverID, host string) (nova.Receipt, error) {
	return v.c.unshelve(ctx, v, serverID, host)
}

// SetServiceStatus implements nova.Client.
func (v *View) SetServiceStatus(ctx context.Context, host string, disabled bool, reason string) error {
	return v.c.setServiceStatus(ctx, v, host, disabled, reason)
}

// SetServerMetadata implements nova.Client.
func (v *View) SetServerMetadata(ctx context.Context, serverID, key, value string) error {
	return v.c.setServerMetadata(ctx, v, serverID, key, value)
}

// ShelvedServers implements nova.Client.
func (v *View) ShelvedServers(ctx context.Context) ([]nova.Server, error) {
	return v.c.shelvedServers(ctx, v)
}

// Demand implements nova.DemandSource (a local source: not charged).
func (v *View) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	return v.c.Demand(ctx, host)
}

// ---- the cost model without a cloud ----

// Calls the virtual clock prices (WarmRequests): nova.Client's method
// names, and HostFirst for a caller's first read of a host.
const (
	CallHost                 = "Host"
	CallHostFirst            = "HostFirst"
	CallServers              = "Servers"
	CallServer               = "Server"
	CallServices             = "Services"
	CallMigrations           = "Migrations"
	CallMigrationsNone       = "MigrationsNone"
	CallMigrationsInProgress = "MigrationsInProgress"
	CallLiveMigrate          = "LiveMigrate"
	CallShelve               = "Shelve"
	CallShelveOffload        = "ShelveOffload"
	CallSetServerMetadata    = "SetServerMetadata"
)

// WarmRequests is the requests one nova.Client call sends (the costs
// table) when the caller's caches are warm (resource provider known,
// inventories and the group index fresh) and a listing fits one page:
// what a simulation that models Nova's cost without a cloud (the virtual
// clock) charges for a call. CallHostFirst is a host's read that also
// finds its provider and reads its inventories; CallMigrationsNone a
// server's migrations when it has none (Nova's answer does not tell a
// missing server from one never migrated: + Server). False for a call
// it does not know. TestWarmRequestsAreWhatTheCloudCharges keeps it
// equal to the cloud's own charging.
func WarmRequests(call string) ([]nova.Template, bool) {
	switch call {
	case CallHost:
		return []nova.Template{tServicesHost, tUsages}, true
	case CallHostFirst:
		return []nova.Template{tServicesHost, tProvidersName, tInventories, tUsages}, true
	case CallServers:
		return []nova.Template{tServersHost}, true
	case CallServer:
		return []nova.Template{tServer}, true
	case CallServices:
		return []nova.Template{tServicesAll}, true
	case CallMigrations:
		return []nova.Template{tMigrations}, true
	case CallMigrationsNone:
		return []nova.Template{tMigrations, tServer}, true
	case CallMigrationsInProgress:
		return []nova.Template{tInProgress}, true
	case CallLiveMigrate, CallShelve, CallShelveOffload:
		return []nova.Template{tAction}, true
	case CallSetServerMetadata:
		return []nova.Template{tMetadata(nova.MetaShelved, "x")}, true
	}
	return nil, false
}
