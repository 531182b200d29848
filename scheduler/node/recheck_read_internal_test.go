package node

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
)

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
	cloud, _ := manualCloud(t, testServer{"busy", "h2", 1, 5.5}, testServer{"x", "h2", 1, 0},
		testServer{"s1", "h1", 1, 1.5}, testServer{"s3", "h3", 1, 1})
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
