package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
	"github.com/dvms-project/dvms/scheduler/status"
)

// countedSource counts the samples of a cgroup source (its other
// methods are the source's own).
type countedSource struct {
	*cgroup.Source
	calls atomic.Int64
}

func (c *countedSource) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	c.calls.Add(1)
	return c.Source.Demand(ctx, host)
}

// An agent whose cgroup source finds none of the servers Nova lists on
// its host says so: one log line (not one a second), dvms_demand_blind,
// and `dvms status`; it measures nothing rather than zero. Once the
// guests' cgroups are there it measures them and says so.
func TestAgentSaysWhenItIsBlind(t *testing.T) {
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	cloud := opsCloud(t, 1) // compute-1: 5 servers
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpu memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cc := cgroup.DefaultConfig()
	cc.Root, cc.Host, cc.DomainDirs = root, "compute-1", nil
	cs, err := cgroup.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	src := &countedSource{Source: cs}

	cfg, err := daemon.Load(daemon.Source{Env: fakeEnv("OS_CLOUD=fake")}, "compute-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runtime.Region, cfg.NATSURL, cfg.Arbiter, cfg.MetricsListen = opsRegion, ns.ClientURL(), "local", "127.0.0.1:0"
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := daemon.Start(ctx, cfg, false, &daemon.NovaDeps{Client: cloud, Meter: cloud.Meter(), Demand: src}, zerolog.New(&logs).Level(zerolog.InfoLevel), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := p.WaitClosed(); err != nil {
			t.Error(err)
		}
	}()
	blindLines := func() int { return strings.Count(logs.String(), "demand/cgroup: blind") }

	waitUntil(t, 20*time.Second, "dvms_demand_blind 1", func() bool {
		m := scrape(t, p)
		return sum(m, "dvms_demand_blind") == 1 && sum(m, "dvms_demand_servers_listed") == 5 && sum(m, "dvms_demand_servers_measured") == 0
	})
	seen := src.calls.Load()
	waitUntil(t, 20*time.Second, "three more samples", func() bool { return src.calls.Load() >= seen+3 })
	if n := blindLines(); n != 1 {
		t.Errorf("%d log lines say the source is blind, want 1 (on change, not every sample):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "5 of the 5 servers nova lists running on this host not found") {
		t.Errorf("the log does not say what is missing:\n%s", logs.String())
	}
	if h, ok := p.Runner().LastSample(); ok {
		t.Errorf("a blind agent sampled its host (%+v): it measures nothing, not zero", h)
	}
	var out lockedBuffer
	if rc := runContext(ctx, []string{"dvms", "status", "--nats-url", ns.ClientURL(), "--region", opsRegion, "--timeout", "10s"}, &out, &out); rc != 0 ||
		!strings.Contains(out.String(), "cgroup BLIND 0/5") {
		t.Errorf("dvms status (exit %d) does not say compute-1 is blind:\n%s", rc, out.String())
	}

	// The guests appear (libvirtd was late, the operator fixed the
	// mount): measured, and said once.
	for i, s := range cloud.ServersOn("compute-1") {
		dir := filepath.Join(root, "machine.slice", fmt.Sprintf(`machine-qemu\x2d%d\x2d%s.scope`, i+1, strings.ReplaceAll(s.InstanceName, "-", `\x2d`)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"cpu.stat": "usage_usec 5\n", "memory.current": fmt.Sprintf("%d\n", 256<<20)} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitUntil(t, 20*time.Second, "dvms_demand_blind 0, 5 measured", func() bool {
		m := scrape(t, p)
		return sum(m, "dvms_demand_blind") == 0 && sum(m, "dvms_demand_servers_measured") == 5
	})
	waitUntil(t, 20*time.Second, "a sample", func() bool { _, ok := p.Runner().LastSample(); return ok })
	if !strings.Contains(logs.String(), "demand source measures again") || blindLines() != 1 {
		t.Errorf("recovery not logged once:\n%s", logs.String())
	}
	if r := p.Report(status.Request{}); r.Demand == nil || r.Demand.Blind || r.Demand.Measured != 5 || r.Demand.Layout != "v2 machine.slice" {
		t.Errorf("status report demand %+v, want 5 of 5 measured in v2 machine.slice", r.Demand)
	}
}
