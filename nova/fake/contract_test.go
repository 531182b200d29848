package fake_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/nova/novatest"
)

type fixture struct {
	c     *fake.Cloud
	clock *fake.ManualClock
	n     int
}

func (f *fixture) Hosts() []string { return []string{"compute-1", "compute-2", "compute-3"} }

func (f *fixture) CreateServer(_ context.Context, name string, vcpus, ram int, host string) (string, error) {
	f.n++
	id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", f.n)
	return id, f.c.AddServer(nova.Server{ID: id, Name: name, Host: host, VCPUs: vcpus, RAMMB: ram, Flavor: "dvms.tiny"})
}

func (f *fixture) DeleteServer(_ context.Context, id string) error { return f.c.DeleteServer(id) }

func (f *fixture) WaitFor(timeout time.Duration, cond func() bool) bool {
	for waited := time.Duration(0); waited <= timeout; waited += 500 * time.Millisecond {
		if cond() {
			return true
		}
		f.clock.Advance(500 * time.Millisecond)
	}
	return false
}

func newCloud() (*fake.Cloud, *fake.ManualClock) {
	clock := fake.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := fake.New(fake.DefaultConfig(), clock)
	for i := 1; i <= 3; i++ {
		c.AddHost(nova.Host{Name: fmt.Sprintf("compute-%d", i), VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 1, RAMAllocRatio: 1})
	}
	return c, clock
}

func TestContract(t *testing.T) {
	novatest.Run(t, func(t *testing.T) novatest.Env {
		c, clock := newCloud()
		return novatest.Env{Client: c, Fixture: &fixture{c: c, clock: clock}}
	})
}
