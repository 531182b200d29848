package node_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
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

// Whole runners (not the pure simulator) over the in-memory hub with 10 %
// of messages dropped, 10 % duplicated and random delays that reorder
// them, merges decided by a three-voter Raft group, and Nova faults from
// the simulated cloud: DESIGN §8 holds (no violation, no server lost),
// events still get solved, and once faults stop no agent stays stuck in a
// partition.
func TestRunnersUnderMessageAndNovaFaults(t *testing.T) {
	const n = 12
	clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 10)
	fc := fake.DefaultConfig()
	fc.FaultRate = 0.05
	cloud := fake.New(fc, clock)
	var hosts []string
	for i := 1; i <= n; i++ {
		h := fmt.Sprintf("compute-%02d", i)
		hosts = append(hosts, h)
		cloud.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 32768, CPUAllocRatio: 4, RAMAllocRatio: 1})
		load := 2
		if i%4 == 1 {
			load = 5 // 10 cores of demand on 8: overloaded
		}
		for j := 0; j < load; j++ {
			id := fmt.Sprintf("s-%02d-%d", i, j)
			if err := cloud.AddServer(nova.Server{ID: id, Host: h, VCPUs: 2, RAMMB: 2048}); err != nil {
				t.Fatal(err)
			}
			if err := cloud.SetDemand(id, nova.Demand{CPU: 2, RAMMB: 1024}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cloud.SetServiceStatus(context.Background(), hosts[n-1], true, "dvms:maintenance faults test"); err != nil {
		t.Fatal(err)
	}

	hub := bus.NewHub(7)
	var fmu sync.Mutex
	faulty := true
	rng := rand.New(rand.NewSource(7))
	chance := func(p float64) bool {
		fmu.Lock()
		defer fmu.Unlock()
		return faulty && rng.Float64() < p
	}
	hub.Drop = func(_, _, _ string) bool { return chance(0.10) }
	hub.Dup = func(_, _, _ string) bool { return chance(0.10) }
	hub.Delay = func(_, _, _ string) int {
		if chance(0.2) {
			fmu.Lock()
			defer fmu.Unlock()
			return 1 + rng.Intn(3)
		}
		return 0
	}
	group, err := consensus.StartInProcessGroup(3, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer group.Shutdown()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() { // the hub's delivery pump
		defer wg.Done()
		for ctx.Err() == nil {
			if hub.Deliver() == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()

	var mu sync.Mutex
	ended := map[scheduler.Outcome]int{}
	failedNoEvent := 0
	rc := node.DefaultConfig()
	rc.Region = "faults"
	rc.Exec.Poll = 200 * time.Millisecond
	var runners []*node.Runner
	for _, h := range hosts {
		ac := scheduler.DefaultConfig(h)
		ac.Incarnation = "f"
		r, err := node.New(rc, ac, hosts, node.Deps{
			Bus: hub.Transport(h), Nova: cloud, Demand: cloud, Arbiter: group, Clock: clock, Log: testLog(t, h),
			Hooks: node.Hooks{
				OnRecord: func(_ string, r scheduler.Record) {
					if r.Kind == scheduler.RecEventEnded {
						mu.Lock()
						ended[r.Outcome]++
						mu.Unlock()
					}
				},
				OnExec: func(_ string, ev scheduler.Event, res node.ExecResult) {
					for _, a := range res.Actions {
						if a.Outcome == node.ActionFailed && ev.ID == "" {
							mu.Lock()
							failedNoEvent++
							mu.Unlock()
						}
					}
				},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		runners = append(runners, r)
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}

	solved := func() int { mu.Lock(); defer mu.Unlock(); return ended[scheduler.Solved] }
	// Two solved events prove the procedure works through the faults;
	// more would only measure how slow -race makes a 2-core machine. The
	// deadline is generous (it ends as soon as two are solved): beside
	// another test run, one event in 60 s was seen.
	if !waitFor(t, 150*time.Second, func() bool { return solved() >= 2 }) {
		mu.Lock()
		got := fmt.Sprint(ended)
		mu.Unlock() // the runners' hooks take mu: never stop holding it
		t.Fatalf("under faults, fewer than 2 events solved in 150 s (ended: %s)", got)
	}
	// Faults off: every partition ends (timeouts), nobody stays stuck.
	fmu.Lock()
	faulty = false
	fmu.Unlock()
	if !waitFor(t, 30*time.Second, func() bool {
		for _, r := range runners {
			if p := r.Partition(); p != nil && p.State != scheduler.Finishing {
				return false
			}
		}
		return true
	}) {
		for _, r := range runners {
			if p := r.Partition(); p != nil {
				t.Errorf("%s still in partition %s (%s) 30 s after faults stopped", r.Host(), p.ID, p.State)
			}
		}
	}
	if v := cloud.Violations(); len(v) > 0 {
		t.Fatalf("safety violations: %v", v)
	}
	if lost := cloud.ServersLost(); lost != 0 {
		t.Fatalf("%d servers lost", lost)
	}
	mu.Lock()
	nf := failedNoEvent
	mu.Unlock()
	if nf > 0 {
		t.Fatalf("%d failed actions without an event id", nf)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("ended %v; hub sent %d, dropped %d; nova faults %d", ended, hub.Sent, hub.Dropped, cloud.Stats().Faults)
}

// testLog writes a runner's log to $DVMS_TEST_LOG_DIR/<host>.log when set
// (to debug a failing run), and nowhere otherwise.
func testLog(t *testing.T, host string) zerolog.Logger {
	dir := os.Getenv("DVMS_TEST_LOG_DIR")
	if dir == "" {
		return zerolog.Nop()
	}
	f, err := os.Create(filepath.Join(dir, host+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return zerolog.New(f).Level(zerolog.DebugLevel).With().Timestamp().Str("host", host).Logger()
}
