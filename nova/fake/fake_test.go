package fake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mod   func(*fake.Config)
		wants []string // substrings of the error, none for valid
	}{
		{"default", func(*fake.Config) {}, nil},
		{"bandwidth", func(c *fake.Config) { c.BandwidthMBps = 0 }, []string{"BandwidthMBps"}},
		{"overhead", func(c *fake.Config) { c.MigrationOverhead = -time.Second }, []string{"MigrationOverhead"}},
		{"fault rate", func(c *fake.Config) { c.FaultRate = 1.5 }, []string{"FaultRate"}},
		{"api", func(c *fake.Config) { c.APIRate, c.APILatency, c.GroupCacheTTL = -1, -time.Millisecond, -time.Second },
			[]string{"APIRate", "APILatency", "GroupCacheTTL"}},
		{"every problem", func(c *fake.Config) { *c = fake.Config{FaultRate: -1} },
			[]string{"BandwidthMBps", "FaultRate", "OverloadCPU", "OverloadRAM"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fake.DefaultConfig()
			tc.mod(&cfg)
			err := cfg.Validate()
			if len(tc.wants) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
	// New repairs an invalid config field by field.
	if got := fake.New(fake.Config{}, fake.NewManualClock(epoch)).Config(); got.Validate() != nil || got.BandwidthMBps != 1000 {
		t.Errorf("New(zero config).Config() = %+v", got)
	}
}

func TestClocks(t *testing.T) {
	m := fake.NewManualClock(epoch)
	m.Advance(time.Second)
	m.Advance(-time.Hour) // ignored: never backwards
	if got := m.Now(); !got.Equal(epoch.Add(time.Second)) {
		t.Errorf("manual clock at %v", got)
	}
	s := fake.NewScaledClock(epoch, 1000)
	time.Sleep(5 * time.Millisecond)
	if el := s.Now().Sub(epoch); el < 5*time.Second || el > time.Hour {
		t.Errorf("scaled clock advanced %v after 5 ms at x1000", el)
	}
	if w := s.Wall(10 * time.Second); w != 10*time.Millisecond {
		t.Errorf("Wall(10s) = %v at x1000", w)
	}
}

func TestLiveMigrateRefusedByAPI(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, c *fake.Cloud)
		server string
		dest   string
		want   error
	}{
		{"unknown server", nil, "nope", "compute-2", nova.ErrNotFound},
		{"unknown destination", nil, "s1", "compute-9", nova.ErrBadRequest},
		{"destination is the source", nil, "s1", "compute-1", nova.ErrBadRequest},
		{"task state", func(t *testing.T, c *fake.Cloud) {
			if _, err := c.LiveMigrate(context.Background(), "s1", "compute-3"); err != nil {
				t.Fatal(err)
			}
		}, "s1", "compute-2", nova.ErrConflict},
		{"not ACTIVE", func(t *testing.T, c *fake.Cloud) {
			if _, err := c.Shelve(context.Background(), "s1"); err != nil {
				t.Fatal(err)
			}
		}, "s1", "compute-2", nova.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newCloud(t)
			mustAdd(t, c, server("s1", "compute-1", 1, 1024))
			if tc.setup != nil {
				tc.setup(t, c)
			}
			before := c.Stats().Started
			_, err := c.LiveMigrate(context.Background(), tc.server, tc.dest)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if c.Stats().Started != before {
				t.Error("a refused request started a migration")
			}
		})
	}
}

