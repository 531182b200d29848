package main

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// dvms drain --dry-run: the plan moves every server off the host, only
// to hosts that take servers, grows the partition along the ring only as
// far as needed, and changes nothing in Nova.
func TestDrainDryRun(t *testing.T) {
	cloud := fake.New(fake.DefaultConfig(), node.Wall{})
	for i := 1; i <= 5; i++ {
		cloud.AddHost(nova.Host{Name: fmt.Sprintf("c%d", i), VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 2, RAMAllocRatio: 1})
	}
	for j := range 6 { // 12 cores at their flavor: more than one 8-core host takes
		id := fmt.Sprintf("s%d", j)
		if err := cloud.AddServer(nova.Server{ID: id, Name: id, Host: "c1", VCPUs: 2, RAMMB: 2048}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := cloud.SetServiceStatus(ctx, "c2", true, "broken"); err != nil { // takes nothing
		t.Fatal(err)
	}
	dc := dryRunConfig{Agent: scheduler.DefaultConfig("c1"), MaxHosts: 16, Seed: 1}
	r, err := planDrain(ctx, cloud, "c1", dc)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Sol.OK || !slices.Equal(r.Hosts, []string{"c1", "c3", "c4"}) {
		t.Fatalf("solved %v (%s) with partition %v, want c1 c3 c4", r.Sol.OK, r.Sol.Reason, r.Hosts)
	}
	moved := map[string]bool{}
	for _, step := range r.Plan.Steps {
		for _, a := range step {
			if a.From != "c1" || (a.To != "c3" && a.To != "c4") || moved[a.Server] {
				t.Errorf("move %+v", a)
			}
			moved[a.Server] = true
		}
	}
	if len(moved) != 6 {
		t.Errorf("%d servers moved, want the 6 of c1", len(moved))
	}
	h, _ := cloud.Host(ctx, "c1")
	if ss, _ := cloud.Servers(ctx, "c1"); len(ss) != 6 || h.Service.Disabled() || cloud.Stats().Started != 0 {
		t.Errorf("the dry run changed the cloud: %d servers on c1, disabled %v, %d migrations", len(ss), h.Service.Disabled(), cloud.Stats().Started)
	}

	dc.MaxHosts = 2 // c1 and c3: 8 cores for 12
	if r, err := planDrain(ctx, cloud, "c1", dc); err != nil || r.Sol.OK {
		t.Errorf("within 2 hosts: solved %v, err %v; want no plan", r.Sol.OK, err)
	}
	if _, err := planDrain(ctx, cloud, "c9", dc); err == nil {
		t.Error("an unknown host gave no error")
	}
}
