package scheduler

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/dvms-project/dvms/scheduler/fit"
)

// Problem is what a partition leader solves: the event and the snapshots
// of the partition's hosts.
type Problem struct {
	// Events are the events the partition carries: its initiator's first,
	// then those of partitions it absorbed. Overloaded hosts are always
	// fixed; hosts with a Maintenance or Underload event are emptied.
	Events     []Event
	Hosts      []Host
	Thresholds Thresholds
	// Preempt allows shelving the lowest-priority servers when no viable
	// placement exists (DESIGN §6, opt-in).
	Preempt bool
	// Headroom is the fraction of their demand limits that destinations
	// of consolidation (servers leaving an Underload event's host) keep
	// free, so consolidation does not create the next overload.
	Headroom float64 `json:",omitempty"`
	// ReliefHeadroom, when > 0, is the fraction of their demand limits
	// that destinations of servers leaving overloaded hosts keep free:
	// a partition asks for it while it may still grow (Config.Relief), so
	// an overload is relieved onto a host with room, not onto the next
	// one to overload. 0: any destination that fits.
	ReliefHeadroom float64 `json:",omitempty"`
	// FewerMoves: with ReliefHeadroom and moves priced, a plan that keeps
	// the headroom only with more moves than one that fits is passed
	// over for that one, said so (Solution.FewerUnmet): the partition
	// grows for room for the fewer moves (relief.go). The leader sets it
	// while its partition may grow.
	FewerMoves bool `json:",omitempty"`
	// MoveCost and MoveCostPerSecond price the moves of relief and
	// consolidation (movecost.go): each live migration costs MoveCost
	// points plus MoveCostPerSecond per second it is predicted to take,
	// and a plan whose cost exceeds its gain is refused. Both 0: off.
	MoveCost          float64 `json:",omitempty"`
	MoveCostPerSecond float64 `json:",omitempty"`
}

// SolveOptions bound the search. The solver never reads a clock itself.
type SolveOptions struct {
	// Now and Deadline give a hard time limit; with Now nil there is none.
	Now      func() time.Time
	Deadline time.Time
	// Rand drives the randomized restarts; nil means no restarts.
	Rand *rand.Rand
	// Restarts is the number of randomized attempts after the
	// deterministic strategies (default 32).
	Restarts int
	// ExactLimit: when an overloaded host has at most this many movable
	// servers, every eviction subset is tried (default 12).
	ExactLimit int
	// Migrations, if set, predicts each live migration (scheduler/migest,
	// learnt from the migrations the agent has seen): a move predicted
	// not to converge is chosen only when no solution without one exists.
	// nil: every move converges.
	Migrations MigrationModel
	// avoid: the pass of Solve that leaves out moves predicted not to
	// converge.
	avoid bool
	// atPeak: the pass of Solve that judges destinations at peaks
	// (peak.go).
	atPeak bool
	// conv: whether a move of the problem may not converge, once per
	// Solve (its peak pass asks too).
	conv *convergence
}

// MigrationModel predicts a live migration: how long it takes, and
// whether its pre-copy converges at all (a guest dirtying memory about
// as fast as its host pair copies it never finishes unless forced).
type MigrationModel interface {
	Migration(a Action) (took time.Duration, converges bool)
}

// DefaultSolveOptions returns options with the defaults filled in.
func DefaultSolveOptions() SolveOptions { return SolveOptions{Restarts: 32, ExactLimit: 12} }

