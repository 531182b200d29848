//go:build functional

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The agent under systemd on the real-hypervisor bed (devstack/hosts,
// BED-INTERFACE): every host runs dvms-agent@HOST from etc/systemd. These
// tests drive it as an operator would (systemctl, the bed's outage.sh) and
// read its readiness from systemd: ActiveState=active, SubState=running
// (READY=1 was sent) and the agent's STATUS= line starting with "ready:".

// sdBed is the bed as hosts.env describes it.
type sdBed struct {
	hosts   []string
	scripts string // devstack/hosts, or $DVMS_HOSTS_SCRIPTS
}

// systemdBed reads $DVMS_HOSTS_DIR/hosts.env (default /tmp/dvms-hosts).
// Without a bed the test skips loudly, or fails with
// DVMS_REALHOSTS_REQUIRED=1 (CI's real-host tier).
func systemdBed(t *testing.T) sdBed {
	t.Helper()
	dir := os.Getenv("DVMS_HOSTS_DIR")
	if dir == "" {
		dir = "/tmp/dvms-hosts"
	}
	notRun := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("DVMS_REALHOSTS_REQUIRED") == "1" {
			t.Fatalf("DVMS_REALHOSTS_REQUIRED=1 but %s", msg)
		}
		t.Skipf("SKIPPED: %s (devstack/hosts/up.sh brings the bed up)", msg)
	}
	env, err := os.ReadFile(filepath.Join(dir, "hosts.env"))
	if err != nil {
		notRun("no real-hypervisor bed: %v", err)
	}
	b := sdBed{scripts: os.Getenv("DVMS_HOSTS_SCRIPTS")}
	if b.scripts == "" {
		b.scripts = "../../devstack/hosts"
	}
	sc := bufio.NewScanner(bytes.NewReader(env))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "DVMS_HOSTS="); ok {
			b.hosts = strings.Fields(strings.Trim(v, `"'`))
		}
	}
	if len(b.hosts) == 0 {
		notRun("%s/hosts.env names no host (DVMS_HOSTS)", dir)
	}
	for _, s := range []string{"exec.sh", "outage.sh"} {
		if _, err := os.Stat(filepath.Join(b.scripts, s)); err != nil {
			t.Fatalf("the bed's %s: %v", s, err)
		}
	}
	t.Setenv("DVMS_HOSTS_DIR", dir)
	return b
}

