package consensus

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
)

// Peer is one live member as membership (heartbeats) sees it.
type Peer struct {
	ID       string // host name
	Site     string // may be ""
	RaftAddr string // advertised raft TCP address; "" = this member cannot vote
}

// ServiceConfig configures one agent's part in its region's merge arbiter.
type ServiceConfig struct {
	Region string
	ID     string // this agent's host
	Site   string
	// Bind is the TCP address raft listens on, e.g. "127.0.0.1:0" or
	// ":7420"; "" = never a voter (requests are forwarded only).
	Bind string
	// Advertise is the address the other voters dial; "" = the bound
	// address (which must then name one interface). A port 0 is replaced
	// by the port actually bound.
	Advertise string
	// Voters is the size of the group: 1, 3, 5 or 7 (default 3).
	Voters int
	// Raft holds the raft timeouts; its ID is overwritten with ID and its
	// zero fields take DefaultRaftConfig's values.
	Raft RaftConfig
	// RequestTimeout bounds one request, forwarding and retries included
	// (default 3 s).
	RequestTimeout time.Duration
	// ProbeInterval is how often a member running a raft node sends a
	// status probe and the leader makes at most one configuration change
	// (default 500 ms).
	ProbeInterval time.Duration
	// Security, when set, runs raft over mutual TLS: a connection is
	// accepted only from a live member that advertises a raft address
	// (a voter or a candidate) and proves its identity; a dialed voter
	// must prove it is the member its address belongs to. Nil = plain TCP
	// (tests, and `insecure_unsigned` trials).
	Security PeerSecurity
	// BootstrapAfter is how long nobody may answer as a group member
	// before the first selected voter starts a new group (default 5 s; it
	// must exceed the time membership takes to see the live agents).
	BootstrapAfter time.Duration
}

// withDefaults fills zero fields.
func (c ServiceConfig) withDefaults() ServiceConfig {
	c.Voters = cmp.Or(c.Voters, 3)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, 3*time.Second)
	c.ProbeInterval = cmp.Or(c.ProbeInterval, 500*time.Millisecond)
	c.BootstrapAfter = cmp.Or(c.BootstrapAfter, 5*time.Second)
	d, r := DefaultRaftConfig(c.ID), &c.Raft
	r.ID = c.ID
	r.HeartbeatTimeout = cmp.Or(r.HeartbeatTimeout, d.HeartbeatTimeout)
	r.ElectionTimeout = cmp.Or(r.ElectionTimeout, d.ElectionTimeout)
	r.LeaderLeaseTimeout = cmp.Or(r.LeaderLeaseTimeout, d.LeaderLeaseTimeout)
	r.CommitTimeout = cmp.Or(r.CommitTimeout, d.CommitTimeout)
	r.ApplyTimeout = cmp.Or(r.ApplyTimeout, d.ApplyTimeout)
	return c
}

