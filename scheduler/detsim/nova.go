package detsim

import (
	"fmt"
	"math/rand"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler/node"
)

// The runtime's calls to Nova, counted on the virtual clock. detsim does
// not read Nova (its ground truth is Hosts), but it runs the runtime's
// decisions that do, and counts the nova.Client calls they would make:
//
//   - the executor's re-checks: the reads node.PlanCheck says each verdict
//     needs (begin);
//   - each action: a live migration's request and its follow-up (one
//     in-progress listing a poll while it runs, one at its end that no
//     longer lists it, then its migrations); a shelve's mark, request,
//     re-reads and offload;
//   - each agent's monitor: the reads node.Refresh schedules (its host's
//     servers every Config.Refresh, service and usage every
//     Config.PlacementRefresh, both at start, the servers again when it
//     leaves a partition, everything when the watch reports its service
//     changed);
//   - the region's maintenance watch: one listing of the services every
//     Config.ServiceWatch, node.WatchStep deciding what it reports.
//
// A caller's first read of a host is HostFirst (it finds the host's
// resource provider and reads its inventories). The prices
// (nova/fake.WarmRequests) assume warm caches otherwise and one page per
// listing. Every request passes the region's API as nova/fake models it
// (fake.API: a FIFO queue at Options.NovaRate requests a second, plus
// Options.NovaLatency) when it is made, and its latency is recorded on
// Nova.Meter. The runtime waits for what it waits for on the wall clock:
// an action starts once its re-check's reads and its request have
// answered, and its end is seen once the last poll and the migration
// listing have answered (progress). A chain of requests made one after
// the other is charged when it starts, each request waiting the queue
// as it stands then. The monitors' and the watch's reads load the queue;
// their answers are not waited for (the agents sample the ground truth
// of the second). Faults are not modelled here (--clock wall runs
// nova/fake with them).

// novaCalls counts calls by nova.Client method name.
type novaCalls struct {
	// Calls: every call; Startup: those of the monitors' first reads.
	Calls, Startup map[string]int64
	known          map[[2]string]bool       // caller, host: provider known
	sched          map[string]*node.Refresh // by agent
	force          map[string]bool          // the watch reported the host's service changed
	left           map[string]bool          // the agent left a partition: re-read its servers
	inPart         map[string]bool
	watched        map[string]nova.Service // the watch's known services
	jitter         *rand.Rand

	// api is the region's API; Meter every request's template and
	// latency, Rest those after the monitors' first reads.
	api         *fake.API
	Meter, Rest *nova.Meter
	prices      map[string][]nova.Template
	now         func() time.Time
}

// APIStats is how the region's API queue held (Options.NovaRate).
func (n *novaCalls) APIStats() fake.APIStats { return n.api.Stats() }

func (n *novaCalls) init(seed int64, api *fake.API, now func() time.Time) {
	n.api, n.now = api, now
	n.Meter, n.Rest = nova.NewMeter(), nova.NewMeter()
	n.prices = map[string][]nova.Template{}
	n.Calls, n.Startup = map[string]int64{}, map[string]int64{}
	n.known, n.sched = map[[2]string]bool{}, map[string]*node.Refresh{}
	n.force, n.left, n.inPart = map[string]bool{}, map[string]bool{}, map[string]bool{}
	n.watched = map[string]nova.Service{}
	n.jitter = rand.New(rand.NewSource(seed + 3))
}

// read counts one call of caller (startup: a monitor's first reads) and
// returns its latency; a host's read is HostFirst when the caller never
// read it.
func (n *novaCalls) read(caller string, r node.Read, startup bool) time.Duration {
	if r.Method == "Host" {
		k := [2]string{caller, r.Host}
		if !n.known[k] {
			n.known[k] = true
			r.Method = "HostFirst"
		}
	}
	return n.call(r.Method, startup)
}

