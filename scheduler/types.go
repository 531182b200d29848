package scheduler

import (
	"errors"
	"fmt"
	"time"

	"github.com/dvms-project/dvms/scheduler/fit"
)

// EventKind is what an agent reacts to (DESIGN §4).
type EventKind uint8

const (
	NoEvent EventKind = iota
	Overload
	Underload
	Maintenance
)

func (k EventKind) String() string {
	switch k {
	case Overload:
		return "overload"
	case Underload:
		return "underload"
	case Maintenance:
		return "maintenance"
	}
	return "none"
}

// Event is a problem on one host, named end to end by ID.
type Event struct {
	ID   string
	Kind EventKind
	Host string
	// Detected is when the event fired (agent time).
	Detected time.Time
}

// Server is a server as the solver sees it.
type Server struct {
	ID    string
	VCPUs int     // flavor vCPUs (placement allocation)
	RAMMB int     // flavor RAM (placement allocation)
	CPU   float64 // measured CPU demand, in cores
	RAM   float64 // measured RAM demand, in MB
	// Group and Policy are the server group and its policy, if any.
	Group  string `json:",omitempty"`
	Policy string `json:",omitempty"`
	// Priority orders preemption (lowest shelved first).
	Priority int `json:",omitempty"`
	// Fixed servers are never moved: pinned by the operator, not ACTIVE,
	// or with a task state. FixedReason says why.
	Fixed       bool   `json:",omitempty"`
	FixedReason string `json:",omitempty"`
	// Settling servers arrived on their host less than the consolidation
	// cooldown ago: consolidation leaves them where they are.
	Settling bool `json:",omitempty"`
	// Cooling servers were moved onto their host by dvms less than the
	// server cooldown ago (Config.ServerCooldown): relief and
	// consolidation leave them where they are; a drain moves them.
	Cooling bool `json:",omitempty"`
	// PeakCPU and PeakRAM are the highest demand the host's agent
	// measured within its destination peak window (peak.go); 0 without
	// one. Profile is its CPU demand over that window, the highest of
	// each step (Host.ProfileStep), oldest first, its last at
	// Host.ProfileEnd. Destinations are judged by profiles.
	PeakCPU float64   `json:",omitempty"`
	PeakRAM float64   `json:",omitempty"`
	Profile []float64 `json:",omitempty"`
}

// Host is one host's snapshot: capacity, state and servers.
type Host struct {
	Name string
	// Zone is the host's availability zone (the site of a multi-site
	// region): the solver moves servers within their zone when it can.
	Zone string `json:",omitempty"`
	// Physical capacity, against which demand is measured.
	CPUs  float64
	RAMMB float64
	// Placement capacity (inventory × ratio − reserved) and usage.
	AllocVCPUs float64
	AllocRAMMB float64
	UsedVCPUs  float64
	UsedRAMMB  float64
	// Disabled hosts are never destinations; Draining ones must be emptied.
	Disabled bool `json:",omitempty"`
	Draining bool `json:",omitempty"`
	Servers  []Server
	// ProfileStep and ProfileEnd: the step of its servers' profiles
	// (Server.Profile, peak.go) and the index of their last step (time
	// since the Unix epoch over ProfileStep); 0 without a peak window.
	ProfileStep time.Duration `json:",omitempty"`
	ProfileEnd  int64         `json:",omitempty"`
	// OverFor: how long the host has been overloaded (K of the last N
	// samples) as of this snapshot, by its agent's samples; 0 when it is
	// not. A relief's gain grows with it (movecost.go).
	OverFor time.Duration `json:",omitempty"`
}

// Demand sums the measured demand of the host's servers.
func (h *Host) Demand() (cpu, ram float64) {
	for i := range h.Servers {
		cpu += h.Servers[i].CPU
		ram += h.Servers[i].RAM
	}
	return cpu, ram
}

// Thresholds say when a host is overloaded or underloaded, as fractions
// of its physical capacity.
type Thresholds struct {
	CPUOverload  float64 // default 1.0
	RAMOverload  float64 // default 1.0
	CPUUnderload float64 // default 0.2
	RAMUnderload float64 // default 0.2
}

// DefaultThresholds are DESIGN §4's defaults.
func DefaultThresholds() Thresholds {
	return Thresholds{CPUOverload: 1.0, RAMOverload: 1.0, CPUUnderload: 0.2, RAMUnderload: 0.2}
}

