//go:build functional

// Package hosts_test checks the real-hypervisor test bed itself
// (devstack/hosts/up.sh): what every other RealHosts test relies on.
package hosts_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bed is what up.sh wrote in $DVMS_HOSTS_DIR/hosts.env.
type bed struct {
	dir   string
	hosts []string
	vars  map[string]string
}

func (b bed) ip(h string) string { return b.vars["DVMS_HOST_IP_"+strings.ReplaceAll(h, "-", "_")] }

// notRun skips loudly, or fails when DVMS_REALHOSTS_REQUIRED is set (CI).
func notRun(t *testing.T, why string) {
	t.Helper()
	msg := "REAL-HOST TEST NOT RUN: " + why
	if os.Getenv("DVMS_REALHOSTS_REQUIRED") != "" {
		t.Fatal(msg + " (DVMS_REALHOSTS_REQUIRED is set)")
	}
	fmt.Fprintln(os.Stderr, "*** "+msg)
	t.Skip(msg)
}

func loadBed(t *testing.T) bed {
	t.Helper()
	if _, err := os.Stat("/dev/kvm"); err != nil {
		notRun(t, "no /dev/kvm on this machine: the bed runs real KVM guests")
	}
	b := bed{dir: os.Getenv("DVMS_HOSTS_DIR"), vars: map[string]string{}}
	if b.dir == "" {
		b.dir = "/tmp/dvms-hosts"
	}
	f, err := os.Open(filepath.Join(b.dir, "hosts.env"))
	if err != nil {
		notRun(t, fmt.Sprintf("no bed (%v): run devstack/hosts/up.sh 3", err))
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && !strings.HasPrefix(k, "#") {
			b.vars[k] = strings.Trim(v, `"`)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading hosts.env: %v", err)
	}
	b.hosts = strings.Fields(b.vars["DVMS_HOSTS"])
	if len(b.hosts) < 3 {
		notRun(t, fmt.Sprintf("the bed has %d hosts (%q), the tests need 3: devstack/hosts/up.sh 3", len(b.hosts), b.vars["DVMS_HOSTS"]))
	}
	return b
}

// in runs a command inside host h (exec.sh) and returns its trimmed output.
func in(ctx context.Context, h string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "./exec.sh", append([]string{h}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("exec.sh %s %s: %w: %s", h, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// eventually retries f every half second until it succeeds or the deadline.
func eventually(t *testing.T, within time.Duration, what string, f func() error) {
	t.Helper()
	end := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestRealHostsBed: every host runs its own systemd with libvirtd (KVM),
// nova-compute (up in Nova as a QEMU hypervisor) and the dvms agent
// (active: READY=1 sent) in its own cgroup, answering on its own address.
func TestRealHostsBed(t *testing.T) {
	b := loadBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	funcDir := os.Getenv("DVMS_FUNC_DIR")
	if funcDir == "" {
		funcDir = "/tmp/dvms-functional"
	}
	hyp, err := exec.CommandContext(ctx, "openstack", "--os-cloud", "dvms-functional",
		"hypervisor", "list", "-f", "value", "-c", "Hypervisor Hostname", "-c", "Hypervisor Type", "-c", "State").Output()
	if err != nil {
		t.Fatalf("openstack hypervisor list: %v", err)
	}
	for _, h := range b.hosts {
		t.Run(h, func(t *testing.T) {
			if !strings.Contains(string(hyp), h+" QEMU up") {
				t.Errorf("Nova has no QEMU hypervisor %s up:\n%s", h, hyp)
			}
			if out, err := in(ctx, h, "hostname"); err != nil || out != h {
				t.Errorf("hostname in %s = %q, %v", h, out, err)
			}
			if out, err := in(ctx, h, "cat", "/proc/1/comm"); err != nil || out != "systemd" {
				t.Errorf("PID 1 of %s is %q (%v), want systemd", h, out, err)
			}
			unit := "dvms-agent@" + h
			for _, u := range []string{"libvirtd", "nova-compute", unit} {
				if out, err := in(ctx, h, "systemctl", "is-active", u); err != nil || out != "active" {
					t.Errorf("%s in %s: %q, %v", u, h, out, err)
				}
			}
			if _, err := in(ctx, h, "virsh", "-c", "qemu:///system", "domcapabilities", "--virttype", "kvm"); err != nil {
				t.Errorf("libvirt in %s cannot run KVM guests: %v", h, err)
			}
			// The agent's cgroup, seen from this machine, is inside the host's own tree.
			cg, err := in(ctx, h, "systemctl", "show", "-p", "ControlGroup", "--value", unit)
			if err != nil || !strings.HasSuffix(cg, "/"+unit+".service") {
				t.Fatalf("ControlGroup of %s: %q, %v", unit, cg, err)
			}
			if p := filepath.Join("/sys/fs/cgroup/unified/dvms-hosts", h, cg); !exists(p) {
				if p2 := filepath.Join("/sys/fs/cgroup/dvms-hosts", h, cg); !exists(p2) {
					t.Errorf("the agent's cgroup is not in %s's tree: neither %s nor %s", h, p, p2)
				}
			}
			// Its /healthz on the host's own address.
			url := "http://" + b.ip(h) + ":9464/healthz"
			eventually(t, time.Minute, "GET "+url, func() error {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return err
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				return nil
			})
		})
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
