package sim

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler/node"
)

// Membership kinds of the simulator.
const (
	// MembershipIdeal: a killed agent is reported dead to every other the
	// moment it stops, and back the moment it restarts.
	MembershipIdeal = "ideal"
	// MembershipSwim: every agent runs node.Swim (hashicorp/memberlist,
	// the code `dvms agent` runs with membership = swim) over an
	// in-memory network (node.SwimNet) losing MembershipDrop of its
	// datagrams; the runners hear of deaths only from it.
	MembershipSwim = "swim"
)

// swimJoinStagger spaces the agents' first joins; swimSeed offsets the
// run's seed for the choice of join seeds.
const (
	swimJoinStagger = 20 * time.Millisecond
	// swimWarmupMax bounds the wait for the joins to converge, and
	// swimSettle is how long the membership must then stay quiet (no
	// agent seen up or down anywhere) before the run's clock starts.
	swimWarmupMax = 3 * time.Minute
	swimSettle    = 10 * time.Second
	swimSeed      = 7741
	// swimKilledFor: with SWIM a killed agent stays down 40-49 s (5-14 s
	// with the ideal detector), longer than memberlist takes to declare
	// it dead at 1,000 agents (p99 32-36 s measured), so detection is
	// measured rather than cut short by the restart.
	swimKilledFor = 40 * time.Second
	// swimProbeTimeout: how long a probe waits for its ack (swimSimTune).
	// swimLagLimit: a goroutine woken later than this (RuntimeReport)
	// makes the run not valid: half the timeout, as a probe's round trip
	// waits on at least two wake-ups (the member's packet reader, then
	// the prober's). Seed 3 with one busy loop on the two cores woke one
	// 932 ms late, 160 s after the start, and declared 4 live agents
	// dead; quiet runs, at most 43 ms.
	swimProbeTimeout = time.Second
	swimLagLimit     = swimProbeTimeout / 2
)

// swimSimTune adjusts memberlist's LAN timings for a region whose
// agents all share one process and two cores, where a probe's round trip
// is the scheduler's latency under load, not the network's:
//   - compression off (it saves bandwidth, not detection, and costs CPU);
//   - gossip every second, not 200 ms: a region's start queues every
//     member's "alive" at every member (N^2 messages, each retransmitted
//     4 x log10(N+1) times by each holder and decoded by every
//     receiver), and gossip runs at its rate until those queues drain:
//     at 1,000 agents and 500 ms that was 6 to 7 datagrams per agent
//     per second for minutes, at about 0.1 ms of CPU each (garbage
//     collection included), and with less than both cores to itself
//     the process starved the probes (live agents declared dead from
//     39 s, before the first collection). Every second halves that
//     rate and makes the joins' gossip last twice as long; a
//     refutation still reaches the region in about log3(N) = 7
//     rounds, well inside the suspicion timeout. The process still
//     needs the two cores to itself: with other work taking a core
//     during the joins, live agents are still declared dead;
//   - a probe every 2 s that waits 1 s for its ack (1 s and 500 ms).
//
// Retransmits and suspicion are memberlist's LAN defaults: each
// broadcast retransmitted 4 x log10(N+1) times (16 at 1,000 agents), and
// a suspect declared dead after 4 x log10(N) probe intervals (24 s at
// 1,000) once Lifeguard has 2 independent confirmations, up to 6 x that
// with none. Halving them (2 x and 3 x, tried until 2026-11-26) left a
// refutation too few transmits (an epidemic of fan-out ~7 misses
// about e^-7 of the region, ~1 member per refutation) and too little
// time (18 s after one confirmation) when garbage-collection stalls
// started suspicions during the joins: 11 to 37 live agents declared
// dead at 1,000 agents, 10 % loss. A killed agent stays down
// swimKilledFor, longer than the 24 s.
//
// Lifeguard (awareness, suspicion confirmations) stays on. `dvms agent`
// runs the LAN defaults.
func swimSimTune(c *memberlist.Config) {
	c.EnableCompression = false
	c.GossipInterval = time.Second
	c.ProbeInterval, c.ProbeTimeout = 2*time.Second, swimProbeTimeout
}

