package node

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
)

// recheckServer is a server of a re-check test's cloud: on host, with
// vcpus and a demand of cpu cores (and 512 MB).
type recheckServer struct {
	id, host string
	vcpus    int
	cpu      float64
}

// recheckCloud is the re-check tests' cloud: hosts h1 to h3 of 8 cores
// and 16 GB, not overcommitted, on a clock that does not move, with
// servers of 1 GB.
func recheckCloud(t *testing.T, servers ...recheckServer) *fake.Cloud {
	t.Helper()
	cloud := fake.New(fake.DefaultConfig(), fake.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	for _, h := range []string{"h1", "h2", "h3"} {
		cloud.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 1, RAMAllocRatio: 1})
	}
	for _, s := range servers {
		if err := cloud.AddServer(nova.Server{ID: s.id, Name: s.id, Host: s.host, VCPUs: s.vcpus, RAMMB: 1024}); err != nil {
			t.Fatal(err)
		}
		if err := cloud.SetDemand(s.id, nova.Demand{CPU: s.cpu, RAMMB: 512}); err != nil {
			t.Fatal(err)
		}
	}
	return cloud
}

// Two moves of one plan into one host are re-checked together, each
// reading the destination. The one deciding first judges the
// destination's servers at the plan's latest reading of them, not at its
// own older answer: a server there read at 0 cores by the first re-check
// and at 1.5 by the second makes the destination full (as nova/fake's
// observer judges it, by the plan's last read). Seen in dvms simulate
// --workload saturated on a busy machine: a move started into 16.04 of
// 16 cores, judged at its own read of a server at 0.00 cores while the
// plan's later read said 0.90.
func TestRecheckJudgesAtThePlansLatestRead(t *testing.T) {
	ctx := context.Background()
	cloud := recheckCloud(t, recheckServer{"busy", "h2", 1, 5.5}, recheckServer{"x", "h2", 1, 0},
		recheckServer{"s1", "h1", 1, 1.5}, recheckServer{"s3", "h3", 1, 1})
	e := NewExecutor(DefaultExecConfig(), cloud, cloud, scheduler.DefaultThresholds(), Wall{}, zerolog.Nop())
	f := newFlight(scheduler.Plan{})
	ev := scheduler.Event{}
	a := scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s1", From: "h1", To: "h2", VCPUs: 1, RAMMB: 1024, CPU: 1.5, RAM: 512}
	b := scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s3", From: "h3", To: "h2", VCPUs: 1, RAMMB: 1024, CPU: 1, RAM: 512}

	ra := e.readAll(ctx, ev, a, f) // a's re-check reads h2: x at 0
	if err := cloud.SetDemand("x", nova.Demand{CPU: 1.5, RAMMB: 512}); err != nil {
		t.Fatal(err)
	}
	rb := e.readAll(ctx, ev, b, f) // b's, later: x at 1.5
	if _, held, sk := judge(e.thr, a, f, ra); sk.class != ReasonOverload {
		t.Fatalf("a judged %q (held %v): want it skipped, h2 at 5.5 + 1.5 (x, the plan's latest read) + 1.5 of 8 cores", sk.why, held != nil)
	}
	if _, _, sk := judge(e.thr, b, f, rb); sk.why != "" {
		t.Fatalf("b judged %q: want it to fit, h2 at 5.5 + 1.5 + 1 of 8 cores", sk.why)
	}
}
