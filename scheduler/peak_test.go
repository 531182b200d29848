package scheduler

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// profiledHost is a 4-core host whose servers carry profiles on 15 s
// steps ending at step 100 (peak.go).
func profiledHost(name string, ss ...Server) Host {
	return Host{Name: name, CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, Servers: ss,
		ProfileStep: 15 * time.Second, ProfileEnd: 100}
}

// flat is a profile at cpu on every step.
func flat(cpu float64) []float64 {
	p := make([]float64, ProfileSteps)
	for i := range p {
		p[i] = cpu
	}
	return p
}

// peakHosts: src (4 cores) is overloaded by its mover (2 cores) and a
// fixed server (2.5); flappy carries 0.5 core now but had 3.5 four steps
// ago; steady carries steadyCPU all along.
func peakHosts(steadyCPU float64) []Host {
	swing := flat(0.5)
	swing[ProfileSteps-5] = 3.5
	return []Host{
		profiledHost("src",
			Server{ID: "mover", VCPUs: 2, RAMMB: 1024, CPU: 2, RAM: 100, PeakCPU: 2, PeakRAM: 100, Profile: flat(2)},
			Server{ID: "pinned", VCPUs: 2, RAMMB: 1024, CPU: 2.5, RAM: 100, PeakCPU: 2.5, PeakRAM: 100, Profile: flat(2.5), Fixed: true, FixedReason: "pinned"}),
		profiledHost("flappy", Server{ID: "f", VCPUs: 4, RAMMB: 1024, CPU: 0.5, RAM: 100, PeakCPU: 3.5, PeakRAM: 100, Profile: swing}),
		profiledHost("steady", Server{ID: "s", VCPUs: 2, RAMMB: 1024, CPU: steadyCPU, RAM: 100, PeakCPU: steadyCPU, PeakRAM: 100, Profile: flat(steadyCPU)}),
	}
}

func solvePeak(hosts []Host) Solution {
	return Solve(Problem{Events: []Event{{ID: "e", Kind: Overload, Host: "src"}}, Hosts: hosts, Thresholds: DefaultThresholds()}, DefaultSolveOptions())
}

// The peak rule keeps relief from choosing the destination that looks
// roomiest now when, at a step of the window, its servers' demand plus
// the incoming server's would have overloaded it: flappy (0.5 now, 3.5
// then, + 2 = 5.5 > 4) is passed over for steady (1.5 + 2 = 3.5). Without
// profiles the roomiest now (flappy) is chosen.
func TestPeakRuleKeepsAPeakingDestinationOut(t *testing.T) {
	sol := solvePeak(peakHosts(1.5))
	if !sol.OK || len(sol.Moves) != 1 || sol.Moves[0].Server != "mover" || sol.Moves[0].To != "steady" {
		t.Fatalf("with profiles: %+v, want mover to steady", sol)
	}
	bare := peakHosts(1.5)
	for i := range bare {
		bare[i].ProfileStep, bare[i].ProfileEnd = 0, 0
		for k := range bare[i].Servers {
			bare[i].Servers[k].Profile, bare[i].Servers[k].PeakCPU, bare[i].Servers[k].PeakRAM = nil, 0, 0
		}
	}
	if sol := solvePeak(bare); !sol.OK || len(sol.Moves) != 1 || sol.Moves[0].To != "flappy" {
		t.Fatalf("without profiles: %+v, want mover to flappy (the most room now)", sol)
	}
}

// Swings that interleave fit: a server high while the destination was low
// fits where the sum of their highest would not.
func TestPeakRuleFitsInterleavedSwings(t *testing.T) {
	hosts := peakHosts(2.5) // steady: 2.5 + 2 > 4, nowhere but flappy
	mover := &hosts[0].Servers[0]
	mover.Profile = flat(0.5)
	mover.Profile[ProfileSteps-1] = 2 // high now only, when flappy is at 0.5
	mover.PeakCPU = 2
	sol := solvePeak(hosts)
	if !sol.OK || len(sol.Moves) != 1 || sol.Moves[0].To != "flappy" {
		t.Fatalf("%+v, want mover to flappy (0.5 + 2 now, 3.5 + 0.5 then)", sol)
	}
}

