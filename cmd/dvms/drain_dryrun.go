package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// `dvms drain --dry-run HOST`: the plan that would empty HOST, computed
// the way the agents would (a partition growing from HOST along the ring
// of host names until the solver empties it, then the planner's ordered
// steps), without disabling anything or moving anything. Read-only on
// Nova: the compute hosts once, then the servers of each host the
// partition takes in.
//
// What differs from the agents' plan: the CLI does not measure servers,
// so each counts at its flavor (the most it can use: VCPUs as cores, its
// RAM); the agents measure, so their plan may pack tighter. Thresholds and limits
// are the defaults unless --config names the agents' file.

// dryRunConfig is what the dry run needs besides the cloud.
type dryRunConfig struct {
	Agent    scheduler.Config // thresholds, limits, headroom, solve timeout
	MaxHosts int              // the partition stops growing at this many hosts
	Seed     int64
}

// drainDryRun is the outcome: the partition's hosts, the solution and
// its plan (empty without a solution).
type drainDryRun struct {
	Hosts []string
	Sol   scheduler.Solution
	Plan  scheduler.Plan
}

// planDrain computes the plan that would empty host.
func planDrain(ctx context.Context, cl nova.Client, host string, dc dryRunConfig) (drainDryRun, error) {
	var out drainDryRun
	all, err := cl.Hosts(ctx)
	if err != nil {
		return out, fmt.Errorf("list compute hosts: %w", err)
	}
	byName := map[string]nova.Host{}
	var ring []string
	for _, h := range all {
		byName[h.Name] = h
		ring = append(ring, h.Name)
	}
	slices.Sort(ring)
	target, ok := byName[host]
	if !ok {
		return out, fmt.Errorf("nova has no compute host %q (`openstack compute service list` names them)", host)
	}
	// The partition grows from host along the ring, as the agents' does;
	// hosts that take no server (disabled, down) are passed over.
	i, _ := slices.BinarySearch(ring, host)
	order := []nova.Host{target}
	for k := 1; k < len(ring); k++ {
		h := byName[ring[(i+k)%len(ring)]]
		if h.Service.Disabled() || h.Service.State == nova.ServiceDown || h.Service.ForcedDown {
			continue
		}
		order = append(order, h)
	}
	ev := scheduler.Event{ID: "dry-run-" + host, Kind: scheduler.Maintenance, Host: host, Detected: time.Now()}
	var hosts []scheduler.Host
	for _, h := range order {
		if len(hosts) >= dc.MaxHosts {
			break
		}
		ss, err := cl.Servers(ctx, h.Name)
		if err != nil {
			return out, fmt.Errorf("servers of %s: %w", h.Name, err)
		}
		flavor := make(map[string]nova.Demand, len(ss)) // the most each can use
		for _, sv := range ss {
			flavor[sv.ID] = nova.Demand{CPU: float64(sv.VCPUs), RAMMB: float64(sv.RAMMB)}
		}
		sh := node.ToHost(h, ss, flavor, nil)
		if h.Name == host {
			sh.Draining = true // as if drained now
		}
		hosts = append(hosts, sh)
		out.Hosts = append(out.Hosts, h.Name)
		if len(hosts) == 1 {
			if len(ss) == 0 {
				out.Sol = scheduler.Solution{OK: true}
				return out, nil
			}
			continue // nowhere to move to yet
		}
		opt := scheduler.DefaultSolveOptions()
		opt.Rand = rand.New(rand.NewSource(dc.Seed))
		start := time.Now()
		opt.Now, opt.Deadline = time.Now, start.Add(dc.Agent.SolveTimeout)
		p := scheduler.Problem{Events: []scheduler.Event{ev}, Hosts: slices.Clone(hosts), Thresholds: dc.Agent.Thresholds, Headroom: dc.Agent.ConsolidationHeadroom}
		sol, plan, err := scheduler.SolveAndPlan(p, dc.Agent.Limits, opt)
		out.Sol, out.Plan = sol, plan
		if err != nil {
			return out, fmt.Errorf("plan: %w", err)
		}
		if sol.OK {
			return out, nil
		}
	}
	return out, nil
}

// runDrainDryRun prints the plan that would empty the host.
func runDrainDryRun(c *cli.Context, host string, cl nova.Client, log zerolog.Logger) error {
	if f := c.String("format"); !slices.Contains(formats, f) {
		return usageError(fmt.Errorf("-f %q: want one of %s", f, strings.Join(formats, ", ")))
	}
	dc := dryRunConfig{Agent: scheduler.DefaultConfig(host), MaxHosts: c.Int("max-hosts"), Seed: 1}
	if dc.MaxHosts < 2 {
		return usageError(errors.New("--max-hosts must be at least 2 (the host and one destination)"))
	}
	if src := fileSource(c); src.file != "" || src.dir != "" {
		cfg, err := loadConfig(src, host)
		if err = withoutCloudError(err); err != nil {
			return fmt.Errorf("--config:\n%w", err)
		}
		dc.Agent = cfg.Agent
	}
	dc.Agent.SolveTimeout = max(dc.Agent.SolveTimeout, 2*time.Second) // no agent waits on the CLI
	r, err := planDrain(c.Context, cl, host, dc)
	if err != nil {
		return err
	}
	log.Debug().Strs("partition", r.Hosts).Bool("solved", r.Sol.OK).Msg("drain dry run")
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
	if !r.Sol.OK {
		return fmt.Errorf("drain %s: no plan empties it within %d hosts (--max-hosts): %s", host, len(r.Hosts), r.Sol.Reason)
	}
	return nil
}
