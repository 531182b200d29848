package fake_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newCloud returns three 8-VCPU / 16 GiB hosts compute-1..3 (ratios 1)
// and checks at cleanup that the observer saw nothing wrong. Tests that
// break the rules on purpose build their cloud with newRawCloud.
func newCloud(t testing.TB, opts ...func(*fake.Config)) (*fake.Cloud, *fake.ManualClock) {
	c, clock := newRawCloud(opts...)
	t.Cleanup(func() {
		if v := c.Violations(); len(v) > 0 {
			t.Errorf("observer violations: %v", v)
		}
		if v := c.Audit(); len(v) > 0 {
			t.Errorf("audit: %v", v)
		}
		if n := c.ServersLost(); n != 0 {
			t.Errorf("%d servers lost", n)
		}
	})
	return c, clock
}

func newRawCloud(opts ...func(*fake.Config)) (*fake.Cloud, *fake.ManualClock) {
	clock := fake.NewManualClock(epoch)
	cfg := fake.DefaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	c := fake.New(cfg, clock)
	for i := 1; i <= 3; i++ {
		c.AddHost(hostSpec(fmt.Sprintf("compute-%d", i), 8, 16384))
	}
	return c, clock
}

func hostSpec(name string, vcpus, ram int) nova.Host {
	return nova.Host{Name: name, VCPUs: vcpus, RAMMB: ram, CPUAllocRatio: 1, RAMAllocRatio: 1}
}

func server(id, host string, vcpus, ram int) nova.Server {
	return nova.Server{ID: id, Name: id, Host: host, VCPUs: vcpus, RAMMB: ram}
}

func mustAdd(t testing.TB, c *fake.Cloud, ss ...nova.Server) {
	t.Helper()
	for _, s := range ss {
		if err := c.AddServer(s); err != nil {
			t.Fatal(err)
		}
	}
}

func isConflict(err error) bool {
	return errors.Is(err, nova.ErrConflict) || errors.Is(err, nova.ErrBadRequest)
}
