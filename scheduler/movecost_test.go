package scheduler

import (
	"strings"
	"testing"
	"time"
)

// durations is a migration model: each server's predicted duration.
type durations map[string]time.Duration

func (d durations) Migration(a Action) (time.Duration, bool) { return d[a.Server], true }

// costHosts: src is overloaded by 1 core of 4 (25 points over its
// threshold, 100 %); each of its servers alone relieves it; dst has room.
func costHosts() []Host {
	src := Host{Name: "src", CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, Servers: []Server{
		{ID: "busy", VCPUs: 2, RAMMB: 1024, CPU: 2.5, RAM: 100},  // fewest bytes, dirties its memory fast
		{ID: "quiet", VCPUs: 2, RAMMB: 2048, CPU: 2.5, RAM: 100}, // twice the bytes, quick to move
	}}
	dst := Host{Name: "dst", CPUs: 16, RAMMB: 65536, AllocVCPUs: 64, AllocRAMMB: 65536}
	return []Host{src, dst}
}

// Relief moves the cheapest server by the migration model once moves are
// priced (bytes only otherwise), and refuses a plan whose cost exceeds
// the overload it removes: 25 points here.
func TestMoveCostPicksCheapAndRefusesWhatDoesNotPay(t *testing.T) {
	opt := DefaultSolveOptions()
	opt.Migrations = durations{"busy": 40 * time.Second, "quiet": 3 * time.Second}
	solve := func(cost, perSecond float64, kind EventKind) Solution {
		return Solve(Problem{Events: []Event{{ID: "e", Kind: kind, Host: "src"}}, Hosts: costHosts(), Thresholds: DefaultThresholds(),
			MoveCost: cost, MoveCostPerSecond: perSecond}, opt)
	}
	if sol := solve(0, 0, Overload); !sol.OK || len(sol.Moves) != 1 || sol.Moves[0].Server != "busy" {
		t.Fatalf("without a cost: %+v, want the fewest bytes (busy)", sol)
	}
	sol := solve(1, 1, Overload)
	if !sol.OK || len(sol.Moves) != 1 || sol.Moves[0].Server != "quiet" {
		t.Fatalf("priced: %+v, want the quick move (quiet)", sol)
	}
	if sol.Gain != 25 || sol.Cost != 4 {
		t.Fatalf("gain %v cost %v, want 25 and 1 + 3 s x 1", sol.Gain, sol.Cost)
	}
	// 10 + 3 x 5 = 25: pays, just.
	if sol := solve(10, 5, Overload); !sol.OK || sol.NotWorth {
		t.Fatalf("cost = gain: %+v, want the plan", sol)
	}
	sol = solve(10, 6, Overload) // 10 + 3 x 6 = 28 > 25
	if sol.OK || !sol.NotWorth || len(sol.Moves) != 0 || !strings.Contains(sol.Reason, "not worth it: 1 move(s) cost 28.0 points for a gain of 25.0") {
		t.Fatalf("cost over gain: %+v, want refused", sol)
	}
	// A drain always goes.
	if sol := solve(1000, 1000, Maintenance); !sol.OK || len(sol.Moves) != 2 {
		t.Fatalf("drain priced out: %+v", sol)
	}
}

// Emptying an underloaded host gains 100 points.
func TestMoveCostConsolidationGain(t *testing.T) {
	src := Host{Name: "src", CPUs: 16, RAMMB: 65536, AllocVCPUs: 64, AllocRAMMB: 65536, Servers: []Server{
		{ID: "a", VCPUs: 1, RAMMB: 1000, CPU: 0.5, RAM: 100}, {ID: "b", VCPUs: 1, RAMMB: 1000, CPU: 0.5, RAM: 100}}}
	dst := Host{Name: "dst", CPUs: 16, RAMMB: 65536, AllocVCPUs: 64, AllocRAMMB: 65536, Servers: []Server{{ID: "c", VCPUs: 4, RAMMB: 4096, CPU: 4, RAM: 1000}}}
	solve := func(cost float64) Solution {
		return Solve(Problem{Events: []Event{{ID: "e", Kind: Underload, Host: "src"}}, Hosts: []Host{src, dst}, Thresholds: DefaultThresholds(),
			MoveCost: cost, MoveCostPerSecond: 1}, DefaultSolveOptions()) // no model: 1000 MB at 1000 MB/s, 1 s each
	}
	if sol := solve(49); !sol.OK || len(sol.Moves) != 2 || sol.Gain != 100 || sol.Cost != 100 {
		t.Fatalf("2 x (49 + 1) = 100: %+v, want the host emptied", sol)
	}
	if sol := solve(50); sol.OK || !sol.NotWorth {
		t.Fatalf("2 x (50 + 1) = 102 > 100: %+v, want refused", sol)
	}
}

