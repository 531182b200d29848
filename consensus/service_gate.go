package consensus

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Raft RPCs bound to the authenticated peer of their connection.
//
// Mutual TLS proves which ring member opened a raft connection, but
// hashicorp/raft reads the sender from the RPC header: any ring member
// that passes the handshake could speak as the leader (a term of 2^40,
// forged entries). gatedTransport keeps one raft.NetworkTransport per
// authenticated peer for inbound connections only, so every RPC it
// decodes is known to come from that peer, and hands raft an RPC only
// when admit accepts it for that peer; the refused ones are answered with
// the error and never reach raft. Outbound RPCs go through one ordinary
// NetworkTransport.

// errRPCRefused: an inbound raft RPC whose header does not match the
// authenticated peer, or whose peer may not send it.
var errRPCRefused = errors.New("raft rpc refused")

// gatedTransport is a raft.Transport (and WithClose, WithPreVote by
// embedding) whose inbound RPCs are checked per authenticated peer.
type gatedTransport struct {
	*raft.NetworkTransport // outbound; its own stream yields no connection

	sess   *streamSession
	admit  func(peer string, cmd any) error
	newIn  func(raft.StreamLayer) *raft.NetworkTransport
	log    hclog.Logger
	out    chan raft.RPC
	done   chan struct{}
	hb     atomic.Pointer[func(raft.RPC)]
	once   sync.Once
	wg     sync.WaitGroup
	mu     sync.Mutex
	peers  map[string]*peerStream
	closed bool
}

// peerStream feeds one peer's inbound connections to its transport.
type peerStream struct {
	trans *raft.NetworkTransport
	ch    chan net.Conn
	done  chan struct{}
	addr  net.Addr
	once  sync.Once
}

// newGatedTransport wraps sess; cfg is the NetworkTransport configuration
// (its Stream is replaced) for the outbound transport and each peer's.
func newGatedTransport(sess *streamSession, cfg raft.NetworkTransportConfig, admit func(peer string, cmd any) error) *gatedTransport {
	g := &gatedTransport{sess: sess, admit: admit, log: cfg.Logger, out: make(chan raft.RPC),
		done: make(chan struct{}), peers: map[string]*peerStream{}}
	outCfg := cfg
	outCfg.Stream = dialOnly{sess: sess, done: g.done}
	g.NetworkTransport = raft.NewNetworkTransportWithConfig(&outCfg)
	g.newIn = func(s raft.StreamLayer) *raft.NetworkTransport {
		in := cfg
		in.Stream, in.MaxPool = s, 1
		return raft.NewNetworkTransportWithConfig(&in)
	}
	g.wg.Go(g.route)
	return g
}

// route hands each accepted connection to its peer's transport until the
// session closes.
func (g *gatedTransport) route() {
	for {
		c, err := g.sess.Accept()
		if err != nil {
			return
		}
		peer := connPeer(c)
		p := g.peer(peer)
		if peer == "" || p == nil {
			_ = c.Close()
			continue
		}
		select {
		case p.ch <- c:
		case <-g.done:
			_ = c.Close()
			return
		}
	}
}

// connPeer is the authenticated peer of c ("" when c is not a completed
// mutual TLS connection): the common name of a certificate that
// PeerSecurity's verification pinned to that member's key.
func connPeer(c net.Conn) string {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return ""
	}
	st := tc.ConnectionState()
	if !st.HandshakeComplete || len(st.PeerCertificates) == 0 {
		return ""
	}
	return st.PeerCertificates[0].Subject.CommonName
}

// peer is peer's inbound transport, started on first use (nil once the
// gate is closed). There is one per ring member that passed the
// handshake, so their number is bounded by the keyring.
func (g *gatedTransport) peer(peer string) *peerStream {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || peer == "" {
		return nil
	}
	if p := g.peers[peer]; p != nil {
		return p
	}
	p := &peerStream{ch: make(chan net.Conn), done: make(chan struct{}), addr: g.sess.Addr()}
	p.trans = g.newIn(p)
	p.trans.SetHeartbeatHandler(func(rpc raft.RPC) {
		if !g.check(peer, rpc) {
			return
		}
		if h := g.hb.Load(); h != nil {
			(*h)(rpc)
			return
		}
		g.forward(rpc)
	})
	g.peers[peer] = p
	g.wg.Go(func() {
		for {
			select {
			case rpc := <-p.trans.Consumer():
				if g.check(peer, rpc) {
					g.forward(rpc)
				}
			case <-g.done:
				return
			}
		}
	})
	return p
}

// check answers rpc with an error unless admit accepts it from peer.
func (g *gatedTransport) check(peer string, rpc raft.RPC) bool {
	err := g.admit(peer, rpc.Command)
	if err == nil {
		return true
	}
	g.log.Warn("raft rpc refused", "peer", peer, "rpc", fmt.Sprintf("%T", rpc.Command), "error", err)
	rpc.Respond(nil, err)
	return false
}