// Solution is the solver's answer.
type Solution struct {
	OK bool
	// Reason says why there is no solution (OK false) or what was left
	// undone (servers that cannot move during a drain).
	Reason string
	// Moves are LiveMigrate (and, with preemption, Shelve) actions from
	// the current placement to the target one, each server at most once.
	Moves []Action
	// MovedMB is the RAM of the migrated servers (the cost minimized,
	// after CrossZone).
	MovedMB int
	// CrossZone counts the live migrations between availability zones
	// (hosts' Zone; the sites of a multi-site region): the solver keeps
	// it as low as it finds, before the bytes moved, since a move across
	// zones crosses a WAN or a server's requested zone.
	CrossZone int `json:",omitempty"`
	// Unmovable lists servers that had to move but cannot ("id: reason").
	Unmovable []string
	// TimedOut reports that the time limit cut the search (best so far).
	TimedOut bool
	// Solved lists the ids of the events whose goal the solution meets.
	Solved []string
	// ReliefUnmet: the problem asked for ReliefHeadroom and no solution
	// kept it; this one only fits (a partition that may grow looks on).
	ReliefUnmet bool `json:",omitempty"`
	// FewerUnmet (with ReliefUnmet): a plan kept the headroom, but only
	// with more moves than this one (Problem.FewerMoves).
	FewerUnmet bool `json:",omitempty"`
	// Unconverging counts the moves SolveOptions.Migrations predicts do
	// not converge (chosen only when no solution avoids them), and
	// MigrationTime sums its predicted durations (0 without a model).
	Unconverging  int           `json:",omitempty"`
	MigrationTime time.Duration `json:",omitempty"`
	// Gain and Cost are the plan's, in points (movecost.go), when the
	// problem prices moves; NotWorth (OK false): the cost exceeded the
	// gain, the plan was refused.
	Gain     float64 `json:",omitempty"`
	Cost     float64 `json:",omitempty"`
	NotWorth bool    `json:",omitempty"`
	// Cooling (OK false): every event is an overload only servers moved
	// within the server cooldown could relieve (cooling.go).
	Cooling bool `json:",omitempty"`
}

// model is the mutable capacity view of the partition during a search.
type model struct {
	hosts []mhost
	thr   Thresholds
	// atPeak: destinations fit at their servers' profiles, not their use
	// now; vec is each server's profile on the model's steps (peak.go).
	atPeak bool
	vec    map[*Server][]float64
	// graded: the hosts carry profiles (prof), with or without atPeak:
	// what fits is ranked by them (peak.go: graded choice).
	graded bool
}

type mhost struct {
	h   *Host
	lim fit.Limit // demand and allocation limits
	use fit.Use   // demand and allocation carried
	// prof and peakRAM: its CPU demand profile and RAM demand at its
	// servers' recent peaks, with atPeak (peak.go).
	prof    []float64
	peakRAM float64
	dest    bool // may receive servers
	anti    map[string]int
	// shared: prof and anti may be another model's too (clone shares
	// them); the first change copies them (own).
	shared bool
}

func newModel(p *Problem) *model {
	m := &model{hosts: make([]mhost, len(p.Hosts)), thr: p.Thresholds}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		mh := mhost{h: h, lim: p.Thresholds.Limit(h), use: h.Use(), dest: !h.Disabled && !h.Draining}
		for _, s := range h.Servers {
			if s.Group != "" && s.Policy == "anti-affinity" {
				if mh.anti == nil {
					mh.anti = map[string]int{}
				}
				mh.anti[s.Group]++
			}
		}
		m.hosts[i] = mh
	}
	return m
}

// clone copies m; the hosts' profiles and anti-affinity counts are
// shared until either model changes them (own): the exact search clones
// the model for every subset it tries, and most hosts are never touched.
func (m *model) clone() *model {
	for i := range m.hosts {
		m.hosts[i].shared = true
	}
	return &model{hosts: slices.Clone(m.hosts), thr: m.thr, atPeak: m.atPeak, vec: m.vec, graded: m.graded}
}

// own gives host h its own copies of what clone shares, before a change.
func (h *mhost) own() {
	if !h.shared {
		return
	}
	h.shared = false
	if h.prof != nil {
		h.prof = slices.Clone(h.prof)
	}
	if h.anti != nil {
		h.anti = maps(h.anti)
	}
}

