package sim

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/detsim"
)

// Clocks are Config.Clock's values: ClockWall paces simulated time by the
// wall clock (the runtime over NATS and nova/fake, Run), ClockVirtual
// advances it from one event to the next (scheduler/detsim, runVirtual).
// ClockAuto picks one (Config.ResolveClock).
const (
	ClockWall    = "wall"
	ClockVirtual = "virtual"
	ClockAuto    = "auto"
)

// AutoVirtualAbove is the host count above which ClockAuto picks the
// virtual clock: on a 2-core machine the wall clock's agents, NATS and
// simulated Nova stop keeping up with simulated time between 1,000 and
// 4,000 hosts (at 4,000 hosts the observer took 17 of its 120
// samples).
const AutoVirtualAbove = 2000

// ResolveClock is the clock ClockAuto stands for, for a run of hosts
// hosts: virtual above AutoVirtualAbove when it models everything c
// asks for, else wall. Other clocks are themselves.
func (c Config) ResolveClock(hosts int) string {
	if c.Clock != ClockAuto {
		return c.Clock
	}
	if hosts > AutoVirtualAbove && c.virtualProblems() == nil {
		return ClockVirtual
	}
	return ClockWall
}

// virtualCheckEvery is how often (simulated) the virtual clock checks the
// whole cloud (every server on one host, executing partitions disjoint);
// each move is checked at its start and end whatever this is.
const virtualCheckEvery = 5 * time.Second

// virtualProblems lists what the virtual clock does not model, given cfg.
func (c Config) virtualProblems() error {
	var errs []error
	if c.Mode != "dvms" && c.Mode != "oracle" {
		errs = append(errs, fmt.Errorf("--clock virtual runs --mode dvms and oracle (not %s)", c.Mode))
	}
	if c.KillAgents > 0 || c.NovaFaults > 0 || c.Arrivals > 0 || c.Byzantine > 0 {
		errs = append(errs, errors.New("--clock virtual does not model --kill-agents, --nova-faults, --arrivals or --byzantine (use --clock wall)"))
	}
	if c.Sites.N > 1 || c.Agent.NextNode == scheduler.NextVivaldi || c.Membership == MembershipSwim {
		errs = append(errs, errors.New("--clock virtual does not model --sites, --next-node vivaldi or --membership swim (use --clock wall)"))
	}
	return errors.Join(errs...)
}