// Validate lists every problem.
func (t Thresholds) Validate() error {
	var errs []error
	if t.CPUOverload <= 0 || t.RAMOverload <= 0 {
		errs = append(errs, errors.New("cpu_overload and ram_overload must be > 0"))
	}
	if t.CPUUnderload < 0 || t.CPUUnderload >= t.CPUOverload {
		errs = append(errs, fmt.Errorf("cpu_underload %.2f must be in [0, cpu_overload)", t.CPUUnderload))
	}
	if t.RAMUnderload < 0 || t.RAMUnderload >= t.RAMOverload {
		errs = append(errs, fmt.Errorf("ram_underload %.2f must be in [0, ram_overload)", t.RAMUnderload))
	}
	return errors.Join(errs...)
}

// Limit is what host h accepts under t: its demand limits (physical
// capacity × overload thresholds) and its allocatable placement capacity.
// Whether a destination fits is fit.Check against this limit, the one
// rule the solver, planner, executor, reviver and simulators share.
func (t Thresholds) Limit(h *Host) fit.Limit {
	return fit.HostLimit(h.CPUs, h.RAMMB, t.CPUOverload, t.RAMOverload, h.AllocVCPUs, h.AllocRAMMB)
}

// Use is what h carries: its servers' measured demand and its placement
// usage.
func (h *Host) Use() fit.Use {
	cpu, ram := h.Demand()
	return fit.Use{CPU: cpu, RAM: ram, VCPUs: h.UsedVCPUs, RAMMB: h.UsedRAMMB}
}

// Use is what s adds to a host: its measured demand and its flavor.
func (s *Server) Use() fit.Use {
	return fit.Use{CPU: s.CPU, RAM: s.RAM, VCPUs: float64(s.VCPUs), RAMMB: float64(s.RAMMB)}
}

// Fits reports whether server s fits on destination h under t, counting
// extra (servers already moving to h, not in its snapshot yet) on top of
// what h carries. It is DESIGN §6's capacity rule (fit.Check); whether h
// may receive servers at all (disabled, draining) and group policies are
// the caller's.
func (t Thresholds) Fits(h *Host, extra fit.Use, s *Server) bool {
	return fit.Fits(h.Use().Plus(extra), s.Use(), t.Limit(h))
}

// Overloaded reports whether the host's demand exceeds a threshold.
func (t Thresholds) Overloaded(h *Host) bool {
	return fit.Overloaded(h.Use(), t.Limit(h))
}

// Underloaded reports whether a non-empty host's demand is below both
// underload thresholds.
func (t Thresholds) Underloaded(h *Host) bool {
	if len(h.Servers) == 0 {
		return false
	}
	cpu, ram := h.Demand()
	return cpu < h.CPUs*t.CPUUnderload && ram < h.RAMMB*t.RAMUnderload
}

// ActionKind is a Nova action in a plan.
type ActionKind uint8

const (
	LiveMigrate ActionKind = iota + 1
	Shelve                 // shelve and offload
	// ColdMigrate and Notify are never planned: a drain's executor turns
	// a server's live migration into them when the server's maintenance
	// action says so (nova.MetaMaintenanceAction) or Nova refuses to
	// live-migrate it, and records the action it used.
	ColdMigrate // migrate with the guest stopped, then confirm the resize
	Notify      // leave the server on its host for its owner
	// Unshelving is not a plan action: an agent with room unshelves the
	// servers its partition shelved (scheduler/node's Reviver).
)

func (k ActionKind) String() string {
	switch k {
	case LiveMigrate:
		return "live-migrate"
	case Shelve:
		return "shelve-offload"
	case ColdMigrate:
		return "cold-migrate"
	case Notify:
		return "notify"
	}
	return "unknown"
}

// Action is one step of a plan on one server.
type Action struct {
	Kind   ActionKind
	Server string
	From   string `json:",omitempty"`
	To     string `json:",omitempty"`
	// Group and Policy: the server's group; the planner keeps anti-affinity
	// while it orders moves (the executor re-reads the group from Nova).
	Group  string `json:",omitempty"`
	Policy string `json:",omitempty"`
	// The server's size, for re-checks and accounting.
	VCPUs int
	RAMMB int
	CPU   float64
	RAM   float64
}

func (a Action) String() string {
	return fmt.Sprintf("%s %s %s->%s", a.Kind, a.Server, a.From, a.To)
}

// Plan is an ordered list of steps; the actions of one step run in
// parallel, a step starts when the previous one ended.
type Plan struct {
	Steps [][]Action
	// Snapshot is the partition's view the plan was built on: the
	// executor takes from it the demand of hosts its own source does not
	// measure (a cgroup source measures only its own host).
	Snapshot []Host
}

// Len is the number of actions.
func (p Plan) Len() int {
	n := 0
	for _, s := range p.Steps {
		n += len(s)
	}
	return n
}
