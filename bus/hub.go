package bus

import (
	"context"
	"math/rand"
	"slices"
	"strings"
	"sync"
)

// Hub is an in-memory, deterministic message fabric for tests: nothing is
// delivered until the test calls Deliver or DeliverAll, and then in an
// order drawn from the seed. Hooks drop, delay, duplicate and partition.
// Every endpoint gets its own Transport from Transport(name).
type Hub struct {
	mu      sync.Mutex
	rng     *rand.Rand
	subs    []*hubSub
	pending []hubMsg
	cut     map[[2]string]bool
	// Drop returns true to lose a message; Delay returns how many Deliver
	// rounds to hold it; Dup returns true to deliver it twice. All optional.
	Drop  func(from, to, subject string) bool
	Delay func(from, to, subject string) int
	Dup   func(from, to, subject string) bool

	Sent, Delivered, Dropped int
}

type hubSub struct {
	owner   string
	pattern string
	h       Handler
	closed  bool
}

type hubMsg struct {
	from, subject string
	data          []byte
	hold          int
	to            *hubSub
}

// NewHub returns a hub whose delivery order follows seed.
func NewHub(seed int64) *Hub {
	return &Hub{rng: rand.New(rand.NewSource(seed)), cut: map[[2]string]bool{}}
}

// Transport returns the endpoint named name.
func (h *Hub) Transport(name string) Transport { return &hubEnd{hub: h, name: name} }

// Partition cuts every link between a side and b side (both directions).
func (h *Hub) Partition(a, b []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			h.cut[[2]string{x, y}], h.cut[[2]string{y, x}] = true, true
		}
	}
}

// Heal restores every link.
func (h *Hub) Heal() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cut = map[[2]string]bool{}
}

// Pending is the number of messages waiting for delivery.
func (h *Hub) Pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.pending)
}

// Deliver delivers one round: every pending message not held, in a
// seeded order; held ones wait one round less. It returns how many were
// delivered. Handlers run on the caller's goroutine, without the hub's
// lock, and may publish (those wait for the next round).
func (h *Hub) Deliver() int {
	h.mu.Lock()
	var now, later []hubMsg
	for _, m := range h.pending {
		if m.hold > 0 {
			m.hold--
			later = append(later, m)
			continue
		}
		now = append(now, m)
	}
	h.pending = later
	h.rng.Shuffle(len(now), func(i, j int) { now[i], now[j] = now[j], now[i] })
	h.mu.Unlock()
	n := 0
	for _, m := range now {
		h.mu.Lock()
		closed := m.to.closed
		h.mu.Unlock()
		if closed {
			continue
		}
		m.to.h(m.subject, m.data)
		n++
	}
	h.mu.Lock()
	h.Delivered += n
	h.mu.Unlock()
	return n
}

// DeliverAll delivers rounds until nothing is pending or max rounds ran.
func (h *Hub) DeliverAll(max int) int {
	total := 0
	for i := 0; i < max && h.Pending() > 0; i++ {
		total += h.Deliver()
	}
	return total
}

type hubEnd struct {
	hub    *Hub
	name   string
	closed bool
}

func (e *hubEnd) Publish(_ context.Context, subject string, data []byte) error {
	h := e.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	h.Sent++
	for _, s := range h.subs {
		if s.closed || !Match(s.pattern, subject) {
			continue
		}
		if h.cut[[2]string{e.name, s.owner}] || (h.Drop != nil && h.Drop(e.name, s.owner, subject)) {
			h.Dropped++
			continue
		}
		m := hubMsg{from: e.name, subject: subject, data: slices.Clone(data), to: s}
		if h.Delay != nil {
			m.hold = h.Delay(e.name, s.owner, subject)
		}
		h.pending = append(h.pending, m)
		if h.Dup != nil && h.Dup(e.name, s.owner, subject) {
			h.pending = append(h.pending, m)
		}
	}
	return nil
}

type hubSubscription struct {
	hub *Hub
	s   *hubSub
}

func (s hubSubscription) Unsubscribe() error {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.s.closed = true
	return nil
}

func (e *hubEnd) Subscribe(subject string, h Handler) (Subscription, error) {
	e.hub.mu.Lock()
	defer e.hub.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	s := &hubSub{owner: e.name, pattern: subject, h: h}
	e.hub.subs = append(e.hub.subs, s)
	return hubSubscription{e.hub, s}, nil
}

func (e *hubEnd) Close() error {
	e.hub.mu.Lock()
	defer e.hub.mu.Unlock()
	e.closed = true
	for _, s := range e.hub.subs {
		if s.owner == e.name {
			s.closed = true
		}
	}
	return nil
}

// Match reports whether a NATS subject matches a pattern with "*" (one
// token) and ">" (one or more trailing tokens) wildcards.
func Match(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(p) == len(s)
}
