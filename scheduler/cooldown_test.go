package scheduler

import (
	"strings"
	"testing"
	"time"
)

// Relief leaves a cooling server where it is and moves another; with
// only cooling servers it has no plan and says why (Cooling: no
// partition grows for it); a drain moves them.
func TestSolveSkipsCoolingServers(t *testing.T) {
	src := Host{Name: "src", CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, Servers: []Server{
		{ID: "back", VCPUs: 1, RAMMB: 1024, CPU: 3, RAM: 100, Cooling: true}, // the cheapest fix, just moved here
		{ID: "s1", VCPUs: 1, RAMMB: 4096, CPU: 2, RAM: 100},
		{ID: "s2", VCPUs: 1, RAMMB: 4096, CPU: 2, RAM: 100},
	}}
	dst := Host{Name: "dst", CPUs: 8, RAMMB: 65536, AllocVCPUs: 32, AllocRAMMB: 65536}
	solve := func(k EventKind, src Host) Solution {
		return Solve(Problem{Events: []Event{{ID: "e", Kind: k, Host: "src"}}, Hosts: []Host{src, dst}, Thresholds: DefaultThresholds()}, DefaultSolveOptions())
	}
	sol := solve(Overload, src)
	if !sol.OK || len(sol.Moves) == 0 {
		t.Fatalf("no relief: %+v", sol)
	}
	for _, m := range sol.Moves {
		if m.Server == "back" {
			t.Fatalf("relief moved the cooling server: %+v", sol.Moves)
		}
	}

	all := src
	all.Servers = append([]Server(nil), src.Servers...)
	for k := range all.Servers {
		all.Servers[k].Cooling = true
	}
	if sol := solve(Overload, all); sol.OK && len(sol.Moves) > 0 || !sol.Cooling || !strings.Contains(sol.Reason, "src stays overloaded without 3 server(s) moved within the server cooldown") {
		t.Fatalf("relief of cooling servers only: %+v", sol)
	}
	if sol := solve(Underload, all); len(sol.Moves) > 0 {
		t.Fatalf("consolidation moved cooling servers: %+v", sol)
	}
	if sol := solve(Maintenance, all); !sol.OK || len(sol.Moves) != 3 {
		t.Fatalf("a drain left cooling servers: %+v", sol)
	}
}

// A server that arrives while a plan ran on the agent's partition cools
// for the server cooldown; one that arrives otherwise (a boot) does not.
func TestArrivalAfterPlanCools(t *testing.T) {
	h2 := newAgent(t, "h2")
	h2.cfg.ServerCooldown = 30 * time.Minute
	h := hostWith("h2", 1)
	h2.Observe(t0, h)
	p := &Partition{ID: "p-e", Version: 5, Initiator: "h1", Leader: "h1", Nodes: []string{"h1", "h2"}, State: Finishing, Events: []Event{{ID: "e", Kind: Overload, Host: "h1"}}}
	h2.part = p.clone()
	h2.Step(Message{Type: MsgDissolve, From: "h1", PartID: p.ID, Version: p.Version, Outcome: Solved})
	h2.Ready()
	moved := Server{ID: "moved", VCPUs: 1, RAMMB: 512, CPU: 0.5, RAM: 256}
	h.Servers = append(h.Servers, moved)
	now := t0.Add(time.Second)
	h2.Observe(now, h) // the sample after the plan
	booted := Server{ID: "booted", VCPUs: 1, RAMMB: 512, CPU: 0.5, RAM: 256}
	h.Servers = append(h.Servers, booted)
	now = now.Add(time.Second)
	h2.Observe(now, h)
	cooling := func() (out []string) {
		for _, s := range h2.snapshot().Servers {
			if s.Cooling {
				out = append(out, s.ID)
			}
		}
		return out
	}
	if c := cooling(); len(c) != 1 || c[0] != "moved" {
		t.Fatalf("cooling %v, want [moved]", c)
	}
	h2.Observe(t0.Add(h2.cfg.ServerCooldown+time.Second), h)
	if c := cooling(); len(c) != 0 {
		t.Fatalf("cooling %v after the cooldown", c)
	}
}
