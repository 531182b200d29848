package fake_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

// The virtual clock prices the runtime's calls with WarmRequests: each
// call, made on a cloud whose caller's caches are warm, must charge the
// meter exactly what WarmRequests says.
func TestWarmRequestsAreWhatTheCloudCharges(t *testing.T) {
	c, clock := newCloud(t)
	mustAdd(t, c, server("s1", "compute-1", 2, 2048), server("s2", "compute-1", 2, 2048), server("s3", "compute-2", 2, 2048))
	ctx := context.Background()
	v := c.Client("agent")
	// Warm the caller's caches (the servers older than the group index's
	// margin for clock skew), and give s1 a migration.
	clock.Advance(2 * time.Minute)
	for _, h := range []string{"compute-1", "compute-2", "compute-3"} {
		if _, err := v.Host(ctx, h); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Servers(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.LiveMigrate(ctx, "s1", "compute-3"); err != nil {
		t.Fatal(err)
	}
	for range 600 {
		if ms, _ := v.Migrations(ctx, "s1"); len(ms) > 0 && ms[0].Terminal() {
			break
		}
		clock.Advance(time.Second)
	}
	for _, tc := range []struct {
		call string
		do   func() error
	}{
		{fake.CallHost, func() error { _, err := v.Host(ctx, "compute-1"); return err }},
		{fake.CallServers, func() error { _, err := v.Servers(ctx, "compute-1"); return err }},
		{fake.CallServer, func() error { _, err := v.Server(ctx, "s2"); return err }},
		{fake.CallServices, func() error { _, err := v.Services(ctx); return err }},
		{fake.CallMigrations, func() error { _, err := v.Migrations(ctx, "s1"); return err }},
		{fake.CallMigrationsNone, func() error { _, err := v.Migrations(ctx, "s2"); return err }},
		{fake.CallMigrationsInProgress, func() error { _, err := v.MigrationsInProgress(ctx, "s2"); return err }},
		{fake.CallSetServerMetadata, func() error { return v.SetServerMetadata(ctx, "s3", nova.MetaShelved, "ev") }},
		{fake.CallLiveMigrate, func() error { _, err := v.LiveMigrate(ctx, "s2", "compute-2"); return err }},
		{fake.CallShelve, func() error { _, err := v.Shelve(ctx, "s3"); return err }},
		{fake.CallHostFirst, func() error { _, err := c.Client("fresh").Host(ctx, "compute-1"); return err }},
	} {
		t.Run(tc.call, func(t *testing.T) {
			before := maps.Clone(c.Meter().CallerCounts("agent"))
			fresh := maps.Clone(c.Meter().CallerCounts("fresh"))
			if err := tc.do(); err != nil {
				t.Fatal(err)
			}
			got := map[nova.Template]int64{}
			for tm, n := range c.Meter().CallerCounts("agent") {
				if d := n - before[tm]; d > 0 {
					got[tm] = d
				}
			}
			for tm, n := range c.Meter().CallerCounts("fresh") {
				if d := n - fresh[tm]; d > 0 {
					got[tm] += d
				}
			}
			want := map[nova.Template]int64{}
			ts, ok := fake.WarmRequests(tc.call)
			if !ok {
				t.Fatalf("WarmRequests does not know %s", tc.call)
			}
			for _, tm := range ts {
				want[tm]++
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s charged %v, WarmRequests says %v", tc.call, got, want)
			}
		})
	}
	if _, ok := fake.WarmRequests("Nothing"); ok {
		t.Error("WarmRequests knows a call that does not exist")
	}
}
