package node

import (
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

// testServer is a server of a test's cloud (manualCloud): on host, with
// vcpus of 1 GB and a demand of cpu cores and 512 MB.
type testServer struct {
	id, host string
	vcpus    int
	cpu      float64
}

// manualCloud is a test's cloud: hosts h1 to h3 of 8 cores and 16 GB,
// not overcommitted, with servers, on a clock that moves only when the
// test advances it.
func manualCloud(t *testing.T, servers ...testServer) (*fake.Cloud, *fake.ManualClock) {
	t.Helper()
	clock := fake.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cloud := fake.New(fake.DefaultConfig(), clock)
	for _, h := range []string{"h1", "h2", "h3"} {
		cloud.AddHost(nova.Host{Name: h, VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 1, RAMAllocRatio: 1})
	}
	for _, s := range servers {
		if err := cloud.AddServer(nova.Server{ID: s.id, Name: s.id, Host: s.host, VCPUs: s.vcpus, RAMMB: 1024}); err != nil {
			t.Fatal(err)
		}
		if err := cloud.SetDemand(s.id, nova.Demand{CPU: s.cpu, RAMMB: 512}); err != nil {
			t.Fatal(err)
		}
	}
	return cloud, clock
}
