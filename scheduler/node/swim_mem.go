package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// SwimNet runs many SWIM agents in one process over memberlist's
// in-memory transport (MockNetwork), with what a real network adds:
// datagram loss (Drop), latency per link (SetDelay), hosts that crash
// (Kill: silent from then on, in and out) and a count of the membership
// messages sent. Tests and
// `dvms simulate` use it; real agents use memberlist's UDP/TCP transport.
//
// Every transport must be made (Transport) before the first agent
// starts: MockNetwork's routing table is not safe for concurrent use.
type SwimNet struct {
	ctx  context.Context
	mock memberlist.MockNetwork
	// drop is the fraction of datagrams lost; streams (TCP) are not.
	drop   float64
	byAddr map[string]*swimTransport
	delay  atomic.Pointer[func(from, to string) time.Duration]
	// Packets and Streams count datagrams and stream connections sent;
	// Dropped the datagrams lost, Overflow those of them lost to a full
	// receive buffer (a receiver that does not keep up) rather than to
	// drop or a dead host.
	Packets, Streams atomic.Int64
	Dropped          atomic.Int64
	Overflow         atomic.Int64
}

// NewSwimNet returns an empty network losing the fraction drop of its
// datagrams. When ctx ends, dials fail at once and datagrams delayed
// (SetDelay) are lost: end it only after every agent on it has stopped.
func NewSwimNet(ctx context.Context, drop float64) (*SwimNet, error) {
	if drop < 0 || drop >= 1 {
		return nil, fmt.Errorf("swim net: drop %.3f must be in [0, 1)", drop)
	}
	n := &SwimNet{ctx: ctx, drop: drop, byAddr: map[string]*swimTransport{}}
	return n, nil
}

// SetDelay makes every datagram from host from to host to arrive
// delay(from, to) later (one way; 0: at once). Streams (TCP) are not
// delayed. Safe to call while agents run.
func (n *SwimNet) SetDelay(delay func(from, to string) time.Duration) { n.delay.Store(&delay) }

// Transport makes the transport of host.
func (n *SwimNet) Transport(host string) memberlist.NodeAwareTransport {
	inner := n.mock.NewTransport(host)
	t := &swimTransport{MockTransport: inner, net: n, host: host,
		packets: make(chan *memberlist.Packet, 4096), streams: make(chan net.Conn, 64)}
	ip, port, _ := inner.FinalAdvertiseAddr("", 0)
	t.addr = net.JoinHostPort(ip.String(), fmt.Sprint(port))
	n.byAddr[t.addr] = t
	return t
}

// Addr is where host's transport listens, to join through.
func (n *SwimNet) Addr(t memberlist.NodeAwareTransport) string {
	return t.(*swimTransport).addr
}

// Kill makes the host of t silent, as a crashed machine: nothing it sends
// or is sent arrives any more.
func (n *SwimNet) Kill(t memberlist.NodeAwareTransport) { t.(*swimTransport).dead.Store(true) }

// swimTransport wraps a MockTransport (its addresses). Datagrams go
// straight into the receiver's buffer (overflow is a lost datagram, as a
// full socket buffer); streams into the receiver's stream buffer, within
// the dial's timeout (DialAddressTimeout).
type swimTransport struct {
	*memberlist.MockTransport
	net     *SwimNet
	host    string
	addr    string
	dead    atomic.Bool
	packets chan *memberlist.Packet
	streams chan net.Conn
}

var errHostDown = errors.New("host down")

func (t *swimTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }
func (t *swimTransport) StreamCh() <-chan net.Conn           { return t.streams }