// When no destination fits at peaks, relief still goes where demand now
// fits: the overload is not left for want of a peak fit.
func TestPeakRuleFallsBackToDemandNow(t *testing.T) {
	sol := solvePeak(peakHosts(2.5)) // steady: 2.5 + 2 > 4 now; flappy fits now only
	if !sol.OK || len(sol.Moves) != 1 || sol.Moves[0].To != "flappy" {
		t.Fatalf("%+v, want mover to flappy by demand now", sol)
	}
}

// The agent keeps each server's highest demand per step of the window,
// aligned on the clock, and forgets what is older than the window.
func TestAgentKeepsServerProfiles(t *testing.T) {
	cfg := DefaultConfig("h1")
	cfg.DestinationPeakWindow = 160 * time.Second // 10 s steps
	a, err := NewAgent(cfg, ring5)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int, cpu float64) Server {
		a.Observe(t0.Add(time.Duration(s)*time.Second), hostWith("h1", cpu))
		return a.host.Servers[0]
	}
	at(0, 3)
	at(5, 1) // same step: its highest stays 3
	s := at(30, 1)
	if want := []float64{3, 1, 1, 1}; !slices.Equal(s.Profile, want) || s.PeakCPU != 3 || s.PeakRAM != 512 {
		t.Fatalf("profile %v peak %v/%v, want %v (steps without a sample take the next), 3, 512", s.Profile, s.PeakCPU, s.PeakRAM, want)
	}
	if a.host.ProfileStep != 10*time.Second || a.host.ProfileEnd != t0.Add(30*time.Second).UnixNano()/int64(10*time.Second) {
		t.Fatalf("host step %v end %d", a.host.ProfileStep, a.host.ProfileEnd)
	}
	s = at(160, 2) // 16 steps after the first: the 3 has left the window
	if len(s.Profile) != ProfileSteps || s.PeakCPU != 2 || slices.Contains(s.Profile, 3) {
		t.Fatalf("profile %v peak %v, want %d steps without the 3", s.Profile, s.PeakCPU, ProfileSteps)
	}
	if len(a.peaks) != 1 {
		t.Fatalf("profiles kept %d", len(a.peaks))
	}
	off := newAgent(t, "h2")
	off.Observe(t0, hostWith("h2", 3))
	if sv := off.host.Servers[0]; sv.Profile != nil || sv.PeakCPU != 0 || off.host.ProfileStep != 0 {
		t.Fatalf("without a window: %+v", sv)
	}
}

// An overload that only servers moved within the server cooldown could
// relieve is said so at once, and its partition ends aborted, class
// cooling, without growing.
func TestCoolingOverloadEndsWithoutGrowing(t *testing.T) {
	src := Host{Name: "src", CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, Servers: []Server{
		{ID: "new", VCPUs: 2, RAMMB: 1024, CPU: 2, RAM: 100, Cooling: true},
		{ID: "old", VCPUs: 2, RAMMB: 1024, CPU: 2.5, RAM: 100},
	}}
	p := Problem{Events: []Event{{ID: "e", Kind: Overload, Host: "src"}}, Hosts: []Host{src}, Thresholds: DefaultThresholds()}
	if sol := Solve(p, DefaultSolveOptions()); !sol.OK && sol.Cooling {
		t.Fatalf("old alone relieves src: %+v, want not cooling", sol)
	}
	p.Hosts[0].Servers[1].CPU = 0.5 // 2 + 0.5: without old, 2 left, yet 4.5 now
	p.Hosts[0].Servers[0].CPU = 4.2
	sol := Solve(p, DefaultSolveOptions())
	if sol.OK || !sol.Cooling || !strings.Contains(sol.Reason, "src stays overloaded without 1 server(s) moved within the server cooldown") {
		t.Fatalf("%+v, want cooling", sol)
	}

	d := dissolvedBy(t, sol)
	if d.Outcome != Aborted || d.Class != EndCooling {
		t.Fatalf("dissolved %v/%v, want aborted/cooling", d.Outcome, d.Class)
	}
	if c := DeriveEndClass(Aborted, d.Reason); c != EndCooling {
		t.Fatalf("an older agent's reason derives %v", c)
	}
}

