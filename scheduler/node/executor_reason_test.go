package node_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Issue 10: a move happens only when its reason is true now, as Nova
// (maintenance) or the source's own measurement (overload) says, whatever
// the event and the snapshots that produced the plan claimed.
func TestExecutorRechecksTheReason(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  scheduler.EventKind
		setup func(w *execWorld)
		// d: the executor's demand source (default: the cloud measures
		// every host); ask: h1's agent answers demand queries.
		local, ask bool
		want       []string         // outcomes of moving s1 then s2 off h1, in order
		class      node.ReasonClass // of the skips
	}{
		{name: "forged maintenance of an enabled host", kind: scheduler.Maintenance,
			want: []string{"skipped: reason does not hold: h1 is not being drained", "skipped: reason does not hold"}, class: node.ReasonEvent},
		{name: "maintenance: disabled for another reason", kind: scheduler.Maintenance, setup: func(w *execWorld) {
			_ = w.cloud.SetServiceStatus(context.Background(), "h1", true, "broken disk")
		}, want: []string{"skipped: reason does not hold: h1 is not being drained", "skipped"}, class: node.ReasonEvent},
		{name: "maintenance: drained", kind: scheduler.Maintenance, setup: func(w *execWorld) {
			_ = w.cloud.SetServiceStatus(context.Background(), "h1", true, "dvms:maintenance")
		}, want: []string{"done", "done"}},
		{name: "forged overload of an idle host", kind: scheduler.Overload,
			want: []string{"skipped: reason does not hold: h1 is neither drained nor overloaded", "skipped"}, class: node.ReasonEvent},
		{name: "overload measured: every move of the plan", kind: scheduler.Overload, setup: func(w *execWorld) {
			_ = w.cloud.SetDemand("s2", nova.Demand{CPU: 7, RAMMB: 1024}) // 2 + 7 > 8 cores
		}, want: []string{"done", "done"}},
		{name: "overload the source's agent does not confirm", kind: scheduler.Overload, local: true,
			want: []string{"skipped: reason not verified: no measurement of h1", "skipped: reason not verified"}, class: node.ReasonEventUnverified},
		{name: "overload confirmed by the source's agent", kind: scheduler.Overload, local: true, ask: true, setup: func(w *execWorld) {
			_ = w.cloud.SetDemand("s2", nova.Demand{CPU: 7, RAMMB: 1024})
		}, want: []string{"done", "done"}},
		{name: "forged underload of a busy host", kind: scheduler.Underload, setup: func(w *execWorld) {
			_ = w.cloud.SetDemand("s2", nova.Demand{CPU: 4, RAMMB: 1024})
		}, want: []string{"skipped: reason does not hold: h1 is not underloaded", "skipped"}, class: node.ReasonEvent},
		// A stolen key's forged UNDERLOAD of an honest host: the executor
		// runs elsewhere, so the host's own agent's answer (signed by its
		// key, bound to it: receiveAnswer) is the only measurement, judged
		// on Nova's capacity and servers.
		{name: "forged underload, the host's own agent measures it busy", kind: scheduler.Underload, local: true, ask: true, setup: func(w *execWorld) {
			_ = w.cloud.SetDemand("s2", nova.Demand{CPU: 4, RAMMB: 1024})
		}, want: []string{"skipped: reason does not hold: h1 is not underloaded", "skipped"}, class: node.ReasonEvent},
		{name: "underload the host's agent does not confirm", kind: scheduler.Underload, local: true,
			want: []string{"skipped: reason not verified: no measurement of h1", "skipped: reason not verified"}, class: node.ReasonEventUnverified},
		{name: "underload confirmed by the host's own agent", kind: scheduler.Underload, local: true, ask: true, setup: func(w *execWorld) {
			_ = w.cloud.SetDemand("s1", nova.Demand{CPU: 0.2, RAMMB: 512})
			_ = w.cloud.SetDemand("s2", nova.Demand{CPU: 0.2, RAMMB: 512})
		}, want: []string{"done", "done"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecWorld(t, 3)
			w.server("s1", "h1", 2, nil)
			w.server("s2", "h1", 0.5, nil)
			if tc.setup != nil {
				tc.setup(w)
			}
			var d nova.DemandSource = w.cloud
			if tc.local {
				d = node.OnlyHost(w.cloud, "h3") // the executor runs on h3
			}
			e := w.executor(fastExec(), w.cloud, d, w.clock)
			if tc.ask {
				e.Ask = func(ctx context.Context, host string) (map[string]nova.Demand, error) {
					return w.cloud.Demand(ctx, host)
				}
			}
			// The plan saw h1 draining and overloaded, whatever is true.
			snap := []scheduler.Host{{Name: "h1", Draining: true, CPUs: 8, Servers: []scheduler.Server{{ID: "s1", CPU: 9}}}}
			plan := scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}, {move("s2", "h1", "h3", 0.5)}}, Snapshot: snap}
			res := e.Execute(context.Background(), scheduler.Event{ID: "ev", Kind: tc.kind, Host: "h1"}, plan)
			for i, want := range tc.want {
				a := res.Actions[i]
				got := a.Outcome.String()
				if a.Reason != "" {
					got += ": " + a.Reason
				}
				if !strings.HasPrefix(got, want) {
					t.Errorf("action %d: %q, want %q...", i, got, want)
				}
				if want != "done" && a.Class != tc.class {
					t.Errorf("action %d: class %q, want %q", i, a.Class, tc.class)
				}
			}
			if tc.want[0] != "done" {
				for _, id := range []string{"s1", "s2"} {
					if s, _ := w.cloud.Server(context.Background(), id); s.Host != "h1" {
						t.Errorf("%s moved to %s on a forged reason", id, s.Host)
					}
				}
			}
		})
	}
}

