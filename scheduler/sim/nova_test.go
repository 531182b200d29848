package sim

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

// The split of an agent's requests between at rest and during events
// follows its records, and leaves the region's watch out.
func TestNovaUseSplitsRestAndEvents(t *testing.T) {
	m := nova.NewMeter()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := t0
	at := func(d time.Duration) { mu.Lock(); now = t0.Add(d); mu.Unlock() }
	u := newNovaUse(m, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	req := func(caller string, n int, tp nova.Template) {
		for range n {
			m.Record(nova.Request{Caller: caller, Template: tp})
		}
	}
	list := nova.Template{Service: nova.ServiceCompute, Method: "GET", Path: "/servers/detail?all_tenants&host&limit"}

	u.start("a")
	u.start("b")
	req("a", 7, list) // start-up, before begin
	u.begin()
	req("a", 2, list)
	req("a", 30, regionWatch) // a is the watcher: apart
	at(time.Minute)
	u.record("a", scheduler.Record{Kind: scheduler.RecJoined})
	req("a", 5, list)
	at(2 * time.Minute)
	u.record("a", scheduler.Record{Kind: scheduler.RecDissolved})
	req("a", 1, list)
	u.record("b", scheduler.Record{Kind: scheduler.RecEventRaised}) // b busy from 2 min
	req("b", 4, list)
	at(3 * time.Minute)
	u.stop("b") // killed: nothing counted after
	req("b", 100, list)
	at(4 * time.Minute)
	u.end()

	if u.startup != 7 {
		t.Errorf("start-up %d, want 7", u.startup)
	}
	// a: 2 + 1 requests over 3 minutes at rest, 5 over 1 minute busy;
	// b: 0 over 2 minutes at rest, 4 over 1 minute busy.
	if u.rest.requests != 3 || u.rest.time != 5*time.Minute {
		t.Errorf("at rest %d requests over %s, want 3 over 5m", u.rest.requests, u.rest.time)
	}
	if u.busy.requests != 9 || u.busy.time != 2*time.Minute {
		t.Errorf("during events %d requests over %s, want 9 over 2m", u.busy.requests, u.busy.time)
	}
	if u.rest.by[list] != 3 || u.rest.by[regionWatch] != 0 || u.busy.by[list] != 9 {
		t.Errorf("by template: at rest %v, during events %v", u.rest.by, u.busy.by)
	}
	if r := perTemplate(u.rest); len(r) != 1 || r[0].PerAgentMinute != 0.6 {
		t.Errorf("perTemplate(at rest) = %+v, want 3 requests over 5 agent-minutes", r)
	}
}

// A run reports what the agents cost Nova, and a capped API queues.
func TestSimulateReportsNovaCost(t *testing.T) {
	c := small(1)
	c.NovaAPIRate = 100
	r := runKeptUp(t, c, protocolStarved)
	n := r.Nova
	if n.Requests.Total == 0 || len(n.Requests.ByTemplate) == 0 || n.Requests.ByTemplate[0].Count == 0 {
		t.Fatalf("no requests reported: %+v", n.Requests)
	}
	var sum int64
	for _, tc := range n.Requests.ByTemplate {
		sum += tc.Count
	}
	if sum > n.Requests.Total {
		t.Errorf("top templates sum to %d > total %d", sum, n.Requests.Total)
	}
	// Every live agent is at rest or in an event from the warm-up on.
	want := float64(c.Hosts) * (c.Duration - novaWarmup(c)).Minutes()
	got := n.PerAgentMinute.AgentMinutesAtRest + n.PerAgentMinute.AgentMinutesDuringEvents
	if math.Abs(got-want) > 0.1*want {
		t.Errorf("agent-minutes %.1f at rest + %.1f during events = %.1f, want about %.1f",
			n.PerAgentMinute.AgentMinutesAtRest, n.PerAgentMinute.AgentMinutesDuringEvents, got, want)
	}
	if n.PerAgentMinute.AtRest <= 0 || n.RegionWatch.Requests == 0 || n.StartupRequests == 0 {
		t.Errorf("per agent-minute %+v, watch %+v, start-up %d", n.PerAgentMinute, n.RegionWatch, n.StartupRequests)
	}
	if due := float64(c.Hosts) * (c.Duration - novaWarmup(c)).Seconds(); float64(r.Samples.Due) < 0.9*due || float64(r.Samples.Due) > 1.1*due || r.Samples.Ratio < 0.5 || r.Samples.Ratio > 1.2 {
		t.Errorf("samples %+v: a small run keeps up", r.Samples)
	}
	if secs := int(c.Duration / time.Second); r.Samples.HarnessTicks < secs/2 || r.Samples.HarnessTicks > secs+2 {
		t.Errorf("harness ticked %d times in a %d s run", r.Samples.HarnessTicks, secs)
	}
	// 40 agents reading their hosts at start against 100 requests/s.
	if n.APIRPS != 100 || n.Queued == 0 || n.QueueMaxMS <= 0 || n.P99MS < 10 {
		t.Errorf("capped API: %d queued, longest %.0f ms, p99 %.1f ms", n.Queued, n.QueueMaxMS, n.P99MS)
	}
}
