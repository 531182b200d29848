// Package sim runs `dvms simulate`: one process with an embedded NATS
// server, a simulated cloud (nova/fake), one runtime per host driving a
// real DVMS agent, a workload, and an observer that samples the cloud
// every simulated second. Safety figures come from the fake cloud's own
// observer, never from the agents.
//
// It is a harness: it wires concrete implementations (like cmd/) so that
// the same run can be tested and benchmarked.
package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/agentd"
	"github.com/dvms-project/dvms/scheduler/extsched"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Config is a simulation.
type Config struct {
	Hosts, Servers int
	Seed           int64
	// Duration of simulated time; TimeScale simulated seconds per wall second.
	Duration  time.Duration
	TimeScale float64
	// Workload: random, saturated, flapping, planetlab:FILE or FILE
	// (NewWorkload).
	Workload  string
	TraceStep time.Duration
	HostCPUs  int
	HostRAMMB int
	// CPUAllocRatio is placement's cpu_allocation_ratio (Nova's default 4.0).
	CPUAllocRatio float64
	// Overcommit, when > 0, replaces Servers: every host is filled with
	// servers of PlanetLab-sized flavors (1 or 2 vCPUs, 512 MB each) to
	// Overcommit vCPUs per core (placement's ratio raised to 1.5 times
	// that, room for moves), the consolidation at which the PlanetLab
	// traces overload hosts (see PlanetLabOvercommit).
	Overcommit float64
	// BandwidthMBps sets migration durations (RAM / bandwidth + overhead).
	BandwidthMBps float64
	// KillAgents is the fraction of agents killed (and restarted) during the run.
	KillAgents float64
	// Byzantine is the fraction of hosts whose agents do not play fair
	// (byzantine.go; wall clock, mode dvms).
	Byzantine float64
	// NovaFaults is the rate of faults the fake cloud injects.
	NovaFaults float64
	// NovaAPIRate is the requests per second the simulated region's API
	// serves (nova-api and placement together), 0 for no limit: requests
	// beyond it queue and their latency grows (fake.Config.APIRate).
	NovaAPIRate float64
	// NovaLatency is the base latency of every Nova or placement request
	// (fake.Config.APILatency), in simulated time.
	NovaLatency time.Duration
	// NovaWarmup is when the per-agent-minute figures start (simulated
	// time): the agents' start-up reads before it are reported apart.
	// 0 means the first minute, or half the run if shorter.
	NovaWarmup time.Duration
	// Mode is "dvms" (one agent per host), "central" (the baseline:
	// one optimizer over the whole cloud every CentralPeriod) or
	// "oracle" (the floor: the whole cloud seen every monitor interval,
	// each event solved at once, see oracle.go).
	Mode string
	// Arbiter decides merges: "raft" (three in-process voters on raft's
	// in-memory transport) or "local" (the single-process FSM).
	Arbiter           string
	CentralPeriod     time.Duration
	CentralSolveLimit time.Duration
	Agent             scheduler.Config // template; ID and Incarnation filled in
	Runtime           node.Config
	// Arrivals is the number of new servers booted per simulated second
	// during the run (0: none); ArrivalWeights orders their candidate
	// hosts: "dvms" (dvms scheduler-api's weighing) or "nova"
	// (placement-only). See arrivals.go.
	Arrivals       float64
	ArrivalWeights string
	// Sites spreads the hosts over sites whose RTTs delay messages; the
	// agents' next-node policy is Agent.NextNode.
	Sites SitesConfig
	// Membership is MembershipIdeal ("" too) or MembershipSwim;
	// MembershipDrop the fraction of SWIM datagrams lost.
	Membership     string
	MembershipDrop float64
	// Clock is ClockWall ("" too) or ClockVirtual (see runVirtual).
	Clock string
	// OnAgents, if set, is called in a goroutine of its own once every
	// agent runs (wall clock, mode dvms), with the URL of the
	// simulation's NATS server: what `dvms status` or `dvms pause` reach
	// there. Its ctx ends with the run, which waits for it.
	OnAgents func(ctx context.Context, natsURL string)
	// Progress, if set, receives a live status line every wall second.
	Progress io.Writer
	Log      zerolog.Logger
}

// DefaultConfig is a small, quick simulation.
func DefaultConfig() Config {
	rt := node.DefaultConfig()
	rt.Region = "sim"
	rt.Exec.Poll = 500 * time.Millisecond
	rt.Exec.MigrationTimeout = 2 * time.Minute
	return Config{
		Hosts: 100, Servers: 1000, Seed: 1, Duration: 60 * time.Second, TimeScale: 10,
		Workload: "random", TraceStep: 10 * time.Second, HostCPUs: 16, HostRAMMB: 65536, CPUAllocRatio: 4,
		BandwidthMBps: 1000, Agent: scheduler.DefaultConfig("template"), Runtime: rt, Log: zerolog.Nop(),
		Mode: "dvms", Arbiter: "raft", CentralPeriod: 30 * time.Second, CentralSolveLimit: 10 * time.Second,
		ArrivalWeights: WeightsDvms,
		Sites:          SitesConfig{Intra: time.Millisecond, Inter: 40 * time.Millisecond, Coord: node.DefaultCoordConfig(), Warmup: time.Minute},
	}
}

// Validate lists every problem.
func (c Config) Validate() error {
	var errs []error
	if c.Hosts < 2 {
		errs = append(errs, errors.New("--hosts must be >= 2"))
	}
	if c.Servers < 0 {
		errs = append(errs, errors.New("--servers must be >= 0"))
	}
	if c.Overcommit < 0 || c.Overcommit > 0 && c.Overcommit*float64(c.HostCPUs)*512 > float64(c.HostRAMMB) {
		errs = append(errs, fmt.Errorf("--vcpu-overcommit must be >= 0, and its vCPUs of 512 MB must fit in --host-ram-mb (at most %.1f)", float64(c.HostRAMMB)/512/float64(max(1, c.HostCPUs))))
	}
	if c.Duration <= 0 || c.TimeScale <= 0 {
		errs = append(errs, errors.New("--duration and --time-scale must be > 0"))
	}
	if c.HostCPUs < 1 || c.HostRAMMB < 512 {
		errs = append(errs, errors.New("--host-cpus must be >= 1 and --host-ram-mb >= 512"))
	}
	if !slices.Contains(Modes, c.Mode) {
		errs = append(errs, fmt.Errorf("mode %q: want one of %s", c.Mode, strings.Join(Modes, ", ")))
	}
	if c.Arbiter != "raft" && c.Arbiter != "local" {
		errs = append(errs, fmt.Errorf("arbiter %q: want raft or local", c.Arbiter))
	}
	if c.Mode == "central" && (c.CentralPeriod <= 0 || c.CentralSolveLimit <= 0) {
		errs = append(errs, errors.New("central period and solve limit must be > 0"))
	}
	if c.Byzantine < 0 || c.Byzantine >= 0.5 || c.Byzantine > 0 && c.Mode != "dvms" {
		errs = append(errs, errors.New("--byzantine must be in [0, 50%) and needs --mode dvms"))
	}
	if c.KillAgents < 0 || c.KillAgents > 1 || c.NovaFaults < 0 || c.NovaFaults > 1 {
		errs = append(errs, errors.New("--kill-agents and --nova-faults must be fractions in [0, 1]"))
	}
	if c.NovaAPIRate < 0 || c.NovaLatency < 0 || c.NovaWarmup < 0 || c.NovaWarmup >= c.Duration && c.Duration > 0 {
		errs = append(errs, errors.New("--nova-api-rps and --nova-api-latency must be >= 0, --nova-warmup in [0, --duration)"))
	}
	if err := c.Runtime.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Arrivals < 0 {
		errs = append(errs, errors.New("--arrivals must be >= 0"))
	}
	if c.ArrivalWeights != WeightsDvms && c.ArrivalWeights != WeightsNova {
		errs = append(errs, fmt.Errorf("arrival weights %q: want dvms or nova", c.ArrivalWeights))
	} else if c.Arrivals > 0 && c.ArrivalWeights == WeightsDvms && c.Mode != "dvms" {
		errs = append(errs, errors.New("--arrival-weights dvms needs --mode dvms (the agents' summaries)"))
	}
	switch c.Membership {
	case "", MembershipIdeal:
	case MembershipSwim:
		if c.Mode != "dvms" {
			errs = append(errs, errors.New("--membership swim needs --mode dvms"))
		}
	default:
		errs = append(errs, fmt.Errorf("membership %q: want ideal or swim", c.Membership))
	}
	if c.Clock != "" && c.Clock != ClockWall && c.Clock != ClockVirtual && c.Clock != ClockAuto {
		errs = append(errs, fmt.Errorf("clock %q: want auto, wall or virtual", c.Clock))
	}
	if c.MembershipDrop < 0 || c.MembershipDrop >= 1 {
		errs = append(errs, errors.New("--drop must be a fraction in [0, 1)"))
	}
	if err := c.Sites.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Agent.NextNode != "" && c.Agent.NextNode != scheduler.NextRing && c.Agent.NextNode != scheduler.NextVivaldi {
		errs = append(errs, fmt.Errorf("--next-node %q: want ring or vivaldi", c.Agent.NextNode))
	}
	return errors.Join(errs...)
}

