package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/sim"
)

// oracleMaxHosts is the largest run simulate compares with the oracle
// unless --oracle is given: the oracle solves each event over the whole
// cloud, which at 100,000 hosts costs more than the run.
const oracleMaxHosts = 10000

// defaultChart is where simulate writes its chart without --report (a
// variable for the tests).
var defaultChart = "dvms-simulate.svg"

func init() {
	commands = append(commands, &cli.Command{
		Name:  "simulate",
		Usage: "run DVMS agents over an embedded NATS server on a simulated cloud and report",
		Description: "One process: an embedded NATS server, a simulated Nova (nova/fake), one agent per host\n" +
			"and a workload. Safety figures come from the simulated cloud's own observer. Then, with\n" +
			"--mode dvms, the oracle on the same cloud. Prints the report, writes the chart (--report)\n" +
			"and ends with one line: verdict PASS (exit 0), FAIL (safety violations, servers lost, or\n" +
			"fewer than 95 % of the events that had a solution solved; exit 1) or NOT VALID (the run\n" +
			"did not keep up with its clock; exit 1).",
		Flags: append(simFlags(),
			&cli.StringFlag{Name: "mode", Value: "dvms", Usage: "`MODE`: dvms (an agent per host) or central (the periodic whole-cloud baseline)"},
			&cli.StringFlag{Name: "report", Value: defaultChart, Usage: "write the SVG chart (overloaded hosts, the oracle's, events in flight, migrations; the verdict) to this `FILE` (\"\": none)"},
			&cli.BoolFlag{Name: "oracle", Value: true, Usage: "with --mode dvms: also run the oracle on the same cloud, seed and workload for the verdict's comparison (the virtual clock when it models the run; above 10,000 hosts only when given)"},
			&cli.Float64Flag{Name: "arrivals", Usage: "`RATE`: new servers booted per simulated second during the run (their later live migrations: migrations.of_new_servers)"},
			&cli.StringFlag{Name: "arrival-weights", Value: sim.WeightsDvms, Usage: "how new servers' hosts are chosen (`WEIGHTS`): dvms (dvms scheduler-api's weighing) or nova (placement-only, most free RAM)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the whole run to this `FILE` (go tool pprof)"},
		),
		Action: runSimulate,
	})
}