// Validate lists every problem (after defaults are applied).
func (c ServiceConfig) Validate() error {
	var errs []error
	if c.Region == "" || strings.ContainsAny(c.Region, " \t\r\n*>") {
		errs = append(errs, fmt.Errorf("region %q: required, no spaces or wildcards", c.Region))
	}
	if c.ID == "" {
		errs = append(errs, errors.New("id (host) is required"))
	}
	if c.Voters < 1 || c.Voters > 7 || c.Voters%2 == 0 {
		errs = append(errs, fmt.Errorf("voters = %d: want 1, 3, 5 or 7", c.Voters))
	}
	if c.RequestTimeout <= 0 || c.ProbeInterval <= 0 || c.BootstrapAfter < c.ProbeInterval {
		errs = append(errs, errors.New("need request_timeout > 0 and 0 < probe_interval <= bootstrap_after"))
	}
	if err := c.Raft.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ServiceStatus is what a Service knows of its group, for logs and tests.
type ServiceStatus struct {
	Voter  bool     // this agent's raft node is a voter of the group
	Leader string   // leader's host as last known ("" = unknown)
	Voters []string // the group's voters as last known, sorted
	// Term is this agent's raft node's current term (0: it runs no
	// node, so it cannot say).
	Term uint64
}

// Service is an agent's part in its region's merge arbiter (DESIGN §5.4):
// the region's one standing Raft group, whose voters are agents, reached
// by every agent over the bus. It implements Arbiter and guarantees:
//
//   - One order: every decision is an entry of one Raft log, applied by
//     the same FSM on every replica; a request is applied at most once
//     however often it is retried (its id is in the entry).
//   - Honest failures: a refusal is a Decision with its reason; with no
//     answer within RequestTimeout, Merge and Dissolve return
//     ErrUnknownOutcome (re-read with Get before proposing again),
//     Register and Get ErrNoQuorum.
//   - Decisions while a majority of the voters runs and reaches the
//     others. Voters follow membership (SelectVoters, spread across
//     sites) one change at a time; a new voter counts in no quorum before
//     it has caught up (reconcile).
//   - One group per region while any member of it reaches the others over
//     the bus: a new group starts only after BootstrapAfter with no
//     member heard (maybeBootstrap); when two groups meet after a cut,
//     the younger one's members leave it and join the older.
//
// Not guaranteed: decisions taken on the two sides of a bus cut are not
// ordered with each other; the stores are in memory, so if a majority of
// the voters restarts at once, entries can be lost (partitions register
// again). Timing uses the wall clock; now only stamps entries (leases).
// All methods are safe for concurrent use; the Arbiter methods work before
// Run as long as another agent's group serves.
type Service struct {
	cfg       ServiceConfig
	bus       bus.Transport
	now       func() time.Time
	log       zerolog.Logger
	mux       *listenerMux // nil when Bind is ""
	addr      string       // advertised raft address
	replySubj string
	replySub  bus.Subscription
	reqs      chan wireReq // forwarded requests for the workers
	wake      chan struct{}
	started   atomic.Bool

	mu         sync.Mutex
	peers      []Peer
	node       *serviceNode
	pending    map[string]chan wireReply
	seen       map[string]seenState // others' status, by id
	self       wireState            // own status as last computed
	lastMember time.Time            // last status from a group member
	runStart   time.Time
	known      ServiceStatus // leader and voters as last heard

	// manager goroutine only
	candidateSince time.Time
	removedSince   time.Time
	learnerSince   map[string]time.Time // leader: when each learner was added
	lastBlocked    string

	forwarded, applied atomic.Int64 // requests sent on the bus, applied locally
}

type seenState struct {
	st wireState
	at time.Time
}

// serviceNode is a running raft node and what goes with it.
type serviceNode struct {
	raft       *RaftNode
	trans      raftTransport
	sub        bus.Subscription
	started    time.Time
	wasMember  bool // manager goroutine only
	wasLearner bool // manager goroutine only
}

// raftTransport is the transport of a service's raft node: plain
// NetworkTransport, or gatedTransport over mutual TLS.
type raftTransport interface {
	raft.Transport
	raft.WithClose
}

// withLeader is st with what n knows of its group's leader.
func (n *serviceNode) withLeader(st wireState) wireState {
	_, lid := n.raft.r.LeaderWithID()
	st.IsLeader, st.Leader = n.raft.Leader(), string(lid)
	return st
}

const (
	serviceWorkers = 4
	requestQueue   = 256
)

// NewService opens the raft listener (so RaftAddr is known before Run)
// and subscribes to this Service's reply subject.
func NewService(cfg ServiceConfig, t bus.Transport, now func() time.Time, log zerolog.Logger) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("merge arbiter service: %w", err)
	}
	if t == nil || now == nil {
		return nil, errors.New("merge arbiter service: a bus transport and a clock are required")
	}
	s := &Service{
		cfg: cfg, bus: t, now: now, log: log,
		reqs: make(chan wireReq, requestQueue), wake: make(chan struct{}, 1),
		pending: map[string]chan wireReply{}, seen: map[string]seenState{}, learnerSince: map[string]time.Time{},
	}
	if cfg.Bind != "" {
		ln, err := net.Listen("tcp", cfg.Bind)
		if err != nil {
			return nil, fmt.Errorf("merge arbiter service: raft listener: %w", err)
		}
		adv, err := advertised(cfg.Advertise, ln.Addr())
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("merge arbiter service: %w", err)
		}
		s.mux, s.addr = newListenerMux(ln, adv), adv
		if cfg.Security != nil {
			s.mux.sec, s.mux.allow, s.mux.expect = cfg.Security, s.allowPeer, s.peerAt
		}
	}
	s.self = wireState{ID: cfg.ID, Addr: s.addr}
	s.replySubj = ReplySubject(cfg.Region) + "." + cfg.ID + "." + newToken()
	sub, err := bus.SubscribeFrom(t, s.replySubj, s.onReply)
	if err != nil {
		if s.mux != nil {
			s.mux.close()
		}
		return nil, fmt.Errorf("merge arbiter service: %w", err)
	}
	s.replySub = sub
	return s, nil
}

