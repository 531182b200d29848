package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const schedAPIUnitPath = "../../etc/systemd/dvms-scheduler-api.service"

// The scheduler-api's unit is sandboxed like the agent's: every sandbox
// directive of dvms-agent@.service (from NoNewPrivileges= to UMask=) is in
// it, it runs as dvms, and systemd-analyze rates it at most 2.0 where it
// can rate a unit offline.
func TestSchedAPIUnitHardened(t *testing.T) {
	agent, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(schedAPIUnitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	lines := strings.Split(string(agent), "\n")
	from, to := -1, -1
	for i, l := range lines {
		if strings.HasPrefix(l, "NoNewPrivileges=") {
			from = i
		}
		if strings.HasPrefix(l, "UMask=") {
			to = i
		}
	}
	if from < 0 || to < from {
		t.Fatalf("%s: no sandbox block NoNewPrivileges= ... UMask=", unitPath)
	}
	for _, l := range append(lines[from:to+1], "User=dvms", "ReadOnlyPaths=/etc/dvms", "ExecStart=/usr/local/bin/dvms scheduler-api --config /etc/dvms/dvms.conf") {
		if !strings.Contains(unit, "\n"+l+"\n") {
			t.Errorf("%s lacks %q", schedAPIUnitPath, l)
		}
	}
	rateUnit(t, "dvms-scheduler-api.service", data)
}

// rateUnit has systemd-analyze rate the unit (installed as name) offline
// and fails above an exposure of 2.0; it skips where that cannot run.
func rateUnit(t *testing.T, name string, data []byte) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("SKIPPED the exposure rating: no systemd-analyze on this machine (directives checked)")
	}
	inst := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(inst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "security", "--offline=true", inst).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Skipf("SKIPPED the exposure rating: systemd-analyze cannot rate a unit offline here (%v):\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security of %s: %.1f", name, score)
	if score > 2.0 {
		t.Fatalf("exposure %.1f > 2.0:\n%s", score, out)
	}
}