// Modes are the simulation's modes (Config.Mode).
var Modes = []string{"dvms", "central", "oracle"}

// PlanetLabOvercommit is `--workload planetlab:FILE`'s default
// consolidation (vCPUs per core): the traces average 12 % of a vCPU
// (standard deviation 17 %), so a host of 16 cores carries about 12
// cores of demand at 6 vCPUs per core and some hosts overload at any
// time, as in the consolidation literature; at Nova's default 4 and the
// default flavors (RAM-bound at 2 vCPUs per core) no host ever does.
const PlanetLabOvercommit = 6.0

// placementRatio: an overcommitted cloud's placement allows this many
// times the vCPUs placed, so that servers can move at all (every host
// is filled alike).
const placementRatio = 1.5

// plFlavors are the flavors of an overcommitted cloud (Config.Overcommit):
// small in RAM, as PlanetLab's slivers.
var plFlavors = []struct {
	name  string
	vcpus int
	ram   int
}{{"pl.1", 1, 512}, {"pl.2", 2, 1024}}

// coordinates: the agents run Vivaldi (sites, or the vivaldi policy).
func (c Config) coordinates() bool {
	return c.Mode == "dvms" && (c.Sites.N > 1 || c.Agent.NextNode == scheduler.NextVivaldi)
}

var flavors = []struct {
	name  string
	vcpus int
	ram   int
}{{"m1.small", 1, 2048}, {"m1.medium", 2, 4096}, {"m1.large", 4, 8192}}

// stats collects what the runtimes report.
type stats struct {
	mu       sync.Mutex
	reliefs  *reliefs             // the hosts relieved, for the report's oscillations
	raised   map[string]time.Time // event id -> wall time of detection
	inFlight map[string]bool
	onHost   map[string]int // host -> events in flight on it
	solveMS  []float64
	// simNow is simulated time; raisedSim the simulated time of each
	// detection, protocolMS detection to plan in simulated time, and
	// solverMS the solver's own time (wall, one solve each).
	simNow     func() time.Time
	raisedSim  map[string]time.Time
	protocolMS []float64
	solverMS   []float64
	sizes      []int
	ended      map[scheduler.Outcome]int
	merges     int
	refused    int
	// leftRefused: partitions an agent left for a refused leader.
	leftRefused int
	unsolvable  []unsolved
	// views: the hosts each partition's leader last solved over (its
	// knowledge: the members' snapshots); viewsEnded: when partitions
	// ended (simulated), their views dropped blockedGuard later (the
	// members' records of their own events come after the leader's).
	views      map[string][]scheduler.Host
	viewsEnded map[string]time.Time
	// endedOrder: viewsEnded's ids in the order they ended (simulated
	// time only grows): the ones to drop are its head, found without
	// walking them all at every end (at 100,000 hosts thousands of
	// partitions end within blockedGuard).
	endedOrder []string
	// aborted: events ended Aborted since the last global check, and
	// abortedBy their count by class (scheduler.EndClass); endedBy every
	// ended event's count by "outcome/class".
	aborted       []scheduler.Record
	abortedBy     map[string]int
	endedBy       map[string]int
	abortedChecks float64 // checks the observer may run now (abortedCheckBudget)
	// blocked: the partitions Blocked now (DESIGN §5.2.5: each entered
	// Blocked and has not left it since), their nodes as they blocked,
	// for the union-of-blocked check.
	blocked  map[string]blockedPart
	messages atomic.Int64
	// actions: the executed plans' actions by outcome and reason class.
	actions map[string]int
	// replans: plans solved again after skipped actions; replanned: the
	// events of their partitions (their first), until they end.
	replans           int
	replanned         map[string]bool
	solvedAfterReplan int
	// vanished: aborted events whose condition went away by itself
	// before anything moved (scheduler.EndVanished).
	vanished int
	// policyRefused: aborted events the move cost or the server
	// cooldown refused (scheduler.EndNotWorth, EndCooling).
	policyRefused int
}

// executed counts a plan's actions by outcome and reason class.
func (s *stats) executed(res node.ExecResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.actions == nil {
		s.actions = map[string]int{}
	}
	for _, a := range res.Actions {
		s.actions[a.Outcome.String()+"/"+string(a.Class)]++
	}
}

// solved counts one solve of took (the solver's own time).
func (s *stats) solved(took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.solverMS = append(s.solverMS, float64(took.Microseconds())/1000)
}

type blockedPart struct {
	nodes   []string
	view    []scheduler.Host // what its leader last solved over
	version uint64
	at      time.Time // simulated
}

// unsolved is an event given up as Unsolvable, with the union of the
// partitions Blocked then (rec.Nodes) and that union as their leaders
// knew it (view).
type unsolved struct {
	rec  scheduler.Record
	view []scheduler.Host
}

// viewed records the hosts a partition's leader solved over.
func (s *stats) viewed(req scheduler.SolveRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.views == nil {
		s.views, s.viewsEnded = map[string][]scheduler.Host{}, map[string]time.Time{}
	}
	s.views[req.PartID] = req.Problem.Hosts
}

// viewEnded marks a partition's view for dropping; it drops those ended
// more than blockedGuard ago.
func (s *stats) viewEnded(id string) {
	if s.views == nil || id == "" {
		return
	}
	now := s.simNow()
	if _, ok := s.viewsEnded[id]; !ok {
		s.viewsEnded[id] = now
		s.endedOrder = append(s.endedOrder, id)
	}
	if len(s.viewsEnded) < 256 {
		return
	}
	for len(s.endedOrder) > 0 && now.Sub(s.viewsEnded[s.endedOrder[0]]) > blockedGuard {
		p := s.endedOrder[0]
		s.endedOrder = s.endedOrder[1:]
		delete(s.views, p)
		delete(s.viewsEnded, p)
	}
}

