// Package novatest is the contract every nova.Client must honour: one
// behaviour suite, run against nova/fake in the unit tier and against a
// real Nova (Debian's Zed, fake virt driver) in the functional tier, so
// the fake cannot drift from Nova.
package novatest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// Fixture sets up the state the suite needs; each implementation knows
// how (the fake directly, a real cloud through its API).
type Fixture interface {
	// Hosts are at least two enabled compute hosts the suite may use.
	Hosts() []string
	// CreateServer boots an ACTIVE server of vcpus/ramMB on host.
	CreateServer(ctx context.Context, name string, vcpus, ramMB int, host string) (string, error)
	DeleteServer(ctx context.Context, id string) error
	// WaitFor polls cond until it holds or timeout passes (advancing a
	// simulated clock, or sleeping on a real cloud).
	WaitFor(timeout time.Duration, cond func() bool) bool
}

// Env is one client under test with its fixture.
type Env struct {
	Client  nova.Client
	Fixture Fixture
}

// Run runs the contract. newEnv is called once per subtest.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	ctx := context.Background()
	t.Run("HostsHaveCapacityAndService", func(t *testing.T) {
		e := newEnv(t)
		hs, err := e.Client.Hosts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range e.Fixture.Hosts()[:2] {
			i := slices.IndexFunc(hs, func(h nova.Host) bool { return h.Name == name })
			if i < 0 {
				t.Fatalf("host %s missing from %d hosts", name, len(hs))
			}
			h := hs[i]
			if h.VCPUs <= 0 || h.RAMMB <= 0 || h.AllocatableVCPUs() <= 0 {
				t.Errorf("host %s without capacity: %+v", name, h)
			}
			if h.Service.ID == "" || h.Service.Status != nova.ServiceEnabled || h.Service.State != nova.ServiceUp {
				t.Errorf("host %s service: %+v", name, h.Service)
			}
			one, err := e.Client.Host(ctx, name)
			if err != nil || one.Name != name {
				t.Errorf("Host(%s) = %+v, %v", name, one, err)
			}
		}
		if _, err := e.Client.Host(ctx, "no-such-host"); !errors.Is(err, nova.ErrNotFound) {
			t.Errorf("unknown host: err = %v, want ErrNotFound", err)
		}
	})

	t.Run("ServersOnHostAndUsage", func(t *testing.T) {
		e := newEnv(t)
		h := e.Fixture.Hosts()[0]
		before, err := e.Client.Host(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		id := mustCreate(t, e, "contract-list", h)
		ss, err := e.Client.Servers(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ss, func(s nova.Server) bool { return s.ID == id })
		if i < 0 {
			t.Fatalf("server %s not listed on %s", id, h)
		}
		s := ss[i]
		if s.Host != h || s.Status != nova.StatusActive || s.VCPUs != 1 || s.RAMMB != 512 {
			t.Errorf("server %+v", s)
		}
		after, err := e.Client.Host(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if after.VCPUsUsed != before.VCPUsUsed+1 || after.RAMMBUsed != before.RAMMBUsed+512 {
			t.Errorf("placement usage %d/%d -> %d/%d, want +1 VCPU +512 MB", before.VCPUsUsed, before.RAMMBUsed, after.VCPUsUsed, after.RAMMBUsed)
		}
		if _, err := e.Client.Server(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, nova.ErrNotFound) {
			t.Errorf("unknown server: err = %v, want ErrNotFound", err)
		}
	})

	t.Run("LiveMigrateCompletes", func(t *testing.T) {
		e := newEnv(t)
		src, dst := e.Fixture.Hosts()[0], e.Fixture.Hosts()[1]
		id := mustCreate(t, e, "contract-migrate", src)
		rctx := nova.WithRequestID(ctx, "req-11111111-2222-4333-8444-555555555555")
		rc, err := e.Client.LiveMigrate(rctx, id, dst)
		if err != nil {
			t.Fatal(err)
		}
		if rc.GlobalRequestID != "req-11111111-2222-4333-8444-555555555555" || !strings.HasPrefix(rc.LocalRequestID, "req-") {
			t.Errorf("receipt %+v", rc)
		}
		// A second action while it moves is a conflict.
		if _, err := e.Client.LiveMigrate(ctx, id, src); err != nil && !errors.Is(err, nova.ErrConflict) {
			t.Errorf("second migrate: err = %v, want ErrConflict (or accepted if the first already ended)", err)
		}
		m := waitMigration(t, e, id, 3*time.Minute)
		if m.Status != nova.MigrationCompleted || m.Source != src || m.Dest != dst {
			t.Fatalf("migration %+v", m)
		}
		s, err := e.Client.Server(ctx, id)
		if err != nil || s.Host != dst || s.Status != nova.StatusActive {
			t.Fatalf("after migration: %+v, %v", s, err)
		}
	})

	t.Run("LiveMigrateToDisabledHostEndsInError", func(t *testing.T) {
		e := newEnv(t)
		src, dst := e.Fixture.Hosts()[0], e.Fixture.Hosts()[1]
		id := mustCreate(t, e, "contract-disabled", src)
		if err := e.Client.SetServiceStatus(ctx, dst, true, "dvms contract test"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Client.SetServiceStatus(ctx, dst, false, "") })
		h, err := e.Client.Host(ctx, dst)
		if err != nil || !h.Service.Disabled() || h.Service.DisabledReason != "dvms contract test" {
			t.Fatalf("disabled service: %+v, %v", h.Service, err)
		}
		_, err = e.Client.LiveMigrate(ctx, id, dst)
		if err == nil {
			m := waitMigration(t, e, id, 3*time.Minute)
			if m.Status == nova.MigrationCompleted {
				t.Fatalf("migrated to a disabled host: %+v", m)
			}
		} else if !errors.Is(err, nova.ErrBadRequest) && !errors.Is(err, nova.ErrConflict) {
			t.Fatalf("err = %v", err)
		}
		ok := e.Fixture.WaitFor(time.Minute, func() bool {
			s, err := e.Client.Server(ctx, id)
			return err == nil && s.Host == src && s.Status == nova.StatusActive && s.TaskState == ""
		})
		if !ok {
			t.Fatal("server did not stay ACTIVE on its source")
		}
	})

	t.Run("ShelveOffloadAndUnshelveToHost", func(t *testing.T) {
		e := newEnv(t)
		src, dst := e.Fixture.Hosts()[0], e.Fixture.Hosts()[1]
		id := mustCreate(t, e, "contract-shelve", src)
		if _, err := e.Client.Shelve(ctx, id); err != nil {
			t.Fatal(err)
		}
		ok := e.Fixture.WaitFor(3*time.Minute, func() bool {
			s, err := e.Client.Server(ctx, id)
			if err != nil || s.TaskState != "" {
				return false
			}
			if s.Status == nova.StatusShelved {
				_, _ = e.Client.ShelveOffload(ctx, id)
			}
			return s.Status == nova.StatusShelvedOffloaded
		})
		if !ok {
			t.Fatal("server not SHELVED_OFFLOADED")
		}
		ss, err := e.Client.Servers(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(ss, func(s nova.Server) bool { return s.ID == id }) {
			t.Error("offloaded server still listed on its host")
		}
		if _, err := e.Client.Unshelve(ctx, id, dst); err != nil {
			t.Fatal(err)
		}
		ok = e.Fixture.WaitFor(3*time.Minute, func() bool {
			s, err := e.Client.Server(ctx, id)
			return err == nil && s.Status == nova.StatusActive && s.TaskState == "" && s.Host == dst
		})
		if !ok {
			t.Fatal("server not ACTIVE on the named host after unshelve")
		}
	})

	t.Run("ServiceDisableEnableRoundTrip", func(t *testing.T) {
		e := newEnv(t)
		h := e.Fixture.Hosts()[1]
		if err := e.Client.SetServiceStatus(ctx, h, true, "dvms:maintenance contract"); err != nil {
			t.Fatal(err)
		}
		got, err := e.Client.Host(ctx, h)
		if err != nil || got.Service.Status != nova.ServiceDisabled || got.Service.DisabledReason != "dvms:maintenance contract" {
			t.Fatalf("after disable: %+v, %v", got.Service, err)
		}
		if err := e.Client.SetServiceStatus(ctx, h, false, ""); err != nil {
			t.Fatal(err)
		}
		got, err = e.Client.Host(ctx, h)
		if err != nil || got.Service.Status != nova.ServiceEnabled {
			t.Fatalf("after enable: %+v, %v", got.Service, err)
		}
		if err := e.Client.SetServiceStatus(ctx, "no-such-host", true, "x"); !errors.Is(err, nova.ErrNotFound) {
			t.Errorf("unknown host: err = %v, want ErrNotFound", err)
		}
	})

	t.Run("ActionsOnUnknownServer", func(t *testing.T) {
		e := newEnv(t)
		id := "00000000-0000-0000-0000-000000000000"
		if _, err := e.Client.LiveMigrate(ctx, id, e.Fixture.Hosts()[1]); !errors.Is(err, nova.ErrNotFound) {
			t.Errorf("live-migrate: err = %v, want ErrNotFound", err)
		}
		if _, err := e.Client.Shelve(ctx, id); !errors.Is(err, nova.ErrNotFound) {
			t.Errorf("shelve: err = %v, want ErrNotFound", err)
		}
	})
}

func mustCreate(t *testing.T, e Env, name, host string) string {
	t.Helper()
	ctx := context.Background()
	id, err := e.Fixture.CreateServer(ctx, name, 1, 512, host)
	if err != nil {
		t.Fatalf("create %s on %s: %v", name, host, err)
	}
	t.Cleanup(func() {
		e.Fixture.WaitFor(2*time.Minute, func() bool {
			s, err := e.Client.Server(ctx, id)
			return err != nil || s.TaskState == ""
		})
		if err := e.Fixture.DeleteServer(ctx, id); err != nil {
			t.Logf("cleanup: delete %s: %v", id, err)
		}
	})
	return id
}

func waitMigration(t *testing.T, e Env, id string, timeout time.Duration) nova.Migration {
	t.Helper()
	var last nova.Migration
	ok := e.Fixture.WaitFor(timeout, func() bool {
		ms, err := e.Client.Migrations(context.Background(), id)
		if err != nil || len(ms) == 0 {
			return false
		}
		last = ms[0]
		return last.Terminal()
	})
	if !ok {
		t.Fatalf("migration of %s not ended after %s (last %+v)", id, timeout, last)
	}
	return last
}