// A plan for a real overload may first make room by moving a server off a
// host that is not overloaded itself: the event justifies the whole plan.
func TestExecutorReasonCoversRoomMakingMoves(t *testing.T) {
	w := newExecWorld(t, 3)
	w.server("s1", "h1", 5, nil)
	w.server("s2", "h1", 4, nil) // h1: 9 > 8 cores
	w.server("r", "h2", 1, nil)  // h2 is idle
	plan := scheduler.Plan{Steps: [][]scheduler.Action{{move("r", "h2", "h3", 1)}, {move("s2", "h1", "h2", 4)}}}
	res := w.executor(fastExec(), w.cloud, w.cloud, w.clock).Execute(context.Background(),
		scheduler.Event{ID: "ev", Kind: scheduler.Overload, Host: "h1"}, plan)
	if res.Done != 2 {
		t.Fatalf("%+v, want both moves done", res)
	}
}

// A plan whose re-checks skipped a move still solved its OVERLOAD when the
// host's own measurement says it is no longer overloaded; not when it
// still is, nor for another kind of event.
func TestExecutorRelieved(t *testing.T) {
	w := newExecWorld(t, 2)
	w.server("s1", "h1", 2, nil)
	w.server("s2", "h1", 7, nil) // 9 > 8 cores: overloaded
	e := w.executor(fastExec(), w.cloud, w.cloud, w.clock)
	ctx := context.Background()
	plan := scheduler.Plan{Snapshot: []scheduler.Host{{Name: "h1", CPUs: 8, RAMMB: 16384}}}
	ev := scheduler.Event{ID: "e1", Kind: scheduler.Overload, Host: "h1"}
	if e.Relieved(ctx, ev, plan) {
		t.Fatal("relieved while h1 carries 9 of 8 cores")
	}
	if err := w.cloud.SetDemand("s2", nova.Demand{CPU: 1, RAMMB: 1024}); err != nil {
		t.Fatal(err)
	}
	if !e.Relieved(ctx, ev, plan) {
		t.Fatal("not relieved at 3 of 8 cores")
	}
	if e.Relieved(ctx, scheduler.Event{ID: "e2", Kind: scheduler.Maintenance, Host: "h1"}, plan) {
		t.Fatal("a maintenance event is never relieved by a measurement")
	}
	if e.Relieved(ctx, ev, scheduler.Plan{}) {
		t.Fatal("relieved without the host's capacity (not in the snapshot)")
	}
}

