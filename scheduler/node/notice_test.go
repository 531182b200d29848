package node_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// gatedHost holds every Host read of one host while the gate is shut
// (a slow nova-api), and counts the reads that returned.
type gatedHost struct {
	nova.Client
	host     string
	mu       sync.Mutex
	gate     chan struct{} // nil: open
	returned int
}

func (g *gatedHost) shut() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedHost) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

func (g *gatedHost) reads() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.returned
}

func (g *gatedHost) Host(ctx context.Context, h string) (nova.Host, error) {
	if h == g.host {
		g.mu.Lock()
		gate := g.gate
		g.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return nova.Host{}, ctx.Err()
			}
		}
		defer func() { g.mu.Lock(); g.returned++; g.mu.Unlock() }()
	}
	return g.Client.Host(ctx, h)
}

// noticeCloud runs two agents, h1 and h2 (two servers on h2), with no
// maintenance watch: the test publishes the notices itself. Every Nova
// read of h2's Host, by either agent, goes through gate.
type noticeCloud struct {
	cloud *fake.Cloud
	gate  *gatedHost
	pub   bus.Transport
	mu    sync.Mutex
	recs  []scheduler.Record
}

func startNoticeCloud(t *testing.T, ctx context.Context) *noticeCloud {
	t.Helper()
	clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 10)
	nc := &noticeCloud{cloud: fake.New(fake.DefaultConfig(), clock)}
	hosts := []string{"h1", "h2"}
	for _, h := range hosts {
		nc.cloud.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 4, RAMAllocRatio: 1})
	}
	for i := range 2 {
		id := fmt.Sprintf("s%d", i)
		if err := nc.cloud.AddServer(nova.Server{ID: id, Name: id, Host: "h2", VCPUs: 1, RAMMB: 1024}); err != nil {
			t.Fatal(err)
		}
	}
	nc.gate = &gatedHost{Client: nc.cloud, host: "h2"}
	nats := startNATS(t)
	nc.pub = nats.connect(t, "dvms-cli")
	t.Cleanup(func() { _ = nc.pub.Close() })
	var wg sync.WaitGroup
	runners := map[string]*node.Runner{}
	for _, h := range hosts {
		tr := nats.connect(t, h)
		ac := scheduler.DefaultConfig(h)
		ac.Incarnation = "t"
		r, err := node.New(node.DefaultConfig(), ac, hosts, node.Deps{
			Bus: tr, Nova: nc.gate, Demand: node.OnlyHost(nc.cloud, h), Arbiter: consensus.NewLocal(clock.Now), Clock: clock, Log: zerolog.Nop(),
			Watcher: func() bool { return false },
			Hooks: node.Hooks{OnRecord: func(_ string, rec scheduler.Record) {
				nc.mu.Lock()
				nc.recs = append(nc.recs, rec)
				nc.mu.Unlock()
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		runners[h] = r
		wg.Add(1)
		go func() { defer wg.Done(); defer tr.Close(); _ = r.Run(ctx) }()
	}
	t.Cleanup(wg.Wait)
	for h, r := range runners {
		if !waitFor(t, 20*time.Second, func() bool { _, ok := r.LastSample(); return ok }) {
			t.Fatalf("%s took no sample", h)
		}
	}
	return nc
}

// notify publishes what the region's watch would about h2.
func (nc *noticeCloud) notify(t *testing.T, ctx context.Context, s nova.Service) {
	t.Helper()
	s.Host = "h2"
	data, err := node.EncodeServiceNotice(s, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.pub.Publish(ctx, bus.ServiceSubject(node.DefaultConfig().Region, "h2"), data); err != nil {
		t.Fatal(err)
	}
}

// record is the first record of kind about h2's MAINTENANCE event.
func (nc *noticeCloud) record(kind scheduler.RecordKind) (scheduler.Record, bool) {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	for _, r := range nc.recs {
		if r.Kind == kind && r.Event.Kind == scheduler.Maintenance && r.Event.Host == "h2" {
			return r, true
		}
	}
	return scheduler.Record{}, false
}

// A drain notice is sampled at once, before Nova answers the agent's
// re-read (three round trips off the path of a drain's first
// migration), but nothing moves before Nova has confirmed the service.
func TestNoticeSampledBeforeNovaAnswers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc := startNoticeCloud(t, ctx)
	before := nc.gate.reads()
	nc.gate.shut() // nova-api is slow from now on
	defer nc.gate.open()
	if err := nc.cloud.SetServiceStatus(ctx, "h2", true, "dvms:maintenance test"); err != nil {
		t.Fatal(err)
	}
	nc.notify(t, ctx, nova.Service{Status: nova.ServiceDisabled, State: nova.ServiceUp, DisabledReason: "dvms:maintenance test"})
	if !waitFor(t, 20*time.Second, func() bool { _, ok := nc.record(scheduler.RecEventRaised); return ok }) {
		t.Fatal("h2 raised no MAINTENANCE while its Nova re-read was pending")
	}
	if n := nc.gate.reads(); n != before {
		t.Fatalf("%d reads of h2 returned before the event: the notice was not sampled first", n-before)
	}
	// The plan waits for Nova's word on the service.
	time.Sleep(300 * time.Millisecond) // 3 s of cloud time: a plan could have moved by now
	if n := len(nc.cloud.ServersOn("h2")); n != 2 {
		t.Fatalf("%d of 2 servers left h2 before Nova confirmed the drain", 2-n)
	}
	nc.gate.open()
	if !waitFor(t, 10*time.Second, func() bool { return len(nc.cloud.ServersOn("h2")) == 0 }) {
		t.Errorf("h2 not drained once Nova answered: %d servers left", len(nc.cloud.ServersOn("h2")))
	}
}

// A notice Nova contradicts (forged, or stale) moves nothing: the
// executor re-reads the service before the first move.
func TestNoticeNovaContradictsMovesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc := startNoticeCloud(t, ctx)
	nc.notify(t, ctx, nova.Service{Status: nova.ServiceDisabled, State: nova.ServiceUp, DisabledReason: "dvms:maintenance forged"})
	if !waitFor(t, 20*time.Second, func() bool { _, ok := nc.record(scheduler.RecEventRaised); return ok }) {
		t.Fatal("h2 raised no MAINTENANCE from the notice")
	}
	if !waitFor(t, 10*time.Second, func() bool { _, ok := nc.record(scheduler.RecEventEnded); return ok }) {
		t.Fatal("the MAINTENANCE event Nova contradicts never ended")
	}
	if n := len(nc.cloud.ServersOn("h2")); n != 2 {
		t.Errorf("%d servers moved off h2 on a notice Nova contradicts", 2-n)
	}
	for _, id := range []string{"s0", "s1"} {
		if ms, err := nc.cloud.Migrations(ctx, id); err != nil || len(ms) != 0 {
			t.Errorf("server %s: migrations %v (%v) on a notice Nova contradicts", id, ms, err)
		}
	}
}
