// Package node drives one scheduler.Agent with a clock, a bus.Transport,
// a nova.Client, a nova.DemandSource and a consensus.Arbiter: one goroutine
// owns the agent; the monitor, the solver, the plan executor and arbiter
// calls run in goroutines it starts and waits for. It also holds the
// executor that re-checks every action against Nova right before it
// (DESIGN §5.5).
//
// Membership comes from Membership (heartbeats over the bus, N² messages a
// second in a region; what `dvms agent` runs today) or Swim (SWIM over
// hashicorp/memberlist, O(1) per agent a second; SwimNet runs many in one
// process). Both report members up and down the same way.
//
// It depends on interfaces only; cmd/ wires concrete implementations.
package node