// The event's host answers a demand query late (a busy agent or bus): the
// executor asks it again before it calls the demand unknown, and the plan
// runs.
func TestExecutorAsksALateAgentAgain(t *testing.T) {
	w := newExecWorld(t, 3)
	w.server("s1", "h1", 2, nil)
	w.server("s2", "h1", 7, nil) // 9 > 8 cores
	e := w.executor(fastExec(), w.cloud, node.OnlyHost(w.cloud, "h3"), w.clock)
	var missed atomic.Int32
	e.Ask = func(ctx context.Context, host string) (map[string]nova.Demand, error) {
		if host == "h1" && missed.Add(1) <= 1 {
			return nil, errors.New("demand of h1: no answer from its agent")
		}
		return w.cloud.Demand(ctx, host)
	}
	snap := []scheduler.Host{{Name: "h1", CPUs: 8, RAMMB: 16384}}
	plan := scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}}, Snapshot: snap}
	res := e.Execute(context.Background(), scheduler.Event{ID: "ev", Kind: scheduler.Overload, Host: "h1"}, plan)
	if res.Done != 1 {
		t.Fatalf("%+v, want the move done after the agent answered", res.Actions)
	}
}

// A reason that could not be verified is not a reason that no longer
// holds: its class says so (the runner re-plans it), and it is not kept
// for the rest of the plan, so the next action verifies it again.
func TestExecutorUnverifiedReasonIsAskedAgain(t *testing.T) {
	w := newExecWorld(t, 3)
	w.server("s1", "h1", 2, nil)
	w.server("s2", "h1", 7, nil) // 9 > 8 cores
	e := w.executor(fastExec(), w.cloud, node.OnlyHost(w.cloud, "h3"), w.clock)
	var silent atomic.Bool // h1's agent does not answer while the first action is re-checked
	silent.Store(true)
	e.Ask = func(ctx context.Context, host string) (map[string]nova.Demand, error) {
		if host == "h1" && silent.Load() {
			return nil, errors.New("demand of h1: no answer from its agent")
		}
		return w.cloud.Demand(ctx, host)
	}
	e.OnAction = func(node.ActionResult) { silent.Store(false) }
	snap := []scheduler.Host{{Name: "h1", CPUs: 8, RAMMB: 16384}}
	plan := scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}, {move("s2", "h1", "h3", 7)}}, Snapshot: snap}
	res := e.Execute(context.Background(), scheduler.Event{ID: "ev", Kind: scheduler.Overload, Host: "h1"}, plan)
	if a := res.Actions[0]; a.Outcome != node.ActionSkipped || a.Class != node.ReasonEventUnverified {
		t.Fatalf("first action %+v, want skipped for %s", a, node.ReasonEventUnverified)
	}
	if a := res.Actions[1]; a.Outcome != node.ActionDone {
		t.Fatalf("second action %+v, want done once h1's agent answered", a)
	}
}

// An action skipped because the event's host did not answer, or because
// the plan's event was found not to hold, costs Nova nothing: the verdict
// comes before the re-check's reads.
func TestExecutorReasonBeforeNovaReads(t *testing.T) {
	w := newExecWorld(t, 3)
	w.server("s1", "h1", 2, nil)
	w.server("s2", "h1", 7, nil)
	e := w.executor(fastExec(), w.cloud, node.OnlyHost(w.cloud, "h3"), w.clock)
	e.Ask = func(context.Context, string) (map[string]nova.Demand, error) {
		return nil, errors.New("no answer from its agent")
	}
	before := w.cloud.Meter().Snapshot().Total
	plan := scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}, {move("s2", "h1", "h3", 7)}}}
	res := e.Execute(context.Background(), scheduler.Event{ID: "ev", Kind: scheduler.Overload, Host: "h1"}, plan)
	if res.Skipped != 2 || res.Actions[0].Class != node.ReasonEventUnverified {
		t.Fatalf("%+v, want both skipped, not verified", res.Actions)
	}
	if n := w.cloud.Meter().Snapshot().Total - before; n != 0 {
		t.Fatalf("%d requests to Nova for a plan whose event could not be verified, want 0", n)
	}
}

