package scheduler

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// randomPartition builds n hosts with random servers; the first host is
// overloaded.
func randomPartition(rng *rand.Rand, n, perHost int) []Host {
	hosts := make([]Host, n)
	id := 0
	for i := range hosts {
		h := Host{Name: fmt.Sprintf("h%03d", i), CPUs: 16, RAMMB: 65536, AllocVCPUs: 64, AllocRAMMB: 65536}
		for j := 0; j < perHost; j++ {
			id++
			v := 1 << rng.Intn(3)
			s := Server{ID: fmt.Sprintf("s%d", id), VCPUs: v, RAMMB: 1024 * (1 + rng.Intn(8)), CPU: float64(v) * rng.Float64()}
			s.RAM = float64(s.RAMMB) * 0.7
			if rng.Intn(10) == 0 {
				s.Group, s.Policy = fmt.Sprintf("g%d", rng.Intn(3)), "anti-affinity"
			}
			h.Servers = append(h.Servers, s)
		}
		for k := range h.Servers {
			h.UsedVCPUs += float64(h.Servers[k].VCPUs)
			h.UsedRAMMB += float64(h.Servers[k].RAMMB)
		}
		hosts[i] = h
	}
	for k := range hosts[0].Servers { // overload the first host
		hosts[0].Servers[k].CPU = float64(hosts[0].Servers[k].VCPUs) * 1.5
	}
	return hosts
}

// oload is an oracle's view of a host, independent of the solver's model
// and of package fit: plain sums, compared with the thresholds by hand.
type oload struct{ cpu, ram, vcpus, rammb float64 }

// oracleLoads sums each host's demand and placement usage.
func oracleLoads(hosts []Host) []oload {
	loads := make([]oload, len(hosts))
	for i := range hosts {
		for _, s := range hosts[i].Servers {
			loads[i].cpu += s.CPU
			loads[i].ram += s.RAM
		}
		loads[i].vcpus, loads[i].rammb = hosts[i].UsedVCPUs, hosts[i].UsedRAMMB
	}
	return loads
}

// add counts a's server in (sign 1) or out (-1).
func (l *oload) add(a Action, sign float64) {
	l.cpu += sign * a.CPU
	l.ram += sign * a.RAM
	l.vcpus += sign * float64(a.VCPUs)
	l.rammb += sign * float64(a.RAMMB)
}

// over: the host carries more than its thresholds or its placement.
func (l oload) over(h *Host, thr Thresholds) bool {
	const slack = 1e-6
	return l.cpu > h.CPUs*thr.CPUOverload+slack || l.ram > h.RAMMB*thr.RAMOverload+slack ||
		l.vcpus > h.AllocVCPUs+slack || l.rammb > h.AllocRAMMB+slack
}

// applyPlan replays a plan step by step, counting each moving server on
// both ends, and fails the test on any property violation.
func applyPlan(t *testing.T, hosts []Host, plan Plan, thr Thresholds, lim Limits) {
	t.Helper()
	loads := oracleLoads(hosts)
	idx := map[string]int{}
	where := map[string]string{}
	for i := range hosts {
		idx[hosts[i].Name] = i
		for _, s := range hosts[i].Servers {
			where[s.ID] = hosts[i].Name
		}
	}
	moved := map[string]bool{}
	for k, step := range plan.Steps {
		if len(step) > lim.PerPartition {
			t.Fatalf("step %d: %d actions > per-partition limit %d", k, len(step), lim.PerPartition)
		}
		out := map[string]int{}
		for _, a := range step {
			if moved[a.Server] {
				t.Fatalf("server %s moved twice", a.Server)
			}
			moved[a.Server] = true
			if where[a.Server] != a.From {
				t.Fatalf("%s: server is on %s", a, where[a.Server])
			}
			if a.Kind != LiveMigrate {
				continue
			}
			out[a.From]++
			if out[a.From] > lim.PerHost {
				t.Fatalf("step %d: %d outgoing from %s > %d", k, out[a.From], a.From, lim.PerHost)
			}
			d := idx[a.To]
			h := &hosts[d]
			loads[d].add(a, 1)
			if loads[d].over(h, thr) {
				t.Fatalf("step %d: %s overcommits %s mid-way", k, a, a.To)
			}
			if h.Disabled || h.Draining {
				t.Fatalf("%s: destination is disabled or draining", a)
			}
		}
		for _, a := range step {
			loads[idx[a.From]].add(a, -1)
			where[a.Server] = a.To
		}
	}
	// Servers conserved: every server is somewhere exactly once.
	n := 0
	for i := range hosts {
		n += len(hosts[i].Servers)
	}
	if len(where) != n {
		t.Fatalf("servers: %d tracked, %d exist", len(where), n)
	}
}

