package node_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// dryRunCloud: five 8-core hosts, c1 with 6 servers of 2 VCPUs (12 cores
// at their flavor: more than one host takes), c2 disabled (takes
// nothing).
func dryRunCloud(t *testing.T) *fake.Cloud {
	t.Helper()
	cloud := fake.New(fake.DefaultConfig(), node.Wall{})
	for i := 1; i <= 5; i++ {
		cloud.AddHost(nova.Host{Name: fmt.Sprintf("c%d", i), VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 2, RAMAllocRatio: 1})
	}
	for j := range 6 {
		id := fmt.Sprintf("s%d", j)
		if err := cloud.AddServer(nova.Server{ID: id, Name: id, Host: "c1", VCPUs: 2, RAMMB: 2048}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cloud.SetServiceStatus(context.Background(), "c2", true, "broken"); err != nil {
		t.Fatal(err)
	}
	return cloud
}

// dvms drain --dry-run: the agents' own code plans: every server off the
// host, only to hosts that take servers, the partition grown along the
// ring from the host, and nothing changed in Nova.
func TestPlanDrainByTheAgents(t *testing.T) {
	ctx := context.Background()
	cloud := dryRunCloud(t)
	dc := node.DefaultDryRunConfig("c1")
	dc.Agent.ReliefHeadroom = 0 // the first destinations that fit
	r, err := node.PlanDrain(ctx, cloud, "c1", dc)
	if err != nil {
		t.Fatal(err)
	}
	ring := []string{"c1", "c2", "c3", "c4", "c5"}
	if !r.Sol.OK || r.Plan.Len() != 6 || r.Hosts[0] != "c1" || !slices.Equal(r.Hosts, ring[:len(r.Hosts)]) {
		t.Fatalf("solved %v (%s), %d moves, partition %v: want a plan of 6 moves from a partition grown along the ring from c1", r.Sol.OK, r.Reason, r.Plan.Len(), r.Hosts)
	}
	if !slices.Equal(r.Hosts, ring[:4]) {
		t.Errorf("partition %v, want c1..c4: 12 cores need c3 and c4, and the agents pass through the disabled c2", r.Hosts)
	}
	moved := map[string]bool{}
	for _, step := range r.Plan.Steps {
		for _, a := range step {
			if a.From != "c1" || a.To == "c2" || a.To == "c1" || moved[a.Server] {
				t.Errorf("move %+v", a)
			}
			moved[a.Server] = true
		}
	}
	h, _ := cloud.Host(ctx, "c1")
	if ss, _ := cloud.Servers(ctx, "c1"); len(ss) != 6 || h.Service.Disabled() || cloud.Stats().Started != 0 {
		t.Errorf("the dry run changed the cloud: %d servers on c1, disabled %v, %d migrations", len(ss), h.Service.Disabled(), cloud.Stats().Started)
	}

	dc.Agent.ReliefHeadroom = 0
	dc.MaxHosts = 3 // c1, c2 and c3: 8 cores for 12
	if r, err := node.PlanDrain(ctx, cloud, "c1", dc); err != nil || r.Sol.OK || r.Plan.Len() != 0 {
		t.Errorf("within 3 hosts: solved %v, %d moves, err %v; want no plan", r.Sol.OK, r.Plan.Len(), err)
	} else if r.Reason == "" {
		t.Error("no plan, and no reason given")
	}
	if _, err := node.PlanDrain(ctx, cloud, "c9", dc); err == nil {
		t.Error("an unknown host gave no error")
	}
	// The agents' next-node rule (scheduler/nextnode.go), not a walk of
	// its own: with next_node = vivaldi and c4, c5 close to c1, the
	// partition grows to them first.
	dc.MaxHosts = 16
	dc.Agent.NextNode = scheduler.NextVivaldi
	dc.Agent.Distance = func(a, b string) (time.Duration, bool) {
		if (a == "c1") && (b == "c4" || b == "c5") {
			return time.Millisecond, true
		}
		return 50 * time.Millisecond, true
	}
	near, err := node.PlanDrain(ctx, cloud, "c1", dc)
	if err != nil || !near.Sol.OK || !slices.Equal(near.Hosts, []string{"c1", "c4", "c5"}) {
		t.Errorf("vivaldi: partition %v (%v, %v), want c1 c4 c5", near.Hosts, near.Sol.OK, err)
	}

	// An empty host: nothing to move, no agent beyond its own.
	if r, err := node.PlanDrain(ctx, cloud, "c5", node.DefaultDryRunConfig("c5")); err != nil || !r.Sol.OK || r.Plan.Len() != 0 || r.Visited != 1 {
		t.Errorf("empty host: %+v, %v", r, err)
	}
}