func maps(in map[string]int) map[string]int {
	out := make(map[string]int, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// fits reports whether s can be added to host i.
func (m *model) fits(i int, s *Server) bool { return m.fitsKeeping(i, s, 1) }

// fitsKeeping reports whether s can be added to host i within keep (1 −
// headroom) of its demand limits (with atPeak, at its peak use and the
// server's peak: peak.go).
func (m *model) fitsKeeping(i int, s *Server, keep float64) bool {
	h := &m.hosts[i]
	if !h.dest {
		return false
	}
	if m.atPeak {
		if !m.fitsAtPeak(i, s, keep) {
			return false
		}
	} else if !fit.Fits(h.use, s.Use(), h.lim.Scaled(keep)) {
		return false
	}
	if s.Policy == "anti-affinity" && h.anti[s.Group] > 0 {
		return false
	}
	return true
}

func (m *model) add(i int, s *Server) {
	h := &m.hosts[i]
	h.own()
	h.use = h.use.Plus(s.Use())
	m.addPeak(i, s, 1)
	if s.Policy == "anti-affinity" {
		if h.anti == nil {
			h.anti = map[string]int{}
		}
		h.anti[s.Group]++
	}
}

func (m *model) remove(i int, s *Server) {
	h := &m.hosts[i]
	h.own()
	h.use = h.use.Plus(s.Use().Neg())
	m.addPeak(i, s, -1)
	if s.Policy == "anti-affinity" && h.anti != nil {
		h.anti[s.Group]--
	}
}

func (m *model) over(i int) bool {
	h := &m.hosts[i]
	return fit.Overloaded(h.use, h.lim)
}

// headroom is the normalized spare demand capacity of host i (with
// atPeak, at its profile's highest: peak.go).
func (m *model) headroom(i int) float64 {
	h := &m.hosts[i]
	cpu, ram := h.use.CPU, h.use.RAM
	if m.atPeak {
		cpu, ram = slices.Max(h.prof), h.peakRAM
	}
	c, r := 1.0, 1.0
	if h.lim.CPU > 0 {
		c = (h.lim.CPU - cpu) / h.lim.CPU
	}
	if h.lim.RAM > 0 {
		r = (h.lim.RAM - ram) / h.lim.RAM
	}
	return min(c, r)
}

// evict is a server chosen to leave host src; consolidate: it leaves an
// underloaded host (its destination keeps the problem's Headroom);
// relieve: it leaves an overloaded host (its destination keeps the
// problem's ReliefHeadroom).
type evict struct {
	src         int
	s           *Server
	consolidate bool
	relieve     bool
}

// Solve computes a target placement for the partition (DESIGN §6): every
// host named by a Maintenance event emptied of its movable servers, every
// host named by an Underload event emptied (or left alone when it cannot
// be), and every overloaded host back under its thresholds, moving as few
// bytes as it can find within the time limit. Destinations respect demand
// and allocation capacity and anti-affinity, and never include disabled,
// draining or emptied hosts.
//
// With ReliefHeadroom, it first looks for destinations that keep it free;
// when none do, it solves without, and says so (ReliefUnmet).
//
// The search with ReliefHeadroom is the deterministic strategies only (no
// randomized restarts), and is skipped when no destination has that
// headroom even before receiving anything: a partition growing for room
// asks at every size, and a search that cannot succeed explores all it
// can before saying so.
//
// With SolveOptions.Migrations, when a move of the partition may not
// converge, it first looks for a solution whose every move converges;
// when there is none, it solves with them, fewest first.
func Solve(p Problem, opt SolveOptions) Solution {
	if why, ok := coolingHolds(&p); ok {
		return Solution{Cooling: true, Reason: why}
	}
	if opt.Migrations != nil && opt.conv == nil {
		opt.conv = &convergence{} // shared with the peak pass: same hosts
	}
	if sol, ok := solveAtPeak(p, opt); ok { // peak.go
		return sol
	}
	if opt.Migrations != nil && !opt.avoid && opt.conv.may(&p, opt.Migrations) {
		strict := opt
		strict.avoid = true
		if sol := Solve(p, strict); sol.OK {
			return sol
		}
	}
	return solveForRelief(p, opt) // relief.go
}

// convergence is mayNotConverge's answer for one problem, computed once
// (every server to every host: a large partition's Solve spent a third
// of its time there, twice).
type convergence struct{ done, yes bool }

func (c *convergence) may(p *Problem, mm MigrationModel) bool {
	if !c.done {
		c.done, c.yes = true, mayNotConverge(p, mm)
	}
	return c.yes
}

// mayNotConverge says whether some server of p, moved to some other host
// of p, is predicted not to converge.
func mayNotConverge(p *Problem, mm MigrationModel) bool {
	for i := range p.Hosts {
		for _, sv := range p.Hosts[i].Servers {
			for j := range p.Hosts {
				if j == i || p.Hosts[j].Disabled {
					continue
				}
				if _, ok := mm.Migration(moveAction(&sv, p.Hosts[i].Name, p.Hosts[j].Name)); !ok {
					return true
				}
			}
		}
	}
	return false
}

// solveTiers is Solve for one ReliefHeadroom.
func solveTiers(p Problem, opt SolveOptions) Solution {
	if opt.Restarts == 0 {
		opt.Restarts = DefaultSolveOptions().Restarts
	}
	if opt.ExactLimit == 0 {
		opt.ExactLimit = DefaultSolveOptions().ExactLimit
	}
	// Tiers: everything; then only the events' hosts (other overloaded
	// hosts are left as they are, never made worse); then each event
	// alone, the partition's own (its initiator's) first. A merged
	// partition thus still solves what it can of the events it carries:
	// the events of the partitions it absorbed too, when its initiator's
	// has no solution (before, their partition gave both up).
	sol := solveTier(p, opt, p.Events, true)
	if !sol.OK && len(p.Events) > 0 {
		if s := solveTier(p, opt, p.Events, false); s.OK {
			return s
		}
		for i := 0; len(p.Events) > 1 && i < len(p.Events); i++ {
			if s := solveTier(p, opt, p.Events[i:i+1], false); s.OK {
				return s
			}
		}
	}
	return sol
}

// solveTier solves for events and, with others, every overloaded host.
func solveTier(p Problem, opt SolveOptions, events []Event, others bool) Solution {
	base := newModel(&p)
	if opt.atPeak || profiled(&p) {
		base.withProfiles(&p, opt.atPeak) // peak.go
	}
	s := &search{p: &p, opt: opt, base: base, best: Solution{Reason: "no viable placement in the partition"}}
	idx := make(map[string]int, len(p.Hosts))
	s.zone = make(map[string]string, len(p.Hosts))
	for i := range p.Hosts {
		idx[p.Hosts[i].Name] = i
		s.zone[p.Hosts[i].Name] = p.Hosts[i].Zone
	}
	empty := map[int]bool{}
	var notes []string
	goal := map[int]bool{}
	var solved []string
	for _, e := range events {
		i, ok := idx[e.Host]
		if !ok {
			continue
		}
		if e.Kind == Overload {
			goal[i] = true
			solved = append(solved, e.ID)
			continue
		}
		h := &p.Hosts[i]
		var fixed []string
		for _, sv := range h.Servers {
			switch {
			case sv.Fixed:
				fixed = append(fixed, sv.ID+": "+sv.FixedReason)
			case sv.Settling && e.Kind == Underload:
				fixed = append(fixed, sv.ID+": arrived within the consolidation cooldown")
			case sv.Cooling && e.Kind == Underload:
				fixed = append(fixed, sv.ID+": moved within the server cooldown")
			}
		}
		if e.Kind == Underload && len(fixed) > 0 {
			notes = append(notes, fmt.Sprintf("underloaded %s cannot be emptied (%s)", h.Name, fixed[0]))
			continue
		}
		solved = append(solved, e.ID)
		s.unmovable = append(s.unmovable, fixed...)
		empty[i] = true
		base.hosts[i].dest = false
		for j := range h.Servers {
			if !h.Servers[j].Fixed {
				s.ev0 = append(s.ev0, evict{src: i, s: &h.Servers[j], consolidate: e.Kind == Underload})
			}
		}
	}
	if len(s.unmovable) > 0 {
		notes = append(notes, fmt.Sprintf("%d server(s) cannot move", len(s.unmovable)))
	}
	s.note = strings.Join(notes, "; ")
	s.goal = goal
	for i := range base.hosts {
		if !empty[i] && base.over(i) && (others || goal[i]) {
			s.over = append(s.over, i)
		}
	}
	cooling := 0
	for _, i := range s.over {
		for _, sv := range base.hosts[i].h.Servers {
			if sv.Cooling && !sv.Fixed {
				cooling++
			}
		}
	}
	if cooling > 0 {
		notes = append(notes, fmt.Sprintf("%d server(s) of overloaded hosts moved within the server cooldown", cooling))
		s.note = strings.Join(notes, "; ")
	}
	if len(s.ev0) == 0 && len(s.over) == 0 {
		return Solution{OK: true, Reason: join("nothing to do", s.note), Unmovable: s.unmovable, Solved: solved}
	}
	s.solve()
	s.pays()
	if !s.found || s.best.NotWorth {
		s.best.Reason = join(s.best.Reason, s.note)
		s.best.Unmovable = s.unmovable
		return s.best
	}
	s.best.Solved = solved
	return s.best
}

func join(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

type search struct {
	p         *Problem
	opt       SolveOptions
	base      *model
	ev0       []evict // servers that must leave emptied hosts
	over      []int   // overloaded hosts to fix
	unmovable []string
	note      string
	best      Solution
	bestMB    int
	bestCross int
	bestUnc   int
	bestCost  float64
	found     bool
	goal      map[int]bool      // hosts of the events' overloads (bestDest)
	zone      map[string]string // host -> availability zone
}

func (s *search) expired() bool {
	return s.opt.Now != nil && !s.opt.Now().Before(s.opt.Deadline)
}

// place puts the evicted servers on destinations, largest demand first,
// each on the host left with the most headroom; it returns the actions or
// false when one server fits nowhere.
func (s *search) place(m *model, ev []evict) ([]Action, bool) {
	order := slices.Clone(ev)
	slices.SortStableFunc(order, byDemand)
	return s.placeInOrder(m, order)
}

// byDemand orders evictions biggest demand first (CPU, then RAM).
func byDemand(a, b evict) int {
	if c := cmp.Compare(b.s.CPU, a.s.CPU); c != 0 {
		return c
	}
	return cmp.Compare(b.s.RAMMB, a.s.RAMMB)
}

// placeInOrder places the servers in the given order.
func (s *search) placeInOrder(m *model, ev []evict) ([]Action, bool) {
	for _, e := range ev {
		m.remove(e.src, e.s)
	}
	acts := make([]Action, 0, len(ev))
	for _, e := range ev {
		bi := s.bestDest(m, e)
		if bi < 0 {
			return nil, false
		}
		m.add(bi, e.s)
		acts = append(acts, moveAction(e.s, m.hosts[e.src].h.Name, m.hosts[bi].h.Name))
	}
	return acts, true
}

// bestDest is the destination in the source's zone, else in any zone,
// with the most headroom left once the server is there, or -1. With
// profiles judged by demand now, the fewest steps over they add come
// before headroom (peak.go: graded choice). A server
// leaving an overloaded host that is not an event's (another member a
// plan relieves on the way) stays in its zone: a partition that grew
// across sites does not move another site's load over the WAN for an
// event that is not that host's (the solver's next tier leaves it).
func (s *search) bestDest(m *model, e evict) int {
	bi, bh, bsame, bsteps := -1, math.Inf(-1), false, 0
	keep := 1.0
	switch {
	case e.consolidate:
		keep = 1 - s.p.Headroom
	case e.relieve:
		keep = 1 - s.p.ReliefHeadroom // relief.go: which destinations count
	}
	zone := m.hosts[e.src].h.Zone
	inZone := e.relieve && !s.goal[e.src]
	for i := range m.hosts {
		if i == e.src || !m.fitsKeeping(i, e.s, keep) {
			continue
		}
		if s.opt.avoid && !s.converges(moveAction(e.s, m.hosts[e.src].h.Name, m.hosts[i].h.Name)) {
			continue
		}
		same := m.hosts[i].h.Zone == zone
		if inZone && !same {
			continue
		}
		if bsame && !same {
			continue
		}
		steps := 0
		if m.graded && !m.atPeak {
			steps = m.overStepsWith(i, e.s) - m.overSteps(i)
		}
		m.add(i, e.s)
		h := m.headroom(i)
		m.remove(i, e.s)
		if (same && !bsame) || bi < 0 || steps < bsteps || steps == bsteps && h > bh {
			bi, bh, bsame, bsteps = i, h, same, steps
		}
	}
	return bi
}

func moveAction(s *Server, from, to string) Action {
	return Action{Kind: LiveMigrate, Server: s.ID, From: from, To: to, Group: s.Group, Policy: s.Policy, VCPUs: s.VCPUs, RAMMB: s.RAMMB, CPU: s.CPU, RAM: s.RAM}
}

func shelveAction(s *Server, from string) Action {
	return Action{Kind: Shelve, Server: s.ID, From: from, Group: s.Group, Policy: s.Policy, VCPUs: s.VCPUs, RAMMB: s.RAMMB, CPU: s.CPU, RAM: s.RAM}
}

// converges says whether the model predicts a converges (no model: yes).
func (s *search) converges(a Action) bool {
	if s.opt.Migrations == nil {
		return true
	}
	_, ok := s.opt.Migrations.Migration(a)
	return ok
}

// offer keeps acts when they beat the best so far: fewer moves predicted
// not to converge, then fewer across zones, then fewer bytes.
func (s *search) offer(acts []Action) {
	mb, cross, unc := 0, 0, 0
	var took time.Duration
	cost := 0.0
	for _, a := range acts {
		if s.p.costOn() {
			cost += s.actionCost(a)
		}
		if a.Kind == LiveMigrate {
			mb += a.RAMMB
			if s.zone[a.From] != s.zone[a.To] {
				cross++
			}
			if s.opt.Migrations != nil {
				d, ok := s.opt.Migrations.Migration(a)
				took += d
				if !ok {
					unc++
				}
			}
		}
	}
	// With moves priced, the cost ranks where the bytes did.
	cheaper := mb < s.bestMB
	if s.p.costOn() {
		cheaper = cost < s.bestCost
	}
	if s.found && (unc > s.bestUnc || unc == s.bestUnc && (cross > s.bestCross || cross == s.bestCross && !cheaper)) {
		return
	}
	s.found, s.bestMB, s.bestCross, s.bestUnc, s.bestCost = true, mb, cross, unc, cost
	s.best = Solution{OK: true, Moves: acts, MovedMB: mb, CrossZone: cross, Unconverging: unc, MigrationTime: took,
		Reason: s.note, Unmovable: s.unmovable, TimedOut: s.best.TimedOut}
}

// candidates are the servers each overloaded host may give up: not
// fixed, not cooling (Server.Cooling).
func (s *search) candidates() [][]*Server {
	cands := make([][]*Server, len(s.over))
	for k, i := range s.over {
		h := s.base.hosts[i].h
		for j := range h.Servers {
			if !h.Servers[j].Fixed && !h.Servers[j].Cooling {
				cands[k] = append(cands[k], &h.Servers[j])
			}
		}
	}
	return cands
}

func (s *search) solve() {
	cands := s.candidates()
	// Deterministic strategies: the order in which each overloaded host
	// gives up servers until it is back under its thresholds.
	strategies := []func(a, b *Server) int{
		func(a, b *Server) int {
			return cmp.Compare(b.CPU/float64(max(1, b.RAMMB)), a.CPU/float64(max(1, a.RAMMB)))
		}, // most CPU per byte moved
		func(a, b *Server) int { return cmp.Compare(a.RAMMB, b.RAMMB) }, // smallest first
		func(a, b *Server) int { return cmp.Compare(b.CPU, a.CPU) },     // biggest demand first
	}
	if s.p.costOn() {
		// Most CPU per point of cost: small, quiet servers first.
		cost := map[*Server]float64{}
		for k, i := range s.over {
			for _, sv := range cands[k] {
				cost[sv] = max(1e-9, s.serverCost(i, sv))
			}
		}
		strategies = append([]func(a, b *Server) int{func(a, b *Server) int {
			return cmp.Compare(b.CPU/cost[b], a.CPU/cost[a])
		}}, strategies...)
	}
	for _, less := range strategies {
		if ev, ok := s.evictions(cands, func(c []*Server) { slices.SortStableFunc(c, less) }); ok {
			if acts, ok := s.place(s.base.clone(), ev); ok {
				s.offer(acts)
			}
		}
	}
	// Every eviction subset when one small host is overloaded.
	if len(s.over) == 1 && len(cands[0]) <= s.opt.ExactLimit && !s.expired() {
		s.exact(s.over[0], cands[0])
	}
	for r := 0; s.opt.Rand != nil && r < s.opt.Restarts; r++ {
		if s.expired() {
			s.best.TimedOut = true
			break
		}
		rnd := s.opt.Rand
		shuffle := func(c []*Server) { rnd.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] }) }
		if ev, ok := s.evictions(cands, shuffle); ok {
			rnd.Shuffle(len(ev), func(i, j int) { ev[i], ev[j] = ev[j], ev[i] })
			if acts, ok := s.placeInOrder(s.base.clone(), ev); ok {
				s.offer(acts)
			}
		}
	}
	if !s.found && s.p.Preempt && !s.opt.avoid { // shelving is no way to avoid a slow move
		s.preempt(cands)
	}
}

