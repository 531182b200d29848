package cgroup_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
)

const (
	uuid1 = "11111111-aaaa-4bbb-8ccc-000000000001"
	uuid2 = "22222222-aaaa-4bbb-8ccc-000000000002"
	uuid3 = "33333333-aaaa-4bbb-8ccc-000000000003"
)

// tree is a temporary cgroup mount (root) and libvirt state (run, etc).
type tree struct {
	t              *testing.T
	root, run, etc string
	layout         layout
}

// layout builds a fleet's cgroup layout: where a guest's directory is
// and which accounting files it has.
type layout struct {
	name string
	// mounts: files that make the hierarchies (cgroup.controllers,
	// cpuacct.usage, memory.usage_in_bytes at their top).
	mounts []string
	// guestDir is a guest's directory in each hierarchy that accounts for it.
	guestDir func(id int, domain string) []string
	// write writes one guest's counters (usage in µs, RAM and inactive
	// file cache in bytes) in dir.
	write func(tr *tree, dir string, usageUsec, ramBytes, cacheBytes uint64)
	want  string // Coverage.Layout
}

// scopeName is systemd's name of libvirt's machine scope.
func scopeName(id int, domain string) string {
	return fmt.Sprintf(`machine-qemu\x2d%d\x2d%s.scope`, id, strings.ReplaceAll(domain, "-", `\x2d`))
}

func cgroupfsName(id int, domain string) string {
	return fmt.Sprintf("qemu-%d-%s.libvirt-qemu", id, domain)
}

