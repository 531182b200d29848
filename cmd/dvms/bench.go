package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/scheduler/sim"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "bench",
		Usage: "run the same simulation with dvms, the centralized baseline and the oracle floor, at one or more scales",
		Description: "Same cloud, seed and workload, one process, one run per mode and scale: dvms agents; one\n" +
			"optimizer over the whole cloud every --central-period (as Entropy or Watcher audits: it acts on\n" +
			"one snapshot per round, without K-of-N, and a round waits for its plan); the oracle (the whole\n" +
			"cloud seen every second at no cost, the agents' K-of-N, each event solved at once over every\n" +
			"host no plan uses, the same executor). --scales runs each at several host counts, servers per\n" +
			"host as --servers / --hosts. Ratios are what to compare: these machines are noisy.",
		Flags: append(simFlags(),
			&cli.StringFlag{Name: "modes", Value: strings.Join(sim.Modes, ","), Usage: "`MODES` to run, comma-separated: " + strings.Join(sim.Modes, ", ") + " (with --clock virtual: dvms,oracle by default; central needs the wall clock)"},
			&cli.StringFlag{Name: "scales", Usage: "host `COUNTS` to run, comma-separated (default: --hosts)"},
			&cli.StringFlag{Name: "out", Usage: "`DIR` to write bench.json, bench.md and bench.svg into"},
		),
		Action: runBench,
	})
}

// parseBench reads --modes and --scales, and resolves cfg's clock: auto
// is virtual when the largest scale calls for it (sim.ResolveClock) and
// no mode asked for needs the wall clock.
func parseBench(c *cli.Context, cfg *sim.Config) (modes []string, scales []int, err error) {
	if scales, err = parseScales(c, cfg.Hosts); err != nil {
		return nil, nil, err
	}
	if cfg.Clock == sim.ClockAuto {
		probe := *cfg
		probe.Mode = "dvms"
		cfg.Clock = probe.ResolveClock(slices.Max(scales))
		if c.IsSet("modes") && strings.Contains(c.String("modes"), "central") {
			cfg.Clock = sim.ClockWall
		}
	}
	list := c.String("modes")
	if cfg.Clock == sim.ClockVirtual && !c.IsSet("modes") {
		list = "dvms,oracle" // the central baseline runs on the wall clock only
	}
	for _, m := range strings.Split(list, ",") {
		m = strings.TrimSpace(m)
		if !slices.Contains(sim.Modes, m) {
			return nil, nil, usageError(fmt.Errorf("--modes: %q is not one of %s", m, strings.Join(sim.Modes, ", ")))
		}
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	return modes, scales, nil
}

// parseScales reads --scales (hosts alone without it).
func parseScales(c *cli.Context, hosts int) (scales []int, err error) {
	if c.String("scales") == "" {
		return []int{hosts}, nil
	}
	for _, s := range strings.Split(c.String("scales"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			return nil, usageError(fmt.Errorf("--scales: %q is not a host count >= 2", s))
		}
		scales = append(scales, n)
	}
	return scales, nil
}

func runBench(c *cli.Context) error {
	cfg, err := simConfig(c)
	if err != nil {
		return err
	}
	modes, scales, err := parseBench(c, &cfg)
	if err != nil {
		return err
	}
	rows, reps, err := sim.Bench(c.Context, cfg, modes, scales)
	if err != nil {
		return err
	}
	md := sim.BenchMarkdown(rows)
	if dir := c.String("out"); dir != "" {
		if err := sim.WriteBench(dir, rows, md); err != nil {
			return err
		}
	}
	if format, _ := simFormat(c); format == "json" { // checked by simConfig
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return err
		}
	} else {
		fmt.Fprint(c.App.Writer, md)
	}
	return sim.Invalid(reps...)
}