// advertised is the address other voters dial: adv with a port 0
// replaced by the bound one, or the bound address itself.
func advertised(adv string, bound net.Addr) (string, error) {
	bhost, bport, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "", fmt.Errorf("bound address %s: %w", bound, err)
	}
	if adv == "" {
		if ip := net.ParseIP(bhost); ip == nil || ip.IsUnspecified() {
			return "", fmt.Errorf("raft listens on every address (%s): set an advertise address", bound)
		}
		return bound.String(), nil
	}
	h, p, err := net.SplitHostPort(adv)
	if err != nil {
		return "", fmt.Errorf("advertise %q: %w", adv, err)
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		return "", fmt.Errorf("advertise %q: name a host others can reach", adv)
	}
	if p == "" || p == "0" {
		p = bport
	}
	return net.JoinHostPort(h, p), nil
}

// RaftAddr is the advertised raft address, "" when Bind is "".
func (s *Service) RaftAddr() string { return s.addr }

// SetPeers replaces the live membership (this agent included or not). It
// does not block; the latest call wins.
func (s *Service) SetPeers(peers []Peer) {
	cp := slices.Clone(peers)
	s.mu.Lock()
	s.peers = cp
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// PeerSecurity makes the TLS configurations of authenticated raft
// connections (bus/auth.PeerTLS: certificates pinned by the region's
// keys). The configurations verify the peer's identity themselves.
type PeerSecurity interface {
	// Server is the listening side's configuration; allow decides on the
	// authenticated peer.
	Server(allow func(host string) error) *tls.Config
	// Client is the dialing side's configuration; the server must prove
	// it is expect ("" = any member).
	Client(expect string) *tls.Config
}

// errNotCandidate: a raft connection from a host that membership does not
// show as a live voter candidate.
var errNotCandidate = errors.New("not a live member with a raft address")

// allowPeer accepts a raft connection from host when membership shows it
// live with a raft address (only those can be voters).
func (s *Service) allowPeer(host string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.peers {
		if p.ID == host && p.RaftAddr != "" {
			return nil
		}
	}
	return errNotCandidate
}

// peerAt is the member advertising raft address addr ("" if none).
func (s *Service) peerAt(addr string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.peers {
		if p.RaftAddr == addr {
			return p.ID
		}
	}
	return ""
}

// livePeers is the peer list with this agent as it really is.
func (s *Service) livePeers() []Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Peer, 0, len(s.peers)+1)
	for _, p := range s.peers {
		if p.ID != s.cfg.ID {
			out = append(out, p)
		}
	}
	return append(out, Peer{ID: s.cfg.ID, Site: s.cfg.Site, RaftAddr: s.addr})
}

