package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/dvms-project/dvms/devstack/hosts/guest/wire"
)

// version is reported by guest-info and dvms-status.
const version = "dvms-burner 1"

// Limits on what a request may ask for: a bed guest has one vCPU and 256 MiB.
const (
	maxCores = 64
	maxMB    = 1 << 16
	maxMBPS  = 1 << 16
)

// status is the answer of every dvms-* command.
type status = wire.Status

// guest executes the commands on this guest's burners.
type guest struct {
	cpu    cpuBurner
	mem    memDirtier
	uptime func() (float64, error)
}

var commandNames = []string{
	"guest-sync", "guest-sync-delimited", "guest-ping", "guest-info",
	"dvms-status", "dvms-cpu", "dvms-mem", "dvms-idle",
}

func (g *guest) handle(execute string, args json.RawMessage) (any, bool, error) {
	switch execute {
	case "guest-sync", "guest-sync-delimited":
		var a struct {
			ID json.RawMessage `json:"id"`
		}
		if err := decodeArgs(args, &a); err != nil || a.ID == nil {
			return nil, false, fmt.Errorf("%s needs {\"id\": NUMBER}", execute)
		}
		return a.ID, execute == "guest-sync-delimited", nil
	case "guest-ping":
		return struct{}{}, false, nil
	case "guest-info":
		type cmd struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
		}
		cmds := make([]cmd, len(commandNames))
		for i, n := range commandNames {
			cmds[i] = cmd{n, true}
		}
		return map[string]any{"version": version, "supported_commands": cmds}, false, nil
	case "dvms-status":
	case "dvms-idle":
		g.cpu.Set(0)
		g.mem.Set(0, 0)
	case "dvms-cpu":
		var a struct {
			Cores *float64 `json:"cores"`
		}
		if err := decodeArgs(args, &a); err != nil || a.Cores == nil || !inRange(*a.Cores, maxCores) {
			return nil, false, fmt.Errorf("dvms-cpu needs {\"cores\": 0..%d} (fractions allowed)", maxCores)
		}
		g.cpu.Set(*a.Cores)
	case "dvms-mem":
		var a struct {
			MB   *float64 `json:"mb"`
			MBPS *float64 `json:"mbps"`
		}
		if err := decodeArgs(args, &a); err != nil || a.MB == nil || a.MBPS == nil ||
			!inRange(*a.MB, maxMB) || *a.MB != math.Trunc(*a.MB) || !inRange(*a.MBPS, maxMBPS) {
			return nil, false, fmt.Errorf("dvms-mem needs {\"mb\": whole MiB 0..%d, \"mbps\": MiB/s 0..%d}", maxMB, maxMBPS)
		}
		g.mem.Set(int(*a.MB), *a.MBPS)
	default:
		return nil, false, fmt.Errorf("%w: %q (have %s)", errUnknownCommand, execute, strings.Join(commandNames, ", "))
	}
	return g.status()
}

func (g *guest) status() (any, bool, error) {
	up, err := g.uptime()
	if err != nil {
		return nil, false, err
	}
	mb, mbps, dirtied := g.mem.Status()
	return status{Version: version, UptimeS: up, Cores: g.cpu.Cores(), MemMB: mb, MemMBPS: mbps, DirtiedMB: dirtied}, false, nil
}

// decodeArgs decodes a command's arguments strictly: unknown keys are errors.
func decodeArgs(args json.RawMessage, into any) error {
	if len(args) == 0 {
		args = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

func inRange(v, max float64) bool { return v >= 0 && v <= max && !math.IsNaN(v) }

// procUptime reads the guest's uptime in seconds from /proc/uptime.
func procUptime() (float64, error) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, fmt.Errorf("read uptime: empty /proc/uptime")
	}
	up, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	return up, nil
}
