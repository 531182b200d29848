package fakeapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/nova/fakeapi"
	"github.com/dvms-project/dvms/nova/novatest"
	"github.com/dvms-project/dvms/nova/openstack"
)

// bed is a fake cloud served over HTTP by an httptest server.
type bed struct {
	cloud *fake.Cloud
	clock *fake.ManualClock
	srv   *httptest.Server
}

// newBed serves three 8-VCPU / 16 GiB hosts compute-1..3 and checks at
// cleanup that the fake's observer saw nothing wrong. The fake's clock
// starts at the wall clock's now: the client compares a server's
// "created" with its own clock (its group index cache).
func newBed(t *testing.T, opts fakeapi.Options) *bed {
	t.Helper()
	clock := fake.NewManualClock(time.Now().UTC().Truncate(time.Second))
	c := fake.New(fake.DefaultConfig(), clock)
	for i := 1; i <= 3; i++ {
		c.AddHost(nova.Host{Name: fmt.Sprintf("compute-%d", i), VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 1, RAMAllocRatio: 1})
	}
	srv := httptest.NewServer(fakeapi.New(c, opts))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if v := c.Violations(); len(v) > 0 {
			t.Errorf("observer violations: %v", v)
		}
		if v := c.Audit(); len(v) > 0 {
			t.Errorf("audit: %v", v)
		}
	})
	return &bed{cloud: c, clock: clock, srv: srv}
}

const cloudsYAML = `clouds:
  bed:
    auth:
      auth_url: %s
      username: %s
      password: %s
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    identity_api_version: 3
`

// connect writes a clouds.yaml for the bed and connects the real
// client through keystone.
func (b *bed) connect(t *testing.T, authURL, user, password string) (*openstack.Client, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, cloudsYAML, authURL, user, password), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := openstack.DefaultConfig("bed")
	cfg.CloudsFile = path
	cfg.RequestTimeout = 10 * time.Second
	cfg.RetryBase, cfg.RetryMax = time.Millisecond, 4*time.Millisecond
	return openstack.New(context.Background(), cfg)
}

func (b *bed) client(t *testing.T) *openstack.Client {
	t.Helper()
	cl, err := b.connect(t, b.srv.URL+"/identity/v3", "admin", "secret")
	if err != nil {
		t.Fatalf("openstack.New against the fake API: %v", err)
	}
	return cl
}

// fixture drives the fake behind the HTTP API for the contract suite:
// servers are added directly, and waiting advances the manual clock.
type fixture struct {
	b *bed
	n int
}

func (f *fixture) Hosts() []string { return []string{"compute-1", "compute-2", "compute-3"} }

func (f *fixture) CreateServer(_ context.Context, name string, vcpus, ramMB int, host string) (string, error) {
	f.n++
	id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", f.n)
	return id, f.b.cloud.AddServer(nova.Server{ID: id, Name: name, Host: host, VCPUs: vcpus, RAMMB: ramMB, Flavor: "dvms.tiny"})
}

func (f *fixture) DeleteServer(_ context.Context, id string) error { return f.b.cloud.DeleteServer(id) }

// NonConverging implements novatest.Dirtier (the fake behind the API).
func (f *fixture) NonConverging(_ context.Context, id, src, dst string) error {
	if err := f.b.cloud.SetBandwidth(src, dst, 100); err != nil {
		return err
	}
	return f.b.cloud.SetDirtyRate(id, 200)
}

func (f *fixture) WaitFor(timeout time.Duration, cond func() bool) bool {
	const step = 250 * time.Millisecond
	for waited := time.Duration(0); waited <= timeout; waited += step {
		if cond() {
			return true
		}
		f.b.clock.Advance(step)
	}
	return false
}

// TestContract runs the shared nova.Client contract with the real
// nova/openstack client, authenticated through the fake keystone, against
// the fake cloud served over HTTP.
func TestContract(t *testing.T) {
	novatest.RunContract(t, func(t *testing.T) novatest.Env {
		b := newBed(t, fakeapi.Options{})
		return novatest.Env{Client: b.client(t), Fixture: &fixture{b: b}}
	})
}
