package cgroup_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova/demand/cgroup"
)

const (
	uuid1 = "11111111-aaaa-4bbb-8ccc-000000000001"
	uuid2 = "22222222-aaaa-4bbb-8ccc-000000000002"
	uuid3 = "33333333-aaaa-4bbb-8ccc-000000000003"
)

// tree is a temporary cgroup v2 + libvirt layout.
type tree struct {
	t              *testing.T
	root, run, etc string
}

func newTree(t *testing.T) *tree {
	d := t.TempDir()
	tr := &tree{t: t, root: filepath.Join(d, "cgroup"), run: filepath.Join(d, "run"), etc: filepath.Join(d, "etc")}
	for _, p := range []string{filepath.Join(tr.root, "machine.slice"), tr.run, tr.etc} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func (tr *tree) write(path, body string) {
	tr.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

// scope writes the accounting of machine-qemu\x2d<n>\x2d<name>.scope.
func (tr *tree) scope(n int, name string, usageUsec, ramBytes uint64) string {
	dir := fmt.Sprintf(`machine-qemu\x2d%d\x2d%s.scope`, n, strings.ReplaceAll(name, "-", `\x2d`))
	p := filepath.Join(tr.root, "machine.slice", dir)
	tr.write(filepath.Join(p, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 1\nsystem_usec 2\n", usageUsec))
	tr.write(filepath.Join(p, "memory.current"), fmt.Sprintf("%d\n", ramBytes))
	return p
}

func (tr *tree) config() cgroup.Config {
	cfg := cgroup.DefaultConfig()
	cfg.Root, cfg.DomainDirs = tr.root, []string{tr.run, tr.etc}
	return cfg
}

func TestDemand(t *testing.T) {
	tr := newTree(t)
	// Live domain 1 (found by id), persistent-only domain 2 (by name),
	// domain 3 mapped by configuration, and a scope that is no server.
	tr.write(filepath.Join(tr.run, "instance-00000001.xml"),
		`<domstatus state='running'><domain type='kvm' id='1'><name>instance-00000001</name><uuid>`+uuid1+`</uuid></domain></domstatus>`)
	tr.write(filepath.Join(tr.etc, "instance-00000002.xml"),
		`<domain type='kvm'><name>instance-00000002</name><uuid>`+uuid2+`</uuid><metadata><nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1"><nova:name>web</nova:name></nova:instance></metadata></domain>`)
	tr.write(filepath.Join(tr.etc, "autostart", "x.xml"), "not xml")
	tr.scope(1, "instance-00000001", 1_000_000, 512<<20)
	tr.scope(7, "instance-00000002", 5_000_000, 1024<<20)
	tr.scope(9, "other", 0, 1<<20)
	tr.scope(4, "instance-00000003", 0, 256<<20)

	cfg := tr.config()
	cfg.Mapping = map[string]string{"instance-00000003": uuid3}
	now := time.Unix(1000, 0)
	src, err := cgroup.NewWithClock(cfg, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := src.Demand(ctx, "compute-1")
	if err != nil || len(d) != 0 {
		t.Fatalf("first call (baselines) = %v, %v; want an empty map", d, err)
	}

	now = now.Add(2 * time.Second)
	tr.scope(1, "instance-00000001", 1_000_000+3_000_000, 600<<20) // 1.5 cores
	tr.scope(7, "instance-00000002", 5_000_000+500_000, 1024<<20)  // 0.25 cores
	tr.scope(4, "instance-00000003", 2_000_000, 256<<20)           // 1 core
	d, err = src.Demand(ctx, "compute-1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{uuid1: {1.5, 600}, uuid2: {0.25, 1024}, uuid3: {1, 256}}
	if len(d) != len(want) {
		t.Fatalf("demand %v, want %v", d, want)
	}
	for id, w := range want {
		if got := d[id]; math.Abs(got.CPU-w[0]) > 1e-9 || got.RAMMB != w[1] {
			t.Errorf("%s: %+v, want %v cores %v MB", id, got, w[0], w[1])
		}
	}

	// A second caller a moment later (the executor's re-check while the
	// monitor samples) gets the same rate, and keeps the window whole for
	// the next.
	now = now.Add(time.Millisecond)
	tr.scope(4, "instance-00000003", 2_000_100, 256<<20)
	if d, err = src.Demand(ctx, "compute-1"); err != nil || math.Abs(d[uuid3].CPU-1) > 1e-9 {
		t.Fatalf("a call 1 ms later: %v, %v; want the last rate (1 core)", d, err)
	}
	now = now.Add(time.Second - time.Millisecond)
	tr.scope(4, "instance-00000003", 2_500_000, 256<<20)
	if d, err = src.Demand(ctx, "compute-1"); err != nil || math.Abs(d[uuid3].CPU-0.5) > 1e-9 {
		t.Fatalf("a second after the last rate: %v, %v; want 0.5 core", d, err)
	}

	// A counter that went back (domain restarted) rebaselines; a scope
	// that disappears is dropped.
	now = now.Add(time.Second)
	tr.scope(1, "instance-00000001", 10, 600<<20)
	if err := os.RemoveAll(filepath.Join(tr.root, "machine.slice", `machine-qemu\x2d7\x2dinstance\x2d00000002.scope`)); err != nil {
		t.Fatal(err)
	}
	d, err = src.Demand(ctx, "compute-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d[uuid1]; ok || len(d) != 1 {
		t.Errorf("after reset/removal: %v, want only %s", d, uuid3)
	}
}

func TestFailures(t *testing.T) {
	tr := newTree(t)
	tr.write(filepath.Join(tr.run, "a.xml"), `<domstatus><domain id='1'><name>a</name><uuid>`+uuid1+`</uuid></domain></domstatus>`)
	p := tr.scope(1, "a", 1, 1)
	tr.write(filepath.Join(p, "memory.current"), "lots\n")
	src, _ := cgroup.New(tr.config())
	if d, err := src.Demand(context.Background(), "h"); err == nil || d != nil {
		t.Errorf("bad memory.current: %v, %v; want an error", d, err)
	}
	tr.write(filepath.Join(p, "memory.current"), "1\n")
	tr.write(filepath.Join(p, "cpu.stat"), "user_usec 1\n")
	if _, err := src.Demand(context.Background(), "h"); err == nil || !strings.Contains(err.Error(), "usage_usec") {
		t.Errorf("cpu.stat without usage_usec: %v", err)
	}
	cfg := tr.config()
	cfg.Root = filepath.Join(tr.root, "nope")
	src, _ = cgroup.New(cfg)
	if _, err := src.Demand(context.Background(), "h"); err == nil {
		t.Error("missing cgroup root: no error")
	}
	cfg = tr.config()
	cfg.Host = "compute-1"
	src, _ = cgroup.New(cfg)
	if _, err := src.Demand(context.Background(), "compute-2"); err == nil {
		t.Error("asked for another host: no error")
	}
}

func TestValidate(t *testing.T) {
	err := cgroup.Config{Slice: "/abs", Mapping: map[string]string{"x": ""}}.Validate()
	for _, want := range []string{"root is empty", "slice", "empty side"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
	if err := cgroup.DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}
