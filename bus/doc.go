// Package bus carries dvms messages between agents: the Transport
// interface, its NATS implementation, an embedded NATS server for
// `dvms simulate` and tests, and an in-memory hub with drop, delay,
// duplicate and partition hooks for deterministic tests.
//
// The bus moves bytes; it knows nothing about DVMS and must not import
// scheduler, consensus or nova. Message encoding is the scheduler's.
package bus
