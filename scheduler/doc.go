// Package scheduler is the pure DVMS logic (DESIGN §4–§6): the agent state
// machine, event detection with K-of-N debouncing, the placement solver,
// the reconfiguration planner and the versioned wire encoding of agent
// messages.
//
// Nothing here does I/O, reads a clock or starts a goroutine: time arrives
// as Tick(now), input as Step(msg), Observe(sample) and the results of
// work the agent asked for (SolveDone, PlanDone, ArbiterDone); output is
// read from Ready(). The solver and planner take their deadline and a
// seeded *rand.Rand as inputs. So one deterministic harness can run
// hundreds of agents and replay a failure from its seed.
//
// This package must not import bus, nova, consensus or any logging or I/O
// package; scheduler/node drives it with real clocks and transports.
// See README.md for the vocabulary and the pipeline.
package scheduler
