package detsim

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/agentd"
	"github.com/dvms-project/dvms/scheduler/node"
)

// One agent, one assembly: `dvms agent` and the wall clock build every
// agent with agentd.New, whose runner's executor is configured from the
// agent's decision part (agentd.NewDecision: the agent's thresholds, the
// runtime's drain reason); the virtual clock builds its agents' decision
// parts, and the planner outside's, with agentd.NewDecision too and
// judges each action with it (Decision.PlanCheck). A table of clouds and
// plans run through the runtime's executor against nova/fake (what the
// wall clock and the fleet run), ended by node.PlanOutcome as the runner
// ends it, and through detsim's re-check of its ground truth, must end
// each plan the same way (outcome, class, and the counts of done,
// skipped and failed actions in the reason), under the default runtime
// configuration and under a region's own drain reason (drain: a
// clock that judged with its own configuration, not the decision's,
// would still take dvms's default reason for a drain).
func TestEveryClockRunsTheAgentsDecisions(t *testing.T) {
	srv := func(id string, cpu float64) scheduler.Server {
		return scheduler.Server{ID: id, VCPUs: 2, RAMMB: 2048, CPU: cpu, RAM: 1024}
	}
	hst := func(name string, servers ...scheduler.Server) scheduler.Host {
		return scheduler.Host{Name: name, CPUs: 8, RAMMB: 16384, AllocVCPUs: 8, AllocRAMMB: 16384, Servers: servers}
	}
	mv := func(id, from, to string, cpu float64) scheduler.Action {
		return scheduler.Action{Kind: scheduler.LiveMigrate, Server: id, From: from, To: to, VCPUs: 2, RAMMB: 2048, CPU: cpu, RAM: 1024}
	}
	over := scheduler.Event{ID: "ev", Kind: scheduler.Overload, Host: "h1"}
	drain := scheduler.Event{ID: "ev", Kind: scheduler.Maintenance, Host: "h1"}
	for _, tc := range []struct {
		name  string
		hosts []scheduler.Host
		ev    scheduler.Event
		steps [][]scheduler.Action
		want  scheduler.EndClass
		// drain is the region's drain reason ("": the default).
		drain string
	}{
		{name: "moves", hosts: []scheduler.Host{hst("h1", srv("s1", 2)), hst("h2"), hst("h3")},
			ev: scheduler.Event{ID: "ev"}, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 2)}}, want: scheduler.EndExecuted},
		{name: "destination would be overloaded: re-plan", hosts: []scheduler.Host{hst("h1", srv("s1", 2)), hst("h2", srv("busy", 7)), hst("h3")},
			ev: scheduler.Event{ID: "ev"}, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 2)}}, want: scheduler.EndSkipped},
		{name: "placement full", hosts: []scheduler.Host{hst("h1", srv("s1", 2), srv("s2", 0.5)), hst("h2", srv("f1", 0.1), srv("f2", 0.1), srv("f3", 0.1)), hst("h3")},
			ev: scheduler.Event{ID: "ev"}, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 2), mv("s2", "h1", "h2", 0.5)}}, want: scheduler.EndSkipped},
		{name: "destination disabled", hosts: []scheduler.Host{hst("h1", srv("s1", 2)), func() scheduler.Host { h := hst("h2"); h.Disabled = true; return h }(), hst("h3")},
			ev: scheduler.Event{ID: "ev"}, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 2)}}, want: scheduler.EndSkipped},
		{name: "server not on its source", hosts: []scheduler.Host{hst("h1"), hst("h2"), hst("h3", srv("s1", 2))},
			ev: scheduler.Event{ID: "ev"}, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 2)}}, want: scheduler.EndSkipped},
		{name: "overload gone before the plan: vanished", hosts: []scheduler.Host{hst("h1", srv("s1", 2), srv("s2", 1)), hst("h2"), hst("h3")},
			ev: over, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 2)}}, want: scheduler.EndVanished},
		{name: "overload relieved by the first move", hosts: []scheduler.Host{hst("h1", srv("s1", 4), srv("s2", 4), srv("s3", 1)), hst("h2"), hst("h3", srv("busy", 7))},
			ev: over, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 4)}, {mv("s2", "h1", "h3", 4)}}, want: scheduler.EndRelieved},
		{name: "overload still there after a skip: re-plan", hosts: []scheduler.Host{hst("h1", srv("s1", 5), srv("s2", 4)), hst("h2", srv("busy", 7)), hst("h3")},
			ev: over, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 5)}}, want: scheduler.EndSkipped},
		{name: "drain not (or no longer) asked: vanished", hosts: []scheduler.Host{hst("h1", srv("s1", 2)), hst("h2"), hst("h3")},
			ev: drain, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 2)}}, want: scheduler.EndVanished},
		{name: "drain", hosts: []scheduler.Host{func() scheduler.Host { h := hst("h1", srv("s1", 2)); h.Draining = true; return h }(), hst("h2"), hst("h3")},
			ev: drain, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 2)}}, want: scheduler.EndExecuted},
		{name: "host disabled under a reason this region does not drain for: vanished", hosts: []scheduler.Host{func() scheduler.Host { h := hst("h1", srv("s1", 2)); h.Draining = true; return h }(), hst("h2"), hst("h3")},
			ev: drain, steps: [][]scheduler.Action{{mv("s1", "h1", "h2", 2)}}, want: scheduler.EndVanished, drain: `^ops:drain`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := scheduler.Plan{Steps: tc.steps, Snapshot: tc.hosts}
			req := scheduler.ExecRequest{PartID: "p", Version: 1, Event: tc.ev, Plan: plan}
			// The agent's decision part, as agentd.New builds it.
			rc := node.DefaultConfig()
			if tc.drain != "" {
				rc.DrainReason = regexp.MustCompile(tc.drain)
			}
			d, err := agentd.NewDecision(agentd.Options{Runtime: rc, Agent: scheduler.DefaultConfig("h1")})
			if err != nil {
				t.Fatal(err)
			}
			type end struct {
				o      scheduler.Outcome
				class  scheduler.EndClass
				reason string
			}
			// The runtime: the executor on nova/fake, the runner's end.
			rt := func() end {
				clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 200)
				cloud := fake.New(fake.DefaultConfig(), clock)
				ctx := context.Background()
				for _, h := range tc.hosts {
					cloud.AddHost(nova.Host{Name: h.Name, VCPUs: int(h.CPUs), RAMMB: int(h.RAMMB), CPUAllocRatio: 1, RAMAllocRatio: 1})
					for _, s := range h.Servers {
						if err := cloud.AddServer(nova.Server{ID: s.ID, Name: s.ID, Host: h.Name, VCPUs: s.VCPUs, RAMMB: s.RAMMB}); err != nil {
							t.Fatal(err)
						}
						if err := cloud.SetDemand(s.ID, nova.Demand{CPU: s.CPU, RAMMB: s.RAM}); err != nil {
							t.Fatal(err)
						}
					}
					switch {
					case h.Draining:
						_ = cloud.SetServiceStatus(ctx, h.Name, true, "dvms:maintenance")
					case h.Disabled:
						_ = cloud.SetServiceStatus(ctx, h.Name, true, "broken")
					}
				}
				cfg := rc.Exec
				cfg.Poll = 100 * time.Millisecond
				// Bounds long enough for a busy machine: the clock runs
				// 200 times faster than the wall.
				cfg.RecheckTimeout, cfg.MigrationTimeout, cfg.Unresponsive = time.Hour, time.Hour, time.Hour
				// Configured as node.New configures its runner's from
				// agentd.New's options and decision part.
				e := node.NewExecutor(cfg, cloud, cloud, d.Config().Thresholds, clock, zerolog.Nop())
				e.DrainReason = rc.DrainReason
				res := e.Execute(ctx, tc.ev, plan)
				o, c, reason, replan := node.PlanOutcome(res, false, true, func() bool { return e.Relieved(ctx, tc.ev, plan) })
				if replan {
					o = scheduler.Aborted // as detsim's Execute ends it: no leader re-plans
				}
				if v := cloud.Violations(); len(v) > 0 {
					t.Errorf("nova/fake's observer: %v", v)
				}
				return end{o, c, reason}
			}()
			// The virtual clock.
			var vc *end
			c := New(Options{Seed: 1, NoAgents: true, Recheck: true, Node: rc}, tc.hosts)
			c.Execute(req, func(o scheduler.Outcome, class scheduler.EndClass, reason string) { vc = &end{o, class, reason} })
			if !c.RunUntil(time.Minute, func() bool { return vc != nil }) {
				t.Fatal("the virtual clock did not end the plan")
			}
			c.Check()
			if len(c.Violations) > 0 {
				t.Errorf("detsim's observer: %v", c.Violations)
			}
			if *vc != rt {
				t.Errorf("virtual clock ended the plan %v/%s (%s), the runtime %v/%s (%s)", vc.o, vc.class, vc.reason, rt.o, rt.class, rt.reason)
			}
			t.Logf("%v/%s: %s", rt.o, rt.class, rt.reason)
			if rt.class != tc.want {
				t.Errorf("ended %s (%s), want %s", rt.class, rt.reason, tc.want)
			}
		})
	}
}