func TestSolvePropertiesRandom(t *testing.T) {
	thr, lim := DefaultThresholds(), DefaultLimits()
	solved := 0
	for seed := int64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewSource(seed))
		hosts := randomPartition(rng, 2+rng.Intn(8), 2+rng.Intn(10))
		kind := []EventKind{Overload, Maintenance, Underload}[seed%3]
		if kind == Maintenance {
			hosts[0].Draining, hosts[0].Disabled = true, true
		}
		p := Problem{Events: []Event{{ID: "e", Kind: kind, Host: hosts[0].Name}}, Hosts: hosts, Thresholds: thr}
		opt := DefaultSolveOptions()
		opt.Rand = rng
		sol := Solve(p, opt)
		if !sol.OK {
			continue
		}
		plan, err := BuildPlan(hosts, sol.Moves, thr, lim)
		if errors.Is(err, ErrNoOrder) {
			continue
		}
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		solved++
		applyPlan(t, hosts, plan, thr, lim)
		// The goal holds at the end.
		final := finalHosts(hosts, plan)
		switch kind {
		case Overload:
			for i := range final {
				if thr.Overloaded(&final[i]) {
					t.Fatalf("seed %d: %s still overloaded", seed, final[i].Name)
				}
			}
		case Maintenance, Underload:
			if len(final[0].Servers) != 0 {
				t.Fatalf("seed %d: %s not emptied (%d left)", seed, final[0].Name, len(final[0].Servers))
			}
		}
	}
	if solved < 100 {
		t.Fatalf("only %d of 300 random problems solved: the fixture or the solver is off", solved)
	}
}

func finalHosts(hosts []Host, plan Plan) []Host {
	out := make([]Host, len(hosts))
	idx := map[string]int{}
	for i := range hosts {
		out[i] = hosts[i]
		out[i].Servers = append([]Server(nil), hosts[i].Servers...)
		idx[hosts[i].Name] = i
	}
	for _, step := range plan.Steps {
		for _, a := range step {
			src := &out[idx[a.From]]
			for k, s := range src.Servers {
				if s.ID == a.Server {
					src.Servers = append(src.Servers[:k], src.Servers[k+1:]...)
					if a.Kind == LiveMigrate {
						out[idx[a.To]].Servers = append(out[idx[a.To]].Servers, s)
					}
					break
				}
			}
		}
	}
	return out
}