// evictions picks, from each overloaded host, servers in the given order
// until the host fits, then puts back those that turn out unnecessary
// (largest RAM first, so fewer bytes move). ev0 comes first.
func (s *search) evictions(cands [][]*Server, order func([]*Server)) ([]evict, bool) {
	m := s.base.clone()
	ev := slices.Clone(s.ev0)
	for k, i := range s.over {
		c := slices.Clone(cands[k])
		order(c)
		var mine []*Server
		for _, sv := range c {
			if !m.over(i) {
				break
			}
			m.remove(i, sv)
			mine = append(mine, sv)
		}
		if m.over(i) {
			return nil, false // even all movable servers do not fix this host
		}
		slices.SortStableFunc(mine, func(a, b *Server) int { return cmp.Compare(b.RAMMB, a.RAMMB) })
		for _, sv := range mine {
			m.add(i, sv)
			if m.over(i) {
				m.remove(i, sv)
				ev = append(ev, evict{src: i, s: sv, relieve: true})
			}
		}
	}
	return ev, true
}

// exact tries every eviction subset of one overloaded host, cheapest
// first (bytes moved, or the cost when moves are priced), and keeps the
// first that fixes the host and can be placed.
func (s *search) exact(src int, cands []*Server) {
	type subset struct {
		mask uint32
		w    float64
	}
	weight := func(i int, sv *Server) float64 { return float64(sv.RAMMB) }
	bound := func() float64 { return float64(s.bestMB) }
	if s.p.costOn() {
		weight = s.serverCost
		bound = func() float64 { return s.bestCost }
	}
	n := len(cands)
	lone := s.loneFits(src, cands)
	base0 := 0.0
	for _, e := range s.ev0 {
		base0 += weight(e.src, e.s)
	}
	ws := make([]float64, n)
	for j, sv := range cands {
		ws[j] = weight(src, sv)
	}
	// With a solution found, the search ends at the first subset that
	// costs as much: those are left out before sorting (they would sort
	// last, so every subset kept has the same rank).
	subs := make([]subset, 0, 1<<n)
	for mask := uint32(1); mask < 1<<n; mask++ {
		w := 0.0
		for j := 0; j < n; j++ {
			if mask&(1<<j) != 0 {
				w += ws[j]
			}
		}
		if s.found && base0+w >= bound() {
			continue
		}
		subs = append(subs, subset{mask, w})
	}
	// Cheapest first, ties in mask order (the order they were made in):
	// a stable sort's order, without its cost.
	slices.SortFunc(subs, func(a, b subset) int { return cmp.Or(cmp.Compare(a.w, b.w), cmp.Compare(a.mask, b.mask)) })
	for k, sub := range subs {
		if k%64 == 0 && s.expired() {
			s.best.TimedOut = true
			return
		}
		if s.found && base0+sub.w >= bound() {
			return
		}
		// Whether the subset fixes the host needs only its use (as
		// model.remove computes it), not a copy of the model.
		h := &s.base.hosts[src]
		use := h.use
		for j := 0; j < n; j++ {
			if sub.mask&(1<<j) != 0 {
				use = use.Plus(cands[j].Use().Neg())
			}
		}
		if fit.Overloaded(use, h.lim) || sub.mask&^lone != 0 {
			continue // not fixed, or a server of it fits nowhere
		}
		ev := slices.Clone(s.ev0)
		for j := 0; j < n; j++ {
			if sub.mask&(1<<j) != 0 {
				ev = append(ev, evict{src: src, s: cands[j], relieve: true})
			}
		}
		if acts, ok := s.place(s.base.clone(), ev); ok {
			s.offer(acts)
			return
		}
	}
	// The first subset left out would have been checked for time first.
	if k := len(subs); k < 1<<n-1 && k%64 == 0 && s.expired() {
		s.best.TimedOut = true
	}
}