// runVirtual runs cfg on a virtual clock: the agents' own state machines
// (scheduler.Agent, the same solver and planner), messages through
// detsim's in-process queue (1-2 ms each, through the wire encoding),
// the single-process merge arbiter, and plans applied to a ground truth.
// The runtime's decisions run as step functions on what that ground truth
// shows: the executor's re-check verdicts and the plan's outcome
// (node.PlanCheck, node.PlanOutcome), the monitor's refresh schedule and
// the region's maintenance watch (node.Refresh, node.WatchStep); the Nova
// calls they make are counted, priced by nova/fake's cost model and
// passed through its model of the region's API (fake.API: --nova-api-rps,
// --nova-api-latency), whose answers the executor waits for (virtualNova,
// detsim's nova.go). Simulated time jumps from one event to the next, so
// the wall time depends only on the work done and a run is reproducible
// from its seed. It does not run node.Runner's goroutines, NATS, Raft or
// nova/fake's cloud itself: Nova's faults are Run's (--clock wall).
func runVirtual(cfg Config) (*Report, error) {
	if err := cfg.virtualProblems(); err != nil {
		return nil, err
	}
	wallStart := time.Now()
	rng := rand.New(rand.NewSource(cfg.Seed))
	names, _, placed, err := layout(cfg, rng)
	if err != nil {
		return nil, err
	}
	cfg.Servers = len(placed)
	hosts := make([]scheduler.Host, len(names))
	for i, n := range names {
		hosts[i] = scheduler.Host{Name: n, CPUs: float64(cfg.HostCPUs), RAMMB: float64(cfg.HostRAMMB),
			AllocVCPUs: float64(cfg.HostCPUs) * cfg.allocRatio(), AllocRAMMB: float64(cfg.HostRAMMB)}
	}
	specs := make([]ServerSpec, len(placed))
	where := make([]int32, len(placed)) // server -> host index
	index := make(map[string]int32, len(placed))
	for i, p := range placed {
		specs[i], where[i], index[p.Name] = p.ServerSpec, int32(p.host), int32(i)
		h := &hosts[p.host]
		h.Servers = append(h.Servers, scheduler.Server{ID: p.Name, VCPUs: p.VCPUs, RAMMB: p.RAMMB})
		h.UsedVCPUs += float64(p.VCPUs)
		h.UsedRAMMB += float64(p.RAMMB)
	}
	wl, err := NewWorkload(cfg.Workload, specs, rng, cfg.TraceStep, float64(cfg.Hosts*cfg.HostCPUs))
	if err != nil {
		return nil, err
	}

	var c *detsim.Cluster
	var beforeSample func(time.Time) // set once the workload is applied below
	st := &stats{raised: map[string]time.Time{}, inFlight: map[string]bool{}, ended: map[scheduler.Outcome]int{}, abortedBy: map[string]int{},
		simNow: func() time.Time { return c.Now }, raisedSim: map[string]time.Time{}}
	st.reliefs = newReliefs(cfg.Runtime.Oscillation, st.simNow)
	fc := fake.DefaultConfig()
	if cfg.BandwidthMBps > 0 {
		fc.BandwidthMBps = cfg.BandwidthMBps
	}
	agent := cfg.Agent
	if agent.K == 0 {
		agent = scheduler.DefaultConfig("template")
	}
	c = detsim.New(detsim.Options{
		Seed: cfg.Seed, EventDriven: true, Recheck: true, CheckEvery: virtualCheckEvery,
		Latency: time.Millisecond, Jitter: time.Millisecond,
		MigrationDuration: func(a scheduler.Action) time.Duration {
			return fc.MigrationOverhead + time.Duration(float64(a.RAMMB)/fc.BandwidthMBps*float64(time.Second))
		},
		// The second's demand is set as the agents sample it: the sample
		// and the re-checks of plans it starts see the same demand.
		BeforeSample: func(now time.Time) { beforeSample(now) },
		OnRecord:     func(r detsim.Rec) { st.record(r.Host, r.Record) },
		OnSolve:      st.solved,
		// The union check of unsolvable events (globalCheck); the oracle
		// runs no agent, so only dvms's leaders send solve requests.
		OnSolveRequest: st.viewed,
		Agent:          agent,
		NoAgents:       cfg.Mode == "oracle",
		NovaRate:       cfg.NovaAPIRate, NovaLatency: cfg.NovaLatency,
		// Every agent's decision part is built as the fleet's agents are
		// (agentd.NewDecision, in agentd.New), from the runtime's config.
		Node: cfg.Runtime,
	}, hosts)
	var orc *virtualOracle
	if cfg.Mode == "oracle" {
		cfg.Agent = agent
		orc = &virtualOracle{detector: newDetector(agent), cfg: cfg, c: c, st: st, names: names,
			rng: rand.New(rand.NewSource(cfg.Seed + 2)), busy: map[string]bool{}}
	}
	host := make([]*scheduler.Host, len(names))
	for i, n := range names {
		host[i] = c.Hosts[n]
	}
	byName := make(map[string]int32, len(names))
	for i, n := range names {
		byName[n] = int32(i)
	}
	moved := 0 // c.Moves already followed into where
	apply := func(t time.Duration) {
		for ; moved < len(c.Moves); moved++ {
			m := c.Moves[moved]
			where[index[m.Server]] = byName[m.To]
		}
		wl.Update(t, func(i int, cpu, ram float64) {
			if ram == 0 {
				ram = 0.7 * float64(specs[i].RAMMB)
			}
			h := host[where[i]]
			if k := slices.IndexFunc(h.Servers, func(s scheduler.Server) bool { return s.ID == specs[i].Name }); k >= 0 {
				h.Servers[k].CPU, h.Servers[k].RAM = cpu, ram
			}
		})
	}

	rep := &Report{Mode: cfg.Mode, Clock: ClockVirtual, Hosts: cfg.Hosts, Servers: cfg.Servers, Seed: cfg.Seed,
		Workload: cfg.Workload, Duration: cfg.Duration.Seconds()}
	thr := agent.Thresholds
	rep.OverloadBreakdown = &OverloadSplit{}
	start := c.Now
	seconds := int(cfg.Duration / time.Second)
	samples0 := c.Samples
	beforeSample = func(now time.Time) {
		if t := now.Sub(start).Truncate(time.Second); t < time.Duration(seconds)*time.Second {
			apply(t)
		}
	}
	apply(0)
	for s := 0; s < seconds; s++ {
		if orc != nil {
			orc.round()
		}
		end := start.Add(time.Duration(s+1) * time.Second)
		for c.Now.Before(end) {
			c.Step()
		}
		over := 0
		for _, h := range host {
			if thr.Overloaded(h) {
				over++
				if st.onHost[h.Name] > 0 {
					rep.OverloadBreakdown.InEvent++
				} else {
					rep.OverloadBreakdown.NoEvent++
				}
			}
		}
		rep.OverloadSeconds += float64(over)
		rep.Samples.HarnessTicks++
		if pending, aborted := st.takeChecks(1, cfg.Hosts); cfg.Mode == "dvms" && (len(pending) > 0 || len(aborted) > 0) {
			rep.addGlobal(cfg, pending, aborted, c.Snapshot())
		}
		rep.Series = append(rep.Series, Sample{T: float64(s + 1), Overloaded: over, InFlight: len(st.inFlight), Migrating: c.Migrating()})
		if cfg.Progress != nil && s%10 == 9 {
			fmt.Fprintf(cfg.Progress, "\rsimulated %d/%d s, wall %.0f s, events %d  ", s+1, seconds, time.Since(wallStart).Seconds(), len(st.sizes)+len(st.inFlight))
		}
	}
	c.Check()
	if cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress)
	}

	// Every agent samples its host every simulated second: the samples are
	// counted, not assumed.
	rep.Samples.Taken = c.Samples - samples0
	if orc != nil {
		rep.Samples.Taken = orc.samples
	}
	rep.Samples.Due = int64(seconds) * int64(cfg.Hosts)
	if rep.Samples.Due > 0 {
		rep.Samples.Ratio = round(float64(rep.Samples.Taken) / float64(rep.Samples.Due))
	}
	rep.Samples.HarnessDue = seconds
	rep.Samples.MaxGapS = 1
	if rep.Samples.HarnessTicks < seconds {
		rep.Samples.MaxGapS = float64(seconds - rep.Samples.HarnessTicks)
	}

	// Unsolvable and aborted events are checked against the whole cloud
	// every simulated second as on the wall clock (globalCheck, the
	// aborted ones within abortedCheckBudget), on the ground truth with
	// servers in flight still on their source. Detection to plan in wall
	// time means nothing on this clock: solve_ms stays empty.
	st.messages.Store(int64(c.Messages))
	st.fill(rep)
	rep.SolveMS = Percentiles{}
	rep.Migrations.Total = c.Started
	rep.OverloadSeconds = round(rep.OverloadSeconds)
	moves := make([]regionMove, len(c.Moves))
	for i, m := range c.Moves {
		moves[i] = regionMove{server: m.Server, from: m.From, to: m.To, start: m.Start, end: m.At}
	}
	cfg.Agent = agent
	rep.Oscillations = oscillations(cfg.Runtime.Oscillation, cfg.cooldownChecked(), moves, st.reliefs)
	rep.Safety.Violations = len(c.Violations) + rep.Oscillations.CooldownViolations
	rep.Safety.Descriptions = firstTen(append(slices.Clone(c.Violations), rep.Oscillations.Descriptions...))
	on := 0
	for _, h := range host {
		on += len(h.Servers)
	}
	rep.Safety.ServersLost = cfg.Servers - on - c.Shelved
	if err := virtualNova(rep, c, cfg); err != nil {
		return nil, err
	}
	rep.validity()
	rep.WallS = round(time.Since(wallStart).Seconds())
	return rep, nil
}

