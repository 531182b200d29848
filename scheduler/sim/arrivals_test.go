package sim

import (
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler/extsched"
)

// A boot follows Nova's filters (service, placement room) and its
// placement-only order, unless dvms weights put a host whose measured
// demand leaves room first: the host placement shows emptiest but the
// agents measure busy gets the server without dvms, not with it.
func TestArrivalsChooseLikeNovaThenDvms(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	host := func(name string, usedRAM int, f ...func(*nova.Host)) fake.HostState {
		h := nova.Host{Name: name, VCPUs: 16, RAMMB: 65536, CPUAllocRatio: 4, RAMAllocRatio: 1, RAMMBUsed: usedRAM,
			Service: nova.Service{Host: name, Status: nova.ServiceEnabled, State: nova.ServiceUp}}
		for _, g := range f {
			g(&h)
		}
		return fake.HostState{Host: h}
	}
	states := []fake.HostState{
		host("busy", 0),
		host("idle", 30000),
		host("off", 0, func(h *nova.Host) { h.Service.Status, h.Service.DisabledReason = nova.ServiceDisabled, "maintenance" }),
		host("full", 65000),
	}
	demand := map[string]float64{"busy": 15, "idle": 2, "off": 0, "full": 0}
	summary := func(h string) (extsched.Summary, bool) {
		return extsched.Summary{V: 1, Host: h, At: now, SampledAt: now, CPUs: 16, RAMMB: 65536, CPUDemand: demand[h]}, true
	}
	for _, tc := range []struct{ weights, want string }{{WeightsNova, "busy"}, {WeightsDvms, "idle"}} {
		cfg := DefaultConfig()
		cfg.Arrivals, cfg.ArrivalWeights = 1, tc.weights
		a := newArrivals(cfg, nil, 1, summary)
		for _, st := range states {
			s, _ := summary(st.Host.Name)
			a.view.Update(s, now)
		}
		got, ok := a.choose(states, 2, 4096, now)
		if !ok || got != tc.want {
			t.Errorf("%s weights: boot on %q (%v), want %q", tc.weights, got, ok, tc.want)
		}
	}
	a := newArrivals(DefaultConfig(), nil, 1, summary)
	if got, ok := a.choose(states[2:], 2, 4096, now); ok {
		t.Errorf("a boot went to %q: a disabled host and a full one are no candidates", got)
	}
}

// --arrivals boots servers during a run and reports them with the moves
// of the new servers.
func TestSimulateArrivals(t *testing.T) {
	for _, w := range []string{WeightsDvms, WeightsNova} {
		c := DefaultConfig()
		c.Hosts, c.Servers, c.Seed = 10, 60, 3
		c.Duration, c.TimeScale = 20*time.Second, 20
		c.Arrivals, c.ArrivalWeights = 2, w
		r := runKeptUp(t, c, protocolStarved)
		// One boot per simulated second tick at 2/s: 2 per tick, ±1 tick.
		if n := r.Arrivals.Booted + r.Arrivals.Unplaced; n < 36 || n > 44 || r.Arrivals.Weights != w {
			t.Errorf("%s: %d booted, %d unplaced, want about 40 (2/s for 20 s): %+v", w, r.Arrivals.Booted, r.Arrivals.Unplaced, r.Arrivals)
		}
		if r.Arrivals.Moved > r.Arrivals.Booted || r.Migrations.OfNewServers < r.Arrivals.Moved || r.Migrations.OfNewServers > r.Migrations.Total {
			t.Errorf("%s: inconsistent counts: arrivals %+v, migrations %+v", w, r.Arrivals, r.Migrations)
		}
	}
	c := DefaultConfig()
	c.Mode, c.Arrivals = "central", 1
	if err := c.Validate(); err == nil {
		t.Error("dvms arrival weights accepted without agents (central mode)")
	}
}
