package consensus

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// errStreamClosed is what Accept returns once a stream session is closed.
var errStreamClosed = errors.New("consensus: raft stream closed")

// advAddr is an advertised raft address, kept as written (a host name is
// not resolved here: the dialing side resolves it).
type advAddr string

func (a advAddr) Network() string { return "tcp" }
func (a advAddr) String() string  { return string(a) }

// listenerMux owns the raft TCP listener for the whole life of a Service,
// so the address advertised in heartbeats stays reserved while the raft
// node comes and goes (a member removed from the group and added again
// later gets a fresh node on the same address). Connections go to the
// current session, the stream layer of the running node; with no node
// running they are closed.
type listenerMux struct {
	ln  net.Listener
	adv advAddr
	// With sec set, every connection is mutual TLS: accepted ones must
	// present a certificate allow accepts, dialed ones the one of the
	// member the address belongs to (expect).
	sec    PeerSecurity
	allow  func(host string) error
	expect func(addr string) string
	shakes chan struct{} // bounds handshakes in progress

	mu  sync.Mutex
	cur *streamSession
}

// handshakeTimeout bounds one TLS handshake (a peer that connects and
// says nothing holds a slot that long).
const handshakeTimeout = 5 * time.Second

func newListenerMux(ln net.Listener, adv string) *listenerMux {
	return &listenerMux{ln: ln, adv: advAddr(adv), shakes: make(chan struct{}, 32)}
}

// acceptLoop hands connections to the current session until the
// listener is closed.
func (m *listenerMux) acceptLoop() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary accept failures (too many open files...): back off
			// a little rather than spin.
			t := time.NewTimer(50 * time.Millisecond)
			<-t.C
			continue
		}
		if m.sec == nil {
			m.hand(c)
			continue
		}
		select {
		case m.shakes <- struct{}{}:
			// Owned by the mux: it ends within handshakeTimeout, and
			// close() closes the listener only; an accepted connection
			// in handshake is closed by its own deadline.
			go func() {
				defer func() { <-m.shakes }()
				if tc, err := m.serverShake(c); err == nil {
					m.hand(tc)
				}
			}()
		default:
			_ = c.Close() // too many handshakes at once
		}
	}
}

// hand gives c to the current session, or closes it.
func (m *listenerMux) hand(c net.Conn) {
	m.mu.Lock()
	s := m.cur
	m.mu.Unlock()
	if s == nil || !s.offer(c) {
		_ = c.Close()
	}
}

// serverShake completes the server side of a mutual TLS handshake; the
// connection is closed when it fails (not a ring member, not allowed,
// not TLS at all).
func (m *listenerMux) serverShake(c net.Conn) (net.Conn, error) {
	tc := tls.Server(c, m.sec.Server(m.allow))
	_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
	if err := tc.Handshake(); err != nil {
		_ = tc.Close()
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

// close closes the listener (acceptLoop returns) and the current session.
func (m *listenerMux) close() {
	_ = m.ln.Close()
	m.swap(nil)
}

// session starts a stream layer for a new raft node; it replaces (and
// closes) any previous one.
func (m *listenerMux) session() *streamSession {
	s := &streamSession{mux: m, conns: make(chan net.Conn, 16), done: make(chan struct{}), open: map[net.Conn]struct{}{}}
	m.swap(s)
	return s
}

// swap makes s (nil: none) the current session and closes the one before.
func (m *listenerMux) swap(s *streamSession) {
	m.mu.Lock()
	old := m.cur
	m.cur = s
	m.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
}

// streamSession is a raft.StreamLayer over the shared listener. Close
// also closes every connection it accepted, so the transport's
// connection handlers end with it.
type streamSession struct {
	mux   *listenerMux
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once

	mu   sync.Mutex
	open map[net.Conn]struct{}
}

var _ raft.StreamLayer = (*streamSession)(nil)

func (s *streamSession) offer(c net.Conn) bool {
	select {
	case <-s.done:
		return false
	default:
	}
	select {
	case s.conns <- c:
		return true
	case <-s.done:
		return false
	}
}

// Accept implements net.Listener.
func (s *streamSession) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.open == nil {
			_ = c.Close()
			return nil, errStreamClosed
		}
		s.open[c] = struct{}{}
		return c, nil
	case <-s.done:
		return nil, errStreamClosed
	}
}

// Close implements net.Listener: the session ends; the shared listener
// stays open.
func (s *streamSession) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.mux.mu.Lock()
		if s.mux.cur == s {
			s.mux.cur = nil
		}
		s.mux.mu.Unlock()
		s.mu.Lock()
		open := s.open
		s.open = nil
		s.mu.Unlock()
		for c := range open {
			_ = c.Close()
		}
		for {
			select {
			case c := <-s.conns:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr implements net.Listener: the advertised address.
func (s *streamSession) Addr() net.Addr { return s.mux.adv }

// Dial implements raft.StreamLayer.
func (s *streamSession) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	m := s.mux
	if m.sec == nil {
		return d.Dial("tcp", string(address))
	}
	expect := ""
	if m.expect != nil {
		expect = m.expect(string(address))
	}
	return tls.DialWithDialer(&d, "tcp", string(address), m.sec.Client(expect))
}
