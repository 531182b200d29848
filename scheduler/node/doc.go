// Package node drives one scheduler.Agent with a clock, a bus.Transport,
// a nova.Client, a nova.DemandSource and a consensus.Arbiter: one goroutine
// owns the agent; the monitor, the solver, the plan executor and arbiter
// calls run in goroutines it starts and waits for. It also holds the
// executor that re-checks every action against Nova right before it
// (DESIGN §5.5).
//
// It depends on interfaces only; cmd/ wires concrete implementations.
package node
