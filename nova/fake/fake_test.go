package fake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

func server(id, host string, vcpus, ram int) nova.Server {
	return nova.Server{ID: id, Name: id, Host: host, VCPUs: vcpus, RAMMB: ram}
}

func TestMigrationProgressesAndHoldsBothAllocations(t *testing.T) {
	c, clock := newCloud()
	ctx := context.Background()
	if err := c.AddServer(server("s1", "compute-1", 2, 4096)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LiveMigrate(ctx, "s1", "compute-2"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		ms, _ := c.Migrations(ctx, "s1")
		seen[ms[0].Status] = true
		if !ms[0].Terminal() {
			h1, _ := c.Host(ctx, "compute-1")
			h2, _ := c.Host(ctx, "compute-2")
			if h1.VCPUsUsed != 2 || h2.VCPUsUsed != 2 {
				t.Fatalf("allocations while moving: %d and %d, want 2 on both", h1.VCPUsUsed, h2.VCPUsUsed)
			}
			s, _ := c.Server(ctx, "s1")
			if s.Status != nova.StatusMigrating || s.TaskState != "migrating" {
				t.Fatalf("server while moving: %+v", s)
			}
		}
		clock.Advance(300 * time.Millisecond) // 4096 MB at 1000 MB/s + 1 s ≈ 5.1 s
	}
	for _, st := range []string{nova.MigrationQueued, nova.MigrationRunning, nova.MigrationCompleted} {
		if !seen[st] {
			t.Errorf("status %s never seen (saw %v)", st, seen)
		}
	}
	h1, _ := c.Host(ctx, "compute-1")
	if h1.VCPUsUsed != 0 {
		t.Fatalf("source still holds %d VCPU", h1.VCPUsUsed)
	}
}

func TestServerGroupPolicyRefusesDestination(t *testing.T) {
	c, clock := newCloud()
	ctx := context.Background()
	c.AddGroup(nova.ServerGroup{ID: "g", Name: "web", Policy: nova.PolicyAntiAffinity})
	a, b := server("a", "compute-1", 1, 512), server("b", "compute-2", 1, 512)
	a.Group, b.Group = &nova.ServerGroup{ID: "g"}, &nova.ServerGroup{ID: "g"}
	_ = c.AddServer(a)
	_ = c.AddServer(b)
	if _, err := c.LiveMigrate(ctx, "a", "compute-2"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	ms, _ := c.Migrations(ctx, "a")
	if ms[0].Status != nova.MigrationError {
		t.Fatalf("anti-affinity violated: %+v", ms[0])
	}
	if s, _ := c.Server(ctx, "a"); s.Host != "compute-1" {
		t.Fatalf("server moved to %s", s.Host)
	}
}

// The observer must catch a plan that overloads its destination and a
// server moved twice in one plan: it can fail.
func TestObserverCatchesBadPlans(t *testing.T) {
	c, clock := newCloud()
	ctx := nova.WithRequestID(context.Background(), "req-plan-1")
	_ = c.AddServer(server("busy", "compute-2", 4, 1024))
	c.SetDemand("busy", nova.Demand{CPU: 7, RAMMB: 1024})
	_ = c.AddServer(server("hot", "compute-1", 2, 1024))
	c.SetDemand("hot", nova.Demand{CPU: 2, RAMMB: 1024})
	// The executor re-checks demand right before acting: reading it makes
	// an overload the plan's fault, not drift.
	_, _ = c.Demand(ctx, "compute-1")
	_, _ = c.Demand(ctx, "compute-2")
	if _, err := c.LiveMigrate(ctx, "hot", "compute-2"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if _, err := c.LiveMigrate(ctx, "hot", "compute-3"); err != nil {
		t.Fatal(err)
	}
	v := c.Violations()
	if len(v) != 2 || !strings.Contains(v[0].Message, "overloads destination") || !strings.Contains(v[1].Message, "twice") {
		t.Fatalf("violations %v", v)
	}
	if c.ServersLost() != 0 {
		t.Fatal("servers lost")
	}
	// Demand that changes after the last read is drift, reported apart.
	_ = c.AddServer(server("late", "compute-1", 1, 512))
	_, _ = c.Demand(ctx, "compute-1")
	_, _ = c.Demand(ctx, "compute-2")
	c.SetDemand("busy", nova.Demand{CPU: 8, RAMMB: 1024})
	if _, err := c.LiveMigrate(ctx, "late", "compute-2"); err != nil {
		t.Fatal(err)
	}
	if len(c.Drift()) != 1 || len(c.Violations()) != 2 {
		t.Fatalf("drift %v violations %v", c.Drift(), c.Violations())
	}
}

func TestFaultInjection(t *testing.T) {
	clock := fake.NewManualClock(time.Unix(0, 0))
	cfg := fake.DefaultConfig()
	cfg.FaultRate, cfg.Seed = 0.5, 3
	c := fake.New(cfg, clock)
	c.AddHost(nova.Host{Name: "h", VCPUs: 4, RAMMB: 4096})
	var unavailable, conflict int
	for i := 0; i < 200; i++ {
		_, err := c.Hosts(context.Background())
		switch {
		case errors.Is(err, nova.ErrUnavailable):
			unavailable++
		case errors.Is(err, nova.ErrConflict):
			conflict++
		}
	}
	if unavailable == 0 || conflict == 0 || c.FaultsInjected() != unavailable+conflict {
		t.Fatalf("faults: %d unavailable, %d conflict, %d counted", unavailable, conflict, c.FaultsInjected())
	}
}

func BenchmarkServersOnHost(b *testing.B) {
	clock := fake.NewManualClock(time.Unix(0, 0))
	c := fake.New(fake.DefaultConfig(), clock)
	for h := 0; h < 1000; h++ {
		c.AddHost(nova.Host{Name: hostName(h), VCPUs: 16, RAMMB: 65536, CPUAllocRatio: 4})
		for s := 0; s < 10; s++ {
			_ = c.AddServer(server(hostName(h)+"-"+hostName(s), hostName(h), 2, 2048))
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Servers(ctx, hostName(i%1000)); err != nil {
			b.Fatal(err)
		}
	}
}

func hostName(i int) string {
	return "h" + string(rune('a'+i%26)) + string(rune('a'+(i/26)%26)) + string(rune('a'+(i/676)%26))
}