// sh runs one of the bed's scripts; its output is logged.
func (b sdBed) sh(t *testing.T, script string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(filepath.Join(b.scripts, script), args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", script, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (b sdBed) must(t *testing.T, script string, args ...string) string {
	t.Helper()
	out, err := b.sh(t, script, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unitState is what systemd says of a host's agent.
type unitState struct {
	active, sub, status, pid, restarts string
}

func (u unitState) ready() bool {
	return u.active == "active" && u.sub == "running" && strings.HasPrefix(u.status, "ready:")
}

func (u unitState) String() string {
	return fmt.Sprintf("%s/%s pid %s restarts %s status %q", u.active, u.sub, u.pid, u.restarts, u.status)
}

func unit(host string) string { return "dvms-agent@" + host }

func (b sdBed) state(t *testing.T, host string) unitState {
	t.Helper()
	out, err := b.sh(t, "exec.sh", host, "systemctl", "show", unit(host), "-p", "ActiveState,SubState,StatusText,MainPID,NRestarts")
	if err != nil {
		t.Log(err)
		return unitState{}
	}
	var u unitState
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
		switch k {
		case "ActiveState":
			u.active = v
		case "SubState":
			u.sub = v
		case "StatusText":
			u.status = v
		case "MainPID":
			u.pid = v
		case "NRestarts":
			u.restarts = v
		}
	}
	return u
}

// waitAll waits up to limit for cond on every host's agent and returns
// how long it took; the test fails at limit.
func (b sdBed) waitAll(t *testing.T, what string, limit time.Duration, cond func(host string, u unitState) bool) time.Duration {
	t.Helper()
	start := time.Now()
	last := map[string]unitState{}
	for {
		all := true
		for _, h := range b.hosts {
			u := b.state(t, h)
			last[h] = u
			if !cond(h, u) {
				all = false
			}
		}
		took := time.Since(start)
		if all {
			t.Logf("%s: %.1f s", what, took.Seconds())
			return took
		}
		if took > limit {
			t.Fatalf("%s: not within %s: %v", what, limit, last)
		}
		time.Sleep(500 * time.Millisecond) // polling systemd; each poll is a few nsenter calls
	}
}

func (b sdBed) readyAll(t *testing.T, what string, limit time.Duration) time.Duration {
	t.Helper()
	return b.waitAll(t, what, limit, func(_ string, u unitState) bool { return u.ready() })
}

// outage stops the service for d, then starts it; it returns when the
// service answers again (outage.sh start waits for it). Meanwhile it logs
// each status the agents report, and fails if one of them exits: an
// outage is ridden out, not restarted through.
func (b sdBed) outage(t *testing.T, svc string, d time.Duration) {
	t.Helper()
	pids := map[string]string{}
	for _, h := range b.hosts {
		pids[h] = b.state(t, h).pid
	}
	b.must(t, "outage.sh", svc, "stop")
	t.Cleanup(func() { _, _ = b.sh(t, "outage.sh", svc, "start") })
	start := time.Now()
	t.Logf("%s stopped for %s", svc, d)
	seen := map[string]bool{}
	for time.Since(start) < d { // the outage itself, as the Done-when states it
		for _, h := range b.hosts {
			u := b.state(t, h)
			if u.pid != pids[h] {
				t.Errorf("%s: the agent exited during the %s outage: %v", h, svc, u)
				pids[h] = u.pid
			}
			if k := h + ": " + u.status; !seen[k] {
				seen[k] = true
				t.Logf("%.1f s into the outage, %s", time.Since(start).Seconds(), k)
			}
		}
		time.Sleep(time.Second)
	}
	b.must(t, "outage.sh", svc, "start")
}

// TestRealHostsSystemd: the systemd side of the bed's Done-when, on every
// host: a SIGKILLed agent, a stopped (hung) one, 30-s outages of NATS and
// Keystone, agents started while NATS or Keystone is down: each agent is
// running and ready again within 60 s of the end, with no human action;
// `systemctl reload` changes the log level without a restart.
func TestRealHostsSystemd(t *testing.T) {
	b := systemdBed(t)
	const within = 60 * time.Second
	b.readyAll(t, "every agent ready", 2*within)

	t.Run("SIGKILL", func(t *testing.T) {
		before := map[string]string{}
		for _, h := range b.hosts {
			before[h] = b.state(t, h).pid
			b.must(t, "exec.sh", h, "systemctl", "kill", "-s", "SIGKILL", unit(h))
		}
		b.waitAll(t, "SIGKILL: restarted and ready", within, func(h string, u unitState) bool {
			return u.ready() && u.pid != before[h] && u.pid != "0"
		})
	})

	t.Run("watchdog", func(t *testing.T) {
		// A stopped process sends no WATCHDOG=1: systemd kills it after
		// WatchdogSec and Restart=on-failure starts a new one.
		out := b.must(t, "exec.sh", b.hosts[0], "systemctl", "show", unit(b.hosts[0]), "-p", "WatchdogUSec")
		wd, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "WatchdogUSec=")))
		if err != nil || wd <= 0 {
			t.Fatalf("the unit has no watchdog: %q", out)
		}
		before := map[string]string{}
		for _, h := range b.hosts {
			before[h] = b.state(t, h).pid
			b.must(t, "exec.sh", h, "systemctl", "kill", "-s", "SIGSTOP", unit(h))
		}
		b.waitAll(t, "SIGSTOP: killed by the watchdog, restarted and ready", wd+within, func(h string, u unitState) bool {
			return u.ready() && u.pid != before[h] && u.pid != "0"
		})
	})

	for _, svc := range []string{"nats", "keystone"} {
		t.Run(svc+" outage", func(t *testing.T) {
			b.readyAll(t, "ready before", within)
			pids := map[string]string{}
			for _, h := range b.hosts {
				pids[h] = b.state(t, h).pid
			}
			b.outage(t, svc, 30*time.Second)
			b.waitAll(t, svc+" back: every agent ready, not restarted", within, func(h string, u unitState) bool {
				return u.ready() && u.pid == pids[h]
			})
		})
		t.Run("started while "+svc+" is down", func(t *testing.T) {
			b.must(t, "outage.sh", svc, "stop")
			t.Cleanup(func() { _, _ = b.sh(t, "outage.sh", svc, "start") })
			for _, h := range b.hosts {
				b.must(t, "exec.sh", h, "systemctl", "restart", "--no-block", unit(h))
			}
			// Waiting, not failing: activating, its status says so.
			want := map[string]string{"nats": "waiting for NATS", "keystone": "waiting for Keystone"}[svc]
			b.waitAll(t, "agents waiting", within, func(_ string, u unitState) bool {
				return u.active == "activating" && strings.HasPrefix(u.status, want)
			})
			b.must(t, "outage.sh", svc, "start")
			b.readyAll(t, svc+" back: every agent started and ready", within)
		})
	}

	t.Run("reload", func(t *testing.T) {
		h := b.hosts[0]
		const conf = "/etc/dvms/dvms.conf"
		orig := b.must(t, "exec.sh", h, "cat", conf)
		put := func(content string) {
			cmd := exec.Command(filepath.Join(b.scripts, "exec.sh"), h, "sh", "-c", "cat > "+conf)
			cmd.Stdin = strings.NewReader(content)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("writing %s on %s: %v\n%s", conf, h, err, out)
			}
		}
		t.Cleanup(func() {
			put(orig)
			_, _ = b.sh(t, "exec.sh", h, "systemctl", "reload", unit(h))
		})
		before := b.state(t, h)
		since := fmt.Sprintf("@%d", time.Now().Unix()-1)
		put(withLogLevel(orig, "debug"))
		b.must(t, "exec.sh", h, "systemctl", "reload", unit(h))
		after := b.state(t, h)
		if after.pid != before.pid || !after.ready() {
			t.Fatalf("reload: before %v, after %v: want the same MainPID, ready", before, after)
		}
		journal := b.must(t, "exec.sh", h, "journalctl", "-u", unit(h), "--since", since, "-o", "cat", "--no-pager")
		if !strings.Contains(journal, "reload: configuration applied") || !strings.Contains(journal, "[DEFAULT] log_level") {
			t.Fatalf("no log line of the applied log level since the reload:\n%s", journal)
		}
		t.Logf("reload applied the log level, MainPID %s kept", after.pid)
	})
}

// withLogLevel sets [DEFAULT] log_level in an INI text.
func withLogLevel(ini, level string) string {
	line := "log_level = " + level
	re := regexp.MustCompile(`(?m)^log_level\s*=.*$`)
	switch {
	case re.MatchString(ini):
		return re.ReplaceAllString(ini, line)
	case strings.Contains(ini, "[DEFAULT]\n"):
		return strings.Replace(ini, "[DEFAULT]\n", "[DEFAULT]\n"+line+"\n", 1)
	}
	return line + "\n" + ini // keys before any section are [DEFAULT]'s
}