// v2 writes cgroup v2 counters; v1cpu and v1mem the v1 ones; each only
// in the hierarchy dir belongs to.
func writeV2(tr *tree, dir string, usageUsec, ramBytes, cacheBytes uint64) {
	tr.write(filepath.Join(dir, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 1\nsystem_usec 2\n", usageUsec))
	tr.write(filepath.Join(dir, "memory.current"), fmt.Sprintf("%d\n", ramBytes))
	tr.write(filepath.Join(dir, "memory.stat"), fmt.Sprintf("anon %d\nfile %d\nactive_file 0\ninactive_file %d\n", ramBytes-cacheBytes, cacheBytes, cacheBytes))
}

func writeByHierarchy(tr *tree, dir string, usageUsec, ramBytes, cacheBytes uint64) {
	rel, _ := filepath.Rel(tr.root, dir)
	switch h := strings.SplitN(rel, string(filepath.Separator), 2)[0]; h {
	case "unified":
		tr.write(filepath.Join(dir, "cpu.stat"), fmt.Sprintf("usage_usec %d\nuser_usec 1\nsystem_usec 2\n", usageUsec))
	case "cpuacct", "cpu,cpuacct":
		tr.write(filepath.Join(dir, "cpuacct.usage"), fmt.Sprintf("%d\n", usageUsec*1000))
	case "memory":
		tr.write(filepath.Join(dir, "memory.usage_in_bytes"), fmt.Sprintf("%d\n", ramBytes))
		tr.write(filepath.Join(dir, "memory.stat"), fmt.Sprintf("cache %d\nrss %d\ninactive_file %d\ntotal_cache %d\ntotal_inactive_file %d\n", cacheBytes, ramBytes-cacheBytes, cacheBytes, cacheBytes, cacheBytes))
	case "cpu", "cpuset", "blkio", "freezer":
		tr.write(filepath.Join(dir, "tasks"), "")
	default:
		tr.t.Fatalf("no hierarchy for %s", dir)
	}
}

var layouts = []layout{
	{
		name:   "v2 systemd",
		mounts: []string{"cgroup.controllers"},
		guestDir: func(id int, d string) []string {
			return []string{filepath.Join("machine.slice", scopeName(id, d))}
		},
		write: writeV2, want: "v2 machine.slice",
	},
	{
		// libvirt ≥ 8: QEMU in a libvirt/ child of the scope; the scope's
		// totals include it.
		name:   "v2 systemd, nested libvirt/",
		mounts: []string{"cgroup.controllers"},
		guestDir: func(id int, d string) []string {
			return []string{filepath.Join("machine.slice", scopeName(id, d))}
		},
		write: func(tr *tree, dir string, u, r, c uint64) {
			writeV2(tr, dir, u, r, c)
			writeV2(tr, filepath.Join(dir, "libvirt"), u-1, r-1, 0)
			writeV2(tr, filepath.Join(dir, "libvirt", "vcpu0"), u/2, 0, 0)
		},
		want: "v2 machine.slice",
	},
	{
		name:   "v2 without systemd (libvirt's cgroupfs)",
		mounts: []string{"cgroup.controllers"},
		guestDir: func(id int, d string) []string {
			return []string{filepath.Join("machine", cgroupfsName(id, d))}
		},
		write: writeV2, want: "v2 machine",
	},
	{
		// This machine kind: v1 controllers and the hybrid v2 mount; a
		// plain libvirtd leaves the guest out of cpuacct.
		name:   "hybrid without systemd (v1 + unified)",
		mounts: []string{"unified/cgroup.controllers", "cpuacct/cpuacct.usage", "memory/memory.usage_in_bytes", "cpu/cpu.shares"},
		guestDir: func(id int, d string) []string {
			n := filepath.Join("machine", cgroupfsName(id, d))
			return []string{"unified/" + n, "memory/" + n, "cpu/" + n, "cpuset/" + n, "freezer/" + n}
		},
		write: writeByHierarchy, want: "cpu unified/machine, memory memory/machine",
	},
	{
		// RHEL 8: cgroup v1, cpu and cpuacct mounted together.
		name:   "v1 systemd (cpu,cpuacct)",
		mounts: []string{"cpu,cpuacct/cpuacct.usage", "memory/memory.usage_in_bytes"},
		guestDir: func(id int, d string) []string {
			n := filepath.Join("machine.slice", scopeName(id, d))
			return []string{"cpu,cpuacct/" + n, "memory/" + n}
		},
		write: writeByHierarchy, want: "cpu cpu,cpuacct/machine.slice, memory memory/machine.slice",
	},
	{
		// Ubuntu 20.04: v1 controllers, systemd's hybrid unified mount.
		name:   "v1 systemd hybrid (cpuacct + unified)",
		mounts: []string{"unified/cgroup.controllers", "cpuacct/cpuacct.usage", "memory/memory.usage_in_bytes"},
		guestDir: func(id int, d string) []string {
			n := filepath.Join("machine.slice", scopeName(id, d))
			return []string{"unified/" + n, "cpuacct/" + n, "memory/" + n}
		},
		write: writeByHierarchy, want: "cpu unified/machine.slice, memory memory/machine.slice",
	},
	{
		// The test bed (devstack/hosts): systemd as PID 1 in a cgroup
		// namespace of this hybrid machine, libvirt 9 with machined. The
		// scope has QEMU's processes in unified and pids; memory holds
		// them in scope/libvirt, cpu and cpuacct in scope/libvirt/{emulator,
		// vcpuN}; every scope sums its children.
		name:   "hybrid systemd, nested libvirt/ (the bed)",
		mounts: []string{"unified/cgroup.controllers", "cpuacct/cpuacct.usage", "cpu/cpu.shares", "memory/memory.usage_in_bytes"},
		guestDir: func(id int, d string) []string {
			n := filepath.Join("machine.slice", scopeName(id, d))
			return []string{"unified/" + n, "cpuacct/" + n, "cpu/" + n, "memory/" + n}
		},
		write: func(tr *tree, dir string, u, r, c uint64) {
			writeByHierarchy(tr, dir, u, r, c)
			rel, _ := filepath.Rel(tr.root, dir)
			switch strings.SplitN(rel, string(filepath.Separator), 2)[0] {
			case "memory":
				writeByHierarchy(tr, filepath.Join(dir, "libvirt"), u, r, c)
			case "cpuacct":
				writeByHierarchy(tr, filepath.Join(dir, "libvirt", "emulator"), u/10, 0, 0)
				writeByHierarchy(tr, filepath.Join(dir, "libvirt", "vcpu0"), u-u/10, 0, 0)
			}
		},
		want: "cpu unified/machine.slice, memory memory/machine.slice",
	},
}

func newTree(t *testing.T, l layout) *tree {
	d := t.TempDir()
	tr := &tree{t: t, root: filepath.Join(d, "cgroup"), run: filepath.Join(d, "run"), etc: filepath.Join(d, "etc"), layout: l}
	for _, m := range l.mounts {
		tr.write(filepath.Join(tr.root, m), "0\n")
	}
	for _, p := range []string{tr.run, tr.etc} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// write writes a file atomically, as cgroupfs changes them.
func (tr *tree) write(path, body string) {
	tr.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tr.t.Fatal(err)
	}
}

// guest writes the accounting of guest id running domain.
func (tr *tree) guest(id int, domain string, usageUsec, ramBytes, cacheBytes uint64) {
	tr.t.Helper()
	for _, d := range tr.layout.guestDir(id, domain) {
		tr.layout.write(tr, filepath.Join(tr.root, d), usageUsec, ramBytes, cacheBytes)
	}
}

func (tr *tree) remove(id int, domain string) {
	for _, d := range tr.layout.guestDir(id, domain) {
		if err := os.RemoveAll(filepath.Join(tr.root, d)); err != nil {
			tr.t.Fatal(err)
		}
	}
}

func (tr *tree) config() cgroup.Config {
	cfg := cgroup.DefaultConfig()
	cfg.Root, cfg.DomainDirs = tr.root, []string{tr.run, tr.etc}
	return cfg
}

func server(id, instance string) nova.Server {
	return nova.Server{ID: id, InstanceName: instance, Status: nova.StatusActive, Host: "compute-1"}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestLayouts: every layout a fleet has, with no setting: guests found,
// named by the listing's instance names, CPU as a rate and RAM as the
// working set.
func TestLayouts(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			tr := newTree(t, l)
			tr.guest(1, "instance-0000000a", 1_000_000, 600<<20, 88<<20)
			tr.guest(7, "instance-0000000b", 5_000_000, 1024<<20, 0)
			tr.guest(9, "not-nova", 0, 1<<20, 0)
			now := time.Unix(1000, 0)
			src, err := cgroup.NewWithClock(tr.config(), func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			src.ObserveServers("compute-1", []nova.Server{server(uuid1, "instance-0000000a"), server(uuid2, "instance-0000000b")})
			ctx := context.Background()
			if d, err := src.Demand(ctx, "compute-1"); err != nil || len(d) != 0 {
				t.Fatalf("first call (baselines) = %v, %v; want an empty map", d, err)
			}
			now = now.Add(2 * time.Second)
			tr.guest(1, "instance-0000000a", 1_000_000+3_000_000, 600<<20, 88<<20) // 1.5 cores
			tr.guest(7, "instance-0000000b", 5_000_000+1_000_000, 1024<<20, 0)     // 0.5 core
			d, err := src.Demand(ctx, "compute-1")
			if err != nil {
				t.Fatal(err)
			}
			want := map[string][2]float64{uuid1: {1.5, 512}, uuid2: {0.5, 1024}}
			if len(d) != len(want) {
				t.Fatalf("demand %v, want %v", d, want)
			}
			for id, w := range want {
				if got := d[id]; !near(got.CPU, w[0]) || !near(got.RAMMB, w[1]) {
					t.Errorf("%s: %+v, want %v cores %v MB", id, got, w[0], w[1])
				}
			}
			c := src.Coverage()
			if c.Listed != 2 || c.Measured != 2 || c.Guests != 3 || c.Blind || c.Layout != l.want || c.Detail != "" {
				t.Errorf("coverage %+v, want 2 of 2 listed measured, 3 guests, layout %q", c, l.want)
			}
		})
	}
}

// TestNaming: libvirt's machine names (filtered, shortened) and
// systemd's escaping map back to the instance names of the listing.
func TestNaming(t *testing.T) {
	long := "instance-" + strings.Repeat("x", 70)
	for _, tc := range []struct{ id, instance, machine string }{
		{"3", "instance-0000abcd", "qemu-3-instance-0000abcd"},
		{"12", "web_01.example", "qemu-12-web01.example"},
		{"4", "..dot--_-ted-.", "qemu-4-dot-ted"},
		{"5", long, ("qemu-5-" + long)[:64]},
	} {
		if got := cgroup.MachineName(tc.id, tc.instance); got != tc.machine {
			t.Errorf("MachineName(%s, %q) = %q, want %q", tc.id, tc.instance, got, tc.machine)
		}
	}
	if got := cgroup.Unescape(`qemu\x2d3\x2dweb01.example\x5cx\xzz`); got != `qemu-3-web01.example\x\xzz` {
		t.Errorf("Unescape = %q", got)
	}
	tr := newTree(t, layouts[0])
	// The scope of a name libvirt filtered and systemd escaped.
	tr.guest(12, "web01.example", 0, 1<<20, 0)
	tr.guest(5, ("qemu-5-" + long)[7:64], 0, 1<<20, 0)
	now := time.Unix(1000, 0)
	src, _ := cgroup.NewWithClock(tr.config(), func() time.Time { return now })
	src.ObserveServers("compute-1", []nova.Server{server(uuid1, "web_01.example"), server(uuid2, long)})
	_, _ = src.Demand(context.Background(), "compute-1")
	now = now.Add(time.Second)
	d, err := src.Demand(context.Background(), "compute-1")
	if _, ok := d[uuid1]; err != nil || !ok || len(d) != 2 {
		t.Errorf("demand %v, %v; want both servers", d, err)
	}
}

// TestFallbacks: guests the listing does not name are mapped by the
// configured mapping, then the live domain XML (by id), then the
// persistent one (by name); unreadable XML is no error.
func TestFallbacks(t *testing.T) {
	tr := newTree(t, layouts[0])
	tr.write(filepath.Join(tr.run, "a.xml"),
		`<domstatus state='running'><domain type='kvm' id='1'><name>renamed</name><uuid>`+uuid1+`</uuid></domain></domstatus>`)
	tr.write(filepath.Join(tr.etc, "instance-00000002.xml"),
		`<domain type='kvm'><name>instance-00000002</name><uuid>`+uuid2+`</uuid></domain>`)
	tr.write(filepath.Join(tr.etc, "autostart", "x.xml"), "not xml")
	tr.write(filepath.Join(tr.etc, "junk.xml"), "not xml")
	tr.guest(1, "instance-00000001", 0, 1<<20, 0)
	tr.guest(7, "instance-00000002", 0, 1<<20, 0)
	tr.guest(4, "instance-00000003", 0, 1<<20, 0)
	cfg := tr.config()
	cfg.Mapping = map[string]string{"instance-00000003": uuid3}
	cfg.DomainDirs = append(cfg.DomainDirs, filepath.Join(tr.etc, "junk.xml")) // not a directory: skipped
	now := time.Unix(1000, 0)
	src, _ := cgroup.NewWithClock(cfg, func() time.Time { return now })
	_, _ = src.Demand(context.Background(), "h")
	now = now.Add(time.Second)
	d, err := src.Demand(context.Background(), "h")
	if err != nil || len(d) != 3 {
		t.Fatalf("demand %v, %v; want 3 servers (mapping, live XML by id, persistent XML by name)", d, err)
	}
	if c := src.Coverage(); c.Listed != -1 || c.Blind {
		t.Errorf("coverage before any listing %+v, want listed -1, not blind", c)
	}
}

// TestBlind: Nova lists running servers and the source finds none of
// them: an error saying what it looked for, never an empty map.
func TestBlind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(tr *tree)
		want  string
	}{
		{"no guest cgroup", func(*tree) {}, "no QEMU guest cgroup under machine.slice, machine"},
		{"guests named otherwise", func(tr *tree) { tr.guest(1, "instance-000000ff", 0, 1<<20, 0) }, "guests named after no listed server: qemu-1-instance-000000ff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(t, layouts[0])
			tc.setup(tr)
			src, _ := cgroup.New(tr.config())
			src.ObserveServers("compute-1", []nova.Server{
				server(uuid1, "instance-00000001"),
				{ID: uuid2, InstanceName: "instance-00000002", Status: "SHUTOFF"},
			})
			d, err := src.Demand(context.Background(), "compute-1")
			if !errors.Is(err, cgroup.ErrBlind) || d != nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "1 of the 1 servers") {
				t.Fatalf("Demand = %v, %v; want ErrBlind saying %q", d, err, tc.want)
			}
			if c := src.Coverage(); !c.Blind || c.Listed != 1 || c.Measured != 0 {
				t.Errorf("coverage %+v, want blind, 1 listed", c)
			}
			// Only shut-off servers: nothing to see, not blind.
			src.ObserveServers("compute-1", []nova.Server{{ID: uuid2, InstanceName: "instance-00000002", Status: "SHUTOFF"}})
			if d, err := src.Demand(context.Background(), "compute-1"); err != nil || d == nil {
				t.Errorf("no running server: %v, %v; want an empty map", d, err)
			}
		})
	}
}