// Status reports what this Service knows of its group.
func (s *Service) Status() ServiceStatus {
	s.mu.Lock()
	n, known := s.node, s.known
	s.mu.Unlock()
	known.Voters = slices.Clone(known.Voters)
	if n == nil {
		return known
	}
	_, lid := n.raft.r.LeaderWithID()
	f := n.raft.r.GetConfiguration()
	if f.Error() != nil {
		return known
	}
	conf := f.Configuration()
	st := ServiceStatus{Voter: slices.Contains(members(conf, raft.Voter), s.cfg.ID), Leader: string(lid), Voters: members(conf, raft.Voter),
		Term: n.raft.r.CurrentTerm()}
	if len(conf.Servers) == 0 { // not in a group yet: what others said
		st.Leader, st.Voters = known.Leader, known.Voters
	}
	return st
}

// Run serves until ctx ends, then shuts the raft node, the listener and
// its goroutines down. It may be called once.
func (s *Service) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("merge arbiter service: Run called twice")
	}
	s.mu.Lock()
	s.runStart = time.Now()
	s.mu.Unlock()
	var wg sync.WaitGroup
	if s.mux != nil {
		wg.Go(s.mux.acceptLoop)
	}
	for range serviceWorkers {
		wg.Go(func() { s.work(ctx) })
	}
	s.log.Info().Str("region", s.cfg.Region).Str("raft", s.addr).Int("voters", s.cfg.Voters).
		Bool("can_vote", s.mux != nil).Msg("merge arbiter service running")
	s.manage(ctx)
	s.stopNode("service stopping")
	if err := s.replySub.Unsubscribe(); err != nil {
		s.log.Warn().Err(err).Msg("merge arbiter: unsubscribe replies")
	}
	if s.mux != nil {
		s.mux.close()
	}
	wg.Wait()
	return nil
}

// currentNode is the running raft node, or nil.
func (s *Service) currentNode() *serviceNode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// leading is this agent's raft node if it leads, else nil.
func (s *Service) leading() *RaftNode {
	if n := s.currentNode(); n != nil && n.raft.Leader() {
		return n.raft
	}
	return nil
}

// Register implements Arbiter.
func (s *Service) Register(ctx context.Context, r Registration) (Decision, error) {
	return s.decide(ctx, wireReq{Kind: kindRegister, Reg: &r}, ErrNoQuorum)
}

// Merge implements Arbiter.
func (s *Service) Merge(ctx context.Context, p, q Ref) (Decision, error) {
	return s.decide(ctx, wireReq{Kind: kindMerge, P: &p, Q: &q}, ErrUnknownOutcome)
}

// Dissolve implements Arbiter.
func (s *Service) Dissolve(ctx context.Context, r Ref) (Decision, error) {
	return s.decide(ctx, wireReq{Kind: kindDissolve, P: &r}, ErrUnknownOutcome)
}

func (s *Service) decide(ctx context.Context, req wireReq, onTimeout error) (Decision, error) {
	rep, err := s.request(ctx, req, onTimeout)
	if err != nil {
		return Decision{}, err
	}
	if rep.Decision == nil {
		return Decision{}, fmt.Errorf("%w: answer from %s without a decision", ErrUnknownOutcome, rep.From)
	}
	return *rep.Decision, nil
}

// Get implements Arbiter: read on the leader after a barrier.
func (s *Service) Get(ctx context.Context, id string) (Record, bool, error) {
	rep, err := s.request(ctx, wireReq{Kind: kindGet, Key: id}, ErrNoQuorum)
	if err != nil {
		return Record{}, false, err
	}
	if !rep.Found || rep.Record == nil {
		return Record{}, false, nil
	}
	return *rep.Record, true, nil
}

var _ Arbiter = (*Service)(nil)

// retryPause is the wait before sending again after an error answer.
const retryPause = 50 * time.Millisecond