func TestMigrationPhasesAndAllocations(t *testing.T) {
	c, clock := newCloud(t)
	ctx := context.Background()
	mustAdd(t, c, server("s1", "compute-1", 2, 4096))
	if _, err := c.LiveMigrate(ctx, "s1", "compute-2"); err != nil {
		t.Fatal(err)
	}
	want := time.Second + 4096*time.Millisecond // overhead + 4096 MB at 1000 MB/s
	var seen []string
	for el := time.Duration(0); el <= want+time.Second; el += 20 * time.Millisecond {
		ms, err := c.Migrations(ctx, "s1")
		if err != nil || len(ms) != 1 {
			t.Fatalf("Migrations = %v, %v", ms, err)
		}
		m := ms[0]
		if len(seen) == 0 || seen[len(seen)-1] != m.Status {
			seen = append(seen, m.Status)
		}
		s, _ := c.Server(ctx, "s1")
		h1, _ := c.Host(ctx, "compute-1")
		h2, _ := c.Host(ctx, "compute-2")
		if !m.Terminal() {
			if s.Status != nova.StatusMigrating || s.TaskState != "migrating" || s.Host != "compute-1" {
				t.Fatalf("at %v while moving: %+v", el, s)
			}
			if h1.VCPUsUsed != 2 || h2.VCPUsUsed != 2 || h1.RAMMBUsed != 4096 || h2.RAMMBUsed != 4096 {
				t.Fatalf("at %v allocations %d/%d and %d/%d, want 2/4096 on both", el, h1.VCPUsUsed, h1.RAMMBUsed, h2.VCPUsUsed, h2.RAMMBUsed)
			}
		} else {
			if el < want {
				t.Fatalf("ended after %v, want %v", el, want)
			}
			if s.Status != nova.StatusActive || s.TaskState != "" || s.Host != "compute-2" || h1.VCPUsUsed != 0 || h2.VCPUsUsed != 2 {
				t.Fatalf("after the move: %+v, allocations %d and %d", s, h1.VCPUsUsed, h2.VCPUsUsed)
			}
			if !m.UpdatedAt.Equal(epoch.Add(want)) {
				t.Errorf("UpdatedAt %v, want %v", m.UpdatedAt, epoch.Add(want))
			}
		}
		clock.Advance(20 * time.Millisecond)
	}
	order := []string{nova.MigrationAccepted, nova.MigrationQueued, nova.MigrationPreparing,
		nova.MigrationRunning, nova.MigrationPostMigrating, nova.MigrationCompleted}
	if strings.Join(seen, ",") != strings.Join(order, ",") {
		t.Errorf("statuses %v, want %v", seen, order)
	}
	if st := c.Stats(); st.Started != 1 || st.Completed != 1 || st.Failed != 0 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
	if ss := c.ServersOn("compute-2"); len(ss) != 1 || ss[0].ID != "s1" {
		t.Errorf("ServersOn(compute-2) = %v", ss)
	}
}