// A refused plan ends the partition Aborted, class not_worth, without
// growing it: the event is raised again after the retry backoff.
func TestNotWorthEndsWithoutGrowing(t *testing.T) {
	d := dissolvedBy(t, Solution{NotWorth: true, Reason: "not worth it: 1 move(s) cost 9.0 points for a gain of 2.0"})
	if d.Outcome != Aborted || d.Class != EndNotWorth {
		t.Fatalf("dissolved %v/%v, want aborted/not_worth", d.Outcome, d.Class)
	}
	if c := DeriveEndClass(Aborted, d.Reason); c != EndNotWorth {
		t.Fatalf("an older agent's reason derives %v", c)
	}
}

// An overload that lasts counts for more: its gain is multiplied by the
// LastingUnits (20 s) it is expected to last, as long as it has held
// (Host.OverFor) or, with profiles, as long as the window saw its host
// over its limit. Here a move costs 28 points against 25 points over now:
// refused for an overload held 15 s, paid for one held 40 s, and for one
// whose window was over at 8 steps of 5 s.
func TestLastingOverloadPays(t *testing.T) {
	solve := func(hosts []Host) Solution {
		opt := DefaultSolveOptions()
		opt.Migrations = durations{"busy": 40 * time.Second, "quiet": 3 * time.Second}
		return Solve(Problem{Events: []Event{{ID: "e", Kind: Overload, Host: "src"}}, Hosts: hosts, Thresholds: DefaultThresholds(),
			MoveCost: 10, MoveCostPerSecond: 6}, opt)
	}
	hosts := costHosts()
	hosts[0].OverFor = 15 * time.Second
	if sol := solve(hosts); !sol.NotWorth || sol.Gain != 25 {
		t.Fatalf("held 15 s: %+v, want refused for a gain of 25", sol)
	}
	hosts[0].OverFor = 40 * time.Second
	if sol := solve(hosts); !sol.OK || sol.Gain != 50 || sol.Cost != 28 {
		t.Fatalf("held 40 s: %+v, want the plan for a gain of 50", sol)
	}
	hosts = costHosts()
	for i := range hosts {
		hosts[i].ProfileStep, hosts[i].ProfileEnd = 5*time.Second, 100
	}
	swing := flat(0.5)
	for j := ProfileSteps / 2; j < ProfileSteps; j++ {
		swing[j] = 2.5
	}
	hosts[0].Servers[0].Profile, hosts[0].Servers[0].PeakCPU = flat(2.5), 2.5
	hosts[0].Servers[1].Profile, hosts[0].Servers[1].PeakCPU = swing, 2.5
	if sol := solve(hosts); !sol.OK || sol.Gain != 50 {
		t.Fatalf("over at 8 steps of 5 s: %+v, want the plan for a gain of 50", sol)
	}
}

// The agent says how long its host has been overloaded (K of N
// samples) since a server last left it: an overload that comes back adds
// to the last, and a server leaving starts the count again.
func TestAgentNotesHowLongAnOverloadHeld(t *testing.T) {
	a := newAgent(t, "h1")
	a.retired = true // sampling only: no partition
	at := func(s int, cpu float64, ids ...string) time.Duration {
		h := hostWith("h1", cpu)
		for _, id := range ids {
			h.Servers = append(h.Servers, Server{ID: id, VCPUs: 1, RAMMB: 512, RAM: 100})
		}
		a.Observe(t0.Add(time.Duration(s)*time.Second), h)
		return a.host.OverFor
	}
	for s := 0; s < a.cfg.K-1; s++ {
		if d := at(s, 5, "x"); d != 0 {
			t.Fatalf("sample %d: over for %v before K samples", s, d)
		}
	}
	s := a.cfg.K - 1
	at(s, 5, "x") // holds from here
	for range 90 {
		s++
		at(s, 5, "x")
	}
	if a.host.OverFor != 90*time.Second {
		t.Fatalf("over for %v, want 90 s", a.host.OverFor)
	}
	if d := at(s+30, 5, "x"); d != 100*time.Second {
		t.Fatalf("over for %v after a 30 s gap, want 100 s (a gap counts 10 s at most)", d)
	}
	s += 30
	for a.holds() == Overload {
		s++
		at(s, 1, "x")
	}
	if d := at(s+60, 1, "x"); d < 100*time.Second {
		t.Fatalf("over for %v once the overload stopped holding, want what it held", d)
	}
	s += 61
	for a.holds() != Overload { // the swing comes back: it adds up
		s++
		at(s, 5, "x")
	}
	if d := at(s+5, 5, "x"); d < 105*time.Second {
		t.Fatalf("over for %v after the overload came back, want more than before", d)
	}
	if d := at(s+6, 5); d != 0 {
		t.Fatalf("over for %v after a server left, want 0", d)
	}
}
