package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler/node"
)

// `dvms drain --dry-run HOST`: the plan the agents would make to empty
// HOST (scheduler/node.PlanDrain runs their code), printed; nothing is
// disabled or moved. Thresholds and limits are the defaults unless
// --config (or /etc/dvms/dvms.conf) / --config-dir name the agents' files.

// runDrainDryRun prints the plan that would empty the host.
func runDrainDryRun(c *cli.Context, host string, cl nova.Client, log zerolog.Logger) error {
	if f := c.String("format"); !slices.Contains(formats, f) {
		return usageError(fmt.Errorf("-f %q: want one of %s", f, strings.Join(formats, ", ")))
	}
	dc := node.DefaultDryRunConfig(host)
	if dc.MaxHosts = c.Int("max-hosts"); dc.MaxHosts < 2 {
		return usageError(fmt.Errorf("--max-hosts must be at least 2 (the host and one destination)"))
	}
	file, err := operatorConfigFile(c)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	if src := (daemon.Source{File: file, Dir: c.String("config-dir"), Env: os.LookupEnv}); src.File != "" || src.Dir != "" {
		cfg, err := daemon.Load(src, host)
		if err = withoutCloudError(err); err != nil {
			return fmt.Errorf("--config:\n%w", err)
		}
		dc.Agent = cfg.Agent
	}
	if dc.Agent.Distance == nil { // no coordinates here: the ring, as agents whose coordinates have not settled
		dc.Agent.Distance = func(string, string) (time.Duration, bool) { return 0, false }
	}
	dc.Agent.SolveTimeout = max(dc.Agent.SolveTimeout, 2*time.Second) // no agent waits on the CLI
	r, err := node.PlanDrain(c.Context, cl, host, dc)
	if err != nil {
		return err
	}
	log.Debug().Strs("partition", r.Hosts).Bool("solved", r.Sol.OK).Int("agents", r.Visited).Msg("drain dry run")
	t := table{Name: "plan", Columns: []string{"Step", "Action", "Server", "From", "To", "VCPUs", "RAM MB"}}
	for k, step := range r.Plan.Steps {
		for _, a := range step {
			t.Rows = append(t.Rows, []any{k + 1, a.Kind.String(), a.Server, a.From, "-> " + a.To, a.VCPUs, a.RAMMB})
		}
	}
	if err := writeTables(c.App.Writer, c.String("format"), c.StringSlice("column"), t); err != nil {
		return err
	}
	// The summary goes to stderr: stdout stays the table (or JSON).
	w := c.App.ErrWriter
	fmt.Fprintf(w, "dry run: %s's service left as it is, nothing moved; partition %s; servers counted at their flavor (the agents measure: their plan may differ)\n",
		host, strings.Join(r.Hosts, " "))
	for _, u := range r.Sol.Unmovable {
		fmt.Fprintf(w, "stays: %s\n", u)
	}
	if !r.Sol.OK || (r.Plan.Len() == 0 && r.Reason != "") {
		why := r.Reason
		if why == "" {
			why = r.Sol.Reason
		}
		return fmt.Errorf("drain %s: no plan empties it (--max-hosts %d): %s", host, dc.MaxHosts, why)
	}
	return nil
}
