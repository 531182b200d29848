package scheduler

// Overloads that end by themselves (with a destination peak window,
// peak.go): relief of an overload about to end buys nothing. A host whose
// flapping servers turn low goes back under its threshold by itself; a
// move that lands as it does bought a few points for a few seconds, and
// the server it moved may overload its destination at its next swing.
//
// So, when the overloaded host's snapshot carries profiles, relief
// predicts how long the overload lasts from the window: demand that flaps
// repeats with its period, and the window is best set to one period
// (peak.go), so the host's demand at the step after the current one is
// predicted by its profile's step one window before that (its oldest).
// An overload predicted to be gone at the next step (the sum of the
// host's servers' profiles was within its CPU limit at that step) gains
// one step of the window's ProfileSteps: a sixteenth of its points over
// (movecost.go); one predicted to last gains its points in full, as
// before. An overload by RAM (profiles are CPU only) and a host without
// profiles (no window) gain their points in full. A server whose profile
// is short (it arrived within the window) counts at its highest known
// demand at its missing steps: a recent arrival makes the overload look
// lasting, never transient.
//
// A refused plan ends the event not_worth (movecost.go); the event is
// raised again after retry_backoff, which a not_worth end does not
// double (end.go): the refusal is about this moment of the overload,
// and one that does last is relieved at the next try, not a minute later.

import "github.com/dvms-project/dvms/scheduler/fit"

// persistence is the weight of host i's CPU points over in relief's gain:
// 1/ProfileSteps when its overload is predicted to end at the next step,
// else (or without profiles) 1.
func (s *search) persistence(i int) float64 {
	if lasts(&s.p.Hosts[i], s.base.hosts[i].lim.CPU) {
		return 1
	}
	return 1.0 / ProfileSteps
}

// lasts predicts whether host h stays over lim at the step after its
// profiles' last: its servers' profiles summed at their oldest step, a
// window before it. Without profiles, yes.
func lasts(h *Host, lim float64) bool {
	if h.ProfileStep <= 0 || len(h.Servers) == 0 {
		return true
	}
	next := 0.0
	for k := range h.Servers {
		next += aligned(&h.Servers[k], h.ProfileEnd, h.ProfileEnd)[0]
	}
	return fit.Over(next, lim)
}

// reliefGain is what relieving overloaded host i of m gains, in points:
// its CPU points over weighed by persistence, or its RAM points over,
// whichever is more.
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
