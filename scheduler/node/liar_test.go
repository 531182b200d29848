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
			e.Ask = w.lyingAsk("h2", tc.lie, tc.ram)
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

// A destination whose word is implausible gets no first move: h1 is
// drained (s1), its plan moves s1 into h2, whose servers (e1, e2) use
// half their flavors' RAM as h3's do; h2's agent reports a twentieth of
// it, in its snapshot and in its answer to the re-check. The move is
// skipped as destination_implausible before anything reaches Nova, and
// the executor lists h2 among the hosts it judged implausible; an honest
// h2 takes the move and is not listed.
func TestExecutorImplausibleDestination(t *testing.T) {
	for _, tc := range []struct {
		name string
		lie  float64 // the fraction of its demand h2 reports (1: honest)
		want string
	}{
		{"honest", 1, "done[none]"},
		{"reports a twentieth", 0.05, "skipped[destination_implausible]"},
		{"reports a third", 1.0 / 3, "done[none]"}, // within the floor: taken at its word
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecWorld(t, 3)
			w.server("s1", "h1", 1, nil)
			w.server("e1", "h2", 1, nil)
			w.server("e2", "h2", 1, nil)
			w.server("f1", "h3", 1, nil)
			ctx := context.Background()
			if err := w.cloud.SetServiceStatus(ctx, "h1", true, "dvms:maintenance by operator"); err != nil {
				t.Fatal(err)
			}
			e := w.executor(fastExec(), w.cloud, nil, w.clock)
			e.Ask = w.lyingAsk("h2", tc.lie, tc.lie)
			// The partition's snapshot, each host by its own word.
			snap := func(name string, ids ...string) scheduler.Host {
				h := scheduler.Host{Name: name, CPUs: 8, RAMMB: 16384}
				d, err := e.Ask(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range ids {
					h.Servers = append(h.Servers, scheduler.Server{ID: id, VCPUs: 2, RAMMB: 2048, CPU: d[id].CPU, RAM: d[id].RAMMB})
				}
				return h
			}
			ev := scheduler.Event{ID: "ev-h1", Kind: scheduler.Maintenance, Host: "h1"}
			plan := scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 1)}},
				Snapshot: []scheduler.Host{snap("h1", "s1"), snap("h2", "e1", "e2"), snap("h3", "f1")}}
			res := e.Execute(ctx, ev, plan)
			if len(res.Actions) != 1 {
				t.Fatalf("actions %+v", res.Actions)
			}
			ar := res.Actions[0]
			if got := ar.Outcome.String() + "[" + string(ar.Class) + "]"; got != tc.want {
				t.Fatalf("outcome %s (%s), want %s", got, ar.Reason, tc.want)
			}
			if got, liar := e.Implausible(), tc.want != "done[none]"; liar != slices.Equal(got, []string{"h2"}) || !liar && len(got) > 0 {
				t.Fatalf("judged implausible %v, want h2 %v", got, liar)
			}
		})
	}
}

// lyingAsk answers the executor's demand queries with the cloud's
// demand, liar's scaled by cpu and ram.
func (w *execWorld) lyingAsk(liar string, cpu, ram float64) func(context.Context, string) (map[string]nova.Demand, error) {
	return func(ctx context.Context, host string) (map[string]nova.Demand, error) {
		d, err := w.cloud.Demand(ctx, host)
		if host == liar {
			for id, x := range d {
				d[id] = nova.Demand{CPU: x.CPU * cpu, RAMMB: x.RAMMB * ram}
			}
		}
		return d, err
	}
}