// firstTen is v's first ten, and how many more there are.
func firstTen(v []string) []string {
	if len(v) <= 10 {
		return v
	}
	return append(slices.Clone(v[:10]), fmt.Sprintf("... and %d more", len(v)-10))
}

// virtualOracle is the oracle (oracle.go) on the virtual clock: every
// simulated second it samples every host with no delay, raises events
// with the agents' K-of-N, solves each at once over every host no plan
// uses, and runs the plan as the agents' plans run (the runtime
// executor's re-check verdicts and plan outcome, detsim's migration
// durations).
type virtualOracle struct {
	detector
	cfg     Config
	c       *detsim.Cluster
	st      *stats
	names   []string
	rng     *rand.Rand
	busy    map[string]bool
	samples int64
}

func (o *virtualOracle) round() {
	now := o.c.Now
	all := make([]scheduler.Host, len(o.names))
	for i, n := range o.names {
		all[i] = o.c.View(n)
	}
	o.samples += int64(len(all))
	for i := range all {
		ev, ok := o.sample(now, &all[i], o.busy[all[i].Name])
		if !ok {
			continue
		}
		o.st.record("oracle", scheduler.Record{Kind: scheduler.RecEventRaised, Event: ev})
		plan, used, size, ok := oraclePlan(o.cfg, ev, all, o.busy, o.rng, o.st)
		if !ok {
			o.st.record("oracle", o.ended(ev, scheduler.Unsolvable, scheduler.EndNoSolution, size, now))
			continue
		}
		o.c.Execute(scheduler.ExecRequest{Event: ev, Plan: plan}, func(out scheduler.Outcome, class scheduler.EndClass, _ string) {
			for _, h := range used {
				delete(o.busy, h)
			}
			o.st.record("oracle", o.ended(ev, out, class, size, o.c.Now))
		})
	}
}

