// Package journal keeps what one agent saw of the events it took part in
// (raised, planned, the steps of their partition, the Nova actions of
// their plan), fed by the runner's hooks (node.Hooks). The status
// protocol (scheduler/status) carries its entries to `dvms status` and
// `dvms events`, which join the entries of every agent by event ID.
//
// It owns no goroutine and does no I/O: Journal.OnUpdate is how a caller
// publishes each step as it is noted. It must not import the command line
// (cmd/) or the agent's assembly (scheduler/agentd).
package journal