// dissolvedBy is the dissolution of a two-host partition (h1's overload,
// led by h2) whose solve answered sol; it fails when the partition grew
// or stayed.
func dissolvedBy(t *testing.T, sol Solution) Message {
	t.Helper()
	_, d := leaderSolved(t, sol)
	return d
}

// Graded choice, by demand now: when no destination fits at peaks, the
// one whose window shows the fewest steps over with the server wins over
// the one with the most room now. flappy (0.5 now, 3.5 over the window's
// first half) would be over at 8 steps with the mover, spiky (1 now and
// all along but one step at 3) at one.
func TestGradedFallbackPrefersFewerStepsOver(t *testing.T) {
	hosts := peakHosts(2.5) // steady: 2.5 + 2 > 4 now
	for j := range ProfileSteps / 2 {
		hosts[1].Servers[0].Profile[j] = 3.5
	}
	spike := flat(1)
	spike[3] = 3
	hosts = append(hosts, profiledHost("spiky", Server{ID: "k", VCPUs: 2, RAMMB: 1024, CPU: 1, RAM: 100, PeakCPU: 3, PeakRAM: 100, Profile: spike}))
	sol := solvePeak(hosts)
	if !sol.OK || len(sol.Moves) != 1 || sol.Moves[0].To != "spiky" {
		t.Fatalf("%+v, want mover to spiky (over at 1 step, not 8)", sol)
	}
}

// A moved server's profile travels with it: the leader (h2) sends, with
// the update that starts its plan, the profile its snapshot had of the
// server it moves to h1 (over the wire), and h1's agent starts the
// server's profile from it when it arrives, instead of from nothing (and
// the solver counting it at its peak at every step). Without a window the
// update carries nothing.
func TestMovedServerCarriesItsProfile(t *testing.T) {
	for _, window := range []time.Duration{160 * time.Second, 0} { // 10 s steps
		cfg := func(id string) Config {
			c := DefaultConfig(id)
			c.DestinationPeakWindow = window
			return c
		}
		h1, err := NewAgent(cfg("h1"), ring5)
		if err != nil {
			t.Fatal(err)
		}
		h2, err := NewAgent(cfg("h2"), ring5)
		if err != nil {
			t.Fatal(err)
		}
		for i, cpu := range []float64{3, 1, 1, 1} {
			h2.Observe(t0.Add(time.Duration(i-3)*10*time.Second), hostWith("h2", cpu))
		}
		h2.Step(only(t, overload(t, h1), MsgGrow).Msg)
		h1.Step(only(t, h2.Ready(), MsgUpdate).Msg)
		h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
		req := h2.Ready().Solve[0]
		move := Action{Kind: LiveMigrate, Server: "h2-s", From: "h2", To: "h1", VCPUs: 2, RAMMB: 1024, CPU: 1, RAM: 512}
		sol := Solution{OK: true, Moves: []Action{move}, Solved: []string{req.Problem.Events[0].ID}}
		h2.SolveDone(req.PartID, req.Version, sol, Plan{Steps: [][]Action{{move}}, Snapshot: req.Problem.Hosts}, nil)
		data, err := Encode(only(t, h2.Ready(), MsgUpdate).Msg)
		if err != nil {
			t.Fatal(err)
		}
		up, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if window == 0 {
			if up.Carried != nil {
				t.Fatalf("without a window the update carries %+v", up.Carried)
			}
			continue
		}
		h1.Step(up)
		arrived := hostWith("h1", 2)
		arrived.Servers = append(arrived.Servers, hostWith("h2", 1).Servers...)
		h1.Observe(t0.Add(20*time.Second), arrived)
		s := h1.host.Servers[1]
		if want := []float64{3, 1, 1, 1, 1, 1}; s.ID != "h2-s" || !slices.Equal(s.Profile, want) || s.PeakCPU != 3 || s.PeakRAM != 512 {
			t.Fatalf("arrived %s: profile %v peak %v/%v, want %v, 3, 512 (its source's steps, the gap filled)", s.ID, s.Profile, s.PeakCPU, s.PeakRAM, want)
		}
		if len(h1.carried) != 0 {
			t.Fatalf("kept %d carried profiles after the arrival", len(h1.carried))
		}
	}
}
