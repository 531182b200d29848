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
	"github.com/dvms-project/dvms/internal/testlog"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

type cluster struct {
	cloud *fake.Cloud
	ns    *bus.Embedded
	hosts []string
	logs  testlog.Buffer // the agents' logs, for a failure's story
	mu    sync.Mutex
	recs  []scheduler.Record
	wg    sync.WaitGroup
}

// startCluster runs one runtime per host over a real in-process NATS
// server, on a simulated cloud whose first host is overloaded.
func startCluster(t *testing.T, ctx context.Context, n int, scale float64) *cluster {
	t.Helper()
	clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), scale)
	c := &cluster{cloud: fake.New(fake.DefaultConfig(), clock)}
	for i := 1; i <= n; i++ {
		h := fmt.Sprintf("compute-%d", i)
		c.hosts = append(c.hosts, h)
		c.cloud.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 32768, CPUAllocRatio: 4, RAMAllocRatio: 1})
		load := 2
		if i == 1 {
			load = 5 // 5 servers x 2 cores = 10 > 8
		}
		for j := 0; j < load; j++ {
			id := fmt.Sprintf("s-%d-%d", i, j)
			if err := c.cloud.AddServer(nova.Server{ID: id, Name: id, Host: h, VCPUs: 2, RAMMB: 2048}); err != nil {
				t.Fatal(err)
			}
			c.cloud.SetDemand(id, nova.Demand{CPU: 2, RAMMB: 1024})
		}
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	c.ns = ns
	t.Cleanup(ns.Shutdown)
	arb := consensus.NewLocal(clock.Now)
	rc := node.DefaultConfig()
	rc.Region = "it"
	rc.Exec.Poll = 200 * time.Millisecond
	for _, h := range c.hosts {
		tr, err := bus.ConnectNATS(ctx, bus.Config{URL: ns.ClientURL(), Name: h, ReconnectWait: 50 * time.Millisecond, MaxReconnects: -1})
		if err != nil {
			t.Fatal(err)
		}
		ac := scheduler.DefaultConfig(h)
		ac.Incarnation = "it"
		r, err := node.New(rc, ac, c.hosts, node.Deps{
			Bus: tr, Nova: c.cloud, Demand: c.cloud, Arbiter: arb, Clock: clock, Log: zerolog.New(&c.logs).Level(zerolog.InfoLevel).With().Str("agent", h).Logger(),
			Hooks: node.Hooks{OnRecord: func(_ string, r scheduler.Record) {
				c.mu.Lock()
				c.recs = append(c.recs, r)
				c.mu.Unlock()
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer tr.Close()
			_ = r.Run(ctx)
		}()
	}
	return c
}

func (c *cluster) count(k scheduler.RecordKind, o scheduler.Outcome) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.recs {
		if r.Kind == k && (o == 0 || r.Outcome == o) {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// Agents over a real NATS server solve an overload on a simulated cloud.
func TestAgentsOverNATSSolveOverload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := startCluster(t, ctx, 5, 10)
	defer c.wg.Wait()
	defer cancel()
	ok := waitFor(t, 20*time.Second, func() bool {
		return !c.cloud.Overloaded("compute-1") && c.count(scheduler.RecEventEnded, scheduler.Solved) >= 1
	})
	if !ok {
		t.Fatalf("overload not solved: %d events raised, %d ended", c.count(scheduler.RecEventRaised, 0), c.count(scheduler.RecEventEnded, 0))
	}
	if v := c.cloud.Violations(); len(v) > 0 || c.cloud.ServersLost() != 0 {
		t.Fatalf("violations %v, lost %d", v, c.cloud.ServersLost())
	}
	if c.cloud.Stats().Completed == 0 {
		t.Fatal("solved without a migration")
	}
}

// The NATS server restarts during a run: agents reconnect, partitions in
// flight time out, and the event is raised again and solved.
func TestNATSRestartDuringRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := startCluster(t, ctx, 5, 10)
	defer c.wg.Wait()
	defer cancel()
	// Restart as soon as the first partition exists. (Bounds for a busy
	// machine: conditions, so a run that keeps up takes no longer.)
	if !waitFor(t, 30*time.Second, func() bool { return c.count(scheduler.RecEventRaised, 0) > 0 }) {
		t.Fatal("no event raised within 30 s: the restart would not interrupt a partition")
	}
	if err := c.ns.Restart(); err != nil {
		t.Fatal(err)
	}
	ok := waitFor(t, 60*time.Second, func() bool {
		return !c.cloud.Overloaded("compute-1") && c.count(scheduler.RecEventEnded, scheduler.Solved) >= 1
	})
	if !ok {
		c.mu.Lock()
		for _, r := range c.recs {
			t.Logf("record %+v", r)
		}
		c.mu.Unlock()
		t.Logf("agents' logs:\n%s", c.logs.String())
		t.Fatalf("not solved after a NATS restart: raised %d, ended %d", c.count(scheduler.RecEventRaised, 0), c.count(scheduler.RecEventEnded, 0))
	}
	if v := c.cloud.Violations(); len(v) > 0 || c.cloud.ServersLost() != 0 {
		t.Fatalf("violations %v, lost %d", v, c.cloud.ServersLost())
	}
}

// Stopping every agent (SIGTERM) while a plan runs: the leader finishes
// the plan, so no migration is left running unrecorded, and its event
// ends before Run returns.
func TestGracefulStopFinishesPlan(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startCluster(t, ctx, 5, 10)
	if !waitFor(t, 20*time.Second, func() bool { return c.count(scheduler.RecPlanned, 0) > 0 }) {
		cancel()
		c.wg.Wait()
		t.Fatal("no plan within 20 s")
	}
	cancel()
	stopped := make(chan struct{})
	go func() { c.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("runners did not stop within 30 s")
	}
	st := c.cloud.Stats()
	if st.InFlight != 0 || st.Started == 0 {
		t.Fatalf("after a graceful stop: %+v (want migrations started and none in flight)", st)
	}
	if c.count(scheduler.RecEventEnded, 0) == 0 {
		t.Fatal("the event being executed did not end before the agents stopped")
	}
	if v := c.cloud.Violations(); len(v) > 0 || c.cloud.ServersLost() != 0 {
		t.Fatalf("violations %v, lost %d", v, c.cloud.ServersLost())
	}
}
