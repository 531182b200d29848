// Package daemon is `dvms agent` as a service, below its command line:
//
//   - the agent's configuration (Config) and the one option table it is
//     read through (Options: sections, names, defaults, help, flags; the
//     sample etc/dvms/dvms.conf.sample and the configuration reference are
//     generated from it by `dvms config`), loaded by Load from the file,
//     the drop-in directory, DVMS_* variables and flags, then validated;
//   - the trust the configuration names: the signed bus, Raft's mutual
//     TLS, the operators' keys, SWIM's keys (CheckTrust, StartChecks);
//   - the agent built from the configuration (Start): NATS, Nova and the
//     demand source connected, then scheduler/agentd's one constructor
//     given the arbiter, membership, coordinates and reviver cfg asks for;
//   - its life under systemd (Serve): start-up that waits out NATS,
//     Keystone and Nova outages with backoff, readiness, status and the
//     watchdog over sd_notify, and the reload of live options on SIGHUP.
//
// The table and the configuration live together because the loader, the
// reloader (which options are live, comparing and copying their values)
// and the documentation all read the same rows.
package daemon
