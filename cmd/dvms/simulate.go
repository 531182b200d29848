package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/sim"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "simulate",
		Usage: "run DVMS agents over an embedded NATS server on a simulated cloud and report",
		Description: "One process: an embedded NATS server, a simulated Nova (nova/fake), one agent per host\n" +
			"and a workload. Safety figures come from the simulated cloud's own observer.",
		Flags: append(simFlags(),
			&cli.StringFlag{Name: "mode", Value: "dvms", Usage: "dvms (an agent per host) or central (the periodic whole-cloud baseline)"},
			&cli.StringFlag{Name: "report", Usage: "write an SVG chart (overloaded hosts, events in flight) to this file"},
			&cli.Float64Flag{Name: "arrivals", Usage: "new servers booted per simulated second during the run (their later live migrations: migrations.of_new_servers)"},
			&cli.StringFlag{Name: "arrival-weights", Value: sim.WeightsDvms, Usage: "how new servers' hosts are chosen: dvms (dvms scheduler-api's weighing) or nova (placement-only, most free RAM)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the whole run to this file (go tool pprof)"},
		),
		Action: runSimulate,
	})
}

// simFlags are the flags shared by simulate and bench.
func simFlags() []cli.Flag {
	d := sim.DefaultConfig()
	return []cli.Flag{
		&cli.IntFlag{Name: "hosts", Value: d.Hosts, Usage: "compute hosts"},
		&cli.IntFlag{Name: "servers", Value: d.Servers, Usage: "servers, placed first-fit at random"},
		&cli.DurationFlag{Name: "duration", Value: d.Duration, Usage: "simulated time"},
		&cli.Float64Flag{Name: "time-scale", Value: d.TimeScale, Usage: "simulated seconds per wall second (--clock wall)"},
		&cli.StringFlag{Name: "clock", Value: sim.ClockAuto, Usage: "auto: virtual above 2,000 hosts when it models every flag given, else wall; wall: simulated time paced by the wall clock, the agents' runtime over embedded NATS and the simulated Nova; virtual: from one event to the next (the agents' state machines, solver and planner in one goroutine, messages 1-2 ms, no Nova API, no NATS), reproducible from --seed, for 10,000-100,000 hosts"},
		&cli.Int64Flag{Name: "seed", Value: d.Seed, Usage: "seed of the placement, workload and faults"},
		&cli.StringFlag{Name: "workload", Value: d.Workload, Usage: "random | saturated (each with an optional :PERIOD, the mean time between redraws of a server's demand, 30s by default) | planetlab:FILE | FILE (CSV time_s,server,cpu,ram_mb)"},
		&cli.DurationFlag{Name: "trace-step", Value: d.TraceStep, Usage: "simulated time each 300 s PlanetLab sample lasts"},
		&cli.IntFlag{Name: "host-cpus", Value: d.HostCPUs, Usage: "cores per host"},
		&cli.IntFlag{Name: "host-ram-mb", Value: d.HostRAMMB, Usage: "RAM per host, MB"},
		&cli.Float64Flag{Name: "cpu-allocation-ratio", Value: d.CPUAllocRatio, Usage: "placement cpu_allocation_ratio"},
		&cli.Float64Flag{Name: "vcpu-overcommit", Usage: fmt.Sprintf("fill every host with small servers (1-2 vCPUs, 512 MB each) to this many vCPUs per core instead of --servers (default with --workload planetlab:FILE: %g, 0 there for --servers)", sim.PlanetLabOvercommit)},
		&cli.Float64Flag{Name: "bandwidth-mbps", Value: d.BandwidthMBps, Usage: "migration bandwidth, MB/s (duration = RAM / bandwidth + overhead)"},
		&cli.StringFlag{Name: "kill-agents", Value: "0", Usage: "fraction of agents killed and restarted during the run (10% or 0.1)"},
		&cli.StringFlag{Name: "membership", Value: sim.MembershipIdeal, Usage: "how agents learn of deaths: ideal (told at once) or swim (hashicorp/memberlist per agent, in-memory network, timings for one process: probe every 2 s, 1 s ack timeout, gossip every 1 s, no compression; retransmits (4 x log10(N+1)) and suspicion (4 x log10(N) probes) as memberlist's LAN config; a killed agent stays down 40-49 s; the run's clock starts once every agent sees every other (at most 3 min); GOGC=400 unless GOGC is set; not valid if the process woke a goroutine over 500 ms late, half the probe timeout: runtime.tick_lag_max_ms)"},
		&cli.StringFlag{Name: "drop", Value: "0", Usage: "--membership swim: fraction of membership datagrams lost (10% or 0.1)"},
		&cli.Float64Flag{Name: "nova-faults", Value: 0, Usage: "rate of injected Nova faults (500, 409, timeouts, failed migrations)"},
		&cli.Float64Flag{Name: "nova-api-rps", Value: 0, Usage: "requests per second the simulated region's nova-api and placement serve together (0: unlimited); beyond it requests queue and wait"},
		&cli.DurationFlag{Name: "nova-api-latency", Value: 0, Usage: "base latency of every simulated Nova or placement request (simulated time)"},
		&cli.DurationFlag{Name: "nova-warmup", Value: 0, Usage: "simulated time before the per-agent-minute Nova figures start (0: the first minute, or half the run)"},
		&cli.DurationFlag{Name: "refresh-interval", Value: d.Runtime.Refresh, Usage: "the agents' [monitor] refresh_interval: each re-reads its host's servers from Nova this often at rest (one request)"},
		&cli.DurationFlag{Name: "placement-refresh-interval", Value: d.Runtime.PlacementRefresh, Usage: "the agents' [monitor] placement_refresh_interval: service, capacity and usage (three requests) this often at rest"},
		&cli.Float64Flag{Name: "relief-headroom", Value: d.Agent.ReliefHeadroom, Usage: "the agents' [scheduler] relief_headroom: a partition relieving an overload grows for destinations that keep this fraction of their limits free (0: any that fits, the partition stops at the first)"},
		&cli.IntFlag{Name: "relief-partition", Value: d.Agent.ReliefPartition, Usage: "the agents' [scheduler] relief_partition: up to this many hosts (then any destination that fits)"},
		&cli.DurationFlag{Name: "server-cooldown", Value: d.Agent.ServerCooldown, Usage: "the agents' [scheduler] server_cooldown: a server moved by dvms is not moved again by relief or consolidation for this long (0: off)"},
		&cli.BoolFlag{Name: "underload", Usage: "enable UNDERLOAD events (consolidation)"},
		&cli.BoolFlag{Name: "preempt", Usage: "shelve the lowest-priority servers when nothing else works"},
		&cli.DurationFlag{Name: "central-period", Value: d.CentralPeriod, Usage: "baseline: simulated time between two whole-cloud rounds"},
		&cli.StringFlag{Name: "arbiter", Value: d.Arbiter, Usage: "merge arbiter: raft (3 in-process voters) or local (single-process FSM)"},
		&cli.IntFlag{Name: "sites", Value: 0, Usage: "spread the hosts over this many sites at random (0 or 1: one site); messages between agents wait half their sites' RTT"},
		&cli.StringFlag{Name: "site-rtt", Value: "1ms,40ms", Usage: "RTT inside a site and between two sites (simulated time), intra,inter"},
		&cli.DurationFlag{Name: "coord-warmup", Value: d.Sites.Warmup, Usage: "with coordinates: let them probe up to this long (simulated) before the agents start, until 95% converged (0: cold start)"},
		&cli.StringFlag{Name: "next-node", Value: scheduler.NextRing, Usage: "next-node policy: ring (the ring successor) or vivaldi (closest to the initiator first, by Vivaldi coordinates)"},
		&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
		&cli.StringFlag{Name: "log-level", Value: "error", Usage: "agent log level (logs go to stderr)"},
	}
}