// blockedGuard: a partition counts as Blocked at most this long
// (simulated) after it blocked, in case the records that say it left
// that state (joined, planned, merged, dissolved) were never emitted
// (an agent killed with its whole partition).
const blockedGuard = 30 * time.Second

// maxUnionMisses: the report names this many events given up with a
// solution in the union (Report.Events.UnionMisses).
const maxUnionMisses = 20

// leaveBlocked forgets the partitions r says are no longer Blocked: a
// node joined it (it grows again), it planned, merged or ended, or it was
// absorbed. A join at the version it blocked at or older is a fork's
// (a request from before): the partition itself is still Blocked.
func (s *stats) leaveBlocked(r scheduler.Record) {
	switch r.Kind {
	case scheduler.RecJoined, scheduler.RecPlanned, scheduler.RecDissolved, scheduler.RecMergeCommitted:
	default:
		return
	}
	if r.Absorbed != "" {
		delete(s.blocked, r.Absorbed)
	}
	b, ok := s.blocked[r.Partition]
	if ok && (r.Version > b.version || r.Kind != scheduler.RecJoined && r.Version == b.version) {
		delete(s.blocked, r.Partition)
	}
}

func (s *stats) record(host string, r scheduler.Record) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaveBlocked(r)
	switch r.Kind {
	case scheduler.RecEventRaised:
		s.raised[r.Event.ID] = now
		s.raisedSim[r.Event.ID] = s.simNow()
		s.inFlight[r.Event.ID] = true
		if s.onHost == nil {
			s.onHost = map[string]int{}
		}
		s.onHost[r.Event.Host]++
	case scheduler.RecPlanned:
		if t, ok := s.raised[r.Event.ID]; ok {
			s.solveMS = append(s.solveMS, float64(now.Sub(t).Microseconds())/1000)
			s.protocolMS = append(s.protocolMS, float64(s.simNow().Sub(s.raisedSim[r.Event.ID]).Microseconds())/1000)
			delete(s.raised, r.Event.ID) // first plan only
			delete(s.raisedSim, r.Event.ID)
		}
	case scheduler.RecReplanning:
		s.replans++
		if s.replanned == nil {
			s.replanned = map[string]bool{}
		}
		s.replanned[r.Event.ID] = true
	case scheduler.RecEventEnded:
		s.ended[r.Outcome]++
		if s.reliefs != nil && r.Outcome == scheduler.Solved && r.Event.Kind == scheduler.Overload {
			s.reliefs.relieved(r.Event.Host)
		}
		if s.replanned[r.Event.ID] {
			delete(s.replanned, r.Event.ID)
			if r.Outcome == scheduler.Solved {
				s.solvedAfterReplan++
			}
		}
		s.sizes = append(s.sizes, r.Size)
		if s.inFlight[r.Event.ID] {
			if s.onHost[r.Event.Host]--; s.onHost[r.Event.Host] <= 0 {
				delete(s.onHost, r.Event.Host)
			}
		}
		delete(s.inFlight, r.Event.ID)
		delete(s.raised, r.Event.ID)
		delete(s.raisedSim, r.Event.ID)
		if r.Outcome == scheduler.Unsolvable {
			// The union: this partition and every other partition Blocked
			// when it gave up. Not the ones that blocked a moment ago
			// and went on since (a plan running on their nodes): no merge
			// could have given those nodes to this event.
			union := slices.Clone(r.Nodes)
			view := slices.Clone(s.views[r.Partition])
			var with []string
			for id, b := range s.blocked {
				if s.simNow().Sub(b.at) > blockedGuard {
					delete(s.blocked, id)
				} else if id != r.Partition {
					union = append(union, b.nodes...)
					view = append(view, b.view...)
					with = append(with, id)
				}
			}
			slices.Sort(with)
			r.Reason = fmt.Sprintf("%s (partition %s of %d nodes; Blocked then: %s)", r.Reason, r.Partition, len(r.Nodes), strings.Join(with, " "))
			slices.Sort(union)
			r.Nodes = slices.Compact(union)
			s.unsolvable = append(s.unsolvable, unsolved{rec: r, view: view})
		}
		class := r.Class
		if class == "" {
			class = scheduler.EndUnknown // an end without a class: a bug, counted where checkAborted sees it
		}
		if s.endedBy == nil {
			s.endedBy = map[string]int{}
		}
		s.endedBy[r.Outcome.String()+"/"+string(class)]++
		if r.Outcome == scheduler.Aborted {
			s.abortedBy[string(class)]++
			if class == scheduler.EndVanished {
				s.vanished++
			}
			refused := class == scheduler.EndNotWorth || class == scheduler.EndCooling
			if refused {
				s.policyRefused++ // the operator's policy, not a protocol's miss: not checked
			}
			if !refused && len(s.aborted) < maxAbortedPending {
				s.aborted = append(s.aborted, r)
			}
		}
	case scheduler.RecBlocked:
		if s.blocked == nil {
			s.blocked = map[string]blockedPart{}
		}
		s.blocked[r.Partition] = blockedPart{nodes: r.Nodes, view: s.views[r.Partition], version: r.Version, at: s.simNow()}
	case scheduler.RecDissolved:
		s.viewEnded(r.Partition)
		if r.Class == scheduler.EndLeaderRefused {
			s.leftRefused++
		}
	case scheduler.RecMergeCommitted:
		s.merges++
		s.viewEnded(r.Absorbed)
	case scheduler.RecMergeRefused:
		s.refused++
	}
}

type agentSlot struct {
	host   string
	cancel context.CancelFunc
	done   chan struct{}
	a      *agentd.Agent
}

