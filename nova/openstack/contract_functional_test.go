//go:build functional

package openstack_test

// The functional tier: the nova/novatest contract against a real Nova
// (devstack/functional brings up Debian's Zed with fake-driver computes).
//
//	OS_CLIENT_CONFIG_FILE=/tmp/dvms-functional/clouds.yaml OS_CLOUD=dvms-functional \
//	  go test -tags functional -count=1 -run Functional ./nova/openstack/
//
// Without a reachable cloud the tests skip, loudly, unless
// DVMS_FUNCTIONAL_REQUIRED is set: then they fail.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/diagnostics"
	"github.com/dvms-project/dvms/nova/novatest"
	"github.com/dvms-project/dvms/nova/openstack"
)

const (
	defaultCloud      = "dvms-functional"
	defaultCloudsFile = "/tmp/dvms-functional/clouds.yaml"
	tinyFlavor        = "dvms.tiny"
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// realCloud is the cloud under test, connected once for all subtests.
type realCloud struct {
	client  *openstack.Client
	compute *gophercloud.ServiceClient
	image   *gophercloud.ServiceClient
	hosts   []string // two enabled, up hosts
	zone    map[string]string
	imageID string
	flavors []flavors.Flavor
}

var (
	cloudOnce sync.Once
	theCloud  *realCloud
	cloudErr  error
)

// functionalCloud connects to the cloud, or skips (loudly) / fails when
// it cannot be reached.
func functionalCloud(t *testing.T) *realCloud {
	t.Helper()
	cloudOnce.Do(func() { theCloud, cloudErr = connectCloud() })
	if cloudErr != nil {
		msg := fmt.Sprintf("FUNCTIONAL TIER NOT RUN: no usable cloud %q in %s: %v",
			envOr("OS_CLOUD", defaultCloud), envOr("OS_CLIENT_CONFIG_FILE", defaultCloudsFile), cloudErr)
		if os.Getenv("DVMS_FUNCTIONAL_REQUIRED") != "" {
			t.Fatal(msg + " (DVMS_FUNCTIONAL_REQUIRED is set)")
		}
		fmt.Fprintln(os.Stderr, "*** "+msg)
		t.Skip(msg + " (bring one up with devstack/functional, or set DVMS_FUNCTIONAL_REQUIRED=1 to fail)")
	}
	return theCloud
}

func connectCloud() (*realCloud, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := openstack.DefaultConfig(envOr("OS_CLOUD", defaultCloud))
	cfg.CloudsFile = envOr("OS_CLIENT_CONFIG_FILE", defaultCloudsFile)
	if _, err := os.Stat(cfg.CloudsFile); err != nil {
		return nil, err
	}
	cl, err := openstack.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rc := &realCloud{client: cl, zone: map[string]string{}}

	// The fixture's own gophercloud clients (creating and deleting
	// servers is not part of nova.Client).
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithCloudName(cfg.Cloud), clouds.WithLocations(cfg.CloudsFile))
	if err != nil {
		return nil, err
	}
	ao.AllowReauth = true
	provider, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig))
	if err != nil {
		return nil, err
	}
	if rc.compute, err = gopenstack.NewComputeV2(provider, eo); err != nil {
		return nil, err
	}
	rc.compute.Microversion = openstack.ComputeMicroversion
	if rc.image, err = gopenstack.NewImageV2(provider, eo); err != nil {
		return nil, err
	}

	hs, err := cl.Hosts(ctx)
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	var usable []string
	for _, h := range hs {
		rc.zone[h.Name] = h.Zone
		if !h.Service.Disabled() && h.Service.State == nova.ServiceUp && h.VCPUs > 0 {
			usable = append(usable, h.Name)
		}
	}
	if want := os.Getenv("DVMS_FUNCTIONAL_HOSTS"); want != "" {
		usable = strings.Split(want, ",")
	}
	if len(usable) < 2 {
		return nil, fmt.Errorf("%d enabled, up compute hosts with capacity (of %d), the contract needs 2", len(usable), len(hs))
	}
	// The last two: other functional tests tend to start at compute-1.
	rc.hosts = usable[len(usable)-2:]

	pages, err := flavors.ListDetail(rc.compute, flavors.ListOpts{AccessType: flavors.AllAccess}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list flavors: %w", err)
	}
	if rc.flavors, err = flavors.ExtractFlavors(pages); err != nil {
		return nil, err
	}
	imgPages, err := images.List(rc.image, images.ListOpts{Status: images.ImageStatusActive}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	imgs, err := images.ExtractImages(imgPages)
	if err != nil {
		return nil, err
	}
	if len(imgs) == 0 {
		return nil, errors.New("no active image in glance")
	}
	rc.imageID = imgs[0].ID
	if id := os.Getenv("DVMS_FUNCTIONAL_IMAGE"); id != "" {
		rc.imageID = id
	}
	return rc, nil
}

// fixture implements novatest.Fixture on the real cloud.
type fixture struct {
	t *testing.T
	c *realCloud
}

func (f *fixture) Hosts() []string { return f.c.hosts }

