package fake_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

// bigCloud is the `dvms simulate` scale: 1000 hosts, 10000 servers.
func bigCloud(b *testing.B) (*fake.Cloud, *fake.ManualClock) {
	b.Helper()
	clock := fake.NewManualClock(epoch)
	c := fake.New(fake.DefaultConfig(), clock)
	for h := 0; h < 1000; h++ {
		c.AddHost(nova.Host{Name: fmt.Sprintf("compute-%d", h), VCPUs: 32, RAMMB: 131072, CPUAllocRatio: 4, RAMAllocRatio: 1})
		for s := 0; s < 10; s++ {
			id := fmt.Sprintf("s-%d-%d", h, s)
			if err := c.AddServer(nova.Server{ID: id, Name: id, Host: fmt.Sprintf("compute-%d", h), VCPUs: 2, RAMMB: 4096}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return c, clock
}

func BenchmarkServersOnHost(b *testing.B) {
	c, _ := bigCloud(b)
	ctx := context.Background()
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("compute-%d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if ss, err := c.Servers(ctx, names[i%1000]); err != nil || len(ss) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkLiveMigrate starts one migration per iteration, the clock
// moving 10 ms each time, so about 500 moves are in flight at once.
func BenchmarkLiveMigrate(b *testing.B) {
	c, clock := bigCloud(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := i % 1000
		id := fmt.Sprintf("s-%d-%d", h, (i/1000)%10)
		if _, err := c.LiveMigrate(ctx, id, fmt.Sprintf("compute-%d", (h+1+i/10000)%1000)); err != nil && !isConflict(err) {
			b.Fatal(err)
		}
		clock.Advance(10 * time.Millisecond)
	}
	b.StopTimer()
	if v := c.Violations(); len(v) > 0 {
		b.Fatalf("violations: %v", v[0])
	}
}

func BenchmarkHosts(b *testing.B) {
	c, _ := bigCloud(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Hosts(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