// Run runs one simulation and returns its report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock = cfg.ResolveClock(cfg.Hosts); cfg.Clock == ClockVirtual {
		return runVirtual(cfg)
	}
	wallStart := time.Now()
	// How late the runtime wakes a goroutine, for the whole run: a
	// starved process is reported (and a SWIM run not valid).
	lag := newLagWatch(lagPeriod)
	lagCtx, lagStop := context.WithCancel(ctx)
	var lagWG sync.WaitGroup
	lagWG.Add(1)
	go func() {
		defer lagWG.Done()
		lag.run(lagCtx)
	}()
	defer func() {
		lagStop()
		lagWG.Wait()
	}()
	rng := rand.New(rand.NewSource(cfg.Seed))
	clock := node.NewScaled(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), cfg.TimeScale)

	fc := fake.DefaultConfig()
	fc.Seed = cfg.Seed
	fc.FaultRate = cfg.NovaFaults
	fc.APIRate, fc.APILatency = cfg.NovaAPIRate, cfg.NovaLatency
	fc.OverloadCPU, fc.OverloadRAM = cfg.Agent.Thresholds.CPUOverload, cfg.Agent.Thresholds.RAMOverload
	if cfg.BandwidthMBps > 0 {
		fc.BandwidthMBps = cfg.BandwidthMBps
	}
	cloud := fake.New(fc, clock)
	hosts, specs, err := build(cloud, cfg, rng)
	if err != nil {
		return nil, err
	}
	cfg.Servers = len(specs)
	wl, err := NewWorkload(cfg.Workload, specs, rng, cfg.TraceStep, float64(cfg.Hosts*cfg.HostCPUs))
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(specs))
	for i, s := range specs {
		ids[i] = s.Name
	}
	applyWorkload := func(t time.Duration) {
		wl.Update(t, func(i int, cpu, ram float64) {
			if ram == 0 {
				ram = 0.7 * float64(specs[i].RAMMB)
			}
			cloud.SetDemand(ids[i], nova.Demand{CPU: cpu, RAMMB: ram})
		})
	}
	applyWorkload(0)

	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Host: "127.0.0.1", Port: -1})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	defer ns.Shutdown()
	nc, err := bus.ConnectNATS(ctx, bus.Config{URL: ns.ClientURL(), Name: "dvms-simulate", OnStateChange: func(ev string, err error) {
		cfg.Log.Debug().Err(err).Str("nats", ev).Msg("nats connection")
	}})
	if err != nil {
		return nil, fmt.Errorf("connect nats: %w", err)
	}
	defer nc.Close()
	var onAgents sync.WaitGroup
	defer onAgents.Wait()
	var advWG sync.WaitGroup // the adversaries (--byzantine)
	defer advWG.Wait()

	st := &stats{raised: map[string]time.Time{}, inFlight: map[string]bool{}, ended: map[scheduler.Outcome]int{}, abortedBy: map[string]int{},
		simNow: clock.Now, raisedSim: map[string]time.Time{}}
	st.reliefs = newReliefs(cfg.Runtime.Oscillation, st.simNow)
	var arb consensus.Arbiter = consensus.NewLocal(clock.Now)
	if cfg.Arbiter == "raft" {
		g, err := consensus.StartInProcessGroup(3, clock.Now)
		if err != nil {
			return nil, err
		}
		defer g.Shutdown()
		arb = g
	}
	var migrating atomic.Int64
	use := newNovaUse(cloud.Meter(), clock.Now)
	var samples atomic.Int64 // demand samples the agents took of their own host
	hooks := node.Hooks{
		OnRecord: func(host string, r scheduler.Record) {
			st.record(host, r)
			use.record(host, r)
		},
		OnSend: func(string, scheduler.Message) { st.messages.Add(1) },
		OnSolve: func(_ string, req scheduler.SolveRequest, _ scheduler.Solution, took time.Duration) {
			st.solved(took)
			st.viewed(req)
		},
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sts := newSites(cfg.Sites, cfg.Runtime.Region, hosts, cfg.Seed+siteSeed, clock)
	var siteWG sync.WaitGroup
	defer siteWG.Wait()
	if cfg.Agent.NextNode == scheduler.NextVivaldi {
		cfg.Agent.Distance = sts.table.Distance(cfg.Sites.Coord.MaxError)
	}
	hooks.OnExec = func(_ string, _ scheduler.Event, res node.ExecResult) { st.executed(res) }
	if cfg.Sites.N > 1 {
		onSolve := hooks.OnSolve
		hooks.OnSolve = func(host string, req scheduler.SolveRequest, sol scheduler.Solution, took time.Duration) {
			onSolve(host, req, sol, took)
			sts.solved(req, sol)
		}
		hooks.OnExec = func(_ string, ev scheduler.Event, res node.ExecResult) { st.executed(res); sts.executed(ev, res) }
		siteWG.Add(1)
		go func() {
			defer siteWG.Done()
			sts.checkSites(ctx, cloud, cfg, hosts)
		}()
	}
	var coordSamples atomic.Int64
	slots := make([]*agentSlot, len(hosts))
	adv := newAdversaries(cfg, hosts, clock, nc)
	if len(adv.byz) > 0 {
		onExec := hooks.OnExec
		hooks.OnExec = func(host string, ev scheduler.Event, res node.ExecResult) {
			onExec(host, ev, res)
			adv.executed(ev, res)
		}
		index := make(map[string]int, len(hosts))
		for i, h := range hosts {
			index[h] = i
		}
		adv.busy = func(h string) bool { s := slots[index[h]]; return s != nil && s.a.Runner().Partition() != nil }
	}
	// The region's maintenance watch runs in the first live agent, as
	// `dvms agent` elects it (the smallest live host name).
	down := make([]atomic.Bool, len(hosts))
	watcher := func(i int) func() bool {
		return func() bool {
			for j := range hosts {
				if !down[j].Load() {
					return j == i
				}
			}
			return false
		}
	}
	ring := scheduler.NewRing(hosts) // one member list for every agent
	var swims *swimSim
	if cfg.Membership == MembershipSwim && cfg.Mode == "dvms" {
		var err error
		if swims, err = newSwimSim(ctx, hosts, cfg.MembershipDrop, clock, cfg.Seed+swimSeed, func(i int) bool { return !down[i].Load() }, cfg.Log); err != nil {
			return nil, err
		}
	}
	// Every agent is built as `dvms agent` builds its own (agentd.New):
	// the same runner, controls, status service and journal.
	start := func(i int) error {
		ac := cfg.Agent
		ac.ID = hosts[i]
		ac.Incarnation = fmt.Sprintf("%x", rng.Int63())
		var tr bus.Transport = nc
		var delayed *bus.Delayed
		if cfg.Sites.N > 1 {
			delayed = sts.transport(nc, hosts[i])
			tr = delayed
		}
		var demand nova.DemandSource = countDemand{cloud, &samples}
		if adv.byz[hosts[i]] {
			demand, tr = liar{demand}, muzzle{Transport: tr, a: adv}
		}
		o := agentd.Options{
			// The sites' delays are on the protocol (Signed); status,
			// controls and the journal's updates take the plain
			// connection.
			Runtime: cfg.Runtime, Agent: ac, Version: "simulate", Bus: nc, Signed: tr,
			// Each agent measures only its own host, as a cgroup source
			// does, and has its own Nova client, metered under its name.
			Nova: cloud.Client(hosts[i]), Demand: node.OnlyHost(demand, hosts[i]), DemandName: "simulated",
			Arbiter: agentd.Shared{Arbiter: arb}, Clock: clock, Log: cfg.Log, Seed: rng.Int63(),
			Ring: &ring, Watcher: watcher(i), Hooks: hooks,
		}
		if cfg.coordinates() {
			// The agents' coordinates are shared in one table: the
			// simulator's membership is ideal (every coordinate known to
			// every agent at once), the RTT samples are real probes.
			o.Coords = &agentd.Coords{Config: cfg.Sites.Coord, Table: sts.table, Peers: hosts}
		}
		if swims != nil {
			o.Membership = func(m agentd.Membership) (agentd.Members, error) {
				return swims.agent(i, ac.Incarnation, m.Up, m.Down)
			}
		}
		a, err := agentd.New(o)
		if err != nil {
			return err
		}
		actx, acancel := context.WithCancel(ctx)
		s := &agentSlot{host: hosts[i], cancel: acancel, done: make(chan struct{}), a: a}
		a.Start(actx)
		go func() {
			defer close(s.done)
			if err := a.Wait(); err != nil {
				cfg.Log.Error().Err(err).Str("host", s.host).Msg("agent stopped")
			}
			if viv := a.Coordinates(); viv != nil {
				coordSamples.Add(viv.Samples())
			}
			if delayed != nil {
				_ = delayed.Close()
			}
		}()
		slots[i] = s
		use.start(hosts[i])
		return nil
	}
	var warmup time.Duration
	centralDone := make(chan struct{})
	switch cfg.Mode {
	case "central":
		slots = nil
		c := newCentral(cloud, hosts, cfg, clock, st, rng.Int63()) // rng is this goroutine's
		go func() {
			defer close(centralDone)
			c.run(ctx)
		}()
	case "oracle":
		slots = nil
		o := newOracle(cloud, hosts, cfg, clock, st, rng.Int63())
		go func() {
			defer close(centralDone)
			o.run(ctx)
		}()
	default:
		close(centralDone)
		if cfg.coordinates() {
			w, err := sts.warmup(ctx, nc, hosts, rng.Int63(), cfg.Log)
			if err != nil {
				return nil, err
			}
			warmup = w
		}
		for i := range hosts {
			if err := start(i); err != nil {
				return nil, err
			}
			if swims != nil {
				// Joins spread as a region's agents start: a thousand
				// state exchanges at once would starve the probes.
				time.Sleep(swimJoinStagger)
			}
		}
		if swims != nil {
			swims.warmup(ctx)
		}
		for i, h := range hosts {
			if adv.byz[h] {
				seed := cfg.Seed + byzSeed + int64(i)
				advWG.Go(func() {
					if err := adv.run(ctx, h, seed); err != nil {
						cfg.Log.Error().Err(err).Msg("adversary stopped")
					}
				})
			}
		}
		if cfg.OnAgents != nil {
			onAgents.Add(1)
			go func() {
				defer onAgents.Done()
				cfg.OnAgents(ctx, ns.ClientURL())
			}()
		}
	}
	defer func() {
		cancel()
		<-centralDone
		for _, s := range slots {
			if s != nil {
				<-s.done
			}
		}
	}()

	rep := &Report{Mode: cfg.Mode, Clock: ClockWall, Hosts: cfg.Hosts, Servers: cfg.Servers, Seed: cfg.Seed, Workload: cfg.Workload, Duration: cfg.Duration.Seconds()}
	// Kill plan: which agents die when, and when they come back.
	type kill struct {
		at, back time.Duration
		i        int
		// gone: the killed agent's Run returned (a stop is graceful: it
		// may finish its plan for up to StopGrace); the others are told
		// then, and it comes back no earlier.
		gone bool
	}
	var kills []kill
	for _, i := range rng.Perm(len(slots))[:int(cfg.KillAgents*float64(len(slots)))] {
		at := time.Duration(rng.Float64() * 0.7 * float64(cfg.Duration))
		downFor := 5*time.Second + time.Duration(rng.Intn(10))*time.Second
		if cfg.Membership == MembershipSwim {
			downFor += swimKilledFor - 5*time.Second
		}
		kills = append(kills, kill{at: at, back: at + downFor, i: i})
	}
	var arr *arrivals
	if cfg.Arrivals > 0 {
		index := make(map[string]int, len(hosts))
		for i, h := range hosts {
			index[h] = i
		}
		arr = newArrivals(cfg, cloud, rng.Int63(), func(h string) (extsched.Summary, bool) {
			i, ok := index[h]
			if !ok || i >= len(slots) || down[i].Load() {
				return extsched.Summary{}, false
			}
			sm, ok := slots[i].a.Runner().Summary("")
			// As node.PublishSummaries: no summary from an old sample.
			return sm, ok && sm.At.Sub(sm.SampledAt) <= node.DefaultSummaryConfig().Interval
		})
	}
	epoch := clock.Now()
	samples.Store(0)
	tick := clock.NewTicker(time.Second)
	defer tick.Stop()
	lastProgress := time.Now()
	var last, maxGap time.Duration
	sampledFrom, samplesAtWarmup := time.Duration(-1), int64(0)
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		t := clock.Now().Sub(epoch)
		dt := (t - last).Seconds()
		maxGap = max(maxGap, t-last)
		last = t
		applyWorkload(t)
		if arr != nil {
			if err := arr.step(dt, clock.Now(), hosts); err != nil {
				return nil, err
			}
		}
		if t >= novaWarmup(cfg) && sampledFrom < 0 {
			// The agents' samples count from here too: start-up (the
			// first reads of Nova) is not keeping up or not.
			use.begin()
			sampledFrom, samplesAtWarmup = t, samples.Load()
		}
		for k := range kills {
			kl := &kills[k]
			if kl.at >= 0 && t >= kl.at {
				// Not waited for here: the observer keeps sampling while
				// the agent stops (waiting blocked it for up to StopGrace,
				// 120 simulated seconds: runs with --kill-agents were
				// reported not valid for the observer's own gap).
				if swims != nil {
					swims.kill(kl.i) // silent at once: no goodbye
				}
				down[kl.i].Store(true)
				slots[kl.i].cancel()
				kl.at = -1
				rep.Agents.Killed++
			}
			if kl.at < 0 && !kl.gone && kl.back >= 0 {
				select {
				case <-slots[kl.i].done:
					kl.gone = true
					use.stop(hosts[kl.i])
					for _, s := range slots {
						if swims == nil && s != slots[kl.i] {
							s.a.MemberDown(hosts[kl.i])
						}
					}
				default:
				}
			}
			if kl.gone && kl.back >= 0 && t >= kl.back {
				if swims != nil {
					swims.revive(kl.i)
				}
				if err := start(kl.i); err != nil {
					return nil, err
				}
				down[kl.i].Store(false)
				for _, s := range slots {
					if swims != nil {
						break // SWIM tells them
					}
					s.a.MemberUp(hosts[kl.i])
				}
				kl.back = -1
			}
		}
		if len(adv.byz) > 0 && slots != nil {
			now := clock.Now()
			for i, s := range slots {
				if !adv.byz[hosts[i]] && !down[i].Load() {
					adv.observe(now, hosts[i], s.a.Runner().Partition())
				}
			}
		}
		over := cloud.OverloadedHosts()
		rep.OverloadSeconds += float64(over) * dt
		st.mu.Lock()
		inflight := len(st.inFlight)
		st.mu.Unlock()
		if pending, aborted := st.takeChecks(dt, cfg.Hosts); cfg.Mode == "dvms" && (len(pending) > 0 || len(aborted) > 0) {
			rep.addGlobal(cfg, pending, aborted, sampleAll(cloud, cfg, hosts))
		}
		migrating.Store(int64(cloud.Stats().InFlight))
		rep.Series = append(rep.Series, Sample{T: t.Seconds(), Overloaded: over, InFlight: inflight, Migrating: int(migrating.Load())})
		if cfg.Progress != nil && time.Since(lastProgress) >= time.Second {
			lastProgress = time.Now()
			st.mu.Lock()
			fmt.Fprintf(cfg.Progress, "\r[%5.0fs/%.0fs] overloaded %4d  events in flight %4d  solved %5d  migrations %5d  merges %4d ",
				t.Seconds(), cfg.Duration.Seconds(), over, inflight, st.ended[scheduler.Solved], cloud.Stats().Completed, st.merges)
			st.mu.Unlock()
		}
		if t >= cfg.Duration {
			break
		}
	}
	use.end() // agents stopping are no longer at rest or in events
	if swims != nil {
		// Before the agents stop: their goodbyes are not deaths.
		rep.Membership = swims.report(cfg.MembershipDrop)
		rep.Runtime = lag.report(swims.warmupEnd(), swimLagLimit)
	} else {
		rep.Runtime = lag.report(time.Time{}, time.Second)
	}
	rep.Samples.HarnessTicks, rep.Samples.HarnessDue = len(rep.Series), int(cfg.Duration/time.Second)
	rep.Samples.MaxGapS = round(maxGap.Seconds())
	if cfg.Mode == "dvms" && sampledFrom >= 0 {
		rep.Samples.Taken, rep.Samples.FromS = samples.Load()-samplesAtWarmup, round(sampledFrom.Seconds())
		rep.Samples.Due = int64(float64(cfg.Hosts) * (last - sampledFrom).Seconds() / cfg.Runtime.Monitor.Seconds())
		if rep.Samples.Due > 0 {
			rep.Samples.Ratio = round(float64(rep.Samples.Taken) / float64(rep.Samples.Due))
		}
	}
	if cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress)
	}
	cancel()
	<-centralDone
	var honest []*node.Runner
	for i, s := range slots {
		<-s.done
		rep.Messages.Dropped += s.a.Runner().Dropped()
		if !adv.byz[hosts[i]] {
			honest = append(honest, s.a.Runner())
		}
	}
	advWG.Wait()
	if cfg.Mode == "dvms" {
		st.mu.Lock()
		refused, left := st.abortedBy[string(scheduler.EndLeaderRefused)], st.leftRefused
		st.mu.Unlock()
		adv.report(rep, honest, refused, left, cloud.Violations())
	}
	cloud.Advance()
	finish(rep, st, cloud, cfg, hosts, wallStart)
	if arr != nil {
		arr.report(rep)
	}
	novaReport(rep, use, cloud, cfg)
	rep.Sites.NextNode = cmp.Or(cfg.Agent.NextNode, scheduler.NextRing)
	if cfg.Mode == "dvms" {
		cancel()
		siteWG.Wait()
		sts.drainChecks(cloud, cfg, hosts)
		sts.report(rep, hosts, coordSamples.Load(), rng, cfg.coordinates())
		rep.Coordinates.WarmupS = round(warmup.Seconds())
	}
	rep.validity()
	return rep, nil
}