// forward hands rpc to raft, or refuses it once the transport closes.
func (g *gatedTransport) forward(rpc raft.RPC) {
	select {
	case g.out <- rpc:
	case <-g.done:
		rpc.Respond(nil, raft.ErrTransportShutdown)
	}
}

// Consumer implements raft.Transport: the admitted RPCs.
func (g *gatedTransport) Consumer() <-chan raft.RPC { return g.out }

// SetHeartbeatHandler implements raft.Transport.
func (g *gatedTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		g.hb.Store(nil)
		return
	}
	g.hb.Store(&cb)
}

// Close implements raft.WithClose: the outbound transport, every peer's
// and the session.
func (g *gatedTransport) Close() error {
	g.once.Do(func() {
		close(g.done)
		_ = g.sess.Close()
		g.mu.Lock()
		g.closed = true
		peers := g.peers
		g.peers = nil
		g.mu.Unlock()
		for _, p := range peers {
			_ = p.Close()
			_ = p.trans.Close()
		}
		_ = g.NetworkTransport.Close()
		g.wg.Wait()
	})
	return nil
}

// Accept implements net.Listener for the peer's transport.
func (p *peerStream) Accept() (net.Conn, error) {
	select {
	case c := <-p.ch:
		return c, nil
	case <-p.done:
		return nil, errStreamClosed
	}
}

// Close implements net.Listener.
func (p *peerStream) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}

// Addr implements net.Listener.
func (p *peerStream) Addr() net.Addr { return p.addr }

// Dial implements raft.StreamLayer: a peer's transport only receives.
func (p *peerStream) Dial(raft.ServerAddress, time.Duration) (net.Conn, error) {
	return nil, errors.New("consensus: inbound-only raft transport")
}

// dialOnly is the outbound transport's stream: it dials through the
// session and accepts nothing (the gate accepts).
type dialOnly struct {
	sess *streamSession
	done chan struct{}
}

func (d dialOnly) Accept() (net.Conn, error) {
	<-d.done
	return nil, errStreamClosed
}
func (d dialOnly) Close() error   { return nil }
func (d dialOnly) Addr() net.Addr { return d.sess.Addr() }
func (d dialOnly) Dial(a raft.ServerAddress, t time.Duration) (net.Conn, error) {
	return d.sess.Dial(a, t)
}