// request sends req to the leader until it answers, RequestTimeout
// passes or ctx ends (then it returns onTimeout): applied here when this
// agent leads, else published on RequestSubject, where only the leader
// answers (so no other member's answer masks it), on this Service's reply
// subject. Unanswered, it is sent again every fifth of RequestTimeout
// (leadership may have moved) with the same id, which the FSM applies at
// most once.
func (s *Service) request(ctx context.Context, req wireReq, onTimeout error) (wireReply, error) {
	req.V, req.ID, req.From, req.Reply = wireVersion, newToken(), s.cfg.ID, s.replySubj
	data, err := json.Marshal(req)
	if err != nil {
		return wireReply{}, fmt.Errorf("merge arbiter %s: encode: %w", req.Kind, err)
	}
	answers := make(chan wireReply, 8)
	s.mu.Lock()
	s.pending[req.ID] = answers
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, req.ID)
		s.mu.Unlock()
	}()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resend := max(s.cfg.RequestTimeout/5, retryPause)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	last := errors.New("no leader answered")
	for {
		pause := resend
		if n := s.leading(); n != nil {
			s.applied.Add(1)
			rep, err := s.serve(rctx, n, req)
			if err == nil {
				rep.From = s.cfg.ID
				return rep, nil
			}
			last, pause = err, retryPause
		} else {
			s.forwarded.Add(1)
			if err := s.bus.Publish(rctx, RequestSubject(s.cfg.Region), data); err != nil {
				last, pause = fmt.Errorf("publish: %w", err), retryPause
			}
		}
		timer.Reset(pause)
		for waiting := true; waiting; {
			select {
			case <-rctx.Done():
				if ctx.Err() != nil {
					return wireReply{}, fmt.Errorf("merge arbiter %s: %w: %w", req.Kind, onTimeout, ctx.Err())
				}
				return wireReply{}, fmt.Errorf("merge arbiter %s in region %s: %w: no decision within %s (last: %v)",
					req.Kind, s.cfg.Region, onTimeout, s.cfg.RequestTimeout, last)
			case rep := <-answers:
				if rep.Err == "" {
					s.noteLeader(rep.From)
					return rep, nil
				}
				// The leader could not decide (yet): ask again soon.
				last = fmt.Errorf("%s answered %s: %s", rep.From, rep.Err, rep.Msg)
				timer.Reset(retryPause)
			case <-timer.C:
				waiting = false
			}
		}
	}
}

// serve applies req on n, which leads (or did a moment ago).
func (s *Service) serve(ctx context.Context, n *RaftNode, req wireReq) (wireReply, error) {
	rep := wireReply{V: wireVersion, ID: req.ID}
	var err error
	if req.Kind == kindGet {
		rep.Record = &Record{}
		*rep.Record, rep.Found, err = n.Get(ctx, req.Key)
	} else {
		rep.Decision = &Decision{}
		*rep.Decision, err = n.applyEntry(ctx, raftEntry{Command: req.command(), Req: req.ID})
	}
	return rep, err
}

// onRequest takes messages on RequestSubject (subscribed while a raft
// node runs). It must not block: requests go to the workers.
//
// On a signed bus (signer != "") a request must name its signer as its
// sender: a status then speaks for its signer only, and a register, merge
// or dissolve comes from an agent holding a key of the region.
func (s *Service) onRequest(_, signer string, data []byte) {
	req, err := decodeReq(data, s.cfg.Region)
	if err != nil {
		s.log.Warn().Err(err).Int("bytes", len(data)).Msg("merge arbiter: malformed request dropped")
		return
	}
	if signer != "" && req.From != signer {
		s.log.Warn().Str("from", req.From).Str("signer", signer).Msg("merge arbiter: request rejected: sender is not its signer")
		return
	}
	if req.Kind == kindStatus {
		if req.Reply == s.replySubj {
			return // our own probe
		}
		if signer != "" && s.allowPeer(signer) != nil {
			// Only voter candidates run raft nodes and probe: a status
			// from anyone else (a signed agent that membership does not
			// show live with a raft address) steers nothing.
			s.log.Debug().Str("from", signer).Msg("merge arbiter: status from a non-candidate ignored")
			return
		}
		s.noteState(*req.State)
		s.mu.Lock()
		st := s.self
		n := s.node
		s.mu.Unlock()
		if !st.Member {
			// Only group members answer (at most Voters+1 of them): a
			// prober learns that a group exists at once. Everyone else's
			// state travels in its own probes.
			return
		}
		if n != nil {
			st = n.withLeader(st)
		}
		s.reply(req, wireReply{State: &st})
		return
	}
	if s.leading() == nil {
		return // only the leader answers
	}
	select {
	case s.reqs <- req:
	default:
		s.log.Warn().Str("request", req.ID).Str("from", req.From).Msg("merge arbiter: request queue full, request dropped")
	}
}

