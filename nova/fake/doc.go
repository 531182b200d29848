// Package fake is a stateful simulated Nova Zed for tests and for
// `dvms simulate`: compute hosts with placement accounting and service
// state, servers with measured demand, live migrations that go accepted
// -> queued -> preparing -> running -> post-migrating -> completed (or
// error, as NoValidHost does) over overhead + RAM / (bandwidth - dirty
// rate), with the memory progress Nova's in-progress listing shows, a
// guest dirtying faster than its host pair copies never converging until
// force-completed or aborted (migrate.go), shelve /
// offload / unshelve, instance actions with global and local request
// ids, injected faults, and an observer that checks the safety
// properties of DESIGN §8 after every change.
//
// A *Cloud implements nova.Client and nova.DemandSource; nova/novatest's
// contract suite runs against it (contract_test.go), and against a real
// Nova in the functional tier, so the two cannot drift apart.
//
// Time comes from an injected Clock (ManualClock for tests, ScaledClock
// for simulations); state advances lazily at every call, so the package
// starts no goroutine and never sleeps (an injected timeout only waits for
// the caller's ctx). One mutex guards the state;
// per-host indexes keep reads at O(servers on the host), and migrations
// in flight wait in a min-heap by end time.
//
// Cost: every nova.Client call is charged on the cloud's nova.Meter as
// the requests nova/openstack sends for it (the table in cost.go, checked
// against the real client by nova/openstack/testing), per caller
// (Client(name) gives a caller its own view; Uncharged is for harness
// reads). Config.APIRate makes the API finite: requests queue FIFO and
// calls wait, on the clock, for their turn (APIStats).
//
// Setup: New, AddHost, AddGroup, AddServer, DeleteServer, SetDemand,
// SetServiceForcedDown, SetDirtyRate, SetBandwidth. Reads for simulators: Snapshot, ServersOn,
// HostDemand, Overloaded, Actions. Observer: Violations, Drift, Audit,
// ServersLost, Stats, FaultsInjected.
//
// It imports nova and the standard library only: no transport, no
// logging, no scheduler package.
package fake
