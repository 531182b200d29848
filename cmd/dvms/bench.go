package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/scheduler/sim"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "bench",
		Usage: "run the same simulation with dvms and with the centralized baseline, side by side",
		Description: "Same cloud, seed and workload, one process, one run each: dvms agents, then one\n" +
			"optimizer over the whole cloud every --central-period (as Entropy or Watcher audits).\n" +
			"Ratios are what to compare: these machines are noisy.",
		Flags:  simFlags(),
		Action: runBench,
	})
}

func runBench(c *cli.Context) error {
	cfg, err := simConfig(c)
	if err != nil {
		return err
	}
	reps := map[string]*sim.Report{}
	for _, mode := range []string{"dvms", "central"} {
		cfg.Mode = mode
		rep, err := sim.Run(c.Context, cfg)
		if err != nil {
			return fmt.Errorf("bench %s: %w", mode, err)
		}
		reps[mode] = rep
	}
	d, b := reps["dvms"], reps["central"]
	ratio := func(base, x float64) float64 {
		if x == 0 {
			if base == 0 {
				return 1
			}
			return 0 // infinite improvement: reported as 0 with the raw figures beside it
		}
		return base / x
	}
	if c.Bool("json") {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{
			"dvms": d, "central": b,
			"overload_ratio_central_over_dvms":      ratio(b.OverloadSeconds, d.OverloadSeconds),
			"nova_requests_ratio_central_over_dvms": ratio(float64(b.Nova.Requests.Total), float64(d.Nova.Requests.Total)),
		}); err != nil {
			return err
		}
		return invalid(d, b)
	}
	fmt.Printf("%-28s %14s %14s\n", "", "dvms", "central")
	fmt.Printf("%-28s %14.0f %14.0f   central/dvms = %.1fx\n", "overload host-seconds", d.OverloadSeconds, b.OverloadSeconds, ratio(b.OverloadSeconds, d.OverloadSeconds))
	fmt.Printf("%-28s %14.1f %14.1f\n", "detection->plan p50 (ms)", d.SolveMS.P50, b.SolveMS.P50)
	fmt.Printf("%-28s %14.1f %14.1f\n", "detection->plan p99 (ms)", d.SolveMS.P99, b.SolveMS.P99)
	fmt.Printf("%-28s %14d %14d\n", "events solved", d.Events.Solved, b.Events.Solved)
	fmt.Printf("%-28s %14d %14d\n", "migrations", d.Migrations.Total, b.Migrations.Total)
	fmt.Printf("%-28s %14d %14d\n", "nova requests", d.Nova.Requests.Total, b.Nova.Requests.Total)
	fmt.Printf("%-28s %14.2f %14.2f\n", "nova requests / host-minute", d.Nova.PerHostMinute, b.Nova.PerHostMinute)
	fmt.Printf("%-28s %14.1f %14.1f\n", "nova latency p99 (ms)", d.Nova.P99MS, b.Nova.P99MS)
	fmt.Printf("%-28s %14d %14d\n", "safety violations", d.Safety.Violations, b.Safety.Violations)
	fmt.Printf("%-28s %14.1f %14.1f\n", "wall seconds", d.WallS, b.WallS)
	fmt.Printf("%-28s %14t %14t\n", "valid", d.Valid, b.Valid)
	return invalid(d, b)
}
