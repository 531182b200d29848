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

// fixture drives the fake for the contract suite: servers are added
// directly, and waiting advances the manual clock.
type fixture struct {
	c     *fake.Cloud
	clock *fake.ManualClock
	n     int
}

func (f *fixture) Hosts() []string { return []string{"compute-1", "compute-2", "compute-3"} }

func (f *fixture) CreateServer(_ context.Context, name string, vcpus, ramMB int, host string) (string, error) {
	f.n++
	id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", f.n)
	return id, f.c.AddServer(nova.Server{ID: id, Name: name, Host: host, VCPUs: vcpus, RAMMB: ramMB, Flavor: "dvms.tiny"})
}

func (f *fixture) DeleteServer(_ context.Context, id string) error { return f.c.DeleteServer(id) }

func (f *fixture) WaitFor(timeout time.Duration, cond func() bool) bool {
	const step = 250 * time.Millisecond
	for waited := time.Duration(0); waited <= timeout; waited += step {
		if cond() {
			return true
		}
		f.clock.Advance(step)
	}
	return false
}

// NonConverging implements novatest.Dirtier: the guest dirties memory
// twice as fast as the pair copies it.
func (f *fixture) NonConverging(_ context.Context, id, src, dst string) error {
	if err := f.c.SetBandwidth(src, dst, 100); err != nil {
		return err
	}
	return f.c.SetDirtyRate(id, 200)
}

func TestContract(t *testing.T) {
	novatest.RunContract(t, func(t *testing.T) novatest.Env {
		c, clock := newCloud(t)
		return novatest.Env{Client: c, Fixture: &fixture{c: c, clock: clock}}
	})
}
