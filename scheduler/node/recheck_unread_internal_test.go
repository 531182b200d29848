package node

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
)

// unmeasured is a destination's agent that has no reading yet of the
// servers named (they just arrived): it answers for the others.
type unmeasured struct {
	c    *fake.Cloud
	skip map[string]bool
}

func (u unmeasured) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	d, err := u.c.Demand(ctx, host)
	for id := range u.skip {
		delete(d, id)
	}
	return d, err
}

// A server another plan just brought onto the destination, which the
// destination's agent has not measured yet, is judged at most at its
// flavor, not at this plan's snapshot of it on its old host: its demand
// may have grown since. Here the plan saw x on h3 at 0.5 cores; another
// plan moved it to h2, where it now uses 2.5 of its 4 VCPUs. Judged at
// 0.5, s1 (1 core) would start into h2 at 5 + 2.5 + 1 = 8.5 of 8 cores:
// the safety observer's plan-overloads-destination (it judges a server
// the plan never read at its demand now), seen twice under heavy load.
func TestRecheckJudgesAServerAnotherPlanBroughtAtItsFlavor(t *testing.T) {
	ctx := nova.WithRequestID(context.Background(), RequestID("ev-unread"))
	cloud, _ := manualCloud(t, testServer{"busy", "h2", 2, 5}, testServer{"x", "h2", 4, 2.5}, testServer{"s1", "h1", 1, 1})
	plan := scheduler.Plan{Snapshot: []scheduler.Host{
		{Name: "h1", Servers: []scheduler.Server{{ID: "s1", CPU: 1, RAM: 512}}},
		{Name: "h2", Servers: []scheduler.Server{{ID: "busy", CPU: 5, RAM: 512}}},
		{Name: "h3", Servers: []scheduler.Server{{ID: "x", CPU: 0.5, RAM: 512}}},
	}}
	e := NewExecutor(DefaultExecConfig(), cloud, unmeasured{cloud, map[string]bool{"x": true}}, scheduler.DefaultThresholds(), Wall{}, zerolog.Nop())
	f := newFlight(plan)
	a := scheduler.Action{Kind: scheduler.LiveMigrate, Server: "s1", From: "h1", To: "h2", VCPUs: 1, RAMMB: 1024, CPU: 1, RAM: 512}
	_, held, sk := judge(e.thr, a, f, e.readAll(ctx, scheduler.Event{}, a, f))
	if sk.class != ReasonOverload {
		t.Errorf("s1 judged %q (held %v): want it skipped, h2 at 5 + 4 (x, unmeasured, at its flavor) + 1 of 8 cores", sk.why, held != nil)
	}
	// The observer agrees the move would overload h2 (the scenario is
	// the violation, not a stricter rule of the executor's own).
	if _, err := cloud.LiveMigrate(ctx, "s1", "h2"); err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, v := range cloud.Violations() {
		seen = seen || v.Kind == fake.KindOverload && strings.Contains(v.Message, "h2")
	}
	if !seen {
		t.Errorf("the observer saw no %s moving s1 into h2: %v", fake.KindOverload, cloud.Violations())
	}
}

// The snapshot still answers for a server the plan saw on the
// destination itself when nobody measures it (no agent to ask: tools,
// tests), and a move of the plan's own that completed is counted at what
// it reserved, not at its flavor.
func TestRecheckUnreadServersOfThePlansOwn(t *testing.T) {
	f := newFlight(scheduler.Plan{Snapshot: []scheduler.Host{
		{Name: "h2", Servers: []scheduler.Server{{ID: "here", CPU: 0.3, RAM: 100}}},
		{Name: "h1", Servers: []scheduler.Server{{ID: "mine", CPU: 0.7, RAM: 200}}},
	}})
	f.flying["h2"] = map[string]*reservation{"mine": {to: "h2", server: "mine", l: load{cpu: 0.9, ram: 300, vcpus: 2, ramMB: 2048}}}
	for _, c := range []struct {
		sv   nova.Server
		want nova.Demand
	}{
		{nova.Server{ID: "here", VCPUs: 4, RAMMB: 4096}, nova.Demand{CPU: 0.3, RAMMB: 100}},
		{nova.Server{ID: "mine", VCPUs: 2, RAMMB: 2048}, nova.Demand{CPU: 0.9, RAMMB: 300}},
		{nova.Server{ID: "other", VCPUs: 4, RAMMB: 4096}, nova.Demand{CPU: 4, RAMMB: 4096}},
	} {
		if got := f.unread("h2", c.sv); got != c.want {
			t.Errorf("%s counted at %+v, want %+v", c.sv.ID, got, c.want)
		}
	}
}
