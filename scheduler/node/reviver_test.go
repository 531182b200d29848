package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// reviverCloud: host-a (8 cores) with load, host-b for the others, and
// offloaded servers: two marked by dvms (priorities 5 and 1), one
// shelved by an operator (no mark).
func reviverCloud(t *testing.T, loadA float64) (*fake.Cloud, *node.Scaled) {
	t.Helper()
	clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 100)
	c := fake.New(fake.DefaultConfig(), clock)
	for _, h := range []string{"host-a", "host-b"} {
		c.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 2, RAMAllocRatio: 1})
	}
	if err := c.AddServer(nova.Server{ID: "busy", Host: "host-a", VCPUs: 4, RAMMB: 2048}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetDemand("busy", nova.Demand{CPU: loadA, RAMMB: 1024}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []nova.Server{
		{ID: "low", VCPUs: 2, RAMMB: 1024, Status: nova.StatusShelvedOffloaded, Metadata: map[string]string{nova.MetaShelved: "ev-1", nova.MetaPriority: "1"}},
		{ID: "high", VCPUs: 2, RAMMB: 1024, Status: nova.StatusShelvedOffloaded, Metadata: map[string]string{nova.MetaShelved: "ev-2", nova.MetaPriority: "5"}},
		{ID: "operators", VCPUs: 1, RAMMB: 512, Status: nova.StatusShelvedOffloaded, Metadata: map[string]string{nova.MetaPriority: "9"}},
	} {
		if err := c.AddServer(s); err != nil {
			t.Fatal(err)
		}
	}
	return c, clock
}

func newReviver(t *testing.T, c *fake.Cloud, clock node.Clock) *node.Reviver {
	t.Helper()
	cfg := node.DefaultReviverConfig("host-a")
	cfg.Interval, cfg.Poll = time.Second, 500*time.Millisecond
	r, err := node.NewReviver(cfg, c, c, nil, clock, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The most important dvms-shelved server comes back first, onto the
// reviver's host, and loses its mark; the operator's stays shelved.
func TestReviverUnshelvesByPriority(t *testing.T) {
	c, clock := reviverCloud(t, 2)
	r := newReviver(t, c, clock)
	ctx := context.Background()
	for _, want := range []string{"high", "low", ""} {
		got, err := r.Round(ctx)
		if err != nil || got != want {
			t.Fatalf("round: unshelved %q, %v; want %q", got, err, want)
		}
		if want == "" {
			break
		}
		s, err := c.Server(ctx, want)
		if err != nil || s.Status != nova.StatusActive || s.Host != "host-a" || s.Metadata[nova.MetaShelved] != "" {
			t.Fatalf("%s after unshelve: %+v, %v", want, s, err)
		}
		acts := c.Actions(want)
		if last := acts[len(acts)-1]; last.Name != "unshelve" || last.GlobalRequestID == "" {
			t.Fatalf("instance action %+v: want unshelve with a request id", last)
		}
	}
	if s, _ := c.Server(ctx, "operators"); s.Status != nova.StatusShelvedOffloaded {
		t.Fatalf("the operator's shelved server was unshelved: %+v", s)
	}
	if v := c.Violations(); len(v) > 0 {
		t.Fatal(v)
	}
}

// No unshelve that would overload the host (headroom kept) or that
// placement would refuse, none on a disabled host, none while the agent
// is busy.
func TestReviverKeepsRoom(t *testing.T) {
	ctx := context.Background()
	// 6 of 8 cores used: a 2-core server would leave less than 10 %.
	c, clock := reviverCloud(t, 6)
	r := newReviver(t, c, clock)
	if got, err := r.Round(ctx); err != nil || got != "" {
		t.Fatalf("unshelved %q (%v) onto a host that would go above the headroom", got, err)
	}

	// Little demand, but placement full (16 of 16 allocatable vCPUs): no
	// unshelve that placement would refuse (NoValidHost).
	cf, clockf := reviverCloud(t, 1)
	if err := cf.AddServer(nova.Server{ID: "idle", Host: "host-a", VCPUs: 12, RAMMB: 1024}); err != nil {
		t.Fatal(err)
	}
	if err := cf.SetDemand("idle", nova.Demand{CPU: 0.1, RAMMB: 256}); err != nil {
		t.Fatal(err)
	}
	if got, err := newReviver(t, cf, clockf).Round(ctx); err != nil || got != "" {
		t.Fatalf("unshelved %q (%v) onto a host whose placement vCPUs are all allocated", got, err)
	}
	for _, id := range []string{"high", "low"} {
		for _, a := range cf.Actions(id) {
			if a.Name == "unshelve" {
				t.Fatalf("asked Nova to unshelve %s onto a host whose placement vCPUs are all allocated: %+v", id, a)
			}
		}
	}

	c2, clock2 := reviverCloud(t, 1)
	if err := c2.SetServiceStatus(ctx, "host-a", true, "kernel upgrade"); err != nil {
		t.Fatal(err)
	}
	r2 := newReviver(t, c2, clock2)
	if got, _ := r2.Round(ctx); got != "" {
		t.Fatalf("unshelved %q onto a disabled host", got)
	}

	c3, clock3 := reviverCloud(t, 1)
	r3 := newReviver(t, c3, clock3)
	runCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // ~30 rounds of simulated time
	defer cancel()
	_ = r3.Run(runCtx, nil, func() bool { return true })
	if s, _ := c3.Server(ctx, "high"); s.Status != nova.StatusShelvedOffloaded {
		t.Fatalf("unshelved while the agent was busy: %+v", s)
	}
}

// A server another agent unshelved first (409) is skipped, not an error.
func TestReviverConflictSkipped(t *testing.T) {
	ctx := context.Background()
	c, clock := reviverCloud(t, 1)
	if _, err := c.Unshelve(ctx, "high", "host-b"); err != nil {
		t.Fatal(err)
	}
	// "high" is ACTIVE on host-b now; "low" remains.
	r := newReviver(t, c, clock)
	if got, err := r.Round(ctx); err != nil || got != "low" {
		t.Fatalf("round: %q, %v; want low", got, err)
	}
}

// The executor marks a server before shelving it, with the event id.
func TestExecutorMarksShelved(t *testing.T) {
	ctx := context.Background()
	c, clock := reviverCloud(t, 1)
	e := node.NewExecutor(node.DefaultExecConfig(), c, c, scheduler.DefaultThresholds(), clock, zerolog.Nop())
	ev := scheduler.Event{ID: "ev-shelve", Kind: scheduler.Overload, Host: "host-a"}
	// The overload is real (the executor re-checks the reason).
	if err := c.SetDemand("busy", nova.Demand{CPU: 9, RAMMB: 1024}); err != nil {
		t.Fatal(err)
	}
	plan := scheduler.Plan{Steps: [][]scheduler.Action{{{Kind: scheduler.Shelve, Server: "busy", From: "host-a", VCPUs: 4, RAMMB: 2048}}}}
	res := e.Execute(ctx, ev, plan)
	if res.Done != 1 {
		t.Fatalf("shelve not done: %+v", res)
	}
	s, err := c.Server(ctx, "busy")
	if err != nil || s.Status != nova.StatusShelvedOffloaded || s.Metadata[nova.MetaShelved] != "ev-shelve" {
		t.Fatalf("after shelve: %+v, %v; want offloaded and marked ev-shelve", s, err)
	}
}

// Issue 10: a dvms shelve left half done (the agent stopped between
// shelve and shelve-offload) is finished or undone by the agent of the
// host it sits on, and only by that one: unshelved in place when the
// host has room, offloaded otherwise (a later round unshelves it where
// there is room).
func TestReviverSettlesHalfDoneShelve(t *testing.T) {
	for _, tc := range []struct {
		name   string
		loadA  float64
		status string
	}{
		{"room: undone", 2, nova.StatusActive},
		{"no room: finished", 7.5, nova.StatusShelvedOffloaded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, clock := reviverCloud(t, tc.loadA)
			ctx := context.Background()
			if err := c.AddServer(nova.Server{ID: "half", Host: "host-a", VCPUs: 2, RAMMB: 1024}); err != nil {
				t.Fatal(err)
			}
			if err := c.SetServerMetadata(ctx, "half", nova.MetaShelved, "ev-9"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Shelve(ctx, "half"); err != nil {
				t.Fatal(err)
			}
			// host-b's agent leaves it alone (it may unshelve the others).
			cfgB := node.DefaultReviverConfig("host-b")
			cfgB.Interval, cfgB.Poll = time.Second, 500*time.Millisecond
			rb, err := node.NewReviver(cfgB, c, c, nil, clock, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rb.Round(ctx); err != nil {
				t.Fatal(err)
			}
			if s, _ := c.Server(ctx, "half"); s.Status != nova.StatusShelved || s.Host != "host-a" {
				t.Fatalf("host-b's reviver touched a server shelved on host-a: %+v", s)
			}
			if _, err := newReviver(t, c, clock).Round(ctx); err != nil {
				t.Fatal(err)
			}
			s, _ := c.Server(ctx, "half")
			if s.Status != tc.status {
				t.Fatalf("half: %s on %q, want %s", s.Status, s.Host, tc.status)
			}
			if tc.status == nova.StatusActive && (s.Host != "host-a" || s.Metadata[nova.MetaShelved] != "") {
				t.Fatalf("undone shelve: %+v, want ACTIVE on host-a without the mark", s)
			}
			if c.ServersLost() != 0 {
				t.Fatalf("%d servers lost", c.ServersLost())
			}
		})
	}
}
