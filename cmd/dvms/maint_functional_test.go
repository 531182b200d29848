//go:build functional

package main

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// maintenanceActions drains host holding, besides its plain servers, one
// whose admin-set property says cold_migrate and one whose flavor says
// notify: the plain ones live-migrate, the cold one goes by migrate +
// confirmResize (Nova's instance actions show both), the notify one
// stays, and `dvms drain --wait` ends at once, non-zero, saying so;
// `dvms events` shows the cold-migrate action done and the event ended
// left_for_owners. The host is enabled again and the notify server
// deleted at the end, for the phases after this one. host is the first of
// candidates with room for the notify server (earlier phases' relief may
// have filled one: Nova then finds no valid host for it).
func (w *world) maintenanceActions(f *fleet, bin string, candidates ...string) {
	t := w.t
	const flavor = "dvmsft-notify"
	host := w.roomyHost(2, 1, 512, candidates...)
	name := w.boot.orDefault().prefix + "notify-" + host
	w.osc("flavor", "create", "--vcpus", "1", "--ram", "512", "--disk", "1", "--property", nova.MetaMaintenanceAction+"=notify", flavor)
	defer func() {
		w.deleteNamed("^" + name)
		if _, err := w.fc.osc(t, w.ctx, "flavor", "delete", flavor); err != nil {
			t.Logf("flavor delete: %v", err)
		}
		if err := w.fc.cl.SetServiceStatus(w.ctx, host, false, ""); err != nil {
			t.Errorf("enable %s again: %v", host, err)
		}
	}()
	notify := strings.TrimSpace(w.osc("server", "create", "--flavor", flavor, "--image", w.boot.orDefault().image, "--nic", "none",
		"--availability-zone", "nova:"+host, "-f", "value", "-c", "id", name))
	if !w.eventually(name+" ACTIVE", 3*time.Minute, func() bool {
		s, err := w.fc.cl.Server(w.ctx, notify)
		return err == nil && s.Status == nova.StatusActive
	}) {
		t.Fatalf("%s not ACTIVE", name)
	}
	plain := w.placement()[host]
	if len(plain) < 2 {
		t.Fatalf("%s holds %d of the test's servers, want 2 or more", host, len(plain))
	}
	cold := plain[0].ID
	w.osc("server", "set", "--property", nova.MetaMaintenanceAction+"=cold_migrate", cold)

	start := time.Now()
	cmd := exec.CommandContext(w.ctx, bin, "drain", host, "--wait", "--poll", "2s", "--stall", "5m")
	cmd.Env = w.fc.env()
	out, err := cmd.CombinedOutput()
	t.Logf("dvms drain %s --wait (%s):\n%s", host, time.Since(start).Round(time.Second), out)
	if err == nil || !strings.Contains(string(out), "left for their owners") || !strings.Contains(string(out), notify) {
		t.Fatalf("drain --wait: %v; want a non-zero exit naming %s left for its owner", err, notify)
	}
	left, err := w.fc.cl.Servers(w.ctx, host)
	if err != nil || len(left) != 1 || left[0].ID != notify || left[0].Status != nova.StatusActive {
		t.Fatalf("%s holds %+v (%v), want only %s, ACTIVE", host, left, err, notify)
	}
	s, err := w.fc.cl.Server(w.ctx, cold)
	if err != nil || s.Host == host || s.Status != nova.StatusActive {
		t.Fatalf("cold-migrated server: %+v (%v), want ACTIVE off %s", s, err, host)
	}

	// Nova's instance actions: migrate then confirmResize, no live
	// migration of it in this drain.
	acts, err := w.fc.cl.ServerActions(w.ctx, cold)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range acts {
		if !a.Start.Before(start.Add(-time.Minute)) {
			names = append(names, a.Action)
		}
	}
	if !slices.Contains(names, "migrate") || !slices.Contains(names, "confirmResize") || slices.Contains(names, "live-migration") {
		t.Errorf("instance actions of %s since the drain: %v, want migrate and confirmResize, no live-migration", cold, names)
	}
	for _, m := range w.migrationList("--server", cold) {
		t.Logf("migration of %s: %+v", cold, m)
	}

	// dvms events: the cold-migrate action done, the event ended
	// left_for_owners (an agent notes an action once it polled its end).
	var evOut string
	if !w.eventually("dvms events shows the cold migration and the servers left", 30*time.Second, func() bool {
		b, err := w.dvms(bin, "events", "--host", host)
		evOut = string(b)
		if err != nil {
			return false
		}
		var evs []struct {
			Kind    string
			Actions []map[string]string
		}
		if json.Unmarshal(b, &evs) != nil {
			return false
		}
		coldDone := false
		for _, e := range evs {
			for _, a := range e.Actions {
				coldDone = coldDone || a["server"] == cold && a["action"] == "cold-migrate" && a["outcome"] == "done"
			}
		}
		return coldDone && strings.Contains(evOut, "left_for_owners")
	}) {
		t.Errorf("dvms events --host %s:\n%s", host, evOut)
	}
	for _, a := range f.actions() {
		if a.Server == cold || a.Server == notify {
			t.Logf("agent action: %+v", a)
		}
	}
}

// roomyHost is the first of candidates, enabled in Nova, that holds at
// least servers of the tests' servers and has room in placement for
// vcpus and ramMB more.
func (w *world) roomyHost(servers, vcpus, ramMB int, candidates ...string) string {
	w.t.Helper()
	pl := w.placement()
	for _, h := range candidates {
		nh, err := w.fc.cl.Host(w.ctx, h)
		if err != nil {
			w.t.Fatalf("host %s: %v", h, err)
		}
		freeCPU := float64(nh.VCPUs-nh.ReservedVCPUs)*nh.CPUAllocRatio - float64(nh.VCPUsUsed)
		freeRAM := float64(nh.RAMMB-nh.ReservedRAMMB)*nh.RAMAllocRatio - float64(nh.RAMMBUsed)
		if nh.Service.Disabled() || len(pl[h]) < servers || freeCPU < float64(vcpus) || freeRAM < float64(ramMB) {
			w.t.Logf("%s: %d of the tests' servers, %.0f vCPUs and %.0f MB free, disabled %v: not the host", h, len(pl[h]), freeCPU, freeRAM, nh.Service.Disabled())
			continue
		}
		return h
	}
	w.t.Fatalf("none of %v holds %d of the tests' servers with room for %d vCPUs and %d MB", candidates, servers, vcpus, ramMB)
	return ""
}
