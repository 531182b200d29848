package fake_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

func TestFaultInjection(t *testing.T) {
	faulty := func(cfg *fake.Config) { cfg.FaultRate, cfg.Seed = 0.5, 3 }
	t.Run("reads fail with 500 or timeout, never 409", func(t *testing.T) {
		c, _ := newCloud(t, faulty)
		var unavailable int
		for i := 0; i < 200; i++ {
			_, err := c.Hosts(context.Background())
			switch {
			case err == nil:
			case errors.Is(err, nova.ErrUnavailable):
				unavailable++
			default:
				t.Fatalf("read failed with %v", err)
			}
		}
		if unavailable < 60 || unavailable > 140 || c.FaultsInjected() != unavailable {
			t.Fatalf("%d unavailable of 200 at rate 0.5, %d counted", unavailable, c.FaultsInjected())
		}
	})
	t.Run("actions fail with 500, 409 or timeout and change nothing", func(t *testing.T) {
		c, _ := newCloud(t, faulty)
		mustAdd(t, c, server("s", "compute-1", 1, 512))
		kinds := map[string]int{}
		for i := 0; i < 300; i++ {
			err := c.SetServiceStatus(context.Background(), "compute-2", i%2 == 0, "x")
			switch {
			case err == nil:
				kinds["ok"]++
			case errors.Is(err, nova.ErrConflict):
				kinds["409"]++
			case errors.Is(err, nova.ErrUnavailable):
				kinds["unavailable"]++
			default:
				t.Fatalf("err %v", err)
			}
		}
		if kinds["ok"] == 0 || kinds["409"] == 0 || kinds["unavailable"] == 0 {
			t.Fatalf("outcomes %v", kinds)
		}
		if c.Stats().Faults != c.FaultsInjected() || c.FaultsInjected() != kinds["409"]+kinds["unavailable"] {
			t.Errorf("faults %d, stats %+v, outcomes %v", c.FaultsInjected(), c.Stats(), kinds)
		}
	})
	t.Run("timeout waits for the deadline and never hangs", func(t *testing.T) {
		c, _ := newCloud(t, func(cfg *fake.Config) { cfg.FaultRate, cfg.Seed = 1, 7 })
		var timeouts int
		for i := 0; i < 40; i++ {
			start := time.Now() // before the deadline is set: a loaded machine may pause in between
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			_, err := c.Host(ctx, "compute-1")
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				timeouts++
				if !errors.Is(err, nova.ErrUnavailable) || time.Since(start) < 5*time.Millisecond {
					t.Fatalf("timeout %v after %v", err, time.Since(start))
				}
			}
			// Without a deadline the same draw returns at once.
			done := make(chan error, 1)
			go func() { _, err := c.Host(context.Background(), "compute-1"); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, nova.ErrUnavailable) {
					t.Fatalf("err %v at rate 1", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a call without deadline hung")
			}
		}
		if timeouts == 0 {
			t.Fatal("no timeout drawn in 40 calls")
		}
	})
	t.Run("a done context fails at once", func(t *testing.T) {
		c, _ := newCloud(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Hosts(ctx); !errors.Is(err, nova.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("migrations end in error", func(t *testing.T) {
		c, clock := newCloud(t, func(cfg *fake.Config) { cfg.FaultRate, cfg.Seed = 0.3, 11 })
		mustAdd(t, c, server("s", "compute-1", 1, 512))
		ctx := context.Background()
		hosts := []string{"compute-2", "compute-3", "compute-1"}
		for i := 0; i < 100 && c.Stats().Failed == 0; i++ {
			s, err := c.Server(ctx, "s")
			if err != nil {
				continue
			}
			dst := hosts[i%3]
			if dst == s.Host {
				dst = hosts[(i+1)%3]
			}
			_, _ = c.LiveMigrate(ctx, "s", dst)
			clock.Advance(5 * time.Second)
		}
		st := c.Stats()
		if st.Failed == 0 || st.Refused != 0 {
			t.Fatalf("stats %+v: want an injected migration failure", st)
		}
		ms, _ := c.Migrations(ctx, "s")
		for _, m := range ms {
			if m.Status == nova.MigrationError {
				return
			}
		}
		t.Fatal("no migration in error")
	})
}

// Agents poll and migrate concurrently while the clock moves: -race
// clean, and the observer and audit stay quiet (newCloud's cleanup).
func TestConcurrentAgents(t *testing.T) {
	c, clock := newCloud(t)
	const hosts, perHost = 8, 4
	for h := 0; h < hosts; h++ {
		c.AddHost(hostSpec(fmt.Sprintf("h%d", h), 64, 1<<20))
		for s := 0; s < perHost; s++ {
			mustAdd(t, c, server(fmt.Sprintf("h%d-s%d", h, s), fmt.Sprintf("h%d", h), 1, 256))
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				clock.Advance(50 * time.Millisecond)
				c.Advance()
			}
		}
	}()
	var agents sync.WaitGroup
	for a := 0; a < hosts; a++ {
		agents.Add(1)
		go func(a int) {
			defer agents.Done()
			rng := rand.New(rand.NewSource(int64(a)))
			me := fmt.Sprintf("h%d", a)
			ctx := context.Background()
			for i := 0; i < 200; i++ {
				_, _ = c.Hosts(ctx)
				_, _ = c.Demand(ctx, me)
				ss, err := c.Servers(ctx, me)
				if err != nil || len(ss) == 0 {
					continue
				}
				s := ss[rng.Intn(len(ss))]
				_, _ = c.LiveMigrate(ctx, s.ID, fmt.Sprintf("h%d", rng.Intn(hosts)))
				_, _ = c.Migrations(ctx, s.ID)
			}
		}(a)
	}
	agents.Wait()
	close(stop)
	wg.Wait()
	clock.Advance(time.Hour)
	if st := c.Stats(); st.Started == 0 || st.InFlight != 0 || st.Completed+st.Failed != st.Started {
		t.Errorf("stats %+v", st)
	}
}