// MembershipReport is what the SWIM membership cost and how well it
// detected (only with --membership swim).
type MembershipReport struct {
	Kind string  `json:"kind"`
	Drop float64 `json:"drop"`
	// WarmupS: wall seconds from the first agent's start until every
	// agent saw every other up and the join's gossip had settled (or
	// swimWarmupMax), before the run's clock started; Converged: it did.
	WarmupS   float64 `json:"warmup_s"`
	Converged bool    `json:"converged"`
	// MsgsPerAgentS: membership datagrams and streams sent per agent per
	// wall second, over the run (after the warm-up); JoinMsgsPerAgentS:
	// the same during the warm-up (the joins' gossip).
	MsgsPerAgentS     float64 `json:"msgs_per_agent_s"`
	JoinMsgsPerAgentS float64 `json:"join_msgs_per_agent_s"`
	// Detections: (observer, killed agent) pairs reported down, and how
	// long after the kill (simulated time).
	Detections int     `json:"detections"`
	DetectP50S float64 `json:"detect_p50_s"`
	DetectP99S float64 `json:"detect_p99_s"`
	DetectMaxS float64 `json:"detect_max_s"`
	// Missed: (live observer, killed agent) pairs where the observer
	// still had the killed agent up when it came back or the run ended
	// (an observer that never had it up, having restarted after the
	// kill, has missed nothing).
	Missed int `json:"missed"`
	// Late: a restarted agent's previous life reported down after the
	// restart, by an observer that has not had the new life up yet (it
	// missed the death, or heard of it late): a death that happened.
	Late int `json:"late"`
	// FalseDeaths: distinct agents that a live observer reported down
	// while they ran, in the life the observer had up (never killed, or
	// restarted and seen up since), warm-up included; FalseDeathReports
	// counts every such report (observer, agent), repeats included.
	FalseDeaths       int `json:"false_deaths"`
	FalseDeathReports int `json:"false_death_reports"`
	// FalseDeathReportsWarmup: those of FalseDeathReports made during the
	// warm-up.
	FalseDeathReportsWarmup int `json:"false_death_reports_warmup"`
	// FullViewS: wall seconds from the first agent's start until every
	// agent first saw every other up (0: not during the warm-up).
	FullViewS float64 `json:"full_view_s"`
	// Overflow: datagrams lost to a full receive buffer, on top of Drop;
	// QueueFullDrops: gossip messages memberlist dropped unread for a
	// full handler queue. Both count a process that does not keep up.
	Overflow       int64 `json:"overflow"`
	QueueFullDrops int64 `json:"queue_full_drops"`
}

// swimSim runs the agents' SWIM membership of one simulation.
type swimSim struct {
	net   *node.SwimNet
	trs   []memberlist.NodeAwareTransport
	hosts []string
	index map[string]int
	clock node.Clock
	rng   *rand.Rand
	log   zerolog.Logger
	start time.Time

	mu       sync.Mutex
	killedAt map[int]time.Time // simulated time of the current kill
	// lives[k]: how many times agent k restarted; upLife[(o, k)]: the
	// life of k observer o last reported up (kept for restarted k only).
	lives  map[int]int
	upLife map[[2]int]int
	sws    []*node.Swim    // each agent's current membership
	down   map[[2]int]bool // (observer, killed) reported since the kill
	detect []time.Duration
	missed int
	falseD map[int]bool // distinct live agents reported down
	falseN int          // reports of live agents down, repeats included
	falseW int          // of them during the warm-up
	late   int
	// queueFull: memberlist's handler-queue drops of agents' past lives.
	queueFull int64
	// fullView: when every agent first saw every other up.
	fullView time.Time
	// seen[i]: how many others agent i's membership has up; changed:
	// the last wall time any agent saw another come or go.
	seen    []atomic.Int32
	changed atomic.Int64
	// started: how many agents started (the first ones join through
	// these); runStart, msgsAtRun: when the run's clock started, and the
	// messages sent until then.
	started   int
	runStart  time.Time
	msgsAtRun int64
	converged bool
	// alive reports whether agent i runs (not killed).
	alive func(i int) bool
}

