package scheduler

import (
	"strings"
	"testing"
	"time"
)

// persistHosts: src is overloaded by 1 core of 4 (25 points) now; one
// window before the next step its two servers' demand summed to first
// (each half of it). dst has room at every step.
func persistHosts(first float64) []Host {
	prof := func(now float64) []float64 {
		p := make([]float64, ProfileSteps)
		for j := range p {
			p[j] = now
		}
		p[0] = first / 2
		return p
	}
	src := Host{Name: "src", CPUs: 4, RAMMB: 65536, AllocVCPUs: 16, AllocRAMMB: 65536, ProfileStep: 15 * time.Second, ProfileEnd: 100,
		Servers: []Server{
			{ID: "a", VCPUs: 2, RAMMB: 1024, CPU: 2.5, RAM: 100, PeakCPU: 2.5, PeakRAM: 100, Profile: prof(2.5)},
			{ID: "b", VCPUs: 2, RAMMB: 1024, CPU: 2.5, RAM: 100, PeakCPU: 2.5, PeakRAM: 100, Profile: prof(2.5)},
		}}
	dst := Host{Name: "dst", CPUs: 16, RAMMB: 65536, AllocVCPUs: 64, AllocRAMMB: 65536, ProfileStep: 15 * time.Second, ProfileEnd: 100}
	return []Host{src, dst}
}

// With profiles, relief of an overload predicted to end at the next step
// gains a sixteenth of its points: 25/16 here, less than one move's cost
// of 2, refused; predicted to last (or without profiles, or over by RAM)
// it gains its 25 points and goes.
func TestReliefOfAnOverloadAboutToEndDoesNotPay(t *testing.T) {
	solve := func(hosts []Host) Solution {
		return Solve(Problem{Events: []Event{{ID: "e", Kind: Overload, Host: "src"}}, Hosts: hosts, Thresholds: DefaultThresholds(),
			MoveCost: 2}, DefaultSolveOptions())
	}
	sol := solve(persistHosts(3)) // 3 cores of 4: under
	if sol.OK || !sol.NotWorth || sol.Gain != 1.56 || !strings.Contains(sol.Reason, "not worth it") {
		t.Fatalf("ending overload: %+v, want refused for a gain of 25/16", sol)
	}
	if sol := solve(persistHosts(5)); !sol.OK || len(sol.Moves) != 1 || sol.Gain != 25 {
		t.Fatalf("lasting overload: %+v, want one move for 25 points", sol)
	}
	bare := persistHosts(3)
	for i := range bare {
		bare[i].ProfileStep, bare[i].ProfileEnd = 0, 0
		for k := range bare[i].Servers {
			bare[i].Servers[k].Profile = nil
		}
	}
	if sol := solve(bare); !sol.OK || sol.Gain != 25 {
		t.Fatalf("without profiles: %+v, want the full 25 points", sol)
	}
	ram := persistHosts(3)
	for k := range ram[0].Servers { // 80,000 MB of 65,536: 22 points over by RAM
		ram[0].Servers[k].RAM, ram[0].Servers[k].PeakRAM = 40000, 40000
	}
	if sol := solve(ram); !sol.OK || sol.Gain < 20 {
		t.Fatalf("overloaded by RAM: %+v, want its RAM points in full", sol)
	}
}

// A refused plan ends the event not_worth and it is raised again after
// retry_backoff, whatever the backoff had grown to: the refusal judged
// the overload's moment, and one that lasts is not left a minute.
func TestNotWorthRetriesAfterRetryBackoff(t *testing.T) {
	h1, d := leaderSolved(t, Solution{NotWorth: true, Reason: "not worth it: test"})
	base := h1.cfg.RetryBackoff
	h1.backoff = 8 * base // grown by earlier failures
	h1.Step(d)
	h1.Ready()
	if h1.Partition() != nil || h1.active != nil {
		t.Fatalf("h1 still in %+v with event %+v", h1.Partition(), h1.active)
	}
	if !h1.retryAt.Equal(h1.now.Add(base)) || h1.backoff != 8*base {
		t.Fatalf("next try at +%s, backoff %s; want +%s and %s kept", h1.retryAt.Sub(h1.now), h1.backoff, base, 8*base)
	}
}

// leaderSolved: h1 raises an overload, h2 leads its partition and its
// solve ends with sol; h1 and the message h2 broadcast (its dissolve when
// sol is refused), which h1 has not seen yet.
func leaderSolved(t *testing.T, sol Solution) (*Agent, Message) {
	t.Helper()
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	h2.Step(only(t, overload(t, h1), MsgGrow).Msg)
	h1.Step(only(t, h2.Ready(), MsgUpdate).Msg)
	h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	rd := h2.Ready()
	if len(rd.Solve) != 1 {
		t.Fatalf("solve requests %+v", rd.Solve)
	}
	req := rd.Solve[0]
	h2.SolveDone(req.PartID, req.Version, sol, Plan{}, nil)
	rd = h2.Ready()
	if len(sent(rd, MsgGrow)) != 0 || h2.Partition() != nil {
		t.Fatalf("grew or kept the partition: %+v", rd.Messages)
	}
	return h1, only(t, rd, MsgDissolve).Msg
}
