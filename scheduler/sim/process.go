package sim

// Process tuning for runs of many agents in one process, and the error
// of a run whose figures are not valid.

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// TuneGCForSwim: a thousand memberlist instances in one process allocate at
// every message they decode (about 180 MB/s while the agents join), and
// the collector took a third of the process's CPU at 1,000 agents with
// an 8 GiB limit (gctrace: a cycle every 15-20 s, each marking 2-3 GB
// for 6-9 s), CPU the probes then lacked. Unless GOGC is set, let the
// heap grow to 5x the live heap instead of 2x (GOGC=400), and collect
// harder only as it nears swimMemLimit (unless GOMEMLIMIT is set).
func TuneGCForSwim() { tuneGC(400, swimMemLimit) }

// tuneGC sets GOGC to percent and the memory limit to limit(the
// machine's memory), each unless its variable is set (GOGC: neither).
func tuneGC(percent int, limit func(total int64) int64) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(percent)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit(memTotal()))
	}
}

// TuneGCForVirtual: the virtual clock (runVirtual) allocates at every
// message (the wire encoding's round trip), sample and solve over a heap
// of long-lived agents and ground truth; at 10,000 hosts the collector
// took 29 % of the process's CPU at GOGC=100. Unless GOGC is set, let
// the heap grow to 4x the live heap (GOGC=300), and collect harder only
// as it nears virtualMemLimit (unless GOMEMLIMIT is set). The run's
// results do not depend on it.
func TuneGCForVirtual() { tuneGC(300, virtualMemLimit) }

// virtualMemLimit: 8 GiB, or a third of the machine's memory when that
// is less (0: unknown, 4 GiB).
func virtualMemLimit(total int64) int64 {
	const most, unknown = 8 << 30, 4 << 30
	if total <= 0 {
		return unknown
	}
	return min(most, total/3)
}

// swimMemLimit: where its collector works harder again: 12 GiB
// (a cycle every 40-60 s at 1,000 agents), or half the machine's memory
// when that is less (0: unknown, 8 GiB).
func swimMemLimit(total int64) int64 {
	const most, unknown = 12 << 30, 8 << 30
	if total <= 0 {
		return unknown
	}
	return min(most, total/2)
}

// memTotal is the machine's memory in bytes from /proc/meminfo (0 where
// there is none).
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}

// Invalid is the error of a run that did not keep up with its clock
// (exit 1, after the report): its figures are not DVMS's.
func Invalid(reps ...*Report) error {
	var errs []error
	for _, r := range reps {
		if !r.Valid {
			errs = append(errs, fmt.Errorf("the %s run is not valid (it did not keep up with its clock; fewer hosts or a lower --time-scale): %s",
				r.Mode, strings.Join(r.InvalidBecause, "; ")))
		}
	}
	return errors.Join(errs...)
}
