package scheduler

import (
	"testing"
	"time"
)

// reliefHosts: src is overloaded by one core; tight has room for the
// server but would be at 94 % of its cores after; roomy at 25 %.
func reliefHosts() (src, tight, roomy Host) {
	src = Host{Name: "src", CPUs: 8, RAMMB: 65536, AllocVCPUs: 32, AllocRAMMB: 65536, Servers: []Server{
		{ID: "a", VCPUs: 2, RAMMB: 2048, CPU: 4, RAM: 1024},
		{ID: "b", VCPUs: 2, RAMMB: 2048, CPU: 3, RAM: 1024},
		{ID: "c", VCPUs: 2, RAMMB: 2048, CPU: 2, RAM: 1024},
	}}
	tight = Host{Name: "tight", CPUs: 8, RAMMB: 65536, AllocVCPUs: 32, AllocRAMMB: 65536, Servers: []Server{
		{ID: "t", VCPUs: 8, RAMMB: 8192, CPU: 5.5, RAM: 4096},
	}}
	roomy = Host{Name: "roomy", CPUs: 8, RAMMB: 65536, AllocVCPUs: 32, AllocRAMMB: 65536}
	return src, tight, roomy
}

// With ReliefHeadroom, a destination that only fits is taken last, and
// the solution says so (ReliefUnmet); a roomy one is taken when present.
func TestSolveReliefHeadroom(t *testing.T) {
	src, tight, roomy := reliefHosts()
	ev := []Event{{ID: "e", Kind: Overload, Host: "src"}}
	p := Problem{Events: ev, Hosts: []Host{src, tight}, Thresholds: DefaultThresholds()}

	sol := Solve(p, DefaultSolveOptions())
	if !sol.OK || sol.ReliefUnmet {
		t.Fatalf("without relief headroom: %+v, want a solution onto tight", sol)
	}
	p.ReliefHeadroom = 0.4
	sol = Solve(p, DefaultSolveOptions())
	if !sol.OK || !sol.ReliefUnmet {
		t.Fatalf("only tight, relief headroom 0.4: %+v, want a solution that only fits (ReliefUnmet)", sol)
	}
	p.Hosts = []Host{src, tight, roomy}
	sol = Solve(p, DefaultSolveOptions())
	if !sol.OK || sol.ReliefUnmet {
		t.Fatalf("with roomy: %+v, want a solution keeping the headroom", sol)
	}
	for _, a := range sol.Moves {
		if a.To != "roomy" {
			t.Fatalf("moved %s to %s, want roomy: %+v", a.Server, a.To, sol.Moves)
		}
	}
}

// Relief headroom is for servers leaving overloaded hosts: a drain
// still empties its host onto a destination that only fits.
func TestReliefHeadroomLeavesDrainsAlone(t *testing.T) {
	src, tight, _ := reliefHosts()
	src.Servers = src.Servers[:1] // 4 cores: not overloaded
	p := Problem{Events: []Event{{ID: "e", Kind: Maintenance, Host: "src"}}, Hosts: []Host{src, tight}, Thresholds: DefaultThresholds(), ReliefHeadroom: 0.4}
	// tight would be at 9.5 of 8 cores with a: nothing fits at all.
	if sol := Solve(p, DefaultSolveOptions()); sol.OK {
		t.Fatalf("drain onto a host it overloads: %+v", sol)
	}
	src.Servers[0].CPU = 2 // tight at 7.5 of 8 cores: fits, no headroom
	p.Hosts = []Host{src, tight}
	if sol := Solve(p, DefaultSolveOptions()); !sol.OK || sol.ReliefUnmet {
		t.Fatalf("drain: %+v, want a solution onto tight whatever the relief headroom", sol)
	}
}

