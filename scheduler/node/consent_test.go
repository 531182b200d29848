package node_test

import (
	"context"
	"testing"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Red team: a compromised host (h4, with its own key) leads nothing but
// writes what it likes into its partition: its own genuine OVERLOAD
// first, then a forged MAINTENANCE (or OVERLOAD) for the healthy h1, and
// its agent answers demand queries about itself with 0.1 cores so that
// h1's servers fit on it. The plan an honest leader computes from that
// partition moves h4's server to h2 (legitimate) and h1's servers onto
// h4. The executor runs the first and none of the second while Nova says
// h1 is enabled and h1's own measurement says it is neither over- nor
// underloaded; the same moves run once Nova drains h1, or once h1's own
// measurement says it is overloaded.
func TestExecutorConsentOfEachSource(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(w *execWorld)
		consent bool // h1's moves run (as far as they fit on h4)
	}{
		{"forged maintenance, h1 enabled in Nova", nil, false},
		{"h1 drained in Nova (its agent dead or not)", func(w *execWorld) {
			if err := w.cloud.SetServiceStatus(context.Background(), "h1", true, "dvms:maintenance by operator"); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"h1 disabled for another reason", func(w *execWorld) {
			if err := w.cloud.SetServiceStatus(context.Background(), "h1", true, "broken disk"); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"h1 overloaded by its own measurement", func(w *execWorld) {
			_ = w.cloud.SetDemand("a1", nova.Demand{CPU: 6.5, RAMMB: 1024}) // 6.5 + 2 > 8 cores
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecWorld(t, 4)
			w.server("a1", "h1", 2, nil)
			w.server("a2", "h1", 2, nil) // 4 of 8 cores: neither over- nor underloaded
			w.server("e1", "h4", 5, nil)
			w.server("e2", "h4", 4, nil) // 9 of 8 cores: h4's overload is genuine
			if tc.setup != nil {
				tc.setup(w)
			}
			e := w.executor(fastExec(), w.cloud, nil, w.clock)
			e.Ask = func(ctx context.Context, host string) (map[string]nova.Demand, error) {
				d, err := w.cloud.Demand(ctx, host)
				if _, overloaded := d["e1"]; host == "h4" && err == nil && !overloaded {
					// Its overload relieved, h4's agent lies to receive
					// h1's servers (it cannot speak for h1).
					for id := range d {
						d[id] = nova.Demand{CPU: 0.1, RAMMB: 10}
					}
				}
				return d, err
			}
			ev := scheduler.Event{ID: "ev-h4", Kind: scheduler.Overload, Host: "h4"}
			plan := scheduler.Plan{Steps: [][]scheduler.Action{
				{move("e1", "h4", "h2", 5)},
				{move("a1", "h1", "h4", 2), move("a2", "h1", "h4", 2)},
			}}
			res := e.Execute(context.Background(), ev, plan)
			t.Logf("%+v", res.Actions)
			if res.Actions[0].Outcome != node.ActionDone {
				t.Fatalf("h4's own move: %+v, want done (its overload is genuine)", res.Actions[0])
			}
			moved, refused := 0, 0
			for _, ar := range res.Actions[1:] {
				switch {
				case ar.Outcome == node.ActionDone:
					moved++
				case ar.Class == node.ReasonNoConsent:
					refused++
				}
			}
			left := len(w.cloud.ServersOn("h1"))
			if tc.consent && (moved == 0 || refused != 0 || left != 2-moved) {
				t.Fatalf("%d of h1's servers moved, %d refused for consent, %d left on h1: want h1's consent", moved, refused, left)
			}
			if !tc.consent && (moved != 0 || refused != 2 || left != 2) {
				t.Fatalf("%d of h1's servers moved, %d refused for consent, %d left on h1: want both refused", moved, refused, left)
			}
		})
	}
}

// The virtual clock judges the same: PlanCheck refuses the moves off a
// host that did not consent, reading it once per plan.
func TestPlanCheckConsent(t *testing.T) {
	w := newExecWorld(t, 4)
	w.server("a1", "h1", 2, nil)
	w.server("a2", "h1", 2, nil)
	w.server("e1", "h4", 5, nil)
	w.server("e2", "h4", 4, nil)
	ctx := context.Background()
	ev := scheduler.Event{ID: "ev-h4", Kind: scheduler.Overload, Host: "h4"}
	acts := []scheduler.Action{move("e1", "h4", "h2", 5), move("a1", "h1", "h3", 2), move("a2", "h1", "h3", 2)}
	pc := node.NewPlanCheck(ev, scheduler.Plan{Steps: [][]scheduler.Action{acts}}, scheduler.DefaultThresholds(), nil)
	var got []node.ReasonClass
	hostReads := 0
	for _, a := range acts {
		var o node.Observed
		o.Server, _ = w.cloud.Server(ctx, a.Server)
		o.Event, _ = w.cloud.Host(ctx, "h4")
		o.EventServers, _ = w.cloud.Servers(ctx, "h4")
		o.EventDemand, _ = w.cloud.Demand(ctx, "h4")
		o.Dest, _ = w.cloud.Host(ctx, a.To)
		o.DestServers, _ = w.cloud.Servers(ctx, a.To)
		o.SrcDemand, _ = w.cloud.Demand(ctx, a.From)
		o.DestDemand, _ = w.cloud.Demand(ctx, a.To)
		if !pc.ConsentKnown(a.From) {
			o.Source, _ = w.cloud.Host(ctx, a.From)
		}
		v := pc.Judge(a, o)
		got = append(got, v.Class)
		for _, r := range v.Reads {
			if r.Method == "Host" && r.Host == "h1" {
				hostReads++
			}
		}
	}
	if got[0] != "" || got[1] != node.ReasonNoConsent || got[2] != node.ReasonNoConsent {
		t.Fatalf("verdicts %q, want h4's move and no consent twice", got)
	}
	if hostReads != 1 {
		t.Fatalf("h1 read %d times, want once per plan", hostReads)
	}
}
