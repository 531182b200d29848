// Package nova is the boundary between dvms and OpenStack Nova: the Client
// interface the agent needs, its types and sentinel errors, and the
// DemandSource interface for per-server CPU/RAM demand.
//
// Implementations live in sub-packages: nova/fake (a stateful simulated
// cloud used by `dvms simulate` and tests) and the gophercloud client for a
// real Nova. This package knows nothing about DVMS and must not import
// scheduler, bus or consensus.
package nova
