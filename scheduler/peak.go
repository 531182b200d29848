package scheduler

// Destination peaks (Config.DestinationPeakWindow): the whole rule, agent
// side and solver side, in this file.
//
// Demand that flaps makes a host whose flapping servers happen to be low
// look roomy; a server moved there for an overload overloads it when they
// turn high again, and relief moves again. With a peak window, each agent
// keeps, per server on its host, the highest CPU and RAM demand it
// measured within the window (Server.PeakCPU, Server.PeakRAM, in its
// snapshots), and the solver judges every destination by peaks: a server
// fits a host when the host's servers' peaks plus the incoming server's
// peak stay within the host's limits (the same fit.Fits, on peak use;
// relief and consolidation headroom apply on top), and the destination
// with the most room is the one with the most room at peak. Whether a
// host is overloaded, and so which servers must leave it, stays judged by
// its demand now: the peak rule only refuses destinations.
//
// A server that just arrived on a host has no history there: its peak is
// its demand from its first sample on (the agent that measured it before
// keeps no record once it left). Without a window (0, the default) no
// peak is kept, peak use is demand now, and nothing changes.

import "time"

// peakSample is one measurement of a server's demand.
type peakSample struct {
	at       time.Time
	cpu, ram float64
}

// notePeaks records the host's and its servers' demand sampled now and
// sets their PeakCPU and PeakRAM: the highest demand measured within the
// window. Servers gone from the host are forgotten.
func (a *Agent) notePeaks(h *Host) {
	w := a.cfg.DestinationPeakWindow
	if w <= 0 {
		return
	}
	cpu, ram := h.Demand()
	drop := 0
	for drop < len(a.hostPeaks) && a.now.Sub(a.hostPeaks[drop].at) >= w {
		drop++
	}
	a.hostPeaks = append(a.hostPeaks[drop:], peakSample{at: a.now, cpu: cpu, ram: ram})
	for _, p := range a.hostPeaks {
		h.PeakCPU, h.PeakRAM = max(h.PeakCPU, p.cpu), max(h.PeakRAM, p.ram)
	}
	ss := h.Servers
	if a.peaks == nil {
		a.peaks = make(map[string][]peakSample, len(ss))
	}
	for k := range ss {
		s := &ss[k]
		hist := a.peaks[s.ID]
		drop := 0
		for drop < len(hist) && a.now.Sub(hist[drop].at) >= w {
			drop++
		}
		hist = append(hist[drop:], peakSample{at: a.now, cpu: s.CPU, ram: s.RAM})
		a.peaks[s.ID] = hist
		for _, p := range hist {
			s.PeakCPU, s.PeakRAM = max(s.PeakCPU, p.cpu), max(s.PeakRAM, p.ram)
		}
	}
	if len(a.peaks) == len(ss) {
		return // every server remembered is still here
	}
	present := make(map[string]bool, len(ss))
	for k := range ss {
		present[ss[k].ID] = true
	}
	for id := range a.peaks {
		if !present[id] {
			delete(a.peaks, id)
		}
	}
}

// hasPeaks says whether a host of p carries a peak (its agent keeps a
// peak window).
func hasPeaks(p *Problem) bool {
	for i := range p.Hosts {
		if p.Hosts[i].PeakCPU > 0 || p.Hosts[i].PeakRAM > 0 {
			return true
		}
	}
	return false
}

// solveAtPeak is Solve's first pass when p carries peaks: destinations
// judged at peak. It reports false when the pass found no plan (nor a
// refusal): Solve then judges them by demand now.
func solveAtPeak(p Problem, opt SolveOptions) (Solution, bool) {
	if opt.atPeak || !hasPeaks(&p) {
		return Solution{}, false
	}
	opt.atPeak = true
	sol := Solve(p, opt)
	return sol, sol.OK || sol.NotWorth
}
