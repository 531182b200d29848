// Package demand groups the nova.DemandSource implementations: what each
// server on a host really uses (CPU cores, RAM MB), as opposed to what
// its flavor reserves.
//
//   - file: a JSON or CSV file, re-read on every call (tests, traces,
//     operators feeding their own numbers);
//   - cgroup: the cgroup accounting of the libvirt guests on the local
//     host (the agent runs beside nova-compute), on any layout (v2, v1,
//     hybrid; systemd or not), guests named by Nova's instance name;
//   - diagnostics: Nova's admin server diagnostics API;
//   - prometheus: two operator-written PromQL instant queries.
//
// Every source follows the nova.DemandSource contract: a source that
// cannot measure returns an error, never a partial guess; a server it
// does not know yet (no baseline for a CPU rate) is absent from the map,
// which means unknown demand. Each sub-package exports Config,
// DefaultConfig and Config.Validate, and New.
//
// The sub-packages import nova and the standard library only.
package demand