// build creates hosts and places servers first-fit on a random host
// order, within placement capacity.
func build(cloud *fake.Cloud, cfg Config, rng *rand.Rand) ([]string, []ServerSpec, error) {
	hosts, zone, placed, err := layout(cfg, rng)
	if err != nil {
		return nil, nil, err
	}
	for i, h := range hosts {
		cloud.AddHost(nova.Host{
			Name: h, Zone: zone[h], VCPUs: cfg.HostCPUs, RAMMB: cfg.HostRAMMB,
			CPUAllocRatio: cfg.allocRatio(), RAMAllocRatio: 1.0,
			Service: nova.Service{ID: fmt.Sprintf("svc-%d", i+1), Host: h, Status: nova.ServiceEnabled, State: nova.ServiceUp},
		})
	}
	specs := make([]ServerSpec, len(placed))
	for i, p := range placed {
		h := hosts[p.host]
		err := cloud.AddServer(nova.Server{ID: p.Name, Name: p.Name, Host: h, Zone: zone[h],
			Status: nova.StatusActive, Flavor: p.flavor, VCPUs: p.VCPUs, RAMMB: p.RAMMB})
		if err != nil {
			return nil, nil, fmt.Errorf("place %s: %w", p.Name, err)
		}
		specs[i] = p.ServerSpec
	}
	return hosts, specs, nil
}