// work applies forwarded requests while this node leads.
func (s *Service) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-s.reqs:
			n := s.leading()
			if n == nil {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, s.cfg.Raft.ApplyTimeout)
			rep, err := s.serve(actx, n, req)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				code := errCodeUnknown
				if errors.Is(err, ErrNoQuorum) {
					code = errCodeNoQuorum
				}
				rep = wireReply{Err: code, Msg: err.Error()}
			}
			s.reply(req, rep)
		}
	}
}

func (s *Service) reply(req wireReq, rep wireReply) {
	rep.V, rep.ID, rep.From = wireVersion, req.ID, s.cfg.ID
	data, err := json.Marshal(rep)
	if err != nil {
		s.log.Error().Err(err).Str("request", req.ID).Msg("merge arbiter: encode answer")
		return
	}
	if err := s.bus.Publish(context.Background(), req.Reply, data); err != nil {
		s.log.Warn().Err(err).Str("request", req.ID).Str("to", req.From).Msg("merge arbiter: answer not sent")
	}
}

// onReply takes answers on this Service's reply subject.
func (s *Service) onReply(_, signer string, data []byte) {
	rep, err := decodeReply(data)
	if err != nil {
		s.log.Warn().Err(err).Int("bytes", len(data)).Msg("merge arbiter: malformed answer dropped")
		return
	}
	if signer != "" && rep.From != signer {
		s.log.Warn().Str("from", rep.From).Str("signer", signer).Msg("merge arbiter: answer rejected: sender is not its signer")
		return
	}
	if rep.State != nil && rep.State.ID == rep.From && (signer == "" || s.allowPeer(signer) == nil) {
		s.noteState(*rep.State)
	}
	s.mu.Lock()
	ch := s.pending[rep.ID]
	s.mu.Unlock()
	if ch != nil {
		if err := s.mayAnswer(rep.From); err != nil {
			// Anyone holding a key of the region reads requests and may
			// answer them: only the group's leader is listened to.
			s.log.Warn().Err(err).Str("from", rep.From).Str("request", rep.ID).Msg("merge arbiter: answer rejected")
			return
		}
		select {
		case ch <- rep:
		default:
		}
	}
}

// errNotLeader: an answer from a member this agent does not know as
// its group's leader.
var errNotLeader = errors.New("not the leader this agent knows")

// mayAnswer reports whether from may answer this agent's requests. When
// this agent's raft node is in a group, from must be a voter of its
// latest configuration and the leader it follows (if it knows one).
// Otherwise from must be one of the voters SelectVoters picks from the
// live membership, the group every agent computes alike (membership is
// bound to the region's keys): a ring member outside the group cannot
// answer, whatever it signs.
func (s *Service) mayAnswer(from string) error {
	if n := s.currentNode(); n != nil {
		if f := n.raft.r.GetConfiguration(); f.Error() == nil && len(f.Configuration().Servers) > 0 {
			if !slices.Contains(members(f.Configuration(), raft.Voter), from) {
				return fmt.Errorf("%w: %s is not a voter of the group", errNotLeader, from)
			}
			if _, lid := n.raft.r.LeaderWithID(); lid != "" && string(lid) != from {
				return fmt.Errorf("%w: the leader is %s, not %s", errNotLeader, lid, from)
			}
			return nil
		}
	}
	if err := s.selected(from); err != nil {
		return fmt.Errorf("%w: %v", errNotLeader, err)
	}
	return nil
}

// selected reports whether id is one of the voters SelectVoters picks
// from the live membership, the group every agent computes alike.
func (s *Service) selected(id string) error {
	for _, p := range SelectVoters(s.livePeers(), s.cfg.Voters) {
		if p.ID == id {
			return nil
		}
	}
	return fmt.Errorf("%s is none of the voters membership selects", id)
}