// virtualNova fills the report's nova section from the calls the
// runtime's decisions made on the virtual clock (detsim's Nova), priced by
// nova/fake's cost model (fake.WarmRequests).
func virtualNova(rep *Report, c *detsim.Cluster, cfg Config) error {
	n := &rep.Nova
	n.Modelled = true
	secs := cfg.Duration.Seconds()
	byTmpl := map[string]int64{}
	price := func(calls map[string]int64) (int64, error) {
		var total int64
		for call, k := range calls {
			ts, ok := fake.WarmRequests(call)
			if !ok {
				return 0, fmt.Errorf("virtual clock: nova/fake has no price for %s", call)
			}
			for _, t := range ts {
				byTmpl[t.String()] += k
			}
			total += k * int64(len(ts))
		}
		return total, nil
	}
	startup, err := price(c.Nova.Startup)
	if err != nil {
		return err
	}
	rest, err := price(c.Nova.Calls)
	if err != nil {
		return err
	}
	n.Requests.Total = startup + rest
	n.StartupRequests = startup
	n.AfterWarmup.Requests = rest
	// Latency as the callers saw it, Nova's API modelled (fake.API).
	all, after := c.Nova.Meter.Snapshot(), c.Nova.Rest.Snapshot()
	n.P50MS, n.P99MS, n.MaxMS = ms(all.P50), ms(all.P99), ms(all.Max)
	n.AfterWarmup.P50MS, n.AfterWarmup.P99MS = ms(after.P50), ms(after.P99)
	n.APIRPS = cfg.NovaAPIRate
	if cfg.NovaAPIRate > 0 {
		as := c.Nova.APIStats()
		n.Queued, n.QueueMaxMS = as.Queued, ms(as.QueueMax)
	}
	if secs > 0 {
		n.AfterWarmup.PerSecond = round(float64(rest) / secs)
		n.RegionWatch.Requests = c.Nova.Calls["Services"]
		n.RegionWatch.PerMinute = round(float64(n.RegionWatch.Requests) / (secs / 60))
		if cfg.Hosts > 0 {
			n.PerHostMinute = round(float64(n.Requests.Total) / (secs / 60) / float64(cfg.Hosts))
		}
	}
	calls := maps.Clone(c.Nova.Calls)
	for call, k := range c.Nova.Startup {
		calls[call] += k
	}
	for _, call := range slices.Sorted(maps.Keys(calls)) {
		ts, _ := fake.WarmRequests(call)
		r := CallRate{Call: call, Calls: calls[call], Requests: calls[call] * int64(len(ts))}
		if secs > 0 {
			r.PerSecond = round(float64(r.Requests) / secs)
		}
		n.ByCall = append(n.ByCall, r)
	}
	tmpls := slices.Collect(maps.Keys(byTmpl))
	slices.SortFunc(tmpls, func(a, b string) int {
		if d := cmp.Compare(byTmpl[b], byTmpl[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for i, t := range tmpls {
		if i == 10 {
			break
		}
		n.Requests.ByTemplate = append(n.Requests.ByTemplate, TemplateCount{Template: t, Count: byTmpl[t]})
	}
	return nil
}
