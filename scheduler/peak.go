package scheduler

// Destination peaks (Config.DestinationPeakWindow): the whole rule, agent
// side and solver side, in this file.
//
// Demand that flaps makes a host whose flapping servers happen to be low
// look roomy; a server moved there for an overload overloads it when they
// turn high again, and relief moves again. With a peak window, each agent
// keeps, per server on its host, a profile of its CPU demand over the
// window: the highest demand measured in each of ProfileSteps steps,
// aligned on the clock (step k covers [k·step, (k+1)·step) since the Unix
// epoch, the same steps on every host), and its highest RAM demand. Its
// snapshots carry them (Server.Profile, PeakCPU, PeakRAM; Host.ProfileEnd,
// ProfileStep).
//
// The solver first judges destinations by profiles: a server fits a host
// when, at every step of the window, the CPU demand of the host's servers
// plus the incoming server's stays within the host's limit (and their
// peak RAM too, with the allocation as always); relief and consolidation
// headroom apply on top; the destination with the most room is the one
// with the most room at its profile's highest step. So a server whose
// demand was high while the host's was low fits (their swings
// interleave), and one that would have overloaded the host at any moment
// of the window does not. When no plan fits at peaks, the solver judges by
// demand now, as without a window: a host is never left overloaded for
// want of a peak fit. Whether a host is overloaded, and so which servers
// must leave it, stays judged by its demand now; the planner's order and
// the executor's re-check judge demand now too (they guard what happens
// while the plan runs).
//
// A moved server's profile travels with it: the leader sends, with the
// update that starts its plan (Message.Carried), the profile of each
// server the plan moves as its source's snapshot had it, and the
// destination's agent starts the server's profile from it when the server
// arrives (its steps since the source's last are filled as any gap is).
// Without it, a server that just arrived has no record on its new host and
// its host looks full at every step for a whole window after each move.
// Where the profile is still short (a server that arrived within the
// window and whose profile did not come: the update was lost, the leader
// had none) or its host's snapshot is older than the problem's latest, its
// missing steps count at its highest known demand. Without a window (0,
// the default) no profile is kept and nothing changes.

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dvms-project/dvms/scheduler/fit"
)

// ProfileSteps is the number of steps of a server's profile: the step is
// the destination peak window over ProfileSteps.
const ProfileSteps = 16

// profile is the agent's record of one server's demand per step.
type profile struct {
	end      int64     // the index of the last step
	cpu, ram []float64 // the highest of each step, oldest first
}

// notePeaks records the host's servers' demand sampled now and sets their
// Profile, PeakCPU and PeakRAM and the host's ProfileEnd and ProfileStep.
// Servers gone from the host are forgotten.
func (a *Agent) notePeaks(h *Host) {
	w := a.cfg.DestinationPeakWindow
	if w <= 0 {
		return
	}
	step := max(w/ProfileSteps, time.Millisecond)
	k := a.now.UnixNano() / int64(step)
	h.ProfileStep, h.ProfileEnd = step, k
	if a.peaks == nil {
		a.peaks = make(map[string]*profile, len(h.Servers))
	}
	for i := range h.Servers {
		s := &h.Servers[i]
		p := a.peaks[s.ID]
		if p == nil || k < p.end {
			p = a.arrival(s.ID, k)
			a.peaks[s.ID] = p
		}
		p.record(k, s.CPU, s.RAM)
		s.Profile = slices.Clone(p.cpu)
		s.PeakCPU, s.PeakRAM = slices.Max(p.cpu), slices.Max(p.ram)
	}
	for id, c := range a.carried {
		if k-c.end >= ProfileSteps {
			delete(a.carried, id) // the server never came within the window
		}
	}
	if len(a.peaks) == len(h.Servers) {
		return // every server remembered is still here
	}
	present := make(map[string]bool, len(h.Servers))
	for i := range h.Servers {
		present[h.Servers[i].ID] = true
	}
	for id := range a.peaks {
		if !present[id] {
			delete(a.peaks, id)
		}
	}
}

// arrival is the profile a server new on the host (or whose record is
// ahead of the clock) starts from in step k: the one its source's agent
// recorded (Carried), when its leader sent one that is not ahead of k
// nor older than the window, else an empty one.
func (a *Agent) arrival(id string, k int64) *profile {
	c, ok := a.carried[id]
	delete(a.carried, id)
	if !ok || c.end > k || k-c.end >= ProfileSteps {
		return &profile{end: k}
	}
	return c
}

// Carried is the demand profile of a server a plan moves, as its source's
// snapshot had it (Server.Profile, PeakRAM; Host.ProfileStep, ProfileEnd):
// its leader sends it to the destination's agent (Message.Carried).
type Carried struct {
	Server  string
	To      string
	Step    time.Duration
	End     int64
	Profile []float64
	PeakRAM float64 `json:",omitempty"`
}

