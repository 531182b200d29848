package node_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/extsched"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Agents publish their host's summary at rest, at once when the host is
// drained (not 30 s later), and the drain's leader publishes the moves of
// its plan.
func TestSummariesFollowTheHost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 10)
	hosts := []string{"h1", "h2", "h3"}
	cloud := smallCloud(t, clock, hosts, "h2", 2, &nova.Demand{CPU: 1.5, RAMMB: 512})
	nats := startNATS(t)
	var mu sync.Mutex
	var got []extsched.Summary
	sub := nats.connect(t, "scheduler-api")
	s, err := sub.Subscribe(bus.SummarySubject("RegionOne", "*"), func(_ string, data []byte) {
		sm, err := extsched.DecodeSummary(data)
		if err != nil {
			t.Errorf("bad summary: %v", err)
			return
		}
		mu.Lock()
		got = append(got, sm)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Unsubscribe() }()
	find := func(f func(extsched.Summary) bool) (extsched.Summary, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, sm := range got {
			if f(sm) {
				return sm, true
			}
		}
		return extsched.Summary{}, false
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	sc := node.DefaultSummaryConfig()
	for _, h := range hosts {
		tr := nats.connect(t, h)
		ac := scheduler.DefaultConfig(h)
		ac.Incarnation = "t"
		r, err := node.New(node.DefaultConfig(), ac, hosts, node.Deps{
			Bus: tr, Nova: cloud, Demand: node.OnlyHost(cloud, h), Arbiter: consensus.NewLocal(clock.Now), Clock: clock, Log: zerolog.Nop(),
			Watcher: func() bool { return h == "h1" },
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() { defer wg.Done(); defer tr.Close(); _ = r.Run(ctx) }()
		go func() { defer wg.Done(); _ = r.PublishSummaries(ctx, sc) }()
	}
	var first extsched.Summary
	if !waitFor(t, 10*time.Second, func() bool {
		var ok bool
		first, ok = find(func(s extsched.Summary) bool { return s.Host == "h2" })
		return ok
	}) {
		t.Fatal("no summary of h2")
	}
	if first.CPUs != 8 || first.RAMMB != 16384 || first.AllocVCPUs != 32 || first.Servers != 2 ||
		first.CPUDemand != 3 || first.RAMDemand != 1024 || first.UsedVCPUs != 2 || first.Draining || first.Seq != 1 {
		t.Errorf("first summary of h2: %+v", first)
	}

	disabled := clock.Now()
	if err := cloud.SetServiceStatus(ctx, "h2", true, "dvms:maintenance test"); err != nil {
		t.Fatal(err)
	}
	if !waitFor(t, 10*time.Second, func() bool {
		_, ok := find(func(s extsched.Summary) bool { return s.Host == "h2" && s.Draining })
		return ok
	}) {
		t.Fatal("no summary says h2 is draining")
	}
	dr, _ := find(func(s extsched.Summary) bool { return s.Host == "h2" && s.Draining })
	if lag := dr.At.Sub(disabled); lag > sc.Interval/2 {
		t.Errorf("draining published %s after the disable, want it on change (interval %s)", lag, sc.Interval)
	}
	if !waitFor(t, 20*time.Second, func() bool {
		_, ok := find(func(s extsched.Summary) bool { return s.PlanMoves["h2"].Out > 0 })
		return ok
	}) {
		t.Error("no leader published the moves of its drain plan out of h2")
	}
	if !waitFor(t, 20*time.Second, func() bool { return len(cloud.ServersOn("h2")) == 0 }) {
		t.Fatal("h2 not drained")
	}
	// Once the plan ended, its leader says so.
	if !waitFor(t, 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		last := map[string]extsched.Summary{}
		for _, s := range got {
			last[s.Host] = s
		}
		for _, s := range last {
			if len(s.PlanMoves) > 0 {
				return false
			}
		}
		return len(last) == 3
	}) {
		t.Error("plan moves still published after the drain")
	}
}