// TestRates: callers a moment apart share the last rate; a counter that
// went back rebaselines; a guest that left is dropped.
func TestRates(t *testing.T) {
	tr := newTree(t, layouts[0])
	tr.guest(1, "instance-00000001", 1_000_000, 1<<20, 0)
	tr.guest(4, "instance-00000003", 0, 256<<20, 0)
	now := time.Unix(1000, 0)
	src, _ := cgroup.NewWithClock(tr.config(), func() time.Time { return now })
	src.ObserveServers("compute-1", []nova.Server{server(uuid1, "instance-00000001"), server(uuid3, "instance-00000003")})
	ctx := context.Background()
	_, _ = src.Demand(ctx, "compute-1")
	now = now.Add(2 * time.Second)
	tr.guest(4, "instance-00000003", 2_000_000, 256<<20, 0)
	if d, err := src.Demand(ctx, "compute-1"); err != nil || !near(d[uuid3].CPU, 1) {
		t.Fatalf("%v, %v; want 1 core", d, err)
	}
	// A second caller a moment later (the executor's re-check while the
	// monitor samples) gets the same rate, and keeps the window whole for
	// the next.
	now = now.Add(time.Millisecond)
	tr.guest(4, "instance-00000003", 2_000_100, 256<<20, 0)
	if d, err := src.Demand(ctx, "compute-1"); err != nil || !near(d[uuid3].CPU, 1) {
		t.Fatalf("a call 1 ms later: %v, %v; want the last rate (1 core)", d, err)
	}
	now = now.Add(time.Second - time.Millisecond)
	tr.guest(4, "instance-00000003", 2_500_000, 256<<20, 0)
	if d, err := src.Demand(ctx, "compute-1"); err != nil || !near(d[uuid3].CPU, 0.5) {
		t.Fatalf("a second after the last rate: %v, %v; want 0.5 core", d, err)
	}
	now = now.Add(time.Second)
	tr.guest(1, "instance-00000001", 10, 1<<20, 0)
	tr.remove(4, "instance-00000003")
	d, err := src.Demand(ctx, "compute-1")
	if _, ok := d[uuid1]; err != nil || ok || len(d) != 0 {
		t.Errorf("after reset/removal: %v, %v; want nothing", d, err)
	}
	if c := src.Coverage(); c.Measured != 1 || c.Listed != 2 || !strings.Contains(c.Detail, uuid3) {
		t.Errorf("coverage %+v, want 1 of 2 measured, %s missing", c, uuid3)
	}
}