// carry lists the profiles of the servers plan moves (nil without a
// peak window): from the snapshot the plan was built on, each with its
// source's step and end.
func (a *Agent) carry(plan Plan) []Carried {
	if a.cfg.DestinationPeakWindow <= 0 {
		return nil
	}
	src := make(map[string]*Host, len(plan.Snapshot))
	for i := range plan.Snapshot {
		src[plan.Snapshot[i].Name] = &plan.Snapshot[i]
	}
	var out []Carried
	for _, step := range plan.Steps {
		for _, act := range step {
			h := src[act.From]
			if act.Kind != LiveMigrate || h == nil || h.ProfileStep <= 0 {
				continue
			}
			for i := range h.Servers {
				if s := &h.Servers[i]; s.ID == act.Server && len(s.Profile) > 0 {
					out = append(out, Carried{Server: s.ID, To: act.To, Step: h.ProfileStep, End: h.ProfileEnd,
						Profile: s.Profile[max(0, len(s.Profile)-ProfileSteps):], PeakRAM: s.PeakRAM})
					break
				}
			}
		}
	}
	return out
}

// expect keeps the profiles of the servers coming to this agent's host
// (To), on its own step, until they arrive (notePeaks) or are older than
// the window. Only judging at peaks reads them: a forged profile makes
// the host look fuller or emptier at peaks in the solver's first pass,
// never what the executor re-checks before each move (demand now), nor
// whether a host is overloaded.
func (a *Agent) expect(cs []Carried) {
	w := a.cfg.DestinationPeakWindow
	if w <= 0 {
		return
	}
	step := max(w/ProfileSteps, time.Millisecond)
	for _, c := range cs {
		if c.To != a.cfg.ID || c.Step != step || len(c.Profile) == 0 {
			continue
		}
		if a.carried == nil {
			a.carried = map[string]*profile{}
		}
		if _, ok := a.carried[c.Server]; !ok && len(a.carried) >= maxCarried {
			continue // its missing steps count at its peak, as without one
		}
		p := &profile{end: c.End, cpu: slices.Clone(c.Profile), ram: make([]float64, len(c.Profile))}
		for i := range p.ram {
			p.ram[i] = math.Round(c.PeakRAM) // the source sends its peak only
		}
		a.carried[c.Server] = p
	}
}

// maxCarried bounds the profiles an agent keeps for servers on their way
// to its host: far more than a host receives within a window.
const maxCarried = 1024

// validCarried checks profiles decoded from the bus: bounded, named,
// finite and non-negative.
func validCarried(cs []Carried) error {
	if len(cs) > MaxNodes {
		return fmt.Errorf("%d carried profiles: more than %d", len(cs), MaxNodes)
	}
	for _, c := range cs {
		if c.Server == "" || c.To == "" || c.Step <= 0 || len(c.Profile) == 0 || len(c.Profile) > ProfileSteps {
			return fmt.Errorf("carried profile of %q to %q: step %v, %d steps", c.Server, c.To, c.Step, len(c.Profile))
		}
		for _, v := range append([]float64{c.PeakRAM}, c.Profile...) {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("carried profile of %q: value %v", c.Server, v)
			}
		}
	}
	return nil
}

// record adds a sample taken in step k (k >= p.end): steps without a
// sample since the last take this one's demand.
func (p *profile) record(k int64, cpu, ram float64) {
	cpu, ram = math.Round(cpu*1000)/1000, math.Round(ram)
	if len(p.cpu) > 0 && k == p.end {
		n := len(p.cpu) - 1
		p.cpu[n], p.ram[n] = max(p.cpu[n], cpu), max(p.ram[n], ram)
		return
	}
	for gap := min(k-p.end, ProfileSteps); len(p.cpu) > 0 && gap > 0; gap-- {
		p.cpu, p.ram = append(p.cpu, cpu), append(p.ram, ram)
	}
	if len(p.cpu) == 0 {
		p.cpu, p.ram = append(p.cpu, cpu), append(p.ram, ram)
	}
	p.end = k
	if n := len(p.cpu); n > ProfileSteps {
		p.cpu = slices.Delete(p.cpu, 0, n-ProfileSteps)
		p.ram = slices.Delete(p.ram, 0, n-ProfileSteps)
	}
}

// profiled says whether every host of p carries profiles on one step.
func profiled(p *Problem) bool {
	if len(p.Hosts) == 0 {
		return false
	}
	step := p.Hosts[0].ProfileStep
	for i := range p.Hosts {
		if p.Hosts[i].ProfileStep <= 0 || p.Hosts[i].ProfileStep != step {
			return false
		}
	}
	return true
}

