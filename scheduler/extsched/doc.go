// Package extsched is dvms as Nova's external scheduler, pure
// logic: the summary every agent publishes of its host (Summary), the
// region's view built from them (View), the request and response shapes
// of cortex's external scheduler API (Request, Response) and the weighing
// that orders Nova's candidate hosts (Weigh).
//
// It does no I/O and does not log: time comes in as an argument and every
// decision comes back with its reasons, for the caller to log. The agent
// side (publishing summaries) is in scheduler/node, the HTTP service in
// cmd/dvms (`dvms scheduler-api`). It imports only scheduler/fit.
package extsched