// noteState records another member's status.
func (s *Service) noteState(st wireState) {
	if st.ID == s.cfg.ID {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[st.ID] = seenState{st: st, at: now}
	if st.Member {
		s.lastMember = now
	}
	if st.IsLeader {
		s.known = ServiceStatus{Leader: st.ID, Voters: slices.Clone(st.Voters)}
	}
}

func (s *Service) noteLeader(id string) {
	s.mu.Lock()
	if s.known.Leader != id {
		s.known = ServiceStatus{Leader: id}
	}
	s.mu.Unlock()
}

// startNode starts a raft node (without bootstrapping) on the listener.
func (s *Service) startNode() error {
	sess := s.mux.session()
	logger := s.raftLogger()
	tc := raft.NetworkTransportConfig{Stream: sess, MaxPool: 3, Timeout: max(2*time.Second, 4*s.cfg.Raft.ElectionTimeout), Logger: logger}
	var trans raftTransport
	var node atomic.Pointer[RaftNode]
	if s.mux.sec != nil {
		claims := &termClaims{}
		// Every inbound RPC is checked against the peer its connection
		// authenticated (see gatedTransport).
		trans = newGatedTransport(sess, tc, func(peer string, cmd any) error { return admitRPC(node.Load(), peer, cmd, s.selected, claims) })
	} else {
		trans = raft.NewNetworkTransportWithConfig(&tc)
	}
	rn, err := newRaftNode(s.cfg.Raft, trans, s.now, nil, logger)
	if err != nil {
		_ = trans.Close()
		return err
	}
	node.Store(rn)
	sub, err := bus.SubscribeFrom(s.bus, RequestSubject(s.cfg.Region), s.onRequest)
	if err != nil {
		_ = rn.Shutdown()
		_ = trans.Close()
		return err
	}
	s.mu.Lock()
	s.node = &serviceNode{raft: rn, trans: trans, sub: sub, started: time.Now()}
	s.self = wireState{ID: s.cfg.ID, Addr: s.addr, Running: true}
	s.mu.Unlock()
	s.log.Info().Str("raft", s.addr).Msg("merge arbiter: raft node started")
	return nil
}

// raftLogger passes hashicorp/raft's own warnings and errors to the
// service log at debug level (they are frequent while a voter is down:
// turn debug on to see them), and costs nothing otherwise.
func (s *Service) raftLogger() hclog.Logger {
	if s.log.GetLevel() > zerolog.DebugLevel {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: raftLogWriter{s.log}, DisableTime: true})
}

// raftLogWriter turns hclog lines into debug records.
type raftLogWriter struct{ log zerolog.Logger }

func (w raftLogWriter) Write(p []byte) (int, error) {
	w.log.Debug().Str("raft_log", strings.TrimSpace(string(p))).Msg("merge arbiter: hashicorp/raft")
	return len(p), nil
}

// stopNode shuts the raft node down, if one runs.
func (s *Service) stopNode(why string) {
	s.mu.Lock()
	n := s.node
	s.node = nil
	s.self = wireState{ID: s.cfg.ID, Addr: s.addr}
	s.mu.Unlock()
	if n == nil {
		return
	}
	if err := n.sub.Unsubscribe(); err != nil {
		s.log.Warn().Err(err).Msg("merge arbiter: unsubscribe requests")
	}
	if err := n.raft.Shutdown(); err != nil {
		s.log.Warn().Err(err).Msg("merge arbiter: raft shutdown")
	}
	_ = n.trans.Close()
	s.log.Info().Str("reason", why).Msg("merge arbiter: raft node stopped")
}

// members lists the ids of c's servers of suffrage s, sorted.
func members(c raft.Configuration, s raft.ServerSuffrage) []string {
	var out []string
	for _, sv := range c.Servers {
		if sv.Suffrage == s {
			out = append(out, string(sv.ID))
		}
	}
	slices.Sort(out)
	return out
}