// hostReads is a nova.Client that notes which hosts were read.
type hostReads struct {
	nova.Client
	mu   sync.Mutex
	read []string
}

func (c *hostReads) Host(ctx context.Context, name string) (nova.Host, error) {
	c.mu.Lock()
	c.read = append(c.read, "host "+name)
	c.mu.Unlock()
	return c.Client.Host(ctx, name)
}

func (c *hostReads) Servers(ctx context.Context, host string) ([]nova.Server, error) {
	c.mu.Lock()
	c.read = append(c.read, "servers "+host)
	c.mu.Unlock()
	return c.Client.Servers(ctx, host)
}

// An OVERLOAD is judged on the capacity Nova gives its host, never on
// one its agent reports (a compromised host could shrink it to fake an
// overload): Nova's host is read, and the same measurement is an
// overload on an 8-core host and none on a 64-core one.
func TestExecutorOverloadOnNovasCapacity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		vcpus int // h1's CPUs in Nova
		done  int
	}{
		{"overloaded on Nova's capacity", 8, 1},
		{"not overloaded on Nova's capacity", 64, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExecWorld(t, 3)
			if tc.vcpus != 8 {
				w.cloud.AddHost(nova.Host{Name: "h1", VCPUs: tc.vcpus, RAMMB: 16384, CPUAllocRatio: 4, RAMAllocRatio: 1})
			}
			w.server("s1", "h1", 2, nil)
			w.server("s2", "h1", 7, nil) // 9 cores measured
			c := &hostReads{Client: w.cloud}
			e := w.executor(fastExec(), c, node.OnlyHost(w.cloud, "h3"), w.clock)
			e.Ask = func(ctx context.Context, host string) (map[string]nova.Demand, error) {
				return w.cloud.Demand(ctx, host)
			}
			plan := scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}}}
			res := e.Execute(context.Background(), scheduler.Event{ID: "ev", Kind: scheduler.Overload, Host: "h1"}, plan)
			if res.Done != tc.done {
				t.Fatalf("%+v, want %d done", res.Actions, tc.done)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if !slices.Contains(c.read, "host h1") {
				t.Fatalf("Nova reads %q: h1 not read", c.read)
			}
		})
	}
}

// Destinations need no grant, but a move lands only on a host that is
// enabled and up in Nova and whose own agent measures it now: onto a
// host whose agent is dead (it does not answer) nothing is sent, and the
// same move runs once the agent answers.
func TestExecutorDestinationAgentMustAnswer(t *testing.T) {
	for _, alive := range []bool{false, true} {
		w := newExecWorld(t, 3)
		w.server("s1", "h1", 2, nil)
		w.server("s2", "h1", 7, nil) // 9 > 8 cores
		e := w.executor(fastExec(), w.cloud, node.OnlyHost(w.cloud, "h3"), w.clock)
		e.Ask = func(ctx context.Context, host string) (map[string]nova.Demand, error) {
			if host == "h2" && !alive {
				return nil, errors.New("demand of h2: no answer from its agent")
			}
			return w.cloud.Demand(ctx, host)
		}
		snap := []scheduler.Host{{Name: "h1", CPUs: 8, RAMMB: 16384}}
		plan := scheduler.Plan{Steps: [][]scheduler.Action{{move("s1", "h1", "h2", 2)}}, Snapshot: snap}
		res := e.Execute(context.Background(), scheduler.Event{ID: "ev", Kind: scheduler.Overload, Host: "h1"}, plan)
		a := res.Actions[0]
		switch {
		case !alive && (a.Outcome != node.ActionSkipped || a.Class != node.ReasonReadFailed || w.cloud.Stats().Started != 0):
			t.Errorf("destination's agent dead: %+v, %d migration(s) sent; want skipped (%s), none sent", a, w.cloud.Stats().Started, node.ReasonReadFailed)
		case alive && a.Outcome != node.ActionDone:
			t.Errorf("destination's agent alive: %+v, want done (control)", a)
		}
	}
}