// flavor picks the flavor of vcpus / ramMB, dvms.tiny first.
func (f *fixture) flavor(vcpus, ramMB int) (string, error) {
	fs := slices.Clone(f.c.flavors)
	slices.SortStableFunc(fs, func(a, b flavors.Flavor) int {
		switch {
		case a.Name == tinyFlavor:
			return -1
		case b.Name == tinyFlavor:
			return 1
		}
		return 0
	})
	for _, fl := range fs {
		if fl.VCPUs == vcpus && fl.RAM == ramMB {
			return fl.ID, nil
		}
	}
	return "", fmt.Errorf("no flavor with %d VCPU / %d MB (want %s)", vcpus, ramMB, tinyFlavor)
}

// CreateServer boots a server without network on host (admin's
// "zone:host" availability zone).
func (f *fixture) CreateServer(ctx context.Context, name string, vcpus, ramMB int, host string) (string, error) {
	flavorID, err := f.flavor(vcpus, ramMB)
	if err != nil {
		return "", err
	}
	zone := f.c.zone[host]
	if zone == "" {
		zone = "nova"
	}
	s, err := servers.Create(ctx, f.c.compute, servers.CreateOpts{
		Name:             name,
		ImageRef:         f.c.imageID,
		FlavorRef:        flavorID,
		Networks:         "none", // 2.37+
		AvailabilityZone: zone + ":" + host,
		Metadata:         map[string]string{"dvms:test": f.t.Name()},
	}, nil).Extract()
	if err != nil {
		return "", err
	}
	f.t.Logf("created server %s (%s) on %s", s.ID, name, host)
	return s.ID, nil
}

func (f *fixture) DeleteServer(ctx context.Context, id string) error {
	err := servers.Delete(ctx, f.c.compute, id).ExtractErr()
	if gophercloud.ResponseCodeIs(err, 404) {
		return nil
	}
	return err
}

func (f *fixture) WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Second)
	}
}

// activeServer boots a 1 VCPU / 512 MB server on host, waits until it is
// ACTIVE, and deletes it once it settles at the end of the test.
func (f *fixture) activeServer(t *testing.T, name, host string) string {
	t.Helper()
	ctx := context.Background()
	id, err := f.CreateServer(ctx, name, 1, 512, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.WaitFor(novatest.SettleTimeout, func() bool {
			s, err := f.c.client.Server(ctx, id)
			return err != nil || s.TaskState == ""
		})
		if err := f.DeleteServer(ctx, id); err != nil {
			t.Logf("cleanup: delete %s: %v", id, err)
		}
	})
	if !f.WaitFor(novatest.ActionTimeout, func() bool {
		s, err := f.c.client.Server(ctx, id)
		return err == nil && s.Status == nova.StatusActive && s.TaskState == "" && s.Host == host
	}) {
		t.Fatalf("server %s never ACTIVE on %s", id, host)
	}
	return id
}

func TestFunctionalContract(t *testing.T) {
	novatest.RunContract(t, func(t *testing.T) novatest.Env {
		c := functionalCloud(t)
		return novatest.Env{Client: c.client, Fixture: &fixture{t: t, c: c}}
	})
}

// WaitMigration follows a real migration to its end.
func TestFunctionalWaitMigration(t *testing.T) {
	c := functionalCloud(t)
	f := &fixture{t: t, c: c}
	ctx := context.Background()
	src, dst := c.hosts[0], c.hosts[1]
	id := f.activeServer(t, "dvms-func-wait", src)
	since := time.Now().Add(-time.Minute) // Nova's clock stamps created_at
	rc, err := c.client.LiveMigrate(nova.WithRequestID(ctx, "req-0f0f0f0f-aaaa-4bbb-8ccc-dddddddddddd"), id, dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("receipt %+v", rc)
	wctx, cancel := context.WithTimeout(ctx, novatest.ActionTimeout)
	defer cancel()
	m, err := nova.WaitMigration(wctx, c.client, id, since, time.Second)
	if err != nil || !m.Succeeded() || m.Dest != dst {
		t.Fatalf("WaitMigration = %+v, %v", m, err)
	}
	t.Logf("migration %s %s -> %s took %s", m.ID, m.Source, m.Dest, m.UpdatedAt.Sub(m.CreatedAt))
}

// The diagnostics demand source reads a real server's diagnostics (the
// fake virt driver reports 15 % of one vCPU and 0 MB used).
func TestFunctionalDiagnosticsDemand(t *testing.T) {
	c := functionalCloud(t)
	f := &fixture{t: t, c: c}
	ctx := context.Background()
	host := c.hosts[0]
	id := f.activeServer(t, "dvms-func-diag", host)
	src, err := diagnostics.New(diagnostics.DefaultConfig(), c.client)
	if err != nil {
		t.Fatal(err)
	}
	d, err := src.Demand(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := d[id]
	if !ok || got.CPU < 0 || got.CPU > 1 || got.RAMMB < 0 {
		t.Fatalf("demand of %s on %s: %+v (in map: %v), all: %v", id, host, got, ok, d)
	}
	t.Logf("demand of %s: %.2f cores, %.0f MB", id, got.CPU, got.RAMMB)
}
