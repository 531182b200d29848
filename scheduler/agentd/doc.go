// Package agentd assembles one whole DVMS agent from Options: the runner
// (monitor, executor, maintenance watch), its membership, Vivaldi
// coordinates, the merge arbiter's peers, the operators' controls
// (scheduler/control), the status service (scheduler/status), the journal
// (scheduler/journal), the reviver and the Prometheus metrics. `dvms
// agent` and `dvms simulate` build their agents with New, so what one
// runs the other simulates.
//
// It is not scheduler/node: node is the runtime the protocols observe
// (status and journal import it), so the assembly above them cannot live
// there. agentd reads no file and no environment: the command line makes
// the connections, loads keys and configuration, and passes them in.
package agentd