func TestMigrationEndsInErrorAsNoValidHost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, c *fake.Cloud)
		dest  string
		why   string
	}{
		{"destination disabled", func(t *testing.T, c *fake.Cloud) {
			if err := c.SetServiceStatus(context.Background(), "compute-2", true, "maintenance"); err != nil {
				t.Fatal(err)
			}
		}, "compute-2", "disabled"},
		{"destination down", func(t *testing.T, c *fake.Cloud) {
			if err := c.SetServiceForcedDown("compute-2", true); err != nil {
				t.Fatal(err)
			}
		}, "compute-2", "down"},
		{"source down", func(t *testing.T, c *fake.Cloud) {
			if err := c.SetServiceForcedDown("compute-1", true); err != nil {
				t.Fatal(err)
			}
		}, "compute-2", "source"},
		{"destination full", func(t *testing.T, c *fake.Cloud) {
			mustAdd(t, c, server("big", "compute-2", 7, 1024))
		}, "compute-2", "no room"},
		{"anti-affinity", func(t *testing.T, c *fake.Cloud) {
			c.AddGroup(nova.ServerGroup{ID: "g", Name: "web", Policy: nova.PolicyAntiAffinity})
			o := server("other", "compute-2", 1, 512)
			o.Group = &nova.ServerGroup{ID: "g"}
			mustAdd(t, c, o)
		}, "compute-2", "anti-affinity"},
		{"affinity", func(t *testing.T, c *fake.Cloud) {
			c.AddGroup(nova.ServerGroup{ID: "g", Name: "db", Policy: nova.PolicyAffinity})
			o := server("other", "compute-1", 1, 512)
			o.Group = &nova.ServerGroup{ID: "g"}
			mustAdd(t, c, o)
		}, "compute-2", "affinity"},
		{"no host for the scheduler", func(t *testing.T, c *fake.Cloud) {
			ctx := context.Background()
			_ = c.SetServiceStatus(ctx, "compute-2", true, "x")
			_ = c.SetServiceStatus(ctx, "compute-3", true, "x")
		}, "", "no usable host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, clock := newCloud(t)
			ctx := context.Background()
			s := server("s1", "compute-1", 2, 2048)
			if strings.Contains(tc.name, "affinity") {
				c.AddGroup(nova.ServerGroup{ID: "g", Policy: nova.PolicyAffinity})
				s.Group = &nova.ServerGroup{ID: "g"}
			}
			tc.setup(t, c)
			mustAdd(t, c, s)
			before, _ := c.Host(ctx, "compute-2")
			if _, err := c.LiveMigrate(ctx, "s1", tc.dest); err != nil {
				t.Fatalf("LiveMigrate: %v, want accepted", err)
			}
			clock.Advance(10 * time.Second)
			ms, _ := c.Migrations(ctx, "s1")
			if len(ms) != 1 || ms[0].Status != nova.MigrationError {
				t.Fatalf("migrations %+v, want one in error", ms)
			}
			got, _ := c.Server(ctx, "s1")
			if got.Host != "compute-1" || got.Status != nova.StatusActive || got.TaskState != "" {
				t.Fatalf("server %+v, want ACTIVE on compute-1", got)
			}
			after, _ := c.Host(ctx, "compute-2")
			if after.VCPUsUsed != before.VCPUsUsed {
				t.Errorf("destination allocation %d -> %d", before.VCPUsUsed, after.VCPUsUsed)
			}
			as := c.Actions("s1")
			if len(as) != 1 || !strings.Contains(as[0].Message, "No valid host") || !strings.Contains(as[0].Message, tc.why) {
				t.Errorf("actions %+v, want a NoValidHost message mentioning %q", as, tc.why)
			}
			if st := c.Stats(); st.Failed != 1 || st.Refused != 1 || st.Completed != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestLiveMigrateWithoutDestinationPicksLeastLoaded(t *testing.T) {
	c, clock := newCloud(t)
	ctx := context.Background()
	mustAdd(t, c, server("s1", "compute-1", 1, 512), server("load", "compute-2", 4, 512))
	if _, err := c.LiveMigrate(ctx, "s1", ""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if s, _ := c.Server(ctx, "s1"); s.Host != "compute-3" {
		t.Errorf("scheduler chose %s, want compute-3 (least loaded)", s.Host)
	}
}

func TestShelveOffloadUnshelve(t *testing.T) {
	ctx := context.Background()
	offload := func(t *testing.T, c *fake.Cloud) {
		t.Helper()
		if _, err := c.Shelve(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ShelveOffload(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T, c *fake.Cloud)
		host     string
		wantErr  error
		wantHost string // "" = stays offloaded
		wantMsg  string
	}{
		{"named host", offload, "compute-3", nil, "compute-3", ""},
		{"scheduler picks least loaded", func(t *testing.T, c *fake.Cloud) {
			offload(t, c)
			mustAdd(t, c, server("a", "compute-1", 4, 512), server("b", "compute-3", 2, 512))
		}, "", nil, "compute-2", ""},
		{"unknown host", offload, "compute-9", nova.ErrBadRequest, "", ""},
		{"disabled host stays offloaded", func(t *testing.T, c *fake.Cloud) {
			offload(t, c)
			_ = c.SetServiceStatus(ctx, "compute-2", true, "x")
		}, "compute-2", nil, "", "disabled"},
		{"full host stays offloaded", func(t *testing.T, c *fake.Cloud) {
			offload(t, c)
			mustAdd(t, c, server("big", "compute-2", 8, 512))
		}, "compute-2", nil, "", "no room"},
		{"shelved, not offloaded, back in place", func(t *testing.T, c *fake.Cloud) {
			if _, err := c.Shelve(ctx, "s1"); err != nil {
				t.Fatal(err)
			}
		}, "", nil, "compute-1", ""},
		{"shelved, not offloaded, to a host", func(t *testing.T, c *fake.Cloud) {
			_, _ = c.Shelve(ctx, "s1")
		}, "compute-2", nova.ErrConflict, "compute-1", ""},
		{"active", func(*testing.T, *fake.Cloud) {}, "", nova.ErrConflict, "compute-1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newCloud(t)
			mustAdd(t, c, server("s1", "compute-1", 2, 2048))
			tc.setup(t, c)
			_, err := c.Unshelve(ctx, "s1", tc.host)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("Unshelve: err = %v, want %v", err, tc.wantErr)
			}
			s, _ := c.Server(ctx, "s1")
			if s.Host != tc.wantHost {
				t.Fatalf("server on %q, want %q (%+v)", s.Host, tc.wantHost, s)
			}
			if tc.wantHost == "" {
				if s.Status != nova.StatusShelvedOffloaded {
					t.Errorf("status %s, want SHELVED_OFFLOADED", s.Status)
				}
				h1, _ := c.Host(ctx, "compute-1")
				if h1.VCPUsUsed != 0 {
					t.Errorf("offloaded server still allocated on compute-1 (%d VCPU)", h1.VCPUsUsed)
				}
			} else if tc.wantErr == nil && s.Status != nova.StatusActive {
				t.Errorf("status %s, want ACTIVE", s.Status)
			}
			if tc.wantMsg != "" {
				as := c.Actions("s1")
				if last := as[len(as)-1]; last.Name != "unshelve" || !strings.Contains(last.Message, tc.wantMsg) {
					t.Errorf("last action %+v, want unshelve failing with %q", last, tc.wantMsg)
				}
			}
		})
	}
}

func TestShelveRefusals(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	mustAdd(t, c, server("s1", "compute-1", 1, 512))
	if _, err := c.ShelveOffload(ctx, "s1"); !errors.Is(err, nova.ErrConflict) {
		t.Errorf("offload of an ACTIVE server: %v, want conflict", err)
	}
	if _, err := c.Shelve(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Shelve(ctx, "s1"); !errors.Is(err, nova.ErrConflict) {
		t.Errorf("second shelve: %v, want conflict", err)
	}
	if h, _ := c.Host(ctx, "compute-1"); h.VCPUsUsed != 1 {
		t.Errorf("a SHELVED server keeps its allocation, got %d VCPU", h.VCPUsUsed)
	}
	if _, err := c.ShelveOffload(ctx, "nope"); !errors.Is(err, nova.ErrNotFound) {
		t.Errorf("unknown server: %v", err)
	}
}

func TestRequestIDsAndActions(t *testing.T) {
	run := func() ([]nova.Receipt, []fake.Action) {
		c, _ := newCloud(t, func(cfg *fake.Config) { cfg.Seed = 42 })
		mustAdd(t, c, server("s1", "compute-1", 1, 512))
		ctx := nova.WithRequestID(context.Background(), "req-00000000-0000-4000-8000-00000000000a")
		var rcs []nova.Receipt
		for _, f := range []func() (nova.Receipt, error){
			func() (nova.Receipt, error) { return c.Shelve(ctx, "s1") },
			func() (nova.Receipt, error) { return c.ShelveOffload(context.Background(), "s1") },
			func() (nova.Receipt, error) { return c.Unshelve(ctx, "s1", "compute-2") },
		} {
			rc, err := f()
			if err != nil {
				t.Fatal(err)
			}
			rcs = append(rcs, rc)
		}
		return rcs, c.Actions("s1")
	}
	rcs, as := run()
	rcs2, _ := run()
	if rcs[0] != rcs2[0] || rcs[2] != rcs2[2] {
		t.Errorf("local ids differ under one seed: %v vs %v", rcs, rcs2)
	}
	names := []string{"shelve", "shelveOffload", "unshelve"}
	globals := []string{"req-00000000-0000-4000-8000-00000000000a", "", "req-00000000-0000-4000-8000-00000000000a"}
	if len(as) != 3 {
		t.Fatalf("actions %+v", as)
	}
	for i, a := range as {
		if a.Name != names[i] || a.GlobalRequestID != globals[i] || a.LocalRequestID != rcs[i].LocalRequestID ||
			rcs[i].GlobalRequestID != globals[i] || !strings.HasPrefix(a.LocalRequestID, "req-") || len(a.LocalRequestID) != 40 || !a.Start.Equal(epoch) {
			t.Errorf("action %d = %+v, receipt %+v", i, a, rcs[i])
		}
	}
}

func TestDeleteServer(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	mustAdd(t, c, server("s1", "compute-1", 2, 512), server("s2", "compute-1", 1, 512))
	if _, err := c.LiveMigrate(ctx, "s2", "compute-2"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteServer("s2"); !errors.Is(err, nova.ErrConflict) {
		t.Errorf("delete while migrating: %v", err)
	}
	if err := c.DeleteServer("s1"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteServer("s1"); !errors.Is(err, nova.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if h, _ := c.Host(ctx, "compute-1"); h.VCPUsUsed != 1 {
		t.Errorf("compute-1 holds %d VCPU, want 1 (s2 moving out)", h.VCPUsUsed)
	}
}

func TestAddServerRefusals(t *testing.T) {
	c, _ := newCloud(t)
	mustAdd(t, c, server("s1", "compute-1", 6, 512))
	for _, tc := range []struct {
		name string
		s    nova.Server
		want error
	}{
		{"unknown host", server("x", "compute-9", 1, 512), nova.ErrNotFound},
		{"duplicate", server("s1", "compute-2", 1, 512), nova.ErrConflict},
		{"no id", server("", "compute-2", 1, 512), nova.ErrBadRequest},
		{"does not fit", server("x", "compute-1", 3, 512), nova.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.AddServer(tc.s); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	off := server("off", "", 1, 512)
	off.Status = nova.StatusShelvedOffloaded
	mustAdd(t, c, off)
	if c.ServersLost() != 0 {
		t.Error("offloaded server not counted")
	}
}

func TestDemandAndSnapshot(t *testing.T) {
	c, _ := newCloud(t)
	ctx := context.Background()
	mustAdd(t, c, server("s1", "compute-1", 2, 2048), server("s2", "compute-1", 2, 2048))
	if err := c.SetDemand("s1", nova.Demand{CPU: 5, RAMMB: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetDemand("nope", nova.Demand{}); !errors.Is(err, nova.ErrNotFound) {
		t.Errorf("SetDemand(unknown) = %v", err)
	}
	d, err := c.Demand(ctx, "compute-1")
	if err != nil || len(d) != 2 || d["s1"].CPU != 5 || d["s2"].RAMMB != 2048 {
		t.Fatalf("Demand = %v, %v", d, err)
	}
	if _, err := c.Demand(ctx, "compute-9"); !errors.Is(err, nova.ErrNotFound) {
		t.Errorf("Demand(unknown) = %v", err)
	}
	if hd, ok := c.HostDemand("compute-1"); !ok || hd.CPU != 5 || hd.RAMMB != 3048 {
		t.Errorf("HostDemand = %v, %v", hd, ok)
	}
	if c.Overloaded("compute-1") {
		t.Error("5 cores of 8 reported overloaded")
	}
	_ = c.SetDemand("s2", nova.Demand{CPU: 4})
	if !c.Overloaded("compute-1") {
		t.Error("9 cores of 8 not reported overloaded")
	}
	snap := c.Snapshot()
	if len(snap) != 3 || snap[0].Host.Name != "compute-1" || snap[0].Servers != 2 || snap[0].Demand.CPU != 9 || snap[0].Host.VCPUsUsed != 4 {
		t.Errorf("Snapshot()[0] = %+v", snap[0])
	}
}
