package node_test

import (
	"context"
	"slices"
	"testing"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// A lying destination: h1 is drained for maintenance (s1 4 cores, s2
// 3.5), both planned onto h2, which carries e1; h2's agent answers the
// executor's demand queries with a fraction of what its servers use. The
// first move cannot be told from an honest one; once it is done, the
// server it received is judged at no less than it carried (a second move
// into a host that under-reports by 0.3 is skipped as an overload), and
// a host that reports the server it received at a twentieth of it is
// caught: the second move is skipped as distrusted and the executor
// lists h2 as distrusted (its planner no longer takes it as a
// destination). An honest h2 takes both and is not blamed.
func TestExecutorLyingDestination(t *testing.T) {
	for _, tc := range []struct {
		name     string
		e1       float64 // e1's real demand on h2, cores
		lie, ram float64 // the fractions of CPU and RAM h2 reports (1: honest)
		second   string  // the second move's outcome
		distrust bool
	}{
		{"honest", 0.2, 1, 1, "done[none]", false},
		{"CPU reported at 0.3: judged at what its server carried", 3.5, 0.3, 1, "skipped[overload]", false},
		{"reports a twentieth: caught", 3.5, 0.05, 0.05, "skipped[destination_distrusted]", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecWorld(t, 1)
			w.cloud.AddHost(nova.Host{Name: "h2", VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 4, RAMAllocRatio: 1})
			w.server("s1", "h1", 4, nil)
			w.server("s2", "h1", 3.5, nil)
			w.server("e1", "h2", tc.e1, nil)
			ctx := context.Background()
			if err := w.cloud.SetServiceStatus(ctx, "h1", true, "dvms:maintenance by operator"); err != nil {
				t.Fatal(err)
			}
			e := w.executor(fastExec(), w.cloud, nil, w.clock)
			e.Ask = func(ctx context.Context, host string) (map[string]nova.Demand, error) {
				d, err := w.cloud.Demand(ctx, host)
				if host == "h2" {
					for id, x := range d {
						d[id] = nova.Demand{CPU: x.CPU * tc.lie, RAMMB: x.RAMMB * tc.ram}
					}
				}
				return d, err
			}
			ev := scheduler.Event{ID: "ev-h1", Kind: scheduler.Maintenance, Host: "h1"}
			plan := scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 4)}, {move("s2", "h1", "h2", 3.5)}}}
			res := e.Execute(ctx, ev, plan)
			var got []string
			_ = node.ActionDone
			for _, ar := range res.Actions {
				got = append(got, ar.Outcome.String()+"["+string(ar.Class)+"]")
			}
			t.Logf("%+v", res.Actions)
			if want := []string{"done[none]", tc.second}; !slices.Equal(got, want) {
				t.Fatalf("outcomes %v, want %v", got, want)
			}
			if d := e.Distrusted(); (len(d) == 1 && d[0] == "h2") != tc.distrust || len(d) > 1 {
				t.Fatalf("distrusted %v, want h2 %v", d, tc.distrust)
			}
		})
	}
}
