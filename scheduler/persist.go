package scheduler

// Persistent overloads (with a destination peak window, peak.go): relief
// of an overload that comes and goes buys little. A host whose flapping
// servers turn low goes back under its threshold by itself, often before
// or soon after relief lands; the move then bought a few points for a
// few seconds and leaves its destination to overload at the next swing.
//
// So, when the overloaded host's snapshot carries profiles, its gain
// (movecost.go: points over its threshold now) is weighed by how much of
// the window it spent over: the share of the window's ProfileSteps steps
// at which the sum of its servers' profiles was above its CPU limit,
// counting the current step. A host over at every step of the window
// gains its points in full; one over at a single step, a sixteenth. An
// overload by RAM (profiles are CPU) and a host without profiles (no
// window, or its agent keeps none) count as persistent: weight 1. A
// server whose profile is short (it arrived within the window) counts at
// its highest known demand at its missing steps, so a recent arrival
// makes the overload look persistent, never transient.

import (
	"os"
	"strconv"

	"github.com/dvms-project/dvms/scheduler/fit"
)

// persistence is the share, in (0, 1], of the window at which host i of
// s's problem was over its CPU limit (1 without profiles).
func (s *search) persistence(i int) float64 {
	run, ok := overRun(&s.p.Hosts[i], s.base.hosts[i].lim.CPU)
	if !ok {
		return 1
	}
	return min(1, max(float64(run)/persistR, 1.0/ProfileSteps))
}

// overRun is how many steps after the current one host h is predicted
// over lim: the run of steps over from the one a window before the next.
func overRun(h *Host, lim float64) (int, bool) {
	if h.ProfileStep <= 0 || len(h.Servers) == 0 {
		return 0, false
	}
	prof := make([]float64, ProfileSteps)
	for k := range h.Servers {
		for j, c := range aligned(&h.Servers[k], h.ProfileEnd, h.ProfileEnd) {
			prof[j] += c
		}
	}
	run := 0
	for _, c := range prof[:ProfileSteps-1] {
		if !fit.Over(c, lim) {
			break
		}
		run++
	}
	return run, true
}

var persistR = func() float64 {
	v, _ := strconv.ParseFloat(os.Getenv("P30_R"), 64)
	if v <= 0 {
		return 1
	}
	return v
}()

// reliefGain is what relieving overloaded host i of m gains, in points:
// its CPU points over weighed by the overload's persistence, or its RAM
// points over, whichever is more.
func (s *search) reliefGain(m *model, i int) float64 {
	h := &m.hosts[i]
	cpu, ram := 0.0, 0.0
	if h.h.CPUs > 0 {
		cpu = (h.use.CPU - h.lim.CPU) / h.h.CPUs * 100
	}
	if h.h.RAMMB > 0 {
		ram = (h.use.RAM - h.lim.RAM) / h.h.RAMMB * 100
	}
	if cpu > max(0, ram) {
		cpu *= s.persistence(i)
	}
	return max(0, cpu, ram)
}