func (t *swimTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress hands the datagram straight to the peer's buffer (no
// goroutine in between: at a thousand agents in one process each hop
// costs CPU the probes need); a full buffer loses it.
func (t *swimTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	t.net.Packets.Add(1)
	now := time.Now()
	p, ok := t.net.byAddr[a.Addr]
	if !ok {
		return now, fmt.Errorf("swim net: no host at %s", a.Addr)
	}
	if t.dead.Load() || p.dead.Load() || rand.Float64() < t.net.drop {
		t.net.Dropped.Add(1)
		return now, nil // a datagram lost is not an error to its sender
	}
	if d := t.delayTo(a); d > 0 {
		t.deliverLater(b, a, d)
		return now, nil
	}
	select {
	case p.packets <- &memberlist.Packet{Buf: b, From: swimAddr(t.addr), Timestamp: now}:
	default:
		t.net.Dropped.Add(1)
		t.net.Overflow.Add(1)
	}
	return now, nil
}

// swimAddr is a datagram's source, "ip:port".
type swimAddr string

func (swimAddr) Network() string  { return "mock" }
func (a swimAddr) String() string { return string(a) }

// delayTo is the one-way latency of the link to a.
func (t *swimTransport) delayTo(a memberlist.Address) time.Duration {
	f := t.net.delay.Load()
	p, ok := t.net.byAddr[a.Addr]
	if f == nil || !ok {
		return 0
	}
	return (*f)(t.host, p.host)
}

// deliverLater hands b to a's transport d from now, stamped with its
// arrival time (memberlist measures a probe's RTT from it). The timer's
// function never blocks: a full buffer, a dead host or a stopped network
// loses the datagram.
func (t *swimTransport) deliverLater(b []byte, a memberlist.Address, d time.Duration) {
	p := t.net.byAddr[a.Addr]
	buf := slices.Clone(b) // memberlist may reuse b once WriteTo returns
	time.AfterFunc(d, func() {
		if t.net.ctx.Err() != nil || p.dead.Load() || t.dead.Load() {
			t.net.Dropped.Add(1)
			return
		}
		select {
		case p.packets <- &memberlist.Packet{Buf: buf, From: swimAddr(t.addr), Timestamp: time.Now()}:
		default:
			t.net.Dropped.Add(1)
			t.net.Overflow.Add(1)
		}
	})
}

func (t *swimTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout hands the receiver one end of a pipe within
// timeout (0: until the network stops), as a TCP connect does.
// MockTransport's own dial ignores its timeout and blocks until the
// receiver takes the stream: a receiver whose memberlist stopped reading
// (an agent shutting down, or one too starved to keep up) held its
// dialers for good, and with them the agents that dialled (seen: a
// `dvms simulate --membership swim` run under load whose revived agent's
// Join never returned, so neither did the run).
func (t *swimTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	t.net.Streams.Add(1)
	if t.dead.Load() || t.peerDead(a) {
		return nil, fmt.Errorf("dial %s: %w", a.Addr, errHostDown)
	}
	p, ok := t.net.byAddr[a.Addr]
	if !ok {
		return nil, fmt.Errorf("dial %s: no host there", a.Addr)
	}
	var expired <-chan time.Time
	if timeout > 0 {
		tm := time.NewTimer(timeout)
		defer tm.Stop()
		expired = tm.C
	}
	theirs, ours := net.Pipe()
	select {
	case p.streams <- theirs:
		return ours, nil
	case <-expired:
	case <-t.net.ctx.Done():
	}
	_, _ = theirs.Close(), ours.Close()
	return nil, fmt.Errorf("dial %s: %w", a.Addr, errDialTimeout)
}

var errDialTimeout = errors.New("i/o timeout: the receiver does not accept streams")

func (t *swimTransport) peerDead(a memberlist.Address) bool {
	p, ok := t.net.byAddr[a.Addr]
	return ok && p.dead.Load()
}

var _ memberlist.NodeAwareTransport = (*swimTransport)(nil)

// Revive makes a killed host's transport carry messages again (the host
// restarted, on the same address).
func (n *SwimNet) Revive(t memberlist.NodeAwareTransport) { t.(*swimTransport).dead.Store(false) }