// allocRatio is placement's cpu_allocation_ratio of every host.
func (c Config) allocRatio() float64 { return max(c.CPUAllocRatio, placementRatio*c.Overcommit) }

// placedServer is a server of the initial layout, on hosts[host].
type placedServer struct {
	ServerSpec
	host   int
	flavor string
}

// layout names the hosts, their zones, and places the servers (random
// hosts with placement room, or every host filled with Config.Overcommit).
func layout(cfg Config, rng *rand.Rand) ([]string, map[string]string, []placedServer, error) {
	hosts := make([]string, cfg.Hosts)
	zone := make(map[string]string, cfg.Hosts)
	for i, k := range siteOf(cfg.Sites, cfg.Hosts, cfg.Seed+siteSeed) {
		hosts[i] = fmt.Sprintf("compute-%05d", i+1)
		zone[hosts[i]] = zoneOf(cfg.Sites, k)
	}
	if cfg.Overcommit > 0 {
		return hosts, zone, fill(cfg, rng), nil
	}
	placed := make([]placedServer, 0, cfg.Servers)
	used := make([]struct{ v, r int }, cfg.Hosts)
	for i := 0; i < cfg.Servers; i++ {
		f := flavors[rng.Intn(len(flavors))]
		s := placedServer{ServerSpec: ServerSpec{Name: fmt.Sprintf("server-%06d", i+1), VCPUs: f.vcpus, RAMMB: f.ram}, host: -1, flavor: f.name}
		for try, h := 0, rng.Intn(cfg.Hosts); try < cfg.Hosts; try, h = try+1, (h+1)%cfg.Hosts {
			if float64(used[h].v+f.vcpus) <= float64(cfg.HostCPUs)*cfg.CPUAllocRatio && used[h].r+f.ram <= cfg.HostRAMMB {
				used[h].v += f.vcpus
				used[h].r += f.ram
				s.host = h
				break
			}
		}
		if s.host < 0 {
			return nil, nil, nil, fmt.Errorf("%d servers do not fit on %d hosts of %d cores (ratio %.1f) / %d MB", cfg.Servers, cfg.Hosts, cfg.HostCPUs, cfg.CPUAllocRatio, cfg.HostRAMMB)
		}
		placed = append(placed, s)
	}
	return hosts, zone, placed, nil
}

// fill places servers of plFlavors on every host up to cfg.Overcommit
// vCPUs per core (Config.Overcommit).
func fill(cfg Config, rng *rand.Rand) []placedServer {
	var placed []placedServer
	limit := int(cfg.Overcommit * float64(cfg.HostCPUs))
	for h := range cfg.Hosts {
		for v := 0; v < limit; {
			f := plFlavors[rng.Intn(len(plFlavors))]
			if v+f.vcpus > limit {
				f = plFlavors[0]
			}
			placed = append(placed, placedServer{ServerSpec: ServerSpec{Name: fmt.Sprintf("server-%06d", len(placed)+1), VCPUs: f.vcpus, RAMMB: f.ram}, host: h, flavor: f.name})
			v += f.vcpus
		}
	}
	return placed
}