// parseFraction accepts "10%" or "0.1".
func parseFraction(s string) (float64, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		return f / 100, err
	}
	return strconv.ParseFloat(s, 64)
}

// simConfig reads the shared flags.
func simConfig(c *cli.Context) (sim.Config, error) {
	cfg := sim.DefaultConfig()
	cfg.Hosts, cfg.Servers = c.Int("hosts"), c.Int("servers")
	cfg.Duration, cfg.TimeScale, cfg.Seed = c.Duration("duration"), c.Float64("time-scale"), c.Int64("seed")
	cfg.Clock = c.String("clock")
	cfg.Workload, cfg.TraceStep = c.String("workload"), c.Duration("trace-step")
	cfg.HostCPUs, cfg.HostRAMMB = c.Int("host-cpus"), c.Int("host-ram-mb")
	cfg.CPUAllocRatio, cfg.BandwidthMBps = c.Float64("cpu-allocation-ratio"), c.Float64("bandwidth-mbps")
	cfg.Overcommit = c.Float64("vcpu-overcommit")
	if strings.HasPrefix(cfg.Workload, "planetlab:") && !c.IsSet("vcpu-overcommit") && !c.IsSet("servers") {
		cfg.Overcommit = sim.PlanetLabOvercommit
	}
	if cfg.Overcommit > 0 && c.IsSet("servers") {
		return cfg, usageError(errors.New("--servers and --vcpu-overcommit: give one (overcommit fills every host)"))
	}
	cfg.NovaFaults = c.Float64("nova-faults")
	cfg.NovaAPIRate, cfg.NovaLatency, cfg.NovaWarmup = c.Float64("nova-api-rps"), c.Duration("nova-api-latency"), c.Duration("nova-warmup")
	cfg.Runtime.Refresh, cfg.Runtime.PlacementRefresh = c.Duration("refresh-interval"), c.Duration("placement-refresh-interval")
	cfg.Agent.Underload, cfg.Agent.Preempt = c.Bool("underload"), c.Bool("preempt")
	cfg.Agent.ServerCooldown = c.Duration("server-cooldown")
	cfg.Agent.ReliefHeadroom, cfg.Agent.ReliefPartition = c.Float64("relief-headroom"), c.Int("relief-partition")
	cfg.CentralPeriod = c.Duration("central-period")
	cfg.Arbiter = c.String("arbiter")
	cfg.Sites.N, cfg.Agent.NextNode = c.Int("sites"), c.String("next-node")
	intra, inter, err := sim.ParseSiteRTT(c.String("site-rtt"))
	if err != nil {
		return cfg, err
	}
	cfg.Sites.Intra, cfg.Sites.Inter, cfg.Sites.Warmup = intra, inter, c.Duration("coord-warmup")
	k, err := parseFraction(c.String("kill-agents"))
	if err != nil {
		return cfg, fmt.Errorf("--kill-agents %q: %w", c.String("kill-agents"), err)
	}
	cfg.KillAgents = k
	cfg.Membership = c.String("membership")
	if cfg.MembershipDrop, err = parseFraction(c.String("drop")); err != nil {
		return cfg, fmt.Errorf("--drop %q: %w", c.String("drop"), err)
	}
	level := c.String("log-level")
	if lv, ok := logLevel(c); ok {
		level = lv
	}
	if _, err := daemon.ParseLevel(level); err != nil {
		return cfg, fmt.Errorf("--log-level: %w", err)
	}
	cfg.Log = newLogger(level, "console")
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cfg.Progress = os.Stderr
	}
	return cfg, nil
}

func runSimulate(c *cli.Context) error {
	cfg, err := simConfig(c)
	if err != nil {
		return err
	}
	cfg.Mode = c.String("mode")
	cfg.Arrivals, cfg.ArrivalWeights = c.Float64("arrivals"), c.String("arrival-weights")
	switch {
	case cfg.Membership == sim.MembershipSwim:
		sim.TuneGCForSwim()
	case cfg.ResolveClock(cfg.Hosts) == sim.ClockVirtual:
		sim.TuneGCForVirtual()
	}
	stop, err := startCPUProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	rep, err := sim.Run(c.Context, cfg)
	if err := stop(); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	if path := c.String("report"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if err := rep.WriteSVG(f); err != nil {
			f.Close()
			return fmt.Errorf("report %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("report %s: %w", path, err)
		}
	}
	if c.Bool("json") {
		if err := rep.WriteJSON(os.Stdout); err != nil {
			return err
		}
	} else {
		rep.WriteText(os.Stdout)
	}
	return sim.Invalid(rep)
}

// startCPUProfile profiles the process into path (none: a no-op) until
// the returned stop is called.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpuprofile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpuprofile %s: %w", path, err)
		}
		return nil
	}, nil
}
