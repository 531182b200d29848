package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dvms-project/dvms/internal/daemon"
)

const unitPath = "../../etc/systemd/dvms-agent@.service"

// The agent's systemd unit is sandboxed (issue 10): the directives that
// matter most are there, and where systemd-analyze can rate the unit
// offline, its exposure is at most 2.0.
func TestSystemdUnitHardened(t *testing.T) {
	data, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{
		"User=dvms", "NoNewPrivileges=true", "ProtectSystem=strict", "ProtectHome=true", "PrivateTmp=true",
		"PrivateDevices=true", "CapabilityBoundingSet=\n", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX\n",
		"SystemCallFilter=@system-service", "UMask=0077", "ReadOnlyPaths=/etc/dvms",
		// The service contract (service.go): notify with a watchdog,
		// reload by SIGHUP, restart on failure but not on a configuration
		// error.
		"Type=notify\n", "WatchdogSec=", "ExecReload=/bin/kill -HUP $MAINPID\n", "Restart=on-failure\n",
		"RestartPreventExitStatus=" + strconv.Itoa(daemon.ExitConfig) + "\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q", strings.TrimSpace(want))
		}
	}
	// An instance name, so the template's %i resolves.
	rateUnit(t, "dvms-agent@compute-1.service", data)
}
