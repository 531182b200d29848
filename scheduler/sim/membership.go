package sim

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
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
	swimJoinStagger = 10 * time.Millisecond
	swimSeed        = 7741
	// swimLateWindow: a down report this soon after the agent's restart
	// is about its previous life (late), not a false death.
	swimLateWindow = time.Minute
	// swimKilledFor: with SWIM a killed agent stays down 30-45 s (5-15 s
	// with the ideal detector), longer than memberlist takes to declare
	// it dead at a few hundred agents, so detection is measured rather
	// than cut short by the restart.
	swimKilledFor = 30 * time.Second
)

// MembershipReport is what the SWIM membership cost and how well it
// detected (only with --membership swim).
type MembershipReport struct {
	Kind string  `json:"kind"`
	Drop float64 `json:"drop"`
	// MsgsPerAgentS: membership datagrams and streams sent per agent per
	// wall second, over the run.
	MsgsPerAgentS float64 `json:"msgs_per_agent_s"`
	// Detections: (observer, killed agent) pairs reported down, and how
	// long after the kill (simulated time).
	Detections int     `json:"detections"`
	DetectP50S float64 `json:"detect_p50_s"`
	DetectMaxS float64 `json:"detect_max_s"`
	// Missed: (live observer, killed agent) pairs not reported down
	// before the killed agent came back or the run ended.
	Missed int `json:"missed"`
	// Late: a restarted agent's previous life reported down after the
	// restart (within swimLateWindow), before it refuted: the runner
	// hears of it as a death until the refutation.
	Late int `json:"late"`
	// FalseDeaths: an agent that was never killed (or not within
	// swimLateWindow) reported down by a live observer.
	FalseDeaths int `json:"false_deaths"`
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

	mu        sync.Mutex
	killedAt  map[int]time.Time // simulated time of the current kill
	revivedAt map[int]time.Time // simulated time of the last restart
	down      map[[2]int]bool   // (observer, killed) reported since the kill
	detect    []time.Duration
	missed    int
	falseD    int
	late      int
	// alive reports whether agent i runs (not killed).
	alive func(i int) bool
}

func newSwimSim(ctx context.Context, hosts []string, drop float64, clock node.Clock, seed int64, alive func(int) bool, log zerolog.Logger) (*swimSim, error) {
	sn, err := node.NewSwimNet(ctx, drop)
	if err != nil {
		return nil, err
	}
	s := &swimSim{net: sn, hosts: hosts, index: make(map[string]int, len(hosts)), clock: clock, rng: rand.New(rand.NewSource(seed)),
		log: log, start: time.Now(), killedAt: map[int]time.Time{}, revivedAt: map[int]time.Time{}, down: map[[2]int]bool{}, alive: alive}
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
// random; up and down are its runner's (and coordinates') handlers.
func (s *swimSim) agent(i int, incarnation string, up, down func(string)) (*node.Swim, error) {
	s.mu.Lock()
	var seeds []string
	for len(seeds) < 2 && len(s.hosts) > 1 {
		if j := s.rng.Intn(len(s.hosts)); j != i {
			seeds = append(seeds, s.net.Addr(s.trs[j]))
		}
	}
	s.mu.Unlock()
	sw, err := node.NewSwim(node.SwimConfig{Self: node.Heartbeat{Host: s.hosts[i], Incarnation: incarnation},
		Seeds: seeds, Transport: s.trs[i],
		// Compression saves bandwidth, not detection, and costs CPU that
		// a thousand agents in one process do not have.
		Tune: func(c *memberlist.Config) { c.EnableCompression = false }},
		// memberlist's own complaints (a starved process: thousands a
		// second), sampled.
		s.log.Sample(&zerolog.BurstSampler{Burst: 5, Period: 10 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("swim of %s: %w", s.hosts[i], err)
	}
	sw.OnUp = up
	sw.OnDown = func(h string) {
		s.observeDown(i, h)
		down(h)
	}
	return sw, nil
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
	case !killed && s.clock.Now().Sub(s.revivedAt[k]) < swimLateWindow:
		s.late++
	case !killed:
		s.falseD++
		s.log.Warn().Str("observer", s.hosts[observer]).Str("member", h).Msg("swim: live agent reported down")
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
	s.revivedAt[i] = s.clock.Now()
	s.mu.Unlock()
	s.net.Revive(s.trs[i])
}

// settle counts the live observers that never reported killed agent k
// down. Locked.
func (s *swimSim) settle(k int) {
	if _, ok := s.killedAt[k]; !ok {
		return
	}
	for o := range s.hosts {
		if o != k && s.alive(o) && !s.down[[2]int{o, k}] {
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
	r := &MembershipReport{Kind: MembershipSwim, Drop: drop, Detections: len(s.detect), Missed: s.missed, Late: s.late, FalseDeaths: s.falseD}
	if secs := time.Since(s.start).Seconds(); secs > 0 {
		r.MsgsPerAgentS = float64(s.net.Packets.Load()+s.net.Streams.Load()) / float64(len(s.hosts)) / secs
	}
	if len(s.detect) > 0 {
		d := slices.Clone(s.detect)
		slices.Sort(d)
		r.DetectP50S, r.DetectMaxS = d[len(d)/2].Seconds(), d[len(d)-1].Seconds()
	}
	return r
}
