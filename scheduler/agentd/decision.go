package agentd

import (
	"errors"
	"fmt"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Decision is the part of an agent that decides, apart from the
// goroutines, tickers, NATS and Nova that feed it: the protocol's state
// machine (scheduler.Agent, from Options.Agent on the shared member list),
// the configuration of the runtime's step functions (Options.Runtime) —
// the executor's re-check verdict (PlanCheck: the agent's thresholds and
// [executor] drain reason) — and the operator controls' registers. New
// builds every agent on one (`dvms agent`, `dvms simulate --clock wall`)
// and the virtual clock runs one per host without the rest
// (scheduler/detsim), so how an agent's configuration becomes its
// decisions is written once, here. A plan's outcome needs no
// configuration: every clock ends its plans with node.PlanOutcome.
type Decision struct {
	agent    *scheduler.Agent
	runtime  node.Config
	config   scheduler.Config
	controls *control.Registers
}

// NewDecision builds the decision part of the agent o describes; it reads
// o.Runtime, o.Agent (an empty Incarnation gets a fresh one) and o.Ring
// (nil: the agent alone at first).
func NewDecision(o Options) (*Decision, error) {
	if o.Agent.ID == "" {
		return nil, errors.New("agentd: no host (Agent.ID)")
	}
	if err := o.Runtime.Validate(); err != nil {
		return nil, fmt.Errorf("agentd: node config: %w", err)
	}
	if o.Agent.Incarnation == "" {
		o.Agent.Incarnation = newIncarnation()
	}
	ring := scheduler.NewRing([]string{o.Agent.ID})
	if o.Ring != nil {
		ring = *o.Ring
	}
	a, err := scheduler.NewAgentOnRing(o.Agent, ring)
	if err != nil {
		return nil, fmt.Errorf("agentd: %w", err)
	}
	return &Decision{agent: a, runtime: o.Runtime, config: o.Agent, controls: control.NewRegisters(o.Runtime.Exec.DryRun)}, nil
}

// Agent is the protocol's state machine.
func (d *Decision) Agent() *scheduler.Agent { return d.agent }

// Config is the agent's configuration (its incarnation filled in).
func (d *Decision) Config() scheduler.Config { return d.config }

// Controls are the operator controls' registers.
func (d *Decision) Controls() *control.Registers { return d.controls }

// PlanCheck is the executor's re-check of plan, run for ev, for a caller
// that observes the cloud itself (the virtual clock): the executor's own
// verdict with this agent's thresholds and drain reason.
func (d *Decision) PlanCheck(ev scheduler.Event, plan scheduler.Plan) *node.PlanCheck {
	return node.NewPlanCheck(ev, plan, d.config.Thresholds, d.runtime.DrainReason)
}
