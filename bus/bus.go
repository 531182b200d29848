package bus

import (
	"context"
	"errors"
	"strings"
)

// ErrClosed is returned by a Transport used after Close.
var ErrClosed = errors.New("bus: closed")

// Handler receives one message. It runs on the transport's delivery
// goroutine for that subscription: it must not block for long and must not
// keep data after it returns (copy it).
type Handler func(subject string, data []byte)

// Subscription is an active subscription.
type Subscription interface {
	// Unsubscribe stops delivery. It is safe to call more than once.
	Unsubscribe() error
}

// Transport carries opaque messages between agents. Delivery is at most
// once and unordered across subjects; callers must tolerate loss,
// duplication and reordering (the protocol uses versions and timeouts).
// Implementations are safe for concurrent use.
type Transport interface {
	// Publish sends data to every subscriber of subject. It returns once
	// the message is handed to the transport, not when it is delivered.
	Publish(ctx context.Context, subject string, data []byte) error
	// Subscribe delivers messages published on subject (NATS wildcards
	// "*" and ">" allowed) to h, in order of arrival, one at a time.
	Subscribe(subject string, h Handler) (Subscription, error)
	// Close releases the transport; pending messages may be dropped.
	Close() error
}

// AgentSubject is the subject an agent listens on.
func AgentSubject(region, host string) string { return "dvms." + region + ".agent." + host }

// HeartbeatSubject is where agents of a region publish heartbeats.
func HeartbeatSubject(region string) string { return "dvms." + region + ".heartbeat" }

// EventsSubject is where agents of a region publish event records
// (`dvms events --follow`).
func EventsSubject(region string) string { return "dvms." + region + ".events" }

// StatusSubject is where agents answer `dvms status` requests.
func StatusSubject(region string) string { return "dvms." + region + ".status" }

// ServiceSubject is where the region's maintenance watch publishes the
// nova-compute service state of host (a hint: agents re-read it from Nova).
func ServiceSubject(region, host string) string { return "dvms." + region + ".service." + host }

// ShelvedSubject is where an agent that shelved servers (preemption) says
// so, so the agents with room look for them at once.
func ShelvedSubject(region string) string { return "dvms." + region + ".shelved" }

// DemandSubject is where the agent of host answers demand queries: an
// executor re-checking a move asks the destination's agent for what its
// local source measured, instead of asking Nova.
func DemandSubject(region, host string) string { return "dvms." + region + ".demand." + host }

// ReplySubject is where an agent receives answers to its queries.
func ReplySubject(region, host string) string { return "dvms." + region + ".reply." + host }

// SummarySubject is where the agent of host publishes a summary of its
// host (demand, capacity, maintenance, moves in flight) for `dvms
// scheduler-api`; SummarySubject(region, "*") subscribes to all of them.
func SummarySubject(region, host string) string { return "dvms." + region + ".summary." + host }

// PingSubject is where the agent of host answers RTT probes (Vivaldi
// coordinates, DESIGN §5.3); PongSubject is where it receives the
// answers to its own.
func PingSubject(region, host string) string { return "dvms." + region + ".ping." + host }

// PongSubject: see PingSubject.
func PongSubject(region, host string) string { return "dvms." + region + ".pong." + host }

// SubjectHost is the host a per-host subject is addressed to
// (AgentSubject, PingSubject, ...: "dvms.<region>.<kind>.<host>"), or "".
func SubjectHost(subject string) string {
	parts := strings.SplitN(subject, ".", 4)
	if len(parts) != 4 || parts[0] != "dvms" {
		return ""
	}
	return parts[3]
}

// FromHandler receives one message with its sender's host as the
// transport authenticated it ("" when the transport does not
// authenticate senders). Same rules as Handler.
type FromHandler func(subject, from string, data []byte)

// Authenticated is a Transport that authenticates senders (bus/auth).
type Authenticated interface {
	Transport
	// SubscribeFrom is Subscribe, telling h who sent each message.
	SubscribeFrom(subject string, h FromHandler) (Subscription, error)
}

// SubscribeFrom subscribes h to subject on t, with the authenticated
// sender when t authenticates (Authenticated), else with from = "".
func SubscribeFrom(t Transport, subject string, h FromHandler) (Subscription, error) {
	if a, ok := t.(Authenticated); ok {
		return a.SubscribeFrom(subject, h)
	}
	return t.Subscribe(subject, func(s string, d []byte) { h(s, "", d) })
}

// ControlSubject is where operators publish run-time controls (`dvms
// pause`, `dvms mode`, `dvms exclude`), signed with an operator's key.
func ControlSubject(region string) string { return "dvms." + region + ".control" }

// ControlStateSubject is where agents pass on the operators' controls
// they hold (to an agent that starts or missed one).
func ControlStateSubject(region string) string { return "dvms." + region + ".control-state" }