// fill writes what the records told into rep (st.mu held): events by
// outcome, latencies, partitions, merges and messages.
func (st *stats) fill(rep *Report) {
	rep.Events.Solved = st.ended[scheduler.Solved]
	rep.Events.Unsolvable = st.ended[scheduler.Unsolvable]
	rep.Events.Failed = st.ended[scheduler.Failed]
	rep.Events.Aborted = st.ended[scheduler.Aborted]
	rep.Events.AbortedBy = st.abortedBy
	rep.Events.EndedBy = st.endedBy
	rep.Events.AbortedVanished = st.vanished
	rep.Events.AbortedRefused = st.policyRefused
	rep.Events.Replans, rep.Events.SolvedAfterReplan = st.replans, st.solvedAfterReplan
	rep.Events.Actions = st.actions
	rep.Events.InFlight = len(st.inFlight)
	rep.Events.Total = rep.Events.Solved + rep.Events.Unsolvable + rep.Events.Failed + rep.Events.Aborted + rep.Events.InFlight
	rep.withSolution()
	rep.SolveMS = percentiles(st.solveMS)
	rep.ProtocolMS, rep.SolverMS = percentiles(st.protocolMS), percentiles(st.solverMS)
	for _, n := range st.sizes {
		rep.Partitions.MaxSize = max(rep.Partitions.MaxSize, n)
		rep.Partitions.MeanSize += float64(n)
	}
	if len(st.sizes) > 0 {
		rep.Partitions.MeanSize = round(rep.Partitions.MeanSize / float64(len(st.sizes)))
	}
	rep.Merges.Committed, rep.Merges.Refused = st.merges, st.refused
	rep.Messages.Total = int(st.messages.Load())
	if rep.Events.Total > 0 {
		rep.Messages.PerEvent = round(float64(rep.Messages.Total) / float64(rep.Events.Total))
	}
}

func finish(rep *Report, st *stats, cloud *fake.Cloud, cfg Config, hosts []string, wallStart time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.fill(rep)
	fs := cloud.Stats()
	rep.Migrations.Total, rep.Migrations.Failed = fs.Started, fs.Failed
	rep.Faults.Injected = cloud.FaultsInjected()
	v := cloud.Violations()
	var moves []regionMove
	for _, m := range cloud.CompletedMigrations() {
		moves = append(moves, regionMove{server: m.Server, from: m.From, to: m.To, start: m.Start, end: m.End})
	}
	rep.Oscillations = oscillations(cfg.Runtime.Oscillation, cfg.cooldownChecked(), moves, st.reliefs)
	rep.Safety.Violations = len(v) + rep.Oscillations.CooldownViolations
	rep.Safety.Descriptions = append(describe(v), rep.Oscillations.Descriptions...)
	rep.Safety.ServersLost = cloud.ServersLost()
	drift := cloud.Drift()
	rep.Safety.DemandDrift = len(drift)
	rep.Safety.DriftDescriptions = describe(drift)
	rep.WallS = round(time.Since(wallStart).Seconds())
}

// describe formats the first ten of v, and says how many more there are.
func describe(v []fake.Violation) []string {
	var out []string
	for i, x := range v {
		if i == 10 {
			return append(out, fmt.Sprintf("... and %d more", len(v)-10))
		}
		out = append(out, x.String())
	}
	return out
}

// abortedCheckBudget bounds the aborted events checked against the whole
// cloud, in hosts solved over per simulated second (each check is a
// solve over every host, run by the observer, which must keep up: 20
// checks a second starved it at 1,000 saturated hosts): 2 a second at
// 1,000 hosts, one every 5 s at 10,000. The report says how many were
// checked. maxAbortedPending bounds those waiting for their check.
const (
	abortedCheckBudget = 2000
	maxAbortedPending  = 20
)

// globalCheck runs the solver over the whole cloud, within a simulated
// second of each unsolvable or aborted event's end: for an unsolvable
// event a solution there means the protocol missed one (a liveness
// miss, reported, not hidden). An unsolvable event is also solved over
// the union of the partitions Blocked when it was given up (see
// stats.record), two ways:
//   - union: over the hosts as those partitions' leaders last solved
//     them (the members' snapshots they were given). A solution there is
//     what DESIGN §5.4's merges are meant never to miss: the protocol's
//     own knowledge had it.
//   - later: over the same hosts as the cloud is at this check. A
//     solution there that the first did not find comes from demand that
//     changed after the snapshots (up to a monitor interval old when
//     solved, and up to a simulated second before this check): counted
//     apart, not hidden.
//
// An aborted event is raised again after its backoff; a global solution
// says what its abort may have delayed.
//
// all is every host as the cloud is now (sampleAll on the wall clock,
// the ground truth on the virtual clock).
func globalCheck(recs []unsolved, aborted []scheduler.Record, all []scheduler.Host, cfg Config) (global int, union, later []scheduler.Record, abortedGlobal int) {
	solvable := func(ev scheduler.Event, hs []scheduler.Host) bool {
		opt := scheduler.DefaultSolveOptions()
		opt.Restarts = 4
		sol := scheduler.Solve(scheduler.Problem{Events: []scheduler.Event{ev}, Hosts: hs, Thresholds: cfg.Agent.Thresholds}, opt)
		return sol.OK && len(sol.Moves) > 0
	}
	for _, u := range recs {
		r := u.rec
		known := solvable(r.Event, u.view)
		if known {
			union = append(union, r)
		}
		if !solvable(r.Event, all) {
			continue
		}
		global++
		var sub []scheduler.Host
		for _, h := range all {
			if slices.Contains(r.Nodes, h.Name) {
				sub = append(sub, h)
			}
		}
		if !known && solvable(r.Event, sub) {
			later = append(later, r)
		}
	}
	for _, r := range aborted {
		if solvable(r.Event, all) {
			abortedGlobal++
		}
	}
	return global, union, later, abortedGlobal
}

// sampleAll is every host of the simulated cloud as a monitor samples it.
// The harness's reads cost Nova nothing and never queue.
func sampleAll(cloud *fake.Cloud, cfg Config, hosts []string) []scheduler.Host {
	ctx := context.Background()
	all := make([]scheduler.Host, 0, len(hosts))
	for _, h := range hosts {
		sh, err := node.Sample(ctx, cloud.Uncharged(), cloud, h, cfg.Runtime.DrainReason)
		if err != nil {
			continue
		}
		all = append(all, sh)
	}
	return all
}

// takeChecks hands the observer the events to check against the whole
// cloud after dt more simulated seconds: every unsolvable one, and the
// aborted ones within abortedCheckBudget.
func (s *stats) takeChecks(dt float64, hosts int) (pending []unsolved, aborted []scheduler.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending, aborted = s.unsolvable, s.aborted
	s.abortedChecks = min(s.abortedChecks+dt*abortedCheckBudget/float64(hosts), maxAbortedPending)
	aborted = aborted[:min(len(aborted), int(s.abortedChecks))]
	s.abortedChecks -= float64(len(aborted))
	s.unsolvable, s.aborted = nil, nil
	return pending, aborted
}

// addGlobal checks pending and aborted events over all (globalCheck) and
// adds the result to the report.
func (rep *Report) addGlobal(cfg Config, pending []unsolved, aborted []scheduler.Record, all []scheduler.Host) {
	g, u, later, a := globalCheck(pending, aborted, all, cfg)
	rep.Events.UnsolvableWithGlobal += g
	rep.Events.UnsolvableWithUnion += len(u)
	rep.Events.UnsolvableWithUnionLater += len(later)
	for _, r := range u {
		cfg.Log.Warn().Str("event", r.Event.ID).Str("partition", r.Partition).Str("reason", r.Reason).Msg("event given up although the Blocked partitions' own views had a solution")
		if len(rep.Events.UnionMisses) < maxUnionMisses {
			rep.Events.UnionMisses = append(rep.Events.UnionMisses, r.Event.ID+": "+r.Reason)
		}
	}
	for _, r := range later {
		if len(rep.Events.UnionLaterMisses) < maxUnionMisses {
			rep.Events.UnionLaterMisses = append(rep.Events.UnionLaterMisses, r.Event.ID+": "+r.Reason)
		}
	}
	rep.Events.AbortedChecked += len(aborted)
	rep.Events.AbortedWithGlobal += a
}