// simFlags are the flags shared by simulate and bench.
func simFlags() []cli.Flag {
	d := sim.DefaultConfig()
	return []cli.Flag{
		&cli.IntFlag{Name: "hosts", Value: d.Hosts, Usage: "`N` compute hosts"},
		&cli.IntFlag{Name: "servers", Value: d.Servers, Usage: "`N` servers, placed first-fit at random"},
		&cli.DurationFlag{Name: "duration", Value: d.Duration, Usage: "simulated time, a `DURATION`"},
		&cli.Float64Flag{Name: "time-scale", Value: d.TimeScale, Usage: "`X` simulated seconds per wall second (--clock wall)"},
		&cli.StringFlag{Name: "clock", Value: sim.ClockAuto, Usage: "`CLOCK`, auto: virtual above 2,000 hosts when it models every flag given, else wall; wall: simulated time paced by the wall clock, the agents' runtime over embedded NATS and the simulated Nova; virtual: from one event to the next (the agents' state machines, solver and planner in one goroutine, messages 1-2 ms, the Nova API modelled by --nova-api-rps and --nova-api-latency, no NATS), reproducible from --seed, for 10,000-100,000 hosts"},
		&cli.Int64Flag{Name: "seed", Value: d.Seed, Usage: "`SEED` of the placement, workload and faults"},
		&cli.StringFlag{Name: "workload", Value: d.Workload, Usage: "`WORKLOAD`: random | saturated (each with an optional :PERIOD, the mean time between redraws of a server's demand, 30s by default) | flapping[:PERIOD] (a quarter of the servers swing between 10 % and 100 % of their vCPUs every half PERIOD, 10m by default, the others steady: hosts cross the overload threshold back and forth) | planetlab:FILE | FILE (CSV time_s,server,cpu,ram_mb)"},
		&cli.DurationFlag{Name: "trace-step", Value: d.TraceStep, Usage: "simulated time (a `DURATION`) each 300 s PlanetLab sample lasts"},
		&cli.IntFlag{Name: "host-cpus", Value: d.HostCPUs, Usage: "`N` cores per host"},
		&cli.IntFlag{Name: "host-ram-mb", Value: d.HostRAMMB, Usage: "RAM per host, `MB`"},
		&cli.Float64Flag{Name: "cpu-allocation-ratio", Value: d.CPUAllocRatio, Usage: "placement cpu_allocation_ratio `X`"},
		&cli.Float64Flag{Name: "vcpu-overcommit", Usage: fmt.Sprintf("fill every host with small servers (1-2 vCPUs, 512 MB each) to `X` vCPUs per core instead of --servers (default with --workload planetlab:FILE: %g, 0 there for --servers)", sim.PlanetLabOvercommit)},
		&cli.Float64Flag{Name: "bandwidth-mbps", Value: d.BandwidthMBps, Usage: "migration bandwidth, `MBPS` (MB/s; duration = RAM / bandwidth + overhead)"},
		&cli.StringFlag{Name: "kill-agents", Value: "0", Usage: "`FRACTION` of agents killed and restarted during the run (10% or 0.1)"},
		&cli.DurationFlag{Name: "lead-timeout", Value: d.Runtime.Bounds.LeadTimeout, Usage: "the agents' lead_timeout: a key leading one partition longer than this `DURATION` outside a plan is refused (0: no bound)"},
		&cli.StringFlag{Name: "byzantine", Value: "0", Usage: "`FRACTION` of hosts whose agents have valid keys and do not play fair (10% or 0.1): they forge events (MAINTENANCE of honest hosts too), take over and hold partitions, and report a twentieth of their demand (--clock wall)"},
		&cli.StringFlag{Name: "membership", Value: sim.MembershipIdeal, Usage: "how agents learn of deaths (`MEMBERSHIP`): ideal (told at once) or swim (hashicorp/memberlist per agent, in-memory network, timings for one process: probe every 2 s, 1 s ack timeout, gossip every 1 s, no compression; retransmits (4 x log10(N+1)) and suspicion (4 x log10(N) probes) as memberlist's LAN config; a killed agent stays down 40-49 s; the run's clock starts once every agent sees every other (at most 3 min); GOGC=400 unless GOGC is set; not valid if the process woke a goroutine over 500 ms late, half the probe timeout: runtime.tick_lag_max_ms)"},
		&cli.StringFlag{Name: "drop", Value: "0", Usage: "--membership swim: `FRACTION` of membership datagrams lost (10% or 0.1)"},
		&cli.Float64Flag{Name: "nova-faults", Value: 0, Usage: "`RATE` of injected Nova faults (500, 409, timeouts, failed migrations)"},
		&cli.Float64Flag{Name: "nova-api-rps", Value: 0, Usage: "`RPS`: requests per second the simulated region's nova-api and placement serve together (0: unlimited); beyond it requests queue and wait"},
		&cli.DurationFlag{Name: "nova-api-latency", Value: 0, Usage: "base latency (a `DURATION`) of every simulated Nova or placement request (simulated time)"},
		&cli.DurationFlag{Name: "nova-warmup", Value: 0, Usage: "simulated time (a `DURATION`) before the per-agent-minute Nova figures start (0: the first minute, or half the run)"},
		&cli.DurationFlag{Name: "refresh-interval", Value: d.Runtime.Refresh, Usage: "the agents' [monitor] refresh_interval: each re-reads its host's servers from Nova every `DURATION` at rest (one request)"},
		&cli.DurationFlag{Name: "placement-refresh-interval", Value: d.Runtime.PlacementRefresh, Usage: "the agents' [monitor] placement_refresh_interval: service, capacity and usage (three requests) every `DURATION` at rest"},
		&cli.Float64Flag{Name: "relief-headroom", Value: d.Agent.ReliefHeadroom, Usage: "the agents' [scheduler] relief_headroom: a partition relieving an overload grows for destinations that keep this `FRACTION` of their limits free (0: any that fits, the partition stops at the first)"},
		&cli.IntFlag{Name: "relief-partition", Value: d.Agent.ReliefPartition, Usage: "the agents' [scheduler] relief_partition: up to `N` hosts (then any destination that fits)"},
		&cli.DurationFlag{Name: "destination-peak-window", Value: d.Agent.DestinationPeakWindow, Usage: "the agents' [scheduler] destination_peak_window: destinations are judged by their servers' highest demand within this `DURATION` (0: off, demand now)"},
		&cli.DurationFlag{Name: "server-cooldown", Value: d.Agent.ServerCooldown, Usage: "the agents' [scheduler] server_cooldown: a server moved by dvms is not moved again by relief or consolidation for this `DURATION` (0: off)"},
		&cli.Float64Flag{Name: "move-cost", Value: d.Agent.MoveCost, Usage: "the agents' [scheduler] move_cost: `POINTS` each live migration of relief or consolidation costs (a point is 1 % of a host's capacity; a plan costing more than it gains is refused; 0 with --move-cost-per-second 0: off)"},
		&cli.Float64Flag{Name: "move-cost-per-second", Value: d.Agent.MoveCostPerSecond, Usage: "the agents' [scheduler] move_cost_per_second: `POINTS` per second of predicted migration time"},
		&cli.BoolFlag{Name: "underload", Usage: "enable UNDERLOAD events (consolidation)"},
		&cli.BoolFlag{Name: "preempt", Usage: "shelve the lowest-priority servers when nothing else works"},
		&cli.DurationFlag{Name: "central-period", Value: d.CentralPeriod, Usage: "baseline: simulated time (a `DURATION`) between two whole-cloud rounds"},
		&cli.StringFlag{Name: "arbiter", Value: d.Arbiter, Usage: "merge `ARBITER`: raft (3 in-process voters) or local (single-process FSM)"},
		&cli.IntFlag{Name: "sites", Value: 0, Usage: "spread the hosts over `N` sites at random (0 or 1: one site); messages between agents wait half their sites' RTT"},
		&cli.StringFlag{Name: "site-rtt", Value: "1ms,40ms", Usage: "RTT inside a site and between two sites (simulated time), `INTRA,INTER`"},
		&cli.DurationFlag{Name: "coord-warmup", Value: d.Sites.Warmup, Usage: "with coordinates: let them probe up to this `DURATION` (simulated) before the agents start, until 95% converged (0: cold start)"},
		&cli.StringFlag{Name: "next-node", Value: scheduler.NextRing, Usage: "next-node `POLICY`: ring (the ring successor) or vivaldi (closest to the initiator first, by Vivaldi coordinates)"},
		&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "report `FORMAT`: text or json"},
		&cli.BoolFlag{Name: "json", Hidden: true, Usage: "deprecated: -f json"},
		&cli.StringFlag{Name: "log-level", Value: "error", Usage: "agent log `LEVEL` (logs go to stderr)"},
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

// simFormats are the report formats of simulate and bench.
var simFormats = []string{"text", "json"}

// simFormat is -f (json with the deprecated --json).
func simFormat(c *cli.Context) (string, error) {
	f := c.String("format")
	if !slices.Contains(simFormats, f) {
		return "", usageError(fmt.Errorf("-f %q: want one of %s", f, strings.Join(simFormats, ", ")))
	}
	if c.Bool("json") {
		if c.IsSet("format") && f != "json" {
			return "", usageError(fmt.Errorf("--json (deprecated: -f json) and -f %s: give one", f))
		}
		f = "json"
	}
	return f, nil
}

// simConfig reads the shared flags; a bad value is a usage error.
func simConfig(c *cli.Context) (sim.Config, error) {
	cfg, err := readSimConfig(c)
	if err == nil {
		_, err = simFormat(c)
	}
	if err != nil && !errors.As(err, new(errUsage)) {
		err = usageError(err)
	}
	return cfg, err
}

func readSimConfig(c *cli.Context) (sim.Config, error) {
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
	cfg.Agent.DestinationPeakWindow = c.Duration("destination-peak-window")
	cfg.Agent.MoveCost, cfg.Agent.MoveCostPerSecond = c.Float64("move-cost"), c.Float64("move-cost-per-second")
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
	if cfg.Byzantine, err = parseFraction(c.String("byzantine")); err != nil {
		return cfg, fmt.Errorf("--byzantine %q: %w", c.String("byzantine"), err)
	}
	cfg.Runtime.Bounds.LeadTimeout = c.Duration("lead-timeout")
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
	format, _ := simFormat(c) // checked by simConfig
	cfg.Mode = c.String("mode")
	cfg.Arrivals, cfg.ArrivalWeights = c.Float64("arrivals"), c.String("arrival-weights")
	if err := cfg.Validate(); err != nil {
		return usageError(err)
	}
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
	var oracle *sim.Report
	if cfg.Mode == "dvms" && c.Bool("oracle") && (c.IsSet("oracle") || cfg.Hosts <= oracleMaxHosts) {
		if oracle, err = runOracle(c, cfg, rep.Clock); err != nil {
			return err
		}
	}
	v := sim.Judge(rep, oracle)
	chart := c.String("report")
	if !c.IsSet("report") {
		chart = defaultChart
	}
	if path := chart; path != "" {
		if err := writeChart(path, rep, oracle, v); err != nil {
			return err
		}
	}
	w := c.App.Writer
	if format == "json" {
		if err := rep.WriteJSON(w); err != nil {
			return err
		}
		w = c.App.ErrWriter // stdout stays JSON
	} else {
		rep.WriteText(w)
		if oracle != nil {
			fmt.Fprintf(w, "  oracle      the same cloud, seed and workload with the whole cloud seen every second and each event solved at once (%s clock): overload %.0f host-seconds, %d migrations\n",
				oracle.Clock, oracle.OverloadSeconds, oracle.Migrations.Total)
		}
		if chart != "" {
			fmt.Fprintf(w, "  chart       %s\n", chart)
		}
	}
	fmt.Fprintln(w, v)
	if err := sim.Invalid(rep); err != nil {
		return err
	}
	if v.Status != "PASS" {
		return fmt.Errorf("simulate: %s: %s", v.Status, strings.Join(v.Why, "; "))
	}
	return nil
}

// runOracle runs the oracle (the floor dvms is measured against) on the
// same cloud, seed and workload as cfg: on the virtual clock when it
// models the run (seconds of wall time), else on clock, the run's.
func runOracle(c *cli.Context, cfg sim.Config, clock string) (*sim.Report, error) {
	oc := cfg
	oc.Mode, oc.Progress, oc.OnAgents = "oracle", nil, nil
	oc.Clock = sim.ClockVirtual
	if oc.VirtualProblems() != nil {
		oc.Clock = clock
	}
	rep, err := sim.Run(c.Context, oc)
	if err != nil {
		return nil, fmt.Errorf("simulate: the oracle's run: %w", err)
	}
	return rep, nil
}

// writeChart writes rep's SVG chart, with the oracle's overloaded hosts
// and the verdict, to path.
func writeChart(path string, rep, oracle *sim.Report, v sim.Verdict) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := rep.WriteChart(f, oracle, v.String()); err != nil {
		f.Close()
		return fmt.Errorf("report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	return nil
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
