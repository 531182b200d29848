package fake_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

// waitFor polls cond (wall time) until it holds or a second passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A finite API: requests beyond APIRate queue FIFO on the cloud's clock,
// the calls really wait, and the meter sees wait + service + base
// latency.
func TestAPIRateQueuesRequests(t *testing.T) {
	c, clock := newCloud(t, func(cfg *fake.Config) { cfg.APIRate, cfg.APILatency = 10, 50*time.Millisecond })
	mustAdd(t, c, server("s1", "compute-1", 1, 512))
	ctx := context.Background()
	done := make(chan error, 3)
	for _, caller := range []string{"a", "b", "c"} {
		go func() {
			_, err := c.Client(caller).Server(ctx, "s1")
			done <- err
		}()
	}
	waitFor(t, "three calls waiting on the clock", func() bool { return clock.Waiting() == 3 })
	// Service 100 ms each, one at a time, plus 50 ms: 150, 250, 350 ms.
	for i, step := range []time.Duration{150 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond} {
		select {
		case err := <-done:
			t.Fatalf("a call returned (%v) before its turn", err)
		default:
		}
		clock.Advance(step - time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("step %d: a call returned (%v) 1 ms early", i, err)
		case <-time.After(5 * time.Millisecond):
		}
		clock.Advance(time.Millisecond)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	s := c.Meter().Snapshot()
	if s.Total != 3 || s.Max != 350*time.Millisecond || s.P50 < 250*time.Millisecond || s.P50 > 313*time.Millisecond {
		t.Errorf("meter: %d requests, p50 %s, max %s; want 3, 250 ms, 350 ms", s.Total, s.P50, s.Max)
	}
	if st := c.APIStats(); st.Queued != 2 || st.QueueMax != 200*time.Millisecond {
		t.Errorf("APIStats %+v, want 2 queued, 200 ms at most", st)
	}
	// A request arriving after the queue drained is served at once.
	clock.Advance(time.Second)
	go func() { _, err := c.Host(ctx, "compute-1"); done <- err }()
	// Host: 4 requests, one after the other, 150 ms each.
	for range 4 {
		waitFor(t, "the next request of Host", func() bool { return clock.Waiting() == 1 })
		clock.Advance(150 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := c.APIStats(); st.Queued != 2 {
		t.Errorf("queued %d, want still 2", st.Queued)
	}
}

// A caller whose ctx ends while queued gets nova.ErrUnavailable, and the
// request is charged as a transport error.
func TestAPIQueueHonoursContext(t *testing.T) {
	c, clock := newCloud(t, func(cfg *fake.Config) { cfg.APIRate = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := c.Host(ctx, "compute-1"); done <- err }()
	waitFor(t, "the call waiting", func() bool { return clock.Waiting() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, nova.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if s := c.Meter().Snapshot(); s.Total != 1 || s.Errors != 1 {
		t.Errorf("charged %d requests, %d errors; want 1 and 1", s.Total, s.Errors)
	}
}

// Each caller's view is charged under its name; Uncharged costs nothing
// and never waits, even with a finite API.
func TestCallersAndUncharged(t *testing.T) {
	c, _ := newCloud(t, func(cfg *fake.Config) { cfg.APIRate = 1 })
	mustAdd(t, c, server("s1", "compute-1", 1, 512))
	ctx := context.Background()
	free := c.Uncharged()
	for range 3 {
		if _, err := free.Servers(ctx, "compute-1"); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Meter().Snapshot(); s.Total != 0 {
		t.Fatalf("uncharged reads charged %d requests", s.Total)
	}
	c2, clock2 := newCloud(t)
	mustAdd(t, c2, server("s1", "compute-1", 1, 512))
	clock2.Advance(time.Hour) // a server older than any group index
	a, b := c2.Client("compute-1"), c2.Client("compute-2")
	if _, err := a.Host(ctx, "compute-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Servers(ctx, "compute-1"); err != nil { // one page + group listing (cold, no group: one empty page)
		t.Fatal(err)
	}
	if _, err := b.Servers(ctx, "compute-1"); err != nil { // cached group index: one page
		t.Fatal(err)
	}
	m := c2.Meter()
	if m.CallerTotal("compute-1") != 4 || m.CallerTotal("compute-2") != 3 || m.CallerTotal("") != 0 {
		t.Errorf("charged compute-1 %d, compute-2 %d, the cloud %d; want 4, 3, 0",
			m.CallerTotal("compute-1"), m.CallerTotal("compute-2"), m.CallerTotal(""))
	}
	var names []string
	for _, ts := range m.Snapshot().Templates {
		names = append(names, ts.Template.String())
	}
	slices.Sort(names)
	want := []string{
		"GET compute /os-server-groups?all_projects&limit&offset",
		"GET compute /os-services?binary&host",
		"GET compute /servers/detail?all_tenants&host&limit",
		"GET placement /resource_providers/{id}/inventories",
		"GET placement /resource_providers/{id}/usages",
		"GET placement /resource_providers?name",
	}
	if !slices.Equal(names, want) {
		t.Errorf("templates %q\nwant %q", names, want)
	}
	if _, err := c2.Server(ctx, "nope"); !errors.Is(err, nova.ErrNotFound) {
		t.Fatal(err)
	}
	if s := m.Snapshot(); s.Errors != 1 || m.CallerTotal("") != 1 {
		t.Errorf("a 404 charged %d errors to the cloud's own caller (%d requests)", s.Errors, m.CallerTotal(""))
	}
}
