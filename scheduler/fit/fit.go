// Package fit is the one rule that decides whether a destination host
// fits (DESIGN §6): measured demand against the host's physical capacity
// times its overload thresholds, and placement allocation against what
// placement will accept, with one epsilon for float rounding.
//
// It imports nothing, so every place that must agree on the rule calls
// it: the solver and planner (package scheduler), the simulators
// (scheduler/detsim, scheduler/sim), the executor's and reviver's
// re-checks (scheduler/node) and the safety observer of the fake cloud
// (nova/fake), which judges the plans the others make. It lives apart
// from package scheduler because nova must not import the DVMS logic
// (DESIGN §2): a rule of arithmetic can be shared, the agent cannot.
package fit

import "fmt"

// Eps absorbs float rounding in every capacity comparison.
const Eps = 1e-9

// Over reports whether v exceeds limit beyond float rounding.
func Over(v, limit float64) bool { return v > limit+Eps }

// Use is what a host carries, or what a server adds to it.
type Use struct {
	CPU, RAM     float64 // measured demand: cores, MB
	VCPUs, RAMMB float64 // placement allocation: flavor vCPUs, MB
}

// Plus returns u with v added.
func (u Use) Plus(v Use) Use {
	return Use{CPU: u.CPU + v.CPU, RAM: u.RAM + v.RAM, VCPUs: u.VCPUs + v.VCPUs, RAMMB: u.RAMMB + v.RAMMB}
}

// Limit is what a host accepts.
type Limit struct {
	CPU, RAM     float64 // demand limits: physical capacity × overload threshold
	VCPUs, RAMMB float64 // allocatable: inventory × allocation ratio − reserved
}

// HostLimit is the limit of a host with cpus cores and ramMB MB of
// physical capacity, overload thresholds cpuOver and ramOver (fractions
// of capacity) and allocatable placement capacity allocVCPUs, allocRAMMB.
func HostLimit(cpus, ramMB, cpuOver, ramOver, allocVCPUs, allocRAMMB float64) Limit {
	return Limit{CPU: cpus * cpuOver, RAM: ramMB * ramOver, VCPUs: allocVCPUs, RAMMB: allocRAMMB}
}

// Scaled returns l with its demand limits multiplied by keep (1 − a
// headroom fraction); allocation limits are placement's and stay as they
// are.
func (l Limit) Scaled(keep float64) Limit {
	l.CPU, l.RAM = l.CPU*keep, l.RAM*keep
	return l
}

// Problem names the first limit a use exceeds.
type Problem uint8

const (
	None       Problem = iota
	DemandCPU          // measured CPU demand over the threshold
	DemandRAM          // measured RAM demand over the threshold
	AllocVCPUs         // placement vCPU allocation over allocatable
	AllocRAMMB         // placement RAM allocation over allocatable
)

func (p Problem) String() string {
	switch p {
	case None:
		return "fits"
	case DemandCPU:
		return "cpu demand over threshold"
	case DemandRAM:
		return "ram demand over threshold"
	case AllocVCPUs:
		return "placement vcpus over allocatable"
	case AllocRAMMB:
		return "placement ram over allocatable"
	}
	return fmt.Sprintf("problem(%d)", uint8(p))
}

// Demand reports whether p is about measured demand (as opposed to
// placement allocation).
func (p Problem) Demand() bool { return p == DemandCPU || p == DemandRAM }

// Overloaded reports whether used exceeds lim's demand limits.
func Overloaded(used Use, lim Limit) bool { return Over(used.CPU, lim.CPU) || Over(used.RAM, lim.RAM) }

// Overcommitted reports whether used exceeds lim's allocation limits.
func Overcommitted(used Use, lim Limit) bool {
	return Over(used.VCPUs, lim.VCPUs) || Over(used.RAMMB, lim.RAMMB)
}

// Check returns the first limit that a host carrying used exceeds once
// add is on it, or None: the destination fits.
func Check(used, add Use, lim Limit) Problem {
	t := used.Plus(add)
	switch {
	case Over(t.CPU, lim.CPU):
		return DemandCPU
	case Over(t.RAM, lim.RAM):
		return DemandRAM
	case Over(t.VCPUs, lim.VCPUs):
		return AllocVCPUs
	case Over(t.RAMMB, lim.RAMMB):
		return AllocRAMMB
	}
	return None
}

// Fits reports whether a host carrying used takes add within lim.
func Fits(used, add Use, lim Limit) bool { return Check(used, add, lim) == None }

// Neg returns −u (to take a server off a host).
func (u Use) Neg() Use { return Use{CPU: -u.CPU, RAM: -u.RAM, VCPUs: -u.VCPUs, RAMMB: -u.RAMMB} }