// loneFits is the mask of cands (servers of host src) that each could
// go somewhere on their own: a destination bestDest would take with every
// other eviction off its host and nothing placed yet. Placing others only
// fills destinations, so a subset with a server outside the mask cannot be
// placed, and exact skips it without copying the model. (Only src's
// servers leave src, and src is never their destination; the other
// evictions leave in place's order, so every other host's use is the one
// place starts from, to the bit.)
func (s *search) loneFits(src int, cands []*Server) uint32 {
	m := s.base.clone()
	order := slices.Clone(s.ev0)
	slices.SortStableFunc(order, byDemand)
	for _, e := range order {
		m.remove(e.src, e.s)
	}
	var mask uint32
	for j, sv := range cands {
		if s.bestDest(m, evict{src: src, s: sv, relieve: true}) >= 0 {
			mask |= 1 << j
		}
	}
	return mask
}

// preempt evicts the lowest-priority servers first, places the most
// important ones first and shelves (offloads) what fits nowhere.
func (s *search) preempt(cands [][]*Server) {
	byPrio := func(a, b *Server) int {
		if a.Priority != b.Priority {
			return cmp.Compare(a.Priority, b.Priority)
		}
		return cmp.Compare(b.CPU, a.CPU)
	}
	ev, ok := s.evictions(cands, func(c []*Server) { slices.SortStableFunc(c, byPrio) })
	if !ok {
		return
	}
	slices.SortStableFunc(ev, func(a, b evict) int { return cmp.Compare(b.s.Priority, a.s.Priority) })
	m := s.base.clone()
	for _, e := range ev {
		m.remove(e.src, e.s)
	}
	acts := make([]Action, 0, len(ev))
	for _, e := range ev {
		if bi := s.bestDest(m, e); bi >= 0 {
			m.add(bi, e.s)
			acts = append(acts, moveAction(e.s, m.hosts[e.src].h.Name, m.hosts[bi].h.Name))
			continue
		}
		acts = append(acts, shelveAction(e.s, m.hosts[e.src].h.Name))
	}
	s.offer(acts)
	s.best.Reason = join("preempted: lowest-priority servers shelved", s.note)
}
