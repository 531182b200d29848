package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
			&cli.StringFlag{Name: "modes", Value: strings.Join(sim.Modes, ","), Usage: "modes to run, comma-separated: " + strings.Join(sim.Modes, ", ") + " (with --clock virtual: dvms,oracle by default; central needs the wall clock)"},
			&cli.StringFlag{Name: "scales", Usage: "host counts to run, comma-separated (default: --hosts)"},
			&cli.StringFlag{Name: "out", Usage: "directory to write bench.json, bench.md and bench.svg into"},
		),
		Action: runBench,
	})
}

// benchRow is one run of a bench.
type benchRow struct {
	Hosts   int         `json:"hosts"`
	Servers int         `json:"servers"`
	Mode    string      `json:"mode"`
	Report  *sim.Report `json:"report"`
	// OverloadVsOracle is the run's overload host-seconds over the
	// oracle's at the same scale (0 when the oracle did not run or had
	// none).
	OverloadVsOracle float64 `json:"overload_vs_oracle"`
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
	perHost := float64(cfg.Servers) / float64(cfg.Hosts)
	var rows []benchRow
	var reps []*sim.Report
	for _, n := range scales {
		oracle := -1
		for _, mode := range modes {
			run := cfg
			run.Mode, run.Hosts, run.Servers = mode, n, int(perHost*float64(n)+0.5)
			rep, err := sim.Run(c.Context, run)
			if err != nil {
				return fmt.Errorf("bench %s at %d hosts: %w", mode, n, err)
			}
			if mode == "oracle" {
				oracle = len(rows)
			}
			rows = append(rows, benchRow{Hosts: n, Servers: run.Servers, Mode: mode, Report: rep})
			reps = append(reps, rep)
		}
		if oracle >= 0 {
			base := rows[oracle].Report.OverloadSeconds
			for i := range rows {
				if rows[i].Hosts == n && base > 0 {
					rows[i].OverloadVsOracle = round2(rows[i].Report.OverloadSeconds / base)
				}
			}
		}
	}
	md := benchMarkdown(rows)
	if dir := c.String("out"); dir != "" {
		if err := writeBench(dir, rows, md); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return err
		}
	} else {
		fmt.Fprint(c.App.Writer, md)
	}
	return invalid(reps...)
}

// latency is detection to plan: wall milliseconds on the wall clock,
// simulated ones on the virtual clock (where no wall time passes between
// the two but the solver's).
func (r benchRow) latency() sim.Percentiles {
	if r.Report.Clock == sim.ClockVirtual {
		return r.Report.ProtocolMS
	}
	return r.Report.SolveMS
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// benchMarkdown is the bench as a Markdown table, one row per run.
func benchMarkdown(rows []benchRow) string {
	var b strings.Builder
	b.WriteString("| hosts | servers | mode | valid | events | solved | detection→plan p50 / p99 (ms; simulated with --clock virtual) | messages / event | mean partition | overload (host-s) | × oracle | migrations | Nova req / host-min | violations | wall (s) |\n")
	b.WriteString("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		p := r.Report
		vs := "–"
		if r.OverloadVsOracle > 0 {
			vs = fmt.Sprintf("%.2f", r.OverloadVsOracle)
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %t | %d | %d | %.1f / %.1f | %.1f | %.1f | %.0f | %s | %d | %.2f | %d | %.1f |\n",
			r.Hosts, r.Servers, r.Mode, p.Valid, p.Events.Total, p.Events.Solved, r.latency().P50, r.latency().P99,
			p.Messages.PerEvent, p.Partitions.MeanSize, p.OverloadSeconds, vs, p.Migrations.Total, p.Nova.PerHostMinute,
			p.Safety.Violations, p.WallS)
	}
	return b.String()
}

// writeBench writes bench.json, bench.md and bench.svg into dir.
func writeBench(dir string, rows []benchRow, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench --out: %w", err)
	}
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return fmt.Errorf("bench json: %w", err)
	}
	var errs []error
	for name, data := range map[string][]byte{"bench.json": append(js, '\n'), "bench.md": []byte(md), "bench.svg": []byte(benchSVG(rows))} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("bench --out: %w", err))
		}
	}
	return errors.Join(errs...)
}