func newSwimSim(ctx context.Context, hosts []string, drop float64, clock node.Clock, seed int64, alive func(int) bool, log zerolog.Logger) (*swimSim, error) {
	sn, err := node.NewSwimNet(ctx, drop)
	if err != nil {
		return nil, err
	}
	s := &swimSim{net: sn, hosts: hosts, index: make(map[string]int, len(hosts)), clock: clock, rng: rand.New(rand.NewSource(seed)),
		log: log, start: time.Now(), killedAt: map[int]time.Time{}, lives: map[int]int{}, upLife: map[[2]int]int{}, down: map[[2]int]bool{}, falseD: map[int]bool{},
		seen: make([]atomic.Int32, len(hosts)), alive: alive, sws: make([]*node.Swim, len(hosts))}
	// Every transport before the first agent: SwimNet's routing table is
	// not safe for concurrent use.
	s.trs = make([]memberlist.NodeAwareTransport, len(hosts))
	for i, h := range hosts {
		s.trs[i] = sn.Transport(h)
		s.index[h] = i
	}
	return s, nil
}

// agent returns agent i's Swim, joining through two other agents at
// random (at the region's start, two already started: a region boots
// with its seeds up); up and down are its runner's (and coordinates')
// handlers.
func (s *swimSim) agent(i int, incarnation string, up, down func(string)) (*node.Swim, error) {
	s.mu.Lock()
	seeds := s.seeds(i)
	s.started++
	s.mu.Unlock()
	sw, err := node.NewSwim(node.SwimConfig{Self: node.Heartbeat{Host: s.hosts[i], Incarnation: incarnation},
		Seeds: seeds, Transport: s.trs[i], Tune: swimSimTune},
		// memberlist's own complaints (a starved process: thousands a
		// second), sampled.
		s.log.Sample(&zerolog.BurstSampler{Burst: 5, Period: 10 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("swim of %s: %w", s.hosts[i], err)
	}
	s.mu.Lock()
	if old := s.sws[i]; old != nil {
		s.queueFull += old.QueueFullDrops()
	}
	s.sws[i] = sw
	s.mu.Unlock()
	sw.OnUp = func(h string) {
		s.seen[i].Add(1)
		s.changed.Store(time.Now().UnixNano())
		s.observeUp(i, h)
		up(h)
	}
	sw.OnDown = func(h string) {
		s.seen[i].Add(-1)
		s.changed.Store(time.Now().UnixNano())
		s.observeDown(i, h)
		down(h)
	}
	return sw, nil
}

// seeds picks two other agents for agent i to join through: among the
// started ones while the region starts (agents start in order, so
// 0..i-1), else among all. Locked.
func (s *swimSim) seeds(i int) []string {
	pool := min(s.started, len(s.hosts))
	others := pool
	if i < pool {
		others--
	}
	var picked []int
	for len(picked) < min(2, others) {
		if j := s.rng.Intn(pool); j != i && !slices.Contains(picked, j) {
			picked = append(picked, j)
		}
	}
	seeds := make([]string, len(picked))
	for k, j := range picked {
		seeds[k] = s.net.Addr(s.trs[j])
	}
	return seeds
}

// warmup waits until every agent sees all the others up and no agent
// has seen a change for swimSettle (the joins' gossip spent), or
// swimWarmupMax, or ctx ends; the run's clock starts after it, as in a
// region up for a while. It returns whether the membership converged.
func (s *swimSim) warmup(ctx context.Context) bool {
	want := int32(len(s.hosts) - 1)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	deadline := time.Now().Add(swimWarmupMax)
	converged := false
	var fullView time.Time
	for !converged && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		full := true
		for i := range s.seen {
			full = full && s.seen[i].Load() == want
		}
		if full && fullView.IsZero() {
			fullView = time.Now()
		}
		converged = full && time.Since(time.Unix(0, s.changed.Load())) >= swimSettle
	}
	s.mu.Lock()
	s.runStart, s.msgsAtRun, s.converged, s.fullView = time.Now(), s.msgs(), converged, fullView
	s.mu.Unlock()
	return converged
}

// warmupEnd is when the run's clock started (zero before).
func (s *swimSim) warmupEnd() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runStart
}

// msgs is the membership datagrams and streams sent so far.
func (s *swimSim) msgs() int64 { return s.net.Packets.Load() + s.net.Streams.Load() }