func TestSolveRespectsConstraints(t *testing.T) {
	thr := DefaultThresholds()
	full := Host{Name: "over", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192, Servers: []Server{
		{ID: "a", VCPUs: 2, RAMMB: 1024, CPU: 2, RAM: 512, Group: "g", Policy: "anti-affinity"},
		{ID: "b", VCPUs: 2, RAMMB: 1024, CPU: 3, RAM: 512, Fixed: true, FixedReason: "pinned"},
	}}
	for _, tc := range []struct {
		name string
		dest Host
		ok   bool
	}{
		{"room", Host{Name: "d", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192}, true},
		{"disabled", Host{Name: "d", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192, Disabled: true}, false},
		{"no placement room", Host{Name: "d", CPUs: 4, RAMMB: 8192, AllocVCPUs: 1, AllocRAMMB: 8192}, false},
		{"anti-affinity", Host{Name: "d", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192,
			Servers: []Server{{ID: "c", VCPUs: 1, RAMMB: 512, CPU: 0, RAM: 1, Group: "g", Policy: "anti-affinity"}}}, false},
		{"demand full", Host{Name: "d", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192,
			Servers: []Server{{ID: "c", VCPUs: 1, RAMMB: 512, CPU: 3, RAM: 1}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sol := Solve(Problem{Events: []Event{{Kind: Overload, Host: "over"}}, Hosts: []Host{full, tc.dest}, Thresholds: thr}, DefaultSolveOptions())
			if sol.OK != tc.ok {
				t.Fatalf("OK=%v want %v (%s)", sol.OK, tc.ok, sol.Reason)
			}
			if sol.OK && (len(sol.Moves) != 1 || sol.Moves[0].Server != "a") {
				t.Fatalf("moves %+v: only the unpinned server may move", sol.Moves)
			}
		})
	}
}

func TestSolveFewestBytes(t *testing.T) {
	// Either the 8 GiB server or the two 1 GiB ones fix the host; the
	// solver must move 2 GiB, not 8.
	src := Host{Name: "src", CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, Servers: []Server{
		{ID: "big", VCPUs: 2, RAMMB: 8192, CPU: 3, RAM: 100},
		{ID: "s1", VCPUs: 1, RAMMB: 1024, CPU: 1, RAM: 100},
		{ID: "s2", VCPUs: 1, RAMMB: 1024, CPU: 1, RAM: 100},
		{ID: "s3", VCPUs: 1, RAMMB: 4096, CPU: 1, RAM: 100},
	}}
	dst := Host{Name: "dst", CPUs: 8, RAMMB: 65536, AllocVCPUs: 32, AllocRAMMB: 65536}
	sol := Solve(Problem{Events: []Event{{Kind: Overload, Host: "src"}}, Hosts: []Host{src, dst}, Thresholds: DefaultThresholds()}, DefaultSolveOptions())
	if !sol.OK || sol.MovedMB != 2048 {
		t.Fatalf("moved %d MB (%+v), want 2048", sol.MovedMB, sol.Moves)
	}
}

// A server moves within its zone when a host there has room, even when
// another zone has more headroom (or a cheaper plan); across zones only
// when its own zone cannot take it, and the solution counts it.
func TestSolvePrefersTheSourcesZone(t *testing.T) {
	// Shedding s1 and s2 (2 GiB) or big (8 GiB) fixes src. near, in
	// src's zone, has the RAM for big or for one of s1, s2, not both: the
	// fewest bytes cross to the far zone, the fewest crossings move big.
	src := Host{Name: "src", Zone: "site-1", CPUs: 3, RAMMB: 131072, AllocVCPUs: 16, AllocRAMMB: 131072, Servers: []Server{
		{ID: "big", VCPUs: 2, RAMMB: 8192, CPU: 3, RAM: 100},
		{ID: "s1", VCPUs: 1, RAMMB: 1024, CPU: 1, RAM: 30000},
		{ID: "s2", VCPUs: 1, RAMMB: 1024, CPU: 1, RAM: 30000},
	}}
	near := Host{Name: "near", Zone: "site-1", CPUs: 8, RAMMB: 40000, AllocVCPUs: 32, AllocRAMMB: 40000}
	far := Host{Name: "far", Zone: "site-2", CPUs: 64, RAMMB: 262144, AllocVCPUs: 256, AllocRAMMB: 262144}
	p := Problem{Events: []Event{{Kind: Overload, Host: "src"}}, Hosts: []Host{src, near, far}, Thresholds: DefaultThresholds()}
	sol := Solve(p, DefaultSolveOptions())
	if !sol.OK || sol.CrossZone != 0 {
		t.Fatalf("crossed zones %d times (%+v), want 0: near can fix src", sol.CrossZone, sol.Moves)
	}
	for _, a := range sol.Moves {
		if a.To != "near" {
			t.Fatalf("moved %s to %s, want near (same zone): %+v", a.Server, a.To, sol.Moves)
		}
	}
	// Without near, the far zone it is, and counted.
	p.Hosts = []Host{src, far}
	if sol := Solve(p, DefaultSolveOptions()); !sol.OK || sol.CrossZone != len(sol.Moves) || sol.CrossZone == 0 {
		t.Fatalf("without near: %+v", sol)
	}
}

func TestSolveTimeLimitKeepsBestSoFar(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	hosts := randomPartition(rng, 8, 12)
	now := time.Unix(0, 0)
	calls := 0
	opt := DefaultSolveOptions()
	opt.Rand = rng
	opt.Deadline = now.Add(time.Second)
	opt.Now = func() time.Time { calls++; return now.Add(time.Duration(calls) * 100 * time.Millisecond) }
	sol := Solve(Problem{Events: []Event{{Kind: Overload, Host: hosts[0].Name}}, Hosts: hosts, Thresholds: DefaultThresholds()}, opt)
	if !sol.TimedOut {
		t.Fatalf("time limit not reported (%d clock reads)", calls)
	}
	if calls > 40 {
		t.Fatalf("solver kept going past its deadline: %d clock reads", calls)
	}
}

func TestPlanBreaksSwapCycleWithPivot(t *testing.T) {
	// a and b must swap hosts; both are full, so one goes through room
	// on a pivot instead (one move per server).
	mk := func(name string, s ...Server) Host {
		return Host{Name: name, CPUs: 4, RAMMB: 8192, AllocVCPUs: 4, AllocRAMMB: 8192, UsedVCPUs: 4, UsedRAMMB: 2048, Servers: s}
	}
	h1 := mk("h1", Server{ID: "a", VCPUs: 4, RAMMB: 2048, CPU: 3, RAM: 1000})
	h2 := mk("h2", Server{ID: "b", VCPUs: 4, RAMMB: 2048, CPU: 3, RAM: 1000})
	pivot := Host{Name: "p", CPUs: 4, RAMMB: 8192, AllocVCPUs: 4, AllocRAMMB: 8192}
	moves := []Action{
		{Kind: LiveMigrate, Server: "a", From: "h1", To: "h2", VCPUs: 4, RAMMB: 2048, CPU: 3, RAM: 1000},
		{Kind: LiveMigrate, Server: "b", From: "h2", To: "h1", VCPUs: 4, RAMMB: 2048, CPU: 3, RAM: 1000},
	}
	plan, err := BuildPlan([]Host{h1, h2, pivot}, moves, DefaultThresholds(), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	applyPlan(t, []Host{h1, h2, pivot}, plan, DefaultThresholds(), DefaultLimits())
	if plan.Len() != 2 || len(plan.Steps) != 2 {
		t.Fatalf("plan %+v", plan.Steps)
	}
	// Without a pivot there is no safe order.
	if _, err := BuildPlan([]Host{h1, h2}, moves, DefaultThresholds(), DefaultLimits()); !errors.Is(err, ErrNoOrder) {
		t.Fatalf("err = %v, want ErrNoOrder", err)
	}
}

func TestPreemptShelvesLowestPriority(t *testing.T) {
	src := Host{Name: "src", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192, Servers: []Server{
		{ID: "vip", VCPUs: 2, RAMMB: 1024, CPU: 3, Priority: 10},
		{ID: "low", VCPUs: 2, RAMMB: 1024, CPU: 3, Priority: -1},
	}}
	full := Host{Name: "full", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192, Servers: []Server{{ID: "x", VCPUs: 4, RAMMB: 1024, CPU: 4}}}
	p := Problem{Events: []Event{{Kind: Overload, Host: "src"}}, Hosts: []Host{src, full}, Thresholds: DefaultThresholds()}
	if sol := Solve(p, DefaultSolveOptions()); sol.OK {
		t.Fatalf("solved without room: %+v", sol)
	}
	p.Preempt = true
	sol := Solve(p, DefaultSolveOptions())
	if !sol.OK || len(sol.Moves) != 1 || sol.Moves[0].Kind != Shelve || sol.Moves[0].Server != "low" {
		t.Fatalf("preemption %+v", sol)
	}
}

func BenchmarkSolve(b *testing.B) {
	for _, n := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewSource(1))
			hosts := randomPartition(rng, n, 10)
			p := Problem{Events: []Event{{Kind: Overload, Host: hosts[0].Name}}, Hosts: hosts, Thresholds: DefaultThresholds()}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				opt := DefaultSolveOptions()
				opt.Rand = rand.New(rand.NewSource(int64(i)))
				Solve(p, opt)
			}
		})
	}
}

