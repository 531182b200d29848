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

// The virtual clock prices the executor's re-checks from PlanCheck's
// Reads: for each plan, the requests the executor's re-checks send
// nova/fake (in advise mode: re-checked, not sent) must be the requests
// PlanCheck's reads cost by nova/fake's cost model, and the verdicts the
// same.
func TestPlanCheckReadsWhatTheExecutorReads(t *testing.T) {
	mv := func(id, from, to string) scheduler.Action {
		return scheduler.Action{Kind: scheduler.LiveMigrate, Server: id, From: from, To: to, VCPUs: 2, RAMMB: 2048, CPU: 1, RAM: 1024}
	}
	shelve := scheduler.Action{Kind: scheduler.Shelve, Server: "s2", From: "h1", VCPUs: 2, RAMMB: 2048, CPU: 1, RAM: 1024}
	for _, tc := range []struct {
		name    string
		ev      scheduler.Event
		demand  float64 // of each server on h1
		drained bool
		steps   []scheduler.Action // one a step: the executor judges them in turn
	}{
		{name: "no event", ev: scheduler.Event{ID: "e"}, demand: 1, steps: []scheduler.Action{mv("s1", "h1", "h2"), mv("s2", "h1", "h3")}},
		{name: "overload its agent confirms", ev: scheduler.Event{ID: "e", Kind: scheduler.Overload, Host: "h1"}, demand: 3,
			steps: []scheduler.Action{mv("s1", "h1", "h2"), mv("s2", "h1", "h3")}},
		{name: "overload gone", ev: scheduler.Event{ID: "e", Kind: scheduler.Overload, Host: "h1"}, demand: 1,
			steps: []scheduler.Action{mv("s1", "h1", "h2"), mv("s2", "h1", "h3")}},
		{name: "underload", ev: scheduler.Event{ID: "e", Kind: scheduler.Underload, Host: "h1"}, demand: 0.1,
			steps: []scheduler.Action{mv("s1", "h1", "h2")}},
		{name: "drain", ev: scheduler.Event{ID: "e", Kind: scheduler.Maintenance, Host: "h1"}, drained: true, demand: 1,
			steps: []scheduler.Action{mv("s1", "h1", "h2"), shelve}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 200)
			// Caches and the re-check's bound long enough for a busy
			// machine (the clock runs 200 times faster than the wall).
			fc := fake.DefaultConfig()
			fc.GroupCacheTTL, fc.InventoryCacheTTL = 24*time.Hour, 24*time.Hour
			cloud := fake.New(fc, clock)
			ctx := context.Background()
			var snap []scheduler.Host
			for _, h := range []string{"h1", "h2", "h3"} {
				cloud.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 1, RAMAllocRatio: 1})
				snap = append(snap, scheduler.Host{Name: h, CPUs: 8, RAMMB: 16384, AllocVCPUs: 8, AllocRAMMB: 16384})
			}
			for _, id := range []string{"s1", "s2", "s3"} {
				if err := cloud.AddServer(nova.Server{ID: id, Name: id, Host: "h1", VCPUs: 2, RAMMB: 2048}); err != nil {
					t.Fatal(err)
				}
				if err := cloud.SetDemand(id, nova.Demand{CPU: tc.demand, RAMMB: 1024}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.drained {
				if err := cloud.SetServiceStatus(ctx, "h1", true, "dvms:maintenance"); err != nil {
					t.Fatal(err)
				}
			}
			// Warm the caller's caches, the servers older than the group
			// index's margin for clock skew (a minute).
			for created := clock.Now(); clock.Now().Before(created.Add(61 * time.Second)); {
				<-clock.After(time.Second)
			}
			v := cloud.Client("agent")
			for _, h := range []string{"h1", "h2", "h3"} { // warm the caller's caches
				if _, err := v.Host(ctx, h); err != nil {
					t.Fatal(err)
				}
				if _, err := v.Servers(ctx, h); err != nil {
					t.Fatal(err)
				}
			}
			plan := scheduler.Plan{Snapshot: snap}
			for _, a := range tc.steps {
				plan.Steps = append(plan.Steps, []scheduler.Action{a})
			}

			// The model: PlanCheck on what Nova shows, priced.
			pc := node.NewPlanCheck(tc.ev, plan, scheduler.DefaultThresholds(), nil)
			var modelled int
			var verdicts []node.ReasonClass
			for _, a := range tc.steps {
				var o node.Observed
				o.Server, _ = cloud.Uncharged().Server(ctx, a.Server)
				o.Event, _ = cloud.Uncharged().Host(ctx, tc.ev.Host)
				o.EventServers, _ = cloud.Uncharged().Servers(ctx, tc.ev.Host)
				o.EventDemand, _ = cloud.Demand(ctx, "h1")
				if a.Kind == scheduler.LiveMigrate {
					o.Dest, _ = cloud.Uncharged().Host(ctx, a.To)
					o.DestServers, _ = cloud.Uncharged().Servers(ctx, a.To)
					o.SrcDemand, _ = cloud.Demand(ctx, a.From)
					o.DestDemand, _ = cloud.Demand(ctx, a.To)
				}
				if !pc.ConsentKnown(a.From) {
					o.Source, _ = cloud.Uncharged().Host(ctx, a.From)
					o.SrcDemand, _ = cloud.Demand(ctx, a.From)
				}
				vd := pc.Judge(a, o)
				verdicts = append(verdicts, vd.Class)
				for _, r := range vd.Reads {
					ts, ok := fake.WarmRequests(r.Method)
					if !ok {
						t.Fatalf("nova/fake does not price %s", r.Method)
					}
					modelled += len(ts)
				}
			}

			// The executor, in advise mode.
			cfg := node.DefaultExecConfig()
			cfg.DryRun = true
			cfg.RecheckTimeout = time.Hour
			e := node.NewExecutor(cfg, v, cloud, scheduler.DefaultThresholds(), clock, zerolog.Nop())
			before := cloud.Meter().CallerTotal("agent")
			res := e.Execute(ctx, tc.ev, plan)
			sent := int(cloud.Meter().CallerTotal("agent") - before)
			for i, ar := range res.Actions {
				want := verdicts[i]
				if want == "" {
					want = node.ReasonAdvise // it would run: advise mode records it
				}
				if ar.Class != want {
					t.Errorf("action %d: executor %s (%s), PlanCheck %s", i, ar.Class, ar.Reason, verdicts[i])
				}
			}
			if sent != modelled {
				t.Errorf("the executor's re-checks sent %d requests, PlanCheck's reads cost %d", sent, modelled)
			}
			t.Logf("%d requests, verdicts %v", sent, verdicts)
		})
	}
}
