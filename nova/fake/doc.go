// Package fake is a stateful simulated Nova: hosts with placement
// accounting, servers with measured demand, live migrations that go
// queued -> preparing -> running -> completed (or error) over a duration
// computed from RAM and bandwidth, shelve / offload / unshelve, compute
// service disable / enable, instance actions with request ids, injected
// faults, and an observer that checks DESIGN §8 after every change.
//
// Time comes from an injected Clock; state advances lazily at every call,
// so the fake starts no goroutine. It implements nova.Client and
// nova.DemandSource; nova/novatest's contract suite runs against it.
package fake