func TestFailures(t *testing.T) {
	tr := newTree(t, layouts[0])
	tr.guest(1, "a", 1, 1, 0)
	p := filepath.Join(tr.root, "machine.slice", scopeName(1, "a"))
	cfg := tr.config()
	cfg.Mapping = map[string]string{"a": uuid1}
	src, _ := cgroup.New(cfg)
	tr.write(filepath.Join(p, "memory.current"), "lots\n")
	if d, err := src.Demand(context.Background(), "h"); err == nil || d != nil {
		t.Errorf("bad memory.current: %v, %v; want an error", d, err)
	}
	tr.write(filepath.Join(p, "memory.current"), "1\n")
	tr.write(filepath.Join(p, "cpu.stat"), "user_usec 1\n")
	if _, err := src.Demand(context.Background(), "h"); err == nil || !strings.Contains(err.Error(), "usage_usec") {
		t.Errorf("cpu.stat without usage_usec: %v", err)
	}
	cfg.Root = filepath.Join(tr.root, "nope")
	src, _ = cgroup.New(cfg)
	if _, err := src.Demand(context.Background(), "h"); err == nil {
		t.Error("missing cgroup root: no error")
	}
	cfg = tr.config()
	cfg.Host = "compute-1"
	src, _ = cgroup.New(cfg)
	if _, err := src.Demand(context.Background(), "compute-2"); !errors.Is(err, nova.ErrNotMeasured) {
		t.Errorf("asked for another host: %v, want nova.ErrNotMeasured", err)
	}
}

