//go:build functional

package cgroup_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
)

// skipOrFail skips the real-host test saying why, or fails it when
// DVMS_REALHOSTS_REQUIRED=1 (CI's real-host tier).
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("DVMS_REALHOSTS_REQUIRED") == "1" {
		t.Fatalf("DVMS_REALHOSTS_REQUIRED=1 and %s", msg)
	}
	t.Skipf("SKIPPED, no real hypervisor: %s", msg)
}

// realGuest is one KVM guest of this machine's libvirtd, booted from the
// bed's burner image (devstack/hosts/guest/build.sh) and named as Nova
// names a domain.
type realGuest struct {
	domain, uuid string
	ramMB        int
}

func virsh(args ...string) (string, error) {
	out, err := exec.Command("virsh", append([]string{"-c", "qemu:///system"}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// virtType is the domain type: kvm, or qemu (TCG) when
// DVMS_CGROUP_TEST_VIRT=qemu. A TCG guest is a real QEMU process in its
// real cgroup all the same (what the source measures); it runs where a
// nested KVM does not boot the guest kernel.
func virtType() string {
	if v := os.Getenv("DVMS_CGROUP_TEST_VIRT"); v != "" {
		return v
	}
	return "kvm"
}

// boot creates the transient domain g from the image in dir.
func (g realGuest) boot(t *testing.T, dir string) {
	t.Helper()
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	xml := fmt.Sprintf(`<domain type='%s'>
  <name>%s</name><uuid>%s</uuid>
  <memory unit='MiB'>%d</memory><vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type>
    <kernel>%s</kernel><initrd>%s</initrd><cmdline>%s</cmdline></os>
  <on_crash>destroy</on_crash>
  <devices>
    <serial type='pty'><target port='0'/></serial>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <memballoon model='none'/>
  </devices>
</domain>`, virtType(), g.domain, g.uuid, g.ramMB, filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initramfs.img"), strings.TrimSpace(string(cmdline)))
	f := filepath.Join(dir, g.domain+".xml")
	if err := os.WriteFile(f, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _ = virsh("destroy", g.domain) // a leftover of an interrupted run
	if out, err := virsh("create", f); err != nil {
		t.Fatalf("virsh create %s: %v: %s", g.domain, err, out)
	}
	t.Cleanup(func() {
		if out, err := virsh("destroy", g.domain); err != nil {
			t.Logf("virsh destroy %s: %v: %s", g.domain, err, out)
		}
	})
}

// agent sends the burner in g a command over its QEMU guest agent
// channel (what devstack/hosts/guest/ctl.sh --domain does).
func (g realGuest) agent(cmd string) (string, error) {
	return virsh("qemu-agent-command", "--timeout", "10", g.domain, cmd)
}

// qemuCPU is the CPU time (s) of g's QEMU process from /proc: the
// kernel's own account, independent of cgroups.
func (g realGuest) qemuCPU() (float64, error) {
	pid, err := os.ReadFile(filepath.Join("/run/libvirt/qemu", g.domain+".pid"))
	if err != nil {
		return 0, err
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "stat"))
	if err != nil {
		return 0, err
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64) // utime, field 14
	st, _ := strconv.ParseFloat(f[12], 64) // stime, field 15
	return (ut + st) / 100, nil            // USER_HZ
}

// TestRealHostsCgroupMeasuresGuests boots three KVM guests on this
// machine's libvirtd, named as Nova names them, tells them to burn 1 and
// 0.5 core and to hold 256 MiB, and checks that the cgroup source with
// its defaults (no root, mapping nor domain XML set) finds them on this
// machine's layout and measures within 10 % of what they were told.
func TestRealHostsCgroupMeasuresGuests(t *testing.T) {
	if _, err := os.Stat("/dev/kvm"); err != nil {
		skipOrFail(t, "no /dev/kvm (%v)", err)
	}
	if _, err := exec.LookPath("virsh"); err != nil {
		skipOrFail(t, "no virsh (apt-get install libvirt-clients)")
	}
	if out, err := virsh("version"); err != nil {
		skipOrFail(t, "no libvirtd answers on qemu:///system (start one: virtlogd -d; libvirtd -d): %v: %s", err, out)
	}
	// The burner image (devstack/hosts/guest/build.sh), built here unless
	// DVMS_GUEST_IMAGE_DIR has one (a bed host runs the compiled test).
	dir := os.Getenv("DVMS_GUEST_IMAGE_DIR")
	if dir == "" {
		build, err := filepath.Abs("../../../devstack/hosts/guest/build.sh")
		if err != nil {
			t.Fatal(err)
		}
		// QEMU runs as libvirt-qemu: build.sh makes the image readable.
		if dir, err = os.MkdirTemp("", "dvms-cgroup-guest-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		if out, err := exec.Command(build, dir).CombinedOutput(); err != nil {
			t.Fatalf("build.sh: %v\n%s", err, out)
		}
	}

	guests := []realGuest{
		{domain: "instance-0000c901", uuid: "c9010000-0000-4000-8000-00000000c901", ramMB: 512},
		{domain: "instance-0000c902", uuid: "c9020000-0000-4000-8000-00000000c902", ramMB: 512},
		{domain: "instance-0000c903", uuid: "c9030000-0000-4000-8000-00000000c903", ramMB: 768},
	}
	var listing []nova.Server
	for _, g := range guests {
		g.boot(t, dir)
		// Nova's servers carry other UUIDs than the domains' here: the
		// source must name guests by instance name, not read the XML.
		listing = append(listing, nova.Server{ID: "nova-" + g.domain, InstanceName: g.domain, Status: nova.StatusActive})
	}
	t.Logf("domain type %s", virtType())
	deadline := time.Now().Add(3 * time.Minute)
	for _, g := range guests {
		for {
			if _, err := g.agent(`{"execute":"dvms-status"}`); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("guest %s: its burner does not answer: %v", g.domain, err)
			}
			time.Sleep(time.Second) // polling a guest that boots
		}
	}

	cfg := cgroup.DefaultConfig()
	cfg.DomainDirs = nil
	src, err := cgroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src.ObserveServers("", listing)
	ctx := context.Background()
	// window measures each guest over d: the source's rate (mean of its
	// samples, one a second) and RAM (last), and QEMU's /proc CPU time.
	type reading struct{ cpu, ram, proc float64 }
	window := func(d time.Duration) map[string]reading {
		t.Helper()
		if _, err := src.Demand(ctx, ""); err != nil {
			t.Fatalf("demand: %v (coverage %+v)", err, src.Coverage())
		}
		proc0 := map[string]float64{}
		for _, g := range guests {
			proc0[g.domain], _ = g.qemuCPU()
		}
		start := time.Now()
		sums := map[string]reading{}
		n := 0
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for time.Since(start) < d {
			<-tick.C
			dm, err := src.Demand(ctx, "")
			if err != nil {
				t.Fatalf("demand: %v (coverage %+v)", err, src.Coverage())
			}
			n++
			for _, g := range guests {
				v, ok := dm["nova-"+g.domain]
				if !ok {
					t.Fatalf("guest %s not measured: %v (coverage %+v)", g.domain, dm, src.Coverage())
				}
				r := sums[g.domain]
				r.cpu += v.CPU
				r.ram = v.RAMMB
				sums[g.domain] = r
			}
		}
		el := time.Since(start).Seconds()
		for _, g := range guests {
			r := sums[g.domain]
			r.cpu /= float64(n)
			p, _ := g.qemuCPU()
			r.proc = (p - proc0[g.domain]) / el
			sums[g.domain] = r
		}
		return sums
	}

	idle := window(5 * time.Second)
	c := src.Coverage()
	t.Logf("layout: %s; %d guests, %d of %d listed measured", c.Layout, c.Guests, c.Measured, c.Listed)
	if c.Listed != 3 || c.Measured != 3 || c.Blind {
		t.Fatalf("coverage %+v, want the 3 guests", c)
	}
	for g, cmd := range map[realGuest]string{
		guests[0]: `{"execute":"dvms-cpu","arguments":{"cores":1}}`,
		guests[1]: `{"execute":"dvms-cpu","arguments":{"cores":0.5}}`,
		guests[2]: `{"execute":"dvms-mem","arguments":{"mb":256,"mbps":0}}`,
	} {
		if out, err := g.agent(cmd); err != nil {
			t.Fatalf("%s %s: %v: %s", g.domain, cmd, err, out)
		}
	}
	// The burners settle (the memory is touched once, in full).
	warm := time.Now().Add(30 * time.Second)
	for {
		r := window(2 * time.Second)
		// Burning: more than twice its idle CPU (a busy machine may give
		// it less than it was told; check reports that).
		if r[guests[2].domain].ram-idle[guests[2].domain].ram > 200 && r[guests[0].domain].cpu > 2*idle[guests[0].domain].cpu {
			break
		}
		if time.Now().After(warm) {
			t.Fatalf("the guests did not start burning in 30 s: %+v", r)
		}
	}
	// The source against what the guest was told, and against QEMU's
	// own CPU time (/proc: independent of cgroups). On a contended
	// machine a guest gets less than it was told, whatever measures it:
	// the source is held to /proc in every window, and the told figure is
	// checked in the first window where QEMU got what the guests were
	// told (a guest cannot burn more than the machine gives it). Up to
	// contendedWindows windows; on a machine contended in all of them the
	// told figure is not judged (said loudly, with the figures): the
	// source is still held to /proc, and RAM to what it was told.
	const contendedWindows = 6
	pct := func(got, want float64) float64 { return 100 * (got - want) / want }
	g3 := guests[2].domain
	told := map[string]float64{guests[0].domain: 1, guests[1].domain: 0.5}
	var busy map[string]reading
	toldJudged := true
	for w := 1; ; w++ {
		busy = window(15 * time.Second)
		contended := ""
		for _, g := range guests[:2] {
			r := busy[g.domain]
			t.Logf("window %d: %s cpu (cores) told %5.2f  measured %5.3f  /proc %5.3f  error vs told %+6.1f %%, vs /proc %+6.1f %%",
				w, g.domain, told[g.domain], r.cpu, r.proc, pct(r.cpu, told[g.domain]), pct(r.cpu, r.proc))
			if math.Abs(pct(r.cpu, r.proc)) > 10 {
				t.Errorf("window %d: %s: measured %.3f cores, QEMU's /proc says %.3f: %.1f %% off (more than 10 %%)", w, g.domain, r.cpu, r.proc, pct(r.cpu, r.proc))
			}
			if pct(r.proc, told[g.domain]) < -10 {
				contended += fmt.Sprintf(" %s got %.2f of %.2f cores;", g.domain, r.proc, told[g.domain])
			}
		}
		if contended == "" {
			break
		}
		t.Logf("CONTENDED window %d:%s the machine is busy (QEMU's /proc)", w, contended)
		if w == contendedWindows {
			t.Logf("TOLD NOT JUDGED: the guests did not get the cores they were told in %d windows of 15 s (last:%s): a contended machine proves nothing about the told figure (run it alone); the source matched QEMU's /proc in every window", w, contended)
			toldJudged = false
			break
		}
	}
	for _, g := range guests[:2] {
		r := busy[g.domain]
		t.Logf("%-28s told %7.2f  measured %7.2f  (/proc %7.2f)  error %+6.1f %% (vs /proc %+6.1f %%)", g.domain+" cpu (cores)", told[g.domain], r.cpu, r.proc, pct(r.cpu, told[g.domain]), pct(r.cpu, r.proc))
		if toldJudged && math.Abs(pct(r.cpu, told[g.domain])) > 10 {
			t.Errorf("%s: measured %.3f cores, told %.2f: %.1f %% off (more than 10 %%)", g.domain, r.cpu, told[g.domain], pct(r.cpu, told[g.domain]))
		}
	}
	ram := busy[g3].ram - idle[g3].ram
	t.Logf("%-28s told %7.2f  measured %7.2f  error %+6.1f %%", g3+" ram growth (MiB)", 256.0, ram, pct(ram, 256))
	// Under-counting is what would let a plan overload a host: held to
	// 10 %. Above the told growth the source counts memory the guest's
	// cgroup really holds besides the guest's pages (QEMU's own, e.g. the
	// TCG translation cache growing with the busy guest's code): seen up
	// to +11.3 % on the reference machine; held to 25 %.
	if e := pct(ram, 256); e < -10 || e > 25 {
		t.Errorf("%s: its RAM grew by %.1f MiB, told 256: %+.1f %% off (allowed -10 %% to +25 %%)", g3, ram, e)
	}
	for _, g := range guests {
		t.Logf("%s: idle %.3f cores %.0f MiB, busy %.3f cores %.0f MiB", g.domain, idle[g.domain].cpu, idle[g.domain].ram, busy[g.domain].cpu, busy[g.domain].ram)
	}
}