func BenchmarkBuildPlan(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	hosts := randomPartition(rng, 16, 10)
	hosts[0].Draining, hosts[0].Disabled = true, true
	sol := Solve(Problem{Events: []Event{{Kind: Maintenance, Host: hosts[0].Name}}, Hosts: hosts, Thresholds: DefaultThresholds()}, DefaultSolveOptions())
	if !sol.OK {
		b.Fatal(sol.Reason)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := BuildPlan(hosts, sol.Moves, DefaultThresholds(), DefaultLimits()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAgentStep(b *testing.B) {
	members := make([]string, 1000)
	for i := range members {
		members[i] = fmt.Sprintf("h%04d", i)
	}
	a, _ := NewAgent(DefaultConfig("h0500"), members)
	// A busy agent forwarding a request: the common hot path.
	busy := &Partition{ID: "p-q", Version: 3, Initiator: "h0499", Leader: "h0500", Nodes: []string{"h0499", "h0500"}, State: Growing}
	a.setPart(busy)
	msg := Message{Type: MsgGrow, From: "h0400", PartID: "p-x", Version: 1,
		Part: &Partition{ID: "p-x", Version: 1, Initiator: "h0400", Leader: "h0400", Nodes: []string{"h0400"}, State: Growing}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Step(msg)
		a.Ready()
	}
}

// Issue 11, point 5: consolidation leaves Headroom free on its
// destinations; overload relief may still fill a host up to its
// thresholds.
func TestConsolidationKeepsHeadroom(t *testing.T) {
	mk := func(kind EventKind) Problem {
		h0 := Host{Name: "h0", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192,
			Servers: []Server{{ID: "a", VCPUs: 1, RAMMB: 512, CPU: 0.5, RAM: 256}}}
		if kind == Overload {
			h0.Servers = append(h0.Servers, Server{ID: "big", VCPUs: 4, RAMMB: 512, CPU: 3.8, RAM: 256, Fixed: true, FixedReason: "pinned"})
		}
		h1 := Host{Name: "h1", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192,
			Servers: []Server{{ID: "b", VCPUs: 4, RAMMB: 512, CPU: 3.4, RAM: 256}}}
		return Problem{Events: []Event{{ID: "e", Kind: kind, Host: "h0"}}, Hosts: []Host{h0, h1}, Thresholds: DefaultThresholds(), Headroom: 0.1}
	}
	for _, tc := range []struct {
		name     string
		kind     EventKind
		headroom float64
		ok       bool
	}{
		{"consolidation within headroom refused", Underload, 0.1, false},
		{"consolidation without headroom", Underload, 0, true},
		{"overload relief ignores headroom", Overload, 0.1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mk(tc.kind)
			p.Headroom = tc.headroom
			sol := Solve(p, DefaultSolveOptions())
			if sol.OK != tc.ok || (sol.OK && len(sol.Moves) != 1) {
				t.Fatalf("solution %+v, want ok=%v with one move", sol, tc.ok)
			}
		})
	}
}

// Issue 11, point 6: a merged partition whose initiator's event has no
// solution still solves the events of the partitions it absorbed (before,
// the tiers tried the initiator's event alone and nothing else, and the
// partition gave both up; dvms simulate counted the absorbed one as
// unsolvable with a solution in the union).
func TestSolveAbsorbedEventWhenInitiatorsHasNone(t *testing.T) {
	stuck := Host{Name: "h1", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192, Servers: []Server{
		{ID: "huge", VCPUs: 4, RAMMB: 1024, CPU: 5, RAM: 512}, // fits nowhere
	}}
	over := Host{Name: "h2", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192, Servers: []Server{
		{ID: "a", VCPUs: 2, RAMMB: 1024, CPU: 2.5, RAM: 512},
		{ID: "b", VCPUs: 2, RAMMB: 1024, CPU: 2.5, RAM: 512},
	}}
	room := Host{Name: "h3", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192}
	evs := []Event{{ID: "e1", Kind: Overload, Host: "h1"}, {ID: "e2", Kind: Overload, Host: "h2"}}
	sol := Solve(Problem{Events: evs, Hosts: []Host{stuck, over, room}, Thresholds: DefaultThresholds()}, DefaultSolveOptions())
	if !sol.OK || !slices.Equal(sol.Solved, []string{"e2"}) || len(sol.Moves) != 1 || sol.Moves[0].From != "h2" {
		t.Fatalf("OK=%v solved %v moves %+v (%s): want e2 solved by one move off h2", sol.OK, sol.Solved, sol.Moves, sol.Reason)
	}
}
