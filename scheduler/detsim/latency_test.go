package detsim

import (
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// Nova's API on the virtual clock (nova.go): the executor waits for its
// re-check's reads, its request and the poll that sees the migration end,
// each as long as nova/fake's API model takes (fake.API), so a plan ends
// later by whole requests' latency; the meter records every request at
// that latency, and a capped API queues them.
func TestVirtualNovaLatencyDelaysPlans(t *testing.T) {
	const lat = 100 * time.Millisecond
	run := func(latency time.Duration, rate float64) (took time.Duration, c *Cluster) {
		hosts := []scheduler.Host{
			{Name: "h1", CPUs: 8, RAMMB: 16384, AllocVCPUs: 8, AllocRAMMB: 16384, Servers: []scheduler.Server{{ID: "s1", VCPUs: 2, RAMMB: 2048, CPU: 2, RAM: 1024}}},
			{Name: "h2", CPUs: 8, RAMMB: 16384, AllocVCPUs: 8, AllocRAMMB: 16384},
		}
		c = New(Options{Seed: 1, NoAgents: true, Recheck: true, EventDriven: true, NovaLatency: latency, NovaRate: rate}, hosts)
		mv := scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s1", From: "h1", To: "h2", VCPUs: 2, RAMMB: 2048, CPU: 2, RAM: 1024}
		t0 := c.Now
		var end time.Time
		c.Execute(scheduler.ExecRequest{Event: scheduler.Event{ID: "ev"}, Plan: scheduler.Plan{Steps: [][]scheduler.Action{{mv}}, Snapshot: hosts}},
			func(o scheduler.Outcome, class scheduler.EndClass, _ string) {
				if class != scheduler.EndExecuted {
					t.Errorf("plan ended %v %v, want executed", o, class)
				}
				end = c.Now
			})
		if !c.RunUntil(time.Minute, func() bool { return !end.IsZero() }) {
			t.Fatal("the plan never ended")
		}
		return end.Sub(t0), c
	}
	base, c0 := run(0, 0)
	slow, c := run(lat, 0)
	s := c.Nova.Meter.Snapshot()
	if s.Total == 0 || s.P50 < lat*3/4 || s.Max > lat || c0.Nova.Meter.Snapshot().Max != 0 {
		t.Errorf("meter: %d requests, p50 %v, max %v; without latency max %v", s.Total, s.P50, s.Max, c0.Nova.Meter.Snapshot().Max)
	}
	// The re-check reads (the server, its migrations, the destination's
	// usage and servers: 5 requests), the live migration's request, the
	// last poll and the migration listing: 8 requests the executor waits
	// for, one after the other. The events are on the 1 ms grid of the
	// event-driven clock's ticks, so the delay is at least that.
	if d := slow - base; d < 8*lat || d > 8*lat+time.Second {
		t.Errorf("plan took %v with %v a request, %v without: %v later, want about %v", slow, lat, base, d, 8*lat)
	}
	// A capped API queues: at 2 requests a second the chain waits.
	queued, cq := run(0, 2)
	if st := cq.Nova.APIStats(); st.Queued == 0 || queued <= base+2*time.Second {
		t.Errorf("API at 2 req/s: %d queued (longest %v), plan %v (unlimited: %v)", st.Queued, st.QueueMax, queued, base)
	}
}
