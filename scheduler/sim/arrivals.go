package sim

import (
	"fmt"
	"math/rand"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler/extsched"
)

// Arrivals (`dvms simulate --arrivals RATE`): new servers boot
// during the run, Config.Arrivals per simulated second. Each boot goes
// through what Nova would do: its filters keep the hosts whose service is
// enabled and up and where placement has room for the flavor, its
// placement-only weigher orders them (most free placement RAM first, as
// Nova's RAMWeigher spreads), and, with ArrivalWeights "dvms", the same
// weighing `dvms scheduler-api` answers with (extsched.Weigh over the
// agents' summaries, node.Runner.Summary) puts its first host first. The
// report counts the live migrations of those servers afterwards
// (migrations.of_new_servers): what dvms had to undo.

// Arrival weighings.
const (
	WeightsDvms = "dvms" // the scheduler-api's order
	WeightsNova = "nova" // placement-only: most free placement RAM first
)

// arrivals boots the new servers of one run.
type arrivals struct {
	cloud   *fake.Cloud
	rng     *rand.Rand
	rate    float64
	weights string
	wcfg    extsched.Config
	view    *extsched.View
	// summary is the agent's summary of a host (false: none, e.g. its
	// agent is down or has not sampled yet).
	summary func(host string) (extsched.Summary, bool)
	due     float64
	ids     []string
	// unplaced: boots no host had placement room for (NoValidHost).
	unplaced int
}

func newArrivals(cfg Config, cloud *fake.Cloud, seed int64, summary func(string) (extsched.Summary, bool)) *arrivals {
	w := extsched.DefaultConfig()
	w.CPUOverload, w.RAMOverload = cfg.Agent.Thresholds.CPUOverload, cfg.Agent.Thresholds.RAMOverload
	return &arrivals{cloud: cloud, rng: rand.New(rand.NewSource(seed)), rate: cfg.Arrivals, weights: cfg.ArrivalWeights,
		wcfg: w, view: extsched.NewView(w.StaleAfter, w.PendingTTL), summary: summary}
}

// step boots the servers due after dt more simulated seconds. With dvms
// weights the view first takes every agent's current summary, as the
// service hears them (the agents publish on change, checked every monitor
// interval, so once a simulated second is what it would know).
func (a *arrivals) step(dt float64, now time.Time, hosts []string) error {
	a.due += a.rate * dt
	if a.due >= 1 && a.weights == WeightsDvms {
		for _, h := range hosts {
			if s, ok := a.summary(h); ok {
				a.view.Update(s, now)
			}
		}
	}
	for ; a.due >= 1; a.due-- {
		if err := a.boot(now); err != nil {
			return err
		}
	}
	return nil
}

// boot places one new server, as Nova would, and gives it a demand.
func (a *arrivals) boot(now time.Time) error {
	f := flavors[a.rng.Intn(len(flavors))]
	name := fmt.Sprintf("new-%06d", len(a.ids)+a.unplaced+1)
	host, ok := a.choose(a.cloud.Snapshot(), f.vcpus, f.ram, now)
	if !ok {
		a.unplaced++
		return nil
	}
	if err := a.cloud.AddServer(nova.Server{ID: name, Name: name, Host: host, Zone: "nova",
		Status: nova.StatusActive, Flavor: f.name, VCPUs: f.vcpus, RAMMB: f.ram}); err != nil {
		return fmt.Errorf("boot %s on %s: %w", name, host, err)
	}
	a.ids = append(a.ids, name)
	// A new server's demand: drawn once, up to its whole flavor.
	return a.cloud.SetDemand(name, nova.Demand{CPU: a.rng.Float64() * float64(f.vcpus), RAMMB: 0.7 * float64(f.ram)})
}

// choose is Nova's filters and placement-only weigher, then (dvms) the
// scheduler-api's order; the boot goes to the first host.
func (a *arrivals) choose(states []fake.HostState, vcpus, ramMB int, now time.Time) (string, bool) {
	req := extsched.Request{Weights: map[string]float64{}}
	var best string
	bestFree := -1.0
	for _, st := range states {
		h := st.Host
		if h.Service.Disabled() || h.Service.State == nova.ServiceDown || h.Service.ForcedDown ||
			float64(h.VCPUsUsed+vcpus) > h.AllocatableVCPUs() || float64(h.RAMMBUsed+ramMB) > h.AllocatableRAMMB() {
			continue
		}
		free := h.AllocatableRAMMB() - float64(h.RAMMBUsed)
		req.Hosts = append(req.Hosts, extsched.RequestHost{Host: h.Name})
		req.Weights[h.Name] = free
		if free > bestFree {
			best, bestFree = h.Name, free
		}
	}
	if len(req.Hosts) == 0 {
		return "", false
	}
	if a.weights != WeightsDvms {
		return best, true
	}
	names := make([]string, len(req.Hosts))
	for i, h := range req.Hosts {
		names[i] = h.Host
	}
	spec := extsched.Spec{VCPUs: vcpus, RAMMB: ramMB}
	d := extsched.Weigh(a.wcfg, spec, req, a.view.States(names, now))
	if len(d.Hosts) == 0 {
		return best, true
	}
	a.view.Reserve(d.Hosts[0], float64(vcpus), float64(ramMB), now)
	return d.Hosts[0], true
}

// report fills the arrivals' part of rep: boots, and the live migrations
// of the new servers (Nova's instance actions).
func (a *arrivals) report(rep *Report) {
	rep.Arrivals.Rate, rep.Arrivals.Weights = a.rate, a.weights
	rep.Arrivals.Booted, rep.Arrivals.Unplaced = len(a.ids), a.unplaced
	moved := 0
	for _, id := range a.ids {
		n := 0
		for _, act := range a.cloud.Actions(id) {
			if act.Name == "live-migration" {
				n++
			}
		}
		rep.Migrations.OfNewServers += n
		if n > 0 {
			moved++
		}
	}
	rep.Arrivals.Moved = moved
}