// A plan relieves the partition's other overloaded members only inside
// their own zone: the event's host is relieved onto the roomy host of
// its zone, and the overloaded member of another zone is left to its own
// event rather than moved across the WAN (TestFunctionalSites saw
// s2-c1 -> s1-c3 from a partition of site 1's event).
func TestOtherOverloadsStayInTheirZone(t *testing.T) {
	src, _, roomy := reliefHosts()
	other, _, _ := reliefHosts()
	other.Name = "other"
	for i := range other.Servers {
		other.Servers[i].ID = "o" + other.Servers[i].ID
	}
	src.Zone, roomy.Zone, other.Zone = "site1", "site1", "site2"
	p := Problem{Events: []Event{{ID: "e", Kind: Overload, Host: "src"}}, Hosts: []Host{src, roomy, other}, Thresholds: DefaultThresholds()}
	sol := Solve(p, DefaultSolveOptions())
	if !sol.OK {
		t.Fatalf("no solution: %+v", sol)
	}
	if sol.CrossZone != 0 {
		t.Fatalf("%d cross-zone moves: %+v", sol.CrossZone, sol.Moves)
	}
	for _, a := range sol.Moves {
		if a.From != "src" {
			t.Fatalf("moved %s from %s: another zone's overload moved across zones: %+v", a.Server, a.From, sol.Moves)
		}
	}
	// In its own zone, the other overload is still relieved on the way.
	other.Zone = "site1"
	p.Hosts = []Host{src, roomy, other}
	sol = Solve(p, DefaultSolveOptions())
	from := map[string]bool{}
	for _, a := range sol.Moves {
		from[a.From] = true
	}
	if !sol.OK || !from["src"] || !from["other"] {
		t.Fatalf("one zone: %+v, want both overloads relieved", sol)
	}
}

// reliefDeferred returns h2 leading {h1, h2} for h1's overload, having
// passed over a solution that only fits (ReliefUnmet) to grow for room,
// and the request it sent out for that.
func reliefDeferred(t *testing.T) (h1, h2 *Agent, out Message) {
	t.Helper()
	return reliefDeferredFor(t, Solution{OK: true, ReliefUnmet: true})
}

// reliefDeferredFor is reliefDeferred, the solution passed over sol (its
// Solved set here).
func reliefDeferredFor(t *testing.T, sol Solution) (h1, h2 *Agent, out Message) {
	t.Helper()
	h1, h2 = newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	h2.Step(only(t, overload(t, h1), MsgGrow).Msg)
	h1.Step(only(t, h2.Ready(), MsgUpdate).Msg)
	h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	rd := h2.Ready()
	if len(rd.Solve) != 1 || rd.Solve[0].Problem.ReliefHeadroom != h2.cfg.ReliefHeadroom {
		t.Fatalf("solve requests %+v, want one asking for relief headroom %v", rd.Solve, h2.cfg.ReliefHeadroom)
	}
	req := rd.Solve[0]
	plan := movePlan("h1-s", "h1", "h2")
	if !req.Problem.FewerMoves {
		t.Fatalf("a partition that may grow for relief headroom does not ask for fewer moves: %+v", req.Problem)
	}
	sol.Solved = []string{req.Problem.Events[0].ID}
	h2.SolveDone(req.PartID, req.Version, sol, plan, nil)
	rd = h2.Ready()
	if len(rd.Execute) != 0 {
		t.Fatalf("took a solution that only fits at 2 hosts: %+v", rd.Execute)
	}
	out = only(t, rd, MsgGrow).Msg
	if p := h2.Partition(); p.FitAt != 2 {
		t.Fatalf("first fit at %d hosts, want 2", p.FitAt)
	}
	return h1, h2, out
}

// reliefSolvesForAnyFit checks that h2, its growth for relief given up,
// collects fresh snapshots and then asks for no relief headroom, its
// tours not counted.
func reliefSolvesForAnyFit(t *testing.T, h1, h2 *Agent, version uint64) {
	t.Helper()
	rd := h2.Ready()
	if len(records(rd, RecDissolved)) != 0 {
		t.Fatalf("partition ended: %+v", rd.Records)
	}
	var up Message
	for _, e := range sent(rd, MsgUpdate) {
		if e.To == "h1" {
			up = e.Msg
		}
	}
	if up.Part == nil || up.Version != version {
		t.Fatalf("no update at version %d to h1 for fresh snapshots: %+v", version, rd.Messages)
	}
	h1.Step(up)
	h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	rd = h2.Ready()
	if len(rd.Solve) != 1 || rd.Solve[0].Problem.ReliefHeadroom != 0 {
		t.Fatalf("solve requests %+v, want one for any destination that fits", rd.Solve)
	}
	if p := h2.Partition(); p.Tours != 0 || p.State != Growing {
		t.Fatalf("partition %+v, want Growing, no tour counted", p)
	}
}

