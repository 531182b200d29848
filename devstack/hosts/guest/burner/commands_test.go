package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommandArguments(t *testing.T) {
	cases := []struct {
		name, execute, args, wantErr string
	}{
		{"cpu needs cores", "dvms-cpu", `{}`, "dvms-cpu needs"},
		{"cpu rejects negative", "dvms-cpu", `{"cores":-1}`, "dvms-cpu needs"},
		{"cpu rejects unknown key", "dvms-cpu", `{"cores":1,"core":2}`, "dvms-cpu needs"},
		{"cpu rejects a string", "dvms-cpu", `{"cores":"1"}`, "dvms-cpu needs"},
		{"mem needs both", "dvms-mem", `{"mb":10}`, "dvms-mem needs"},
		{"mem needs whole MiB", "dvms-mem", `{"mb":1.5,"mbps":1}`, "dvms-mem needs"},
		{"mem rejects huge rate", "dvms-mem", `{"mb":1,"mbps":1e9}`, "dvms-mem needs"},
		{"sync needs an id", "guest-sync", `{}`, "guest-sync needs"},
		{"cpu zero is idle", "dvms-cpu", `{"cores":0}`, ""},
		{"mem zero frees", "dvms-mem", `{"mb":0,"mbps":0}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := fixedGuest(3)
			defer g.handle("dvms-idle", nil) // a mutant that accepts a bad request must not leave a burner running
			_, _, err := g.handle(c.execute, json.RawMessage(c.args))
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("error %v, want one containing %q", err, c.wantErr)
			}
		})
	}
}

func TestCommandsChangeStatus(t *testing.T) {
	g := fixedGuest(7)
	defer g.handle("dvms-idle", nil)
	res, _, err := g.handle("dvms-cpu", json.RawMessage(`{"cores":0.25}`))
	if err != nil || res.(status).Cores != 0.25 || res.(status).UptimeS != 7 {
		t.Fatalf("dvms-cpu = %+v, %v", res, err)
	}
	res, _, err = g.handle("dvms-mem", json.RawMessage(`{"mb":2,"mbps":0}`))
	if err != nil || res.(status).MemMB != 2 || res.(status).Cores != 0.25 {
		t.Fatalf("dvms-mem = %+v, %v", res, err)
	}
	res, _, err = g.handle("dvms-idle", nil)
	if err != nil || res.(status).MemMB != 0 || res.(status).Cores != 0 {
		t.Fatalf("dvms-idle = %+v, %v", res, err)
	}
}

func TestFindPort(t *testing.T) {
	sys := t.TempDir()
	for port, name := range map[string]string{"vport0p1": "org.qemu.guest_agent.0\n", "vport0p2": "other\n"} {
		os.MkdirAll(filepath.Join(sys, port), 0o755)
		os.WriteFile(filepath.Join(sys, port, "name"), []byte(name), 0o644)
	}
	if got := findPort(sys, "org.qemu.guest_agent.0"); got != "/dev/vport0p1" {
		t.Errorf("findPort = %q", got)
	}
	if got := findPort(sys, "missing"); got != "" {
		t.Errorf("findPort of a missing name = %q", got)
	}
}

func TestProcUptime(t *testing.T) {
	if _, err := os.Stat("/proc/uptime"); err != nil {
		t.Skip("no /proc/uptime here:", err)
	}
	up, err := procUptime()
	if err != nil || up <= 0 {
		t.Errorf("procUptime = %v, %v", up, err)
	}
}