// solveAtPeak is Solve's first pass when every host of p carries
// profiles: destinations judged at peaks. It reports false when the pass
// found no plan (nor a refusal): Solve then judges them by demand now.
func solveAtPeak(p Problem, opt SolveOptions) (Solution, bool) {
	if opt.atPeak || !profiled(&p) {
		return Solution{}, false
	}
	opt.atPeak = true
	sol := Solve(p, opt)
	return sol, sol.OK || sol.NotWorth
}

// withProfiles gives m the profiles of p: each server's on the problem's
// latest ProfileSteps steps, each host's the sum of its servers'. With
// atPeak m judges destinations at peaks; without, it judges them by
// demand now and ranks what fits by the profiles (graded choice below).
func (m *model) withProfiles(p *Problem, atPeak bool) {
	end := int64(math.MinInt64)
	for i := range p.Hosts {
		end = max(end, p.Hosts[i].ProfileEnd)
	}
	m.atPeak, m.graded, m.vec = atPeak, true, map[*Server][]float64{}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		mh := &m.hosts[i]
		mh.prof, mh.peakRAM = make([]float64, ProfileSteps), 0
		for k := range h.Servers {
			s := &h.Servers[k]
			v := aligned(s, h.ProfileEnd, end)
			m.vec[s] = v
			for j := range v {
				mh.prof[j] += v[j]
			}
			mh.peakRAM += max(s.RAM, s.PeakRAM)
		}
	}
}

// aligned is s's profile on the ProfileSteps steps ending at end, s's
// host's snapshot ending at hostEnd; missing steps at its highest known.
func aligned(s *Server, hostEnd, end int64) []float64 {
	v := make([]float64, ProfileSteps)
	high := max(s.CPU, s.PeakCPU)
	first := hostEnd - int64(len(s.Profile)) + 1 // the step of s.Profile[0]
	for j := range v {
		k := end - ProfileSteps + 1 + int64(j)
		if i := k - first; i >= 0 && i < int64(len(s.Profile)) {
			v[j] = s.Profile[i]
		} else {
			v[j] = high
		}
	}
	return v
}

// vector is s's profile in m: its own when the problem gave one, else its
// highest known demand at every step (a server the planner made up).
func (m *model) vector(s *Server) []float64 {
	if v, ok := m.vec[s]; ok {
		return v
	}
	v := make([]float64, ProfileSteps)
	for j := range v {
		v[j] = max(s.CPU, s.PeakCPU)
	}
	return v
}

// addPeak adds (sign 1) or takes off (-1) s's profile and peak RAM to
// host i's, when m judges at peaks.
func (m *model) addPeak(i int, s *Server, sign float64) {
	h := &m.hosts[i]
	if h.prof == nil {
		return
	}
	for j, c := range m.vector(s) {
		h.prof[j] += sign * c
	}
	h.peakRAM += sign * max(s.RAM, s.PeakRAM)
}

// fitsAtPeak reports whether s fits host i at every step of their
// profiles and at their peak RAM, within keep of its demand limits, and
// within its allocation.
func (m *model) fitsAtPeak(i int, s *Server, keep float64) bool {
	h := &m.hosts[i]
	lim := h.lim.Scaled(keep)
	used := fit.Use{RAM: h.peakRAM, VCPUs: h.use.VCPUs, RAMMB: h.use.RAMMB}
	add := fit.Use{RAM: max(s.RAM, s.PeakRAM), VCPUs: float64(s.VCPUs), RAMMB: float64(s.RAMMB)}
	if !fit.Fits(used, add, lim) {
		return false
	}
	for j, c := range m.vector(s) {
		if fit.Over(h.prof[j]+c, lim.CPU) {
			return false
		}
	}
	return true
}

// Graded choice. When the hosts carry profiles and no plan fits at
// peaks, the solver judges destinations by demand now; of those that fit
// now, each server goes to the one it adds the fewest steps over its CPU
// limit to (the steps of the window at which the host's profile plus the
// server's would have been over; then the one with the most room now).
// Relief that falls back to demand now so no longer takes a host because
// its flapping servers happen to be low now: that host overloads again
// when they turn high, and relief moves again. The host's own steps over
// also say how long an overload is expected to last (movecost.go).

// overSteps is the number of steps at which host i's profile is over its
// CPU limit (0 without profiles).
func (m *model) overSteps(i int) int {
	h := &m.hosts[i]
	n := 0
	for _, c := range h.prof {
		if fit.Over(c, h.lim.CPU) {
			n++
		}
	}
	return n
}

// futureOver is the sum of overSteps over m's hosts.
func (m *model) futureOver() int {
	n := 0
	for i := range m.hosts {
		n += m.overSteps(i)
	}
	return n
}

// overStepsWith is overSteps(i) with s added to host i.
func (m *model) overStepsWith(i int, s *Server) int {
	h := &m.hosts[i]
	n := 0
	for j, c := range m.vector(s) {
		if fit.Over(h.prof[j]+c, h.lim.CPU) {
			n++
		}
	}
	return n
}