// ---- what the agents cost Nova ----

// regionWatch is the template of the region's maintenance watch (one
// agent lists the nova-compute services, nova.Client.Services).
var regionWatch = nova.Template{Service: nova.ServiceCompute, Method: "GET", Path: "/os-services?binary"}

// novaWarmup is when the per-agent figures start: every agent reads its
// host at start, a start-up cost reported apart. Config.NovaWarmup, by
// default the first simulated minute, or half the run if shorter.
func novaWarmup(cfg Config) time.Duration {
	if cfg.NovaWarmup > 0 {
		return cfg.NovaWarmup
	}
	return min(time.Minute, cfg.Duration/2)
}

// novaUse splits each agent's requests between at rest (in no partition,
// so no plan running) and during events (in a partition), with the
// agent-time spent in each, from the agents' records (joined or raised:
// busy; dissolved: at rest) and the meter's count per caller. The
// region's watch is counted apart.
type novaUse struct {
	meter *nova.Meter
	now   func() time.Time

	mu      sync.Mutex
	counted bool  // begin was called
	ended   bool  // end was called
	startup int64 // requests before begin
	mark    nova.LatencyMark
	agents  map[string]*agentUse
	rest    tally
	busy    tally
}

type agentUse struct {
	live, busy bool
	since      time.Time               // current state since
	mark       map[nova.Template]int64 // the agent's requests at since
}

type tally struct {
	requests int64
	time     time.Duration
	by       map[nova.Template]int64
}

func newNovaUse(m *nova.Meter, now func() time.Time) *novaUse {
	return &novaUse{meter: m, now: now, agents: map[string]*agentUse{},
		rest: tally{by: map[nova.Template]int64{}}, busy: tally{by: map[nova.Template]int64{}}}
}

// settle closes host's current interval at now (u.mu held): the
// requests since its mark, the watch excluded, go to its state's tally.
func (u *novaUse) settle(host string, a *agentUse, now time.Time) {
	n := u.meter.CallerCounts(host)
	if u.counted && !u.ended && a.live {
		acc := &u.rest
		if a.busy {
			acc = &u.busy
		}
		for t, c := range n {
			if d := c - a.mark[t]; d > 0 && t != regionWatch {
				acc.requests += d
				acc.by[t] += d
			}
		}
		acc.time += now.Sub(a.since)
	}
	a.since, a.mark = now, n
}

func (u *novaUse) set(host string, live, busy bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	a := u.agents[host]
	if a == nil {
		a = &agentUse{}
		u.agents[host] = a
	}
	if a.live == live && a.busy == busy {
		return
	}
	u.settle(host, a, u.now())
	a.live, a.busy = live, busy
}

// start: an agent (re)started, free.
func (u *novaUse) start(host string) { u.set(host, true, false) }

// stop: an agent was killed.
func (u *novaUse) stop(host string) { u.set(host, false, false) }

func (u *novaUse) record(host string, r scheduler.Record) {
	switch r.Kind {
	case scheduler.RecEventRaised, scheduler.RecJoined:
		u.set(host, true, true)
	case scheduler.RecDissolved:
		u.set(host, true, false)
	}
}

// begin starts the per-agent figures (after the warm-up), once.
func (u *novaUse) begin() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.counted || u.ended {
		return
	}
	now := u.now()
	u.counted, u.startup, u.mark = true, u.meter.Snapshot().Total, u.meter.Mark()
	for host, a := range u.agents {
		a.since, a.mark = now, u.meter.CallerCounts(host)
	}
}

// end closes every interval.
func (u *novaUse) end() {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	for host, a := range u.agents {
		u.settle(host, a, now)
	}
	u.ended = true
}

func perMinute(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round(float64(n) / d.Minutes())
}

func ms(d time.Duration) float64 { return round(float64(d) / float64(time.Millisecond)) }

// novaReport fills the report's nova section.
func novaReport(rep *Report, u *novaUse, cloud *fake.Cloud, cfg Config) {
	s := cloud.Meter().Snapshot()
	n := &rep.Nova
	n.Requests.Total, n.Requests.Errors = s.Total, s.Errors
	for i, ts := range s.Templates {
		if i == 10 {
			break
		}
		n.Requests.ByTemplate = append(n.Requests.ByTemplate, TemplateCount{Template: ts.Template.String(), Count: ts.Count, Errors: ts.Errors})
	}
	minutes := cfg.Duration.Minutes()
	if minutes > 0 && cfg.Hosts > 0 {
		n.PerHostMinute = round(float64(s.Total) / minutes / float64(cfg.Hosts))
	}
	u.mu.Lock()
	n.PerAgentMinute.AtRest = perMinute(u.rest.requests, u.rest.time)
	n.PerAgentMinute.DuringEvents = perMinute(u.busy.requests, u.busy.time)
	n.PerAgentMinute.AgentMinutesAtRest = round(u.rest.time.Minutes())
	n.PerAgentMinute.AgentMinutesDuringEvents = round(u.busy.time.Minutes())
	n.PerAgentMinute.FromS = round(novaWarmup(cfg).Seconds())
	n.StartupRequests = u.startup
	n.PerAgentMinute.AtRestByTemplate = perTemplate(u.rest)
	n.PerAgentMinute.DuringEventsByTemplate = perTemplate(u.busy)
	if u.counted {
		reqs, p50, p99 := u.meter.LatencySince(u.mark)
		a := &n.AfterWarmup
		a.Requests, a.P50MS, a.P99MS = reqs, ms(p50), ms(p99)
		if d := cfg.Duration - novaWarmup(cfg); d > 0 {
			a.PerSecond = round(float64(reqs) / d.Seconds())
		}
	}
	u.mu.Unlock()
	for _, ts := range s.Templates {
		if ts.Template == regionWatch {
			n.RegionWatch.Requests = ts.Count
			if minutes > 0 {
				n.RegionWatch.PerMinute = round(float64(ts.Count) / minutes)
			}
		}
	}
	n.P50MS, n.P99MS, n.MaxMS = ms(s.P50), ms(s.P99), ms(s.Max)
	n.APIRPS = cfg.NovaAPIRate
	if cfg.NovaAPIRate > 0 {
		as := cloud.APIStats()
		n.Queued, n.QueueMaxMS = as.Queued, ms(as.QueueMax)
	}
}

// countDemand counts the demand reads of the agents' monitors (the
// samples a run must take to keep up).
type countDemand struct {
	d nova.DemandSource
	n *atomic.Int64
}

func (c countDemand) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	c.n.Add(1)
	return c.d.Demand(ctx, host)
}

// perTemplate is a tally's five largest templates, per agent-minute.
func perTemplate(t tally) []TemplateRate {
	var out []TemplateRate
	for tp, n := range t.by {
		out = append(out, TemplateRate{Template: tp.String(), PerAgentMinute: perMinute(n, t.time)})
	}
	slices.SortFunc(out, func(a, b TemplateRate) int {
		if a.PerAgentMinute != b.PerAgentMinute {
			return cmp.Compare(b.PerAgentMinute, a.PerAgentMinute)
		}
		return strings.Compare(a.Template, b.Template)
	})
	return out[:min(len(out), 5)]
}