// The request sent out for relief headroom comes back without a node:
// what fits will do, on fresh snapshots, and the tour does not count.
func TestReliefGivenUpWhenRequestComesBack(t *testing.T) {
	h1, h2, out := reliefDeferred(t)
	out.From = "h5"
	h2.Step(out)
	reliefSolvesForAnyFit(t, h1, h2, out.Version)
}

// The request sent out for relief headroom is lost: what fits will do,
// at a new version (the request, should it still find a node, is stale),
// instead of ending the event.
func TestReliefGivenUpWhenRequestLost(t *testing.T) {
	h1, h2, out := reliefDeferred(t)
	h2.Tick(t0.Add(h2.requestTimeout() + time.Millisecond))
	reliefSolvesForAnyFit(t, h1, h2, out.Version+1)
}

// Room for fewer moves: the leader grew because room came only with more
// moves (FewerUnmet); once its request comes back, it asks again for the
// relief headroom, no longer for fewer moves (room with more moves beats
// no room), and a solution that then only fits is taken, not grown for.
func TestReliefForFewerMovesKeepsTheHeadroom(t *testing.T) {
	h1, h2, out := reliefDeferredFor(t, Solution{OK: true, ReliefUnmet: true, FewerUnmet: true})
	out.From = "h5"
	h2.Step(out)
	rd := h2.Ready()
	var up Message
	for _, e := range sent(rd, MsgUpdate) {
		if e.To == "h1" {
			up = e.Msg
		}
	}
	h1.Step(up)
	h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	rd = h2.Ready()
	if len(rd.Solve) != 1 || rd.Solve[0].Problem.ReliefHeadroom != h2.cfg.ReliefHeadroom || rd.Solve[0].Problem.FewerMoves {
		t.Fatalf("solve requests %+v, want one with the relief headroom, not for fewer moves", rd.Solve)
	}
	req := rd.Solve[0]
	h2.SolveDone(req.PartID, req.Version, Solution{OK: true, ReliefUnmet: true, Solved: []string{req.Problem.Events[0].ID}}, movePlan("h1-s", "h1", "h2"), nil)
	if rd := h2.Ready(); len(rd.Execute) != 1 || len(sent(rd, MsgGrow)) != 0 {
		t.Fatalf("grew again or did not execute: %+v", rd)
	}
}

// The solver: a plan keeping the relief headroom with two moves (two
// small servers fit dst's 60 %; big does not) gives way, when moves are
// priced and the problem asks for fewer moves, to one that moves big
// alone and only fits, said so; without FewerMoves, or without a cost,
// the room wins.
func TestSolveFewerMovesForRelief(t *testing.T) {
	src := Host{Name: "src", CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, Servers: []Server{
		{ID: "pinned", VCPUs: 2, RAMMB: 1024, CPU: 2.2, RAM: 100, Fixed: true, FixedReason: "pinned"},
		{ID: "big", VCPUs: 2, RAMMB: 2048, CPU: 1.5, RAM: 100},
		{ID: "small1", VCPUs: 1, RAMMB: 1024, CPU: 0.5, RAM: 100},
		{ID: "small2", VCPUs: 1, RAMMB: 1024, CPU: 0.5, RAM: 100},
	}}
	dst := Host{Name: "dst", CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, Servers: []Server{{ID: "d", VCPUs: 2, RAMMB: 1024, CPU: 1.2, RAM: 100}}}
	p := Problem{Events: []Event{{ID: "e", Kind: Overload, Host: "src"}}, Hosts: []Host{src, dst}, Thresholds: DefaultThresholds(),
		ReliefHeadroom: 0.4, MoveCost: 1, FewerMoves: true}
	sol := Solve(p, DefaultSolveOptions())
	if !sol.OK || !sol.ReliefUnmet || !sol.FewerUnmet || len(sol.Moves) != 1 || sol.Moves[0].Server != "big" {
		t.Fatalf("%+v, want big alone, ReliefUnmet and FewerUnmet", sol)
	}
	p.FewerMoves = false
	if sol := Solve(p, DefaultSolveOptions()); !sol.OK || sol.ReliefUnmet || len(sol.Moves) != 2 {
		t.Fatalf("without FewerMoves: %+v, want the two small servers, with room", sol)
	}
	p.FewerMoves, p.MoveCost = true, 0
	if sol := Solve(p, DefaultSolveOptions()); !sol.OK || sol.ReliefUnmet || len(sol.Moves) != 2 {
		t.Fatalf("moves not priced: %+v, want the two small servers, with room", sol)
	}
}