// call counts one call of method and passes its requests through the
// API now; it returns the call's latency (its requests one after the
// other).
func (n *novaCalls) call(method string, startup bool) time.Duration {
	m := n.Calls
	if startup {
		m = n.Startup
	}
	m[method]++
	ts, ok := n.prices[method]
	if !ok {
		if ts, ok = fake.WarmRequests(method); !ok {
			panic(fmt.Sprintf("detsim: nova/fake has no price for %s", method)) // a call detsim itself names
		}
		n.prices[method] = ts
	}
	now := n.now()
	var d time.Duration
	for _, t := range ts {
		lat := n.api.Slot(now)
		r := nova.Request{Template: t, Latency: lat, Class: nova.ClassOK}
		n.Meter.Record(r)
		if !startup {
			n.Rest.Record(r)
		}
		d += lat
	}
	return d
}

// reads counts a re-check's reads, made one after the other, and
// returns how long they took.
func (n *novaCalls) reads(caller string, rs []node.Read) time.Duration {
	var d time.Duration
	for _, r := range rs {
		d += n.read(caller, r, false)
	}
	return d
}

// migrate counts a live migration of d followed every poll; start is
// how long its request took to answer, seen how long the last poll and
// the migration listing took (its end is seen that much after it).
func (n *novaCalls) migrate(d, poll time.Duration) (start, seen time.Duration) {
	start = n.call("LiveMigrate", false)
	polls := int64(d/poll) + 1
	for k := int64(0); k < polls; k++ {
		seen = n.call("MigrationsInProgress", false)
	}
	seen += n.call("Migrations", false)
	return start, seen
}

// shelve counts a shelve followed to its offload and returns how long
// its requests took.
func (n *novaCalls) shelve() time.Duration {
	d := n.call("SetServerMetadata", false)
	d += n.call("Shelve", false)
	d += n.call("Server", false)
	d += n.call("Server", false)
	return d + n.call("ShelveOffload", false)
}

// caller is who runs e's plan: its agent, or the planner outside.
func (c *Cluster) caller(e *exec) string {
	if e.host == "" {
		return "planner"
	}
	return e.host
}

// refresh runs agent n's monitor schedule at a sample (node.Refresh).
func (c *Cluster) refresh(n string) {
	s := c.Nova.sched[n]
	if s == nil {
		s = &node.Refresh{}
		c.Nova.sched[n] = s
	}
	startup := s.PlacementAt.IsZero()
	placement, servers := s.Due(c.Now, c.Nova.force[n], c.Nova.left[n])
	delete(c.Nova.force, n)
	delete(c.Nova.left, n)
	if placement {
		c.Nova.read(n, node.Read{Method: "Host", Host: n}, startup)
	}
	if servers {
		c.Nova.read(n, node.Read{Method: "Servers", Host: n}, startup)
	}
	s.Read(c.Now, placement, servers, c.opt.Node, c.Nova.jitter)
}

// notePartition notes that agent n left a partition (its monitor re-reads
// its servers, as the runner asks it).
func (c *Cluster) notePartition(n string) {
	in := c.Agents[n].Partition() != nil
	if in != c.Nova.inPart[n] {
		if !in {
			c.Nova.left[n] = true
			delete(c.Nova.inPart, n)
		} else {
			c.Nova.inPart[n] = true
		}
	}
}

// watch is one turn of the region's maintenance watch on the ground
// truth (node.WatchStep): one listing of the services; an agent whose
// host's service changed re-reads its host at its next sample.
func (c *Cluster) watch() {
	c.Nova.call("Services", false)
	svcs := make([]nova.Service, 0, len(c.names))
	for _, name := range c.names {
		h := c.Hosts[name]
		s := nova.Service{Host: name, Status: nova.ServiceEnabled, State: nova.ServiceUp}
		if h.Disabled || h.Draining {
			s.Status = nova.ServiceDisabled
		}
		if h.Draining {
			s.DisabledReason = "dvms:maintenance"
		}
		svcs = append(svcs, s)
	}
	// The periodic republish (all) costs Nova nothing: an agent re-reads
	// only a service that changed.
	for _, no := range node.WatchStep(c.Nova.watched, svcs, false) {
		if no.Changed && !c.Crashed[no.Service.Host] {
			c.Nova.force[no.Service.Host] = true
		}
	}
}