func TestValidate(t *testing.T) {
	err := cgroup.Config{Slices: []string{"/abs"}, Mapping: map[string]string{"x": ""}}.Validate()
	for _, want := range []string{"root is empty", "slice", "empty side"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
	if err := cgroup.DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}

// TestListingNeedsNoFiles: guests the listing names are mapped without
// reading libvirt's domain XML (root-only where the agent runs as its
// own user under its hardened unit); a guest it does not name is looked
// up there.
func TestListingNeedsNoFiles(t *testing.T) {
	tr := newTree(t, layouts[0])
	tr.write(filepath.Join(tr.run, "instance-00000001.xml"),
		`<domstatus><domain id='1'><name>instance-00000001</name><uuid>`+uuid3+`</uuid></domain></domstatus>`)
	tr.guest(1, "instance-00000001", 0, 1<<20, 0)
	now := time.Unix(1000, 0)
	src, _ := cgroup.NewWithClock(tr.config(), func() time.Time { return now })
	src.ObserveServers("compute-1", []nova.Server{server(uuid1, "instance-00000001")})
	for range 2 {
		_, _ = src.Demand(context.Background(), "compute-1")
		now = now.Add(time.Second)
	}
	d, err := src.Demand(context.Background(), "compute-1")
	if _, ok := d[uuid1]; err != nil || !ok || len(d) != 1 {
		t.Errorf("demand %v, %v; want %s (by its instance name)", d, err, uuid1)
	}
	if n := cgroup.DomainReads(src); n != 0 {
		t.Errorf("read the domain XML directories %d times, want 0", n)
	}
	tr.guest(2, "instance-00000002", 0, 1<<20, 0) // not Nova's listing: the XML is asked
	_, _ = src.Demand(context.Background(), "compute-1")
	if n := cgroup.DomainReads(src); n == 0 {
		t.Error("an unnamed guest did not consult the domain XML")
	}
}