// observeUp records which life of a restarted agent the observer has up.
func (s *swimSim) observeUp(observer int, h string) {
	k, ok := s.index[h]
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.lives[k]; ok && l > 0 {
		s.upLife[[2]int{observer, k}] = l
	}
}

func (s *swimSim) observeDown(observer int, h string) {
	k, ok := s.index[h]
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok || !s.alive(observer) {
		return // a killed agent's view does not count
	}
	at, killed := s.killedAt[k]
	switch {
	case !killed && s.upLife[[2]int{observer, k}] < s.lives[k]:
		// The observer never had this life up: the down is the previous
		// life's (Swim reports a restart as down then up).
		s.late++
	case !killed:
		s.falseD[k] = true
		s.falseN++
		if s.runStart.IsZero() {
			s.falseW++
		}
		s.log.Warn().Str("observer", s.hosts[observer]).Str("member", h).Int("life", s.lives[k]).
			Bool("warmup", s.runStart.IsZero()).Dur("after_start", time.Since(s.start)).Msg("swim: live agent reported down")
	case !s.down[[2]int{observer, k}]:
		s.down[[2]int{observer, k}] = true
		s.detect = append(s.detect, s.clock.Now().Sub(at))
	}
}

// kill makes agent i silent (a crash: no goodbye), before its agent
// stops.
func (s *swimSim) kill(i int) {
	s.mu.Lock()
	s.killedAt[i] = s.clock.Now()
	s.mu.Unlock()
	s.net.Kill(s.trs[i])
}

// revive: agent i restarts (a new Swim on the same address).
func (s *swimSim) revive(i int) {
	s.mu.Lock()
	s.settle(i)
	s.lives[i]++
	s.mu.Unlock()
	s.net.Revive(s.trs[i])
}

// settle counts the live observers that still have killed agent k up.
// Locked.
func (s *swimSim) settle(k int) {
	if _, ok := s.killedAt[k]; !ok {
		return
	}
	for o := range s.hosts {
		if o != k && s.alive(o) && !s.down[[2]int{o, k}] && s.sws[o] != nil && s.sws[o].Knows(s.hosts[k]) {
			s.missed++
		}
		delete(s.down, [2]int{o, k})
	}
	delete(s.killedAt, k)
}

// report is the membership's figures so far; nothing is counted after
// it (the agents' goodbyes at the run's end are not deaths).
func (s *swimSim) report(drop float64) *MembershipReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.killedAt {
		s.settle(k) // agents still down: killed at most 0.7 x the run before its end
	}
	s.alive = func(int) bool { return false }
	r := &MembershipReport{Kind: MembershipSwim, Drop: drop, Detections: len(s.detect), Missed: s.missed, Late: s.late,
		FalseDeaths: len(s.falseD), FalseDeathReports: s.falseN, FalseDeathReportsWarmup: s.falseW,
		Overflow: s.net.Overflow.Load(), QueueFullDrops: s.queueFull}
	for _, sw := range s.sws {
		if sw != nil {
			r.QueueFullDrops += sw.QueueFullDrops()
		}
	}
	if s.runStart.IsZero() {
		s.runStart = s.start // no warm-up: the whole run
	}
	r.WarmupS = round(s.runStart.Sub(s.start).Seconds())
	if !s.fullView.IsZero() {
		r.FullViewS = round(s.fullView.Sub(s.start).Seconds())
	}
	r.Converged = s.converged
	n := float64(len(s.hosts))
	if secs := time.Since(s.runStart).Seconds(); secs > 0 {
		r.MsgsPerAgentS = round(float64(s.msgs()-s.msgsAtRun) / n / secs)
	}
	if r.WarmupS > 0 {
		r.JoinMsgsPerAgentS = round(float64(s.msgsAtRun) / n / r.WarmupS)
	}
	if len(s.detect) > 0 {
		d := slices.Clone(s.detect)
		slices.Sort(d)
		q := func(p float64) float64 { return round(d[int(p*float64(len(d)-1))].Seconds()) }
		r.DetectP50S, r.DetectP99S, r.DetectMaxS = q(0.5), q(0.99), q(1)
	}
	return r
}