// admitRPC decides whether an RPC that peer (authenticated by its
// certificate) sent may reach node: its header must name peer as the
// sender, and, once node belongs to a group, peer must be a voter of the
// group's latest configuration at the address the RPC gives. Only a
// leader or a candidate sends RPCs (AppendEntries, InstallSnapshot,
// TimeoutNow from the leader; RequestVote and RequestPreVote from a
// candidate), and both are voters. A node in no group yet has no
// configuration to go by: it takes RPCs from a peer outside answers
// (nil: from any), the voters membership selects, of which the leader
// that adds it is one (see Service.selected).
func admitRPC(node *RaftNode, peer string, cmd any, outside func(peer string) error, claims *termClaims) error {
	h, ok := cmd.(raft.WithRPCHeader)
	if !ok {
		return fmt.Errorf("%w: %T has no header", errRPCRefused, cmd)
	}
	hdr := h.GetRPCHeader()
	if string(hdr.ID) != peer {
		return fmt.Errorf("%w: its header names %q, its connection is %s", errRPCRefused, hdr.ID, peer)
	}
	if node == nil {
		return fmt.Errorf("%w: raft node not started", errRPCRefused)
	}
	switch r := cmd.(type) {
	case *raft.AppendEntriesRequest:
		if err := appendShape(r); err != nil {
			return fmt.Errorf("%w: %s: %v", errRPCRefused, peer, err)
		}
	case *raft.InstallSnapshotRequest:
		if r.SnapshotVersion > 0 {
			if err := configurationDecodes(r.Configuration); err != nil {
				return fmt.Errorf("%w: %s: snapshot configuration: %v", errRPCRefused, peer, err)
			}
		}
	}
	f := node.r.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("%w: configuration: %v", errRPCRefused, err)
	}
	conf := f.Configuration()
	if len(conf.Servers) == 0 {
		if outside == nil {
			return nil
		}
		if err := outside(peer); err != nil {
			return fmt.Errorf("%w: in no group yet: %v", errRPCRefused, err)
		}
		return nil
	}
	for _, s := range conf.Servers {
		if string(s.ID) != peer {
			continue
		}
		if s.Suffrage != raft.Voter {
			return fmt.Errorf("%w: %s is not a voter", errRPCRefused, peer)
		}
		addrs := [][]byte{hdr.Addr}
		switch r := cmd.(type) {
		case *raft.AppendEntriesRequest:
			addrs = append(addrs, r.Leader)
		case *raft.RequestVoteRequest:
			addrs = append(addrs, r.Candidate)
		case *raft.InstallSnapshotRequest:
			addrs = append(addrs, r.Leader)
		}
		for _, a := range addrs {
			if len(a) > 0 && raft.ServerAddress(a) != s.Address {
				return fmt.Errorf("%w: %s gives address %s, the group has %s", errRPCRefused, peer, a, s.Address)
			}
		}
		if term, ok := rpcTerm(cmd); ok {
			if cur := node.r.CurrentTerm(); term > cur && term-cur > maxTermStep {
				return fmt.Errorf("%w: %s speaks in term %d, %d past this node's %d (at most %d)", errRPCRefused, peer, term, term-cur, cur, uint64(maxTermStep))
			}
		}
		if term, ok := leaderTerm(cmd); ok && claims != nil {
			if node.r.State() == raft.Leader && term == node.r.CurrentTerm() {
				return fmt.Errorf("%w: %s leads in term %d, which this node leads", errRPCRefused, peer, term)
			}
			if err := claims.claim(peer, term); err != nil {
				return fmt.Errorf("%w: %v", errRPCRefused, err)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: %s is not in the group", errRPCRefused, peer)
}

// maxTermStep bounds how far past a node's current term a voter's RPC
// may take it. Raft moves a node to any higher term it hears of, so a
// voter's key could send term 2^64-1, after which the next election wraps
// the term to 0 and no candidate wins again. An honest group moves its
// term by one an election (pre-vote keeps a cut-off node from counting up
// alone): a million elections past a node's term is not a group that node
// was part of, and at this step a forger needs 2^44 accepted RPCs to wrap.
const maxTermStep = 1 << 20

// rpcTerm is the term an RPC moves its receiver to when it is higher.
func rpcTerm(cmd any) (uint64, bool) {
	switch r := cmd.(type) {
	case *raft.AppendEntriesRequest:
		return r.Term, true
	case *raft.InstallSnapshotRequest:
		return r.Term, true
	case *raft.RequestVoteRequest:
		return r.Term, true
	case *raft.RequestPreVoteRequest:
		return r.Term, true
	}
	return 0, false
}

// leaderTerm is the term of an RPC only a leader sends (AppendEntries,
// InstallSnapshot).
func leaderTerm(cmd any) (uint64, bool) {
	switch r := cmd.(type) {
	case *raft.AppendEntriesRequest:
		return r.Term, true
	case *raft.InstallSnapshotRequest:
		return r.Term, true
	}
	return 0, false
}

// termClaims holds the latest term a voter led this node in, and
// that voter: Raft elects one leader a term, so appending to this node's
// log (or installing a snapshot) in a term another voter already leads
// is a voter's lie (it would write entries beside the leader's, which its
// followers may apply). A higher term is
// taken (elections move it on): winning one is a voter's power anyway.
type termClaims struct {
	mu     sync.Mutex
	term   uint64
	leader string
}

func (c *termClaims) claim(peer string, term uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case term > c.term:
		c.term, c.leader = term, peer
	case term == c.term && peer != c.leader:
		return fmt.Errorf("%s leads in term %d, which %s leads", peer, term, c.leader)
	}
	return nil
}

// appendShape refuses entries no leader sends: not numbered on from the
// entry they follow (PrevLogEntry) one by one, of a term above the
// request's or below the entry before them, or configuration entries
// that do not decode. hashicorp/raft stores such
// entries as they come and, with a commit index past a gap, panics
// applying the entries it does not have ("log not found"): a voter's key
// could crash every follower with one RPC.
func appendShape(r *raft.AppendEntriesRequest) error {
	next, term := r.PrevLogEntry+1, r.PrevLogTerm
	for _, e := range r.Entries {
		switch {
		case e == nil:
			return errors.New("a nil entry")
		case e.Index != next:
			return fmt.Errorf("entry %d where entry %d follows", e.Index, next)
		case e.Term > r.Term || e.Term < term:
			return fmt.Errorf("entry %d of term %d (request of term %d, previous entry's %d)", e.Index, e.Term, r.Term, term)
		}
		if e.Type == raft.LogConfiguration {
			if err := configurationDecodes(e.Data); err != nil {
				return fmt.Errorf("entry %d: configuration: %v", e.Index, err)
			}
		}
		next, term = next+1, e.Term
	}
	return nil
}

// configurationDecodes reports whether buf is a configuration raft can
// read. hashicorp/raft decodes the configuration of a snapshot it is sent
// and of each configuration entry it stores with DecodeConfiguration,
// which panics on bytes that do not decode: one RPC from a voter's key
// would end the agent. Its panic is the only way that function reports
// an error, so it is recovered here, on bytes raft has not seen yet.
func configurationDecodes(buf []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	raft.DecodeConfiguration(buf)
	return nil
}
