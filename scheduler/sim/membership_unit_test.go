package sim

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler/node"
)

func newTestSwimSim(t *testing.T, n int, alive func(int) bool) *swimSim {
	t.Helper()
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%02d", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := newSwimSim(ctx, hosts, 0.1, node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 1), 1, alive, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// While the region starts, agent i joins through agents already started
// (0..i-1), never itself; a restarted agent through any other.
func TestSwimSimSeedsAreStartedAgents(t *testing.T) {
	s := newTestSwimSim(t, 6, func(int) bool { return true })
	addrs := map[string]int{}
	for i, tr := range s.trs {
		addrs[s.net.Addr(tr)] = i
	}
	check := func(i, want, below int) {
		t.Helper()
		seeds := s.seeds(i)
		if len(seeds) != want {
			t.Fatalf("agent %d: %d seeds %v, want %d", i, len(seeds), seeds, want)
		}
		seen := map[int]bool{}
		for _, a := range seeds {
			j, ok := addrs[a]
			if !ok || j == i || j >= below || seen[j] {
				t.Fatalf("agent %d: seed %s (agent %d) not a distinct other among 0..%d", i, a, j, below-1)
			}
			seen[j] = true
		}
	}
	for i := range s.hosts {
		check(i, min(i, 2), i)
		s.started++
	}
	for range 20 {
		check(3, 2, len(s.hosts))
	}
}

// False deaths count distinct live agents reported down; the reports,
// repeats included, are counted apart; killed agents' detections give
// p50 and p99.
func TestSwimSimFalseDeathsAreDistinctAgents(t *testing.T) {
	s := newTestSwimSim(t, 4, func(int) bool { return true })
	s.observeDown(0, "h03")
	s.observeDown(1, "h03")
	s.observeDown(1, "h03")
	s.observeDown(2, "h01")
	s.kill(0)
	s.observeDown(1, "h00")
	s.observeDown(1, "h00") // counted once per (observer, killed)
	r := s.report(0.1)
	if r.FalseDeaths != 2 || r.FalseDeathReports != 4 {
		t.Errorf("false deaths %d (reports %d), want 2 agents (4 reports)", r.FalseDeaths, r.FalseDeathReports)
	}
	if r.Detections != 1 || r.DetectP99S < r.DetectP50S {
		t.Errorf("detections %d, p50 %.2f p99 %.2f", r.Detections, r.DetectP50S, r.DetectP99S)
	}
}

// A restarted agent's previous life reported down by an observer that has
// not had the new life up is a late death, not a false one (Swim reports
// a restart as down then up, whenever the observer hears of it); the new
// life reported down once the observer had it up is a false death.
func TestSwimSimRestartedLifeDownIsLateNotFalse(t *testing.T) {
	s := newTestSwimSim(t, 4, func(int) bool { return true })
	s.kill(3)
	s.revive(3)
	s.observeDown(0, "h03") // 0 missed the death, hears of the restart
	s.observeUp(0, "h03")
	s.observeUp(1, "h03")
	s.observeDown(1, "h03") // 1 had the new life up
	r := s.report(0.1)
	if r.Late != 1 || r.FalseDeaths != 1 || r.FalseDeathReports != 1 {
		t.Errorf("late %d, false deaths %d (reports %d), want 1 late and 1 false (h01's)", r.Late, r.FalseDeaths, r.FalseDeathReports)
	}
}

// A kill is missed by the live observers that still have the agent up
// when it comes back, not by one that never had it (restarted after the
// kill, it joined a region where the agent was already down).
func TestSwimSimMissedOnlyByObserversThatHadItUp(t *testing.T) {
	s := newTestSwimSim(t, 4, func(int) bool { return true })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	sws := make([]*node.Swim, 4)
	for i := range sws {
		sw, err := s.agent(i, "1", func(string) {}, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		sws[i] = sw
		if i == 3 {
			break // h03 never runs: it has nobody up
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = sw.Run(ctx) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for !(sws[0].Knows("h02") && sws[1].Knows("h02")) {
		if time.Now().After(deadline) {
			t.Fatal("h00 and h01 never had h02 up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.kill(2)
	s.revive(2) // before anyone detected it: h00 and h01 missed it
	if r := s.report(0.1); r.Missed != 2 {
		t.Errorf("missed %d, want 2 (h00 and h01; not h03, which never had h02 up)", r.Missed)
	}
}

// The simulator's timings declare a suspect dead well before a killed
// agent comes back at 1,000 agents, keep Lifeguard on, and give a
// refutation memberlist's LAN retransmits and suspicion time.
func TestSwimSimTuneDetectsBeforeRestart(t *testing.T) {
	c := memberlist.DefaultLANConfig()
	swimSimTune(c)
	// memberlist's suspicionTimeout: SuspicionMult x log10(N) x ProbeInterval.
	minTimeout := time.Duration(float64(c.SuspicionMult) * math.Log10(1000) * float64(c.ProbeInterval))
	if minTimeout >= swimKilledFor*3/4 {
		t.Errorf("suspicion %s at 1,000 agents: a killed agent (down %s) would come back undetected", minTimeout, swimKilledFor)
	}
	if c.ProbeTimeout >= c.ProbeInterval {
		t.Errorf("probe timeout %s leaves no time for indirect probes in a %s interval", c.ProbeTimeout, c.ProbeInterval)
	}
	if c.AwarenessMaxMultiplier <= 1 || c.SuspicionMaxTimeoutMult <= 1 {
		t.Error("Lifeguard turned off")
	}
	// Refutations keep memberlist's LAN retransmits and suspicion: halved,
	// they missed members at 1,000 agents and live agents were declared
	// dead (11 to 37 a run).
	lan := memberlist.DefaultLANConfig()
	if c.RetransmitMult < lan.RetransmitMult || c.SuspicionMult < lan.SuspicionMult {
		t.Errorf("retransmit x%d, suspicion x%d: below memberlist's LAN x%d and x%d", c.RetransmitMult, c.SuspicionMult, lan.RetransmitMult, lan.SuspicionMult)
	}
	// The joins' gossip runs at the gossip rate until every member's
	// queue of "alive" messages drains (minutes at 1,000 agents): at 6
	// datagrams per agent per second, about two thirds of a core, and
	// the probes starved whenever the process got less than both
	// cores. But a refutation must still reach the region (about
	// log_GossipNodes(N) rounds) well inside the suspicion timeout.
	if rate := float64(c.GossipNodes) / c.GossipInterval.Seconds(); rate > 3 {
		t.Errorf("gossip to %d members every %s: %.1f datagrams per agent per second, over 3", c.GossipNodes, c.GossipInterval, rate)
	}
	rounds := math.Ceil(math.Log(1000) / math.Log(float64(c.GossipNodes)))
	if spread := time.Duration(rounds) * c.GossipInterval; spread > minTimeout/3 {
		t.Errorf("a refutation takes about %s to reach 1,000 agents, over a third of the %s suspicion", spread, minTimeout)
	}
}
