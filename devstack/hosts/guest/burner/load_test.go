package main

import (
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time this process has used (all threads).
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runDelay is how long this process's threads have waited on a run queue
// for a CPU (schedstat's second field, summed over /proc/self/task).
func runDelay(t *testing.T) (time.Duration, bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	var sum time.Duration
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/schedstat")
		if err != nil {
			continue // a thread that ended
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += time.Duration(ns)
	}
	return sum, true
}

// TestCPUBurnerDutyCycle checks that half a core is about half a core. On a
// busy shared machine the burner can get less than it asks for, never much
// more: the bound above is tight; below, what it burned plus what it
// waited for a CPU (the kernel's run-queue delay) must reach about half a
// core, so a burner that did not try fails and a starved one does not.
func TestCPUBurnerDutyCycle(t *testing.T) {
	if testing.Short() {
		t.Skip("burns CPU for 2 s")
	}
	var c cpuBurner
	delay0, haveDelay := runDelay(t)
	cpu0, wall0 := processCPU(t), time.Now()
	c.Set(0.5)
	deadline := time.NewTimer(2 * time.Second)
	<-deadline.C
	c.Set(0)
	wall := time.Since(wall0).Seconds()
	used := (processCPU(t) - cpu0).Seconds() / wall
	delay1, _ := runDelay(t)
	waited := (delay1 - delay0).Seconds() / wall
	t.Logf("asked 0.5 core, used %.3f, waited for a CPU %.3f", used, waited)
	if used > 0.6 {
		t.Errorf("burned %.3f cores, want at most about 0.5", used)
	}
	tried := used
	if haveDelay {
		tried += waited
	}
	if tried < 0.4 {
		t.Errorf("burned %.3f cores and waited %.3f for a CPU: the burner did not try to burn 0.5", used, waited)
	}
	if c.Cores() != 0 {
		t.Errorf("Cores() = %v after Set(0)", c.Cores())
	}
}

func TestMemDirtierRate(t *testing.T) {
	var m memDirtier
	m.Set(4, 0)
	waitFor(t, "the 4 MiB buffer touched once", func() bool { _, _, d := m.Status(); return d >= 4 })
	m.Set(4, 40)
	start := time.Now()
	_, _, before := m.Status()
	waitFor(t, "20 MiB dirtied at 40 MiB/s", func() bool { _, _, d := m.Status(); return d-before >= 4+20 })
	took := time.Since(start).Seconds()
	m.Set(0, 0)
	// 4 MiB of first touch, then 20 MiB at 40 MiB/s: 0.5 s, never faster.
	if took < 0.45 {
		t.Errorf("dirtied 20 MiB in %.2fs at 40 MiB/s: faster than asked", took)
	}
	t.Logf("20 MiB at 40 MiB/s took %.2fs", took)
	if mb, mbps, _ := m.Status(); mb != 0 || mbps != 0 {
		t.Errorf("Status after Set(0,0) = %d MiB at %v", mb, mbps)
	}
}

func TestTouchWraps(t *testing.T) {
	var m memDirtier
	buf := make([]byte, 3*pageSize)
	next := m.touch(buf, 2, 4) // pages 2, 0, 1, 2
	if next != 0 || buf[2*pageSize] != 2 || buf[0] != 1 || buf[pageSize] != 1 {
		t.Errorf("touch: next %d, pages %d %d %d", next, buf[0], buf[pageSize], buf[2*pageSize])
	}
	if got := float64(m.dirtied.Load()); math.Abs(got-4) > 0 {
		t.Errorf("dirtied %v pages, want 4", got)
	}
}

// waitFor polls cond every 10 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
