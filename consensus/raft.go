package consensus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// RaftConfig tunes one member of the merge arbiter group. Timeouts are
// tuned for a LAN; raft requires LeaderLeaseTimeout <= HeartbeatTimeout.
type RaftConfig struct {
	ID                 string
	HeartbeatTimeout   time.Duration // default 200 ms
	ElectionTimeout    time.Duration // default 200 ms
	LeaderLeaseTimeout time.Duration // default 100 ms
	CommitTimeout      time.Duration // default 20 ms
	// ApplyTimeout bounds one request (enqueue and commit).
	ApplyTimeout time.Duration // default 2 s
}

// DefaultRaftConfig returns LAN timeouts for member id.
func DefaultRaftConfig(id string) RaftConfig {
	return RaftConfig{ID: id, HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 20 * time.Millisecond, ApplyTimeout: 2 * time.Second}
}

// Validate lists every problem.
func (c RaftConfig) Validate() error {
	var errs []error
	if c.ID == "" {
		errs = append(errs, errors.New("raft: id is required"))
	}
	if c.HeartbeatTimeout <= 0 || c.ElectionTimeout < c.HeartbeatTimeout {
		errs = append(errs, errors.New("raft: need 0 < heartbeat_timeout <= election_timeout"))
	}
	if c.LeaderLeaseTimeout <= 0 || c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		errs = append(errs, errors.New("raft: need 0 < leader_lease_timeout <= heartbeat_timeout"))
	}
	if c.CommitTimeout <= 0 || c.ApplyTimeout <= 0 {
		errs = append(errs, errors.New("raft: commit_timeout and apply_timeout must be > 0"))
	}
	return errors.Join(errs...)
}

// RaftNode is one member of the merge arbiter group: the FSM replicated
// by hashicorp/raft, in-memory log and stable store (the arbiter's state
// is leases of a few seconds: a member that restarts catches up from the
// others; a group that loses every member starts empty, which only makes
// partitions register again).
//
// A RaftNode decides requests only while it leads; otherwise it returns
// ErrNoQuorum naming the leader. RaftGroup forwards to the leader inside
// one process; Service runs one RaftNode per agent over TCP and forwards
// requests between processes over the bus.
type RaftNode struct {
	cfg RaftConfig
	r   *raft.Raft
	fsm *raftFSM
	now func() time.Time
}

type raftFSM struct {
	mu  sync.Mutex
	fsm *FSM
	// seen holds the decision of every request applied with a request id
	// in the last dedupWindow of entry time: a request retried after an
	// unknown outcome (leader lost, answer lost, message duplicated) is
	// answered with its first decision instead of being applied twice.
	seen map[string]seenDecision
	// group names the group (set by the first group entry, see
	// raftEntry); two groups of one region meeting is detected with it.
	group string
	// now is this member's clock (the one its leader stamps entries
	// with); nil: entries are not checked against it.
	now func() time.Time
}

// maxEntryAhead is how far ahead of a member's clock an entry may be
// dated. The leader stamps entries with its own clock, so an entry much
// later than every member's clock is none the leader wrote: applied, it
// would expire every lease at once and keep the arbiter's clock there.
// It is refused instead. The bound is far above any clock skew the
// members can have, so the replicas decide alike.
const maxEntryAhead = time.Hour

// dedupWindow is how long, in entry time, a request id is remembered.
// It must exceed the time a caller keeps retrying one request.
const dedupWindow = 5 * time.Minute

type seenDecision struct {
	Decision Decision
	Time     time.Time
}

// raftEntry is one log entry: a Command, tagged with the id of the
// request that proposed it (retries of one request commit once), or a
// group entry naming the group. Entries written before the tags existed
// decode as plain commands.
type raftEntry struct {
	Command
	Req   string `json:",omitempty"`
	Group string `json:",omitempty"`
}

func newRaftFSM(now func() time.Time) *raftFSM {
	return &raftFSM{fsm: NewFSM(), seen: make(map[string]seenDecision), now: now}
}

func (f *raftFSM) Apply(l *raft.Log) any {
	var e raftEntry
	if err := json.Unmarshal(l.Data, &e); err != nil {
		return Decision{Reason: "undecodable entry: " + err.Error()}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now != nil {
		if limit := f.now().Add(maxEntryAhead); e.Time.After(limit) {
			return Decision{Reason: fmt.Sprintf("entry dated %s, more than %s ahead of this member's clock: refused", e.Time.UTC().Format(time.RFC3339), maxEntryAhead)}
		}
	}
	if e.Group != "" {
		if f.group == "" {
			f.group = e.Group
		}
		return Decision{Committed: true}
	}
	if e.Req != "" {
		if s, ok := f.seen[e.Req]; ok {
			d := s.Decision
			d.Nodes = slices.Clone(d.Nodes)
			return d
		}
	}
	d := f.fsm.Apply(e.Command)
	if e.Req != "" {
		f.seen[e.Req] = seenDecision{Decision: d, Time: f.fsm.Now()}
		d.Nodes = slices.Clone(d.Nodes)
		horizon := f.fsm.Now().Add(-dedupWindow)
		for id, s := range f.seen {
			if s.Time.Before(horizon) {
				delete(f.seen, id)
			}
		}
	}
	return d
}

// groupID is the group named by the log so far ("" before its group
// entry is applied).
func (f *raftFSM) groupID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.group
}

type fsmSnapshot struct {
	Now     time.Time
	Records []Record
	Seen    map[string]seenDecision `json:",omitempty"`
	Group   string                  `json:",omitempty"`
}

func (f *raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fsmSnapshot{Now: f.fsm.Now(), Records: f.fsm.Records(), Seen: maps.Clone(f.seen), Group: f.group}, nil
}

func (f *raftFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s fsmSnapshot
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return fmt.Errorf("restore arbiter snapshot: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fsm.Restore(s.Now, s.Records)
	f.seen = s.Seen
	if f.seen == nil {
		f.seen = make(map[string]seenDecision)
	}
	f.group = s.Group
	return nil
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// NewRaftNode starts a member on transport t. bootstrap, when not empty,
// is the initial voter set (give the same set to every first member).
func NewRaftNode(cfg RaftConfig, t raft.Transport, now func() time.Time, bootstrap []raft.Server) (*RaftNode, error) {
	return newRaftNode(cfg, t, now, bootstrap, hclog.NewNullLogger())
}

// newRaftNode is NewRaftNode with hashicorp/raft's own log going to logger.
func newRaftNode(cfg RaftConfig, t raft.Transport, now func() time.Time, bootstrap []raft.Server, logger hclog.Logger) (*RaftNode, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout, rc.ElectionTimeout = cfg.HeartbeatTimeout, cfg.ElectionTimeout
	rc.LeaderLeaseTimeout, rc.CommitTimeout = cfg.LeaderLeaseTimeout, cfg.CommitTimeout
	rc.Logger = logger
	logs, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	f := newRaftFSM(now)
	if len(bootstrap) > 0 {
		if err := raft.BootstrapCluster(rc, logs, logs, snaps, t, raft.Configuration{Servers: bootstrap}); err != nil {
			return nil, fmt.Errorf("raft bootstrap %s: %w", cfg.ID, err)
		}
	}
	r, err := raft.NewRaft(rc, f, logs, logs, snaps, t)
	if err != nil {
		return nil, fmt.Errorf("raft %s: %w", cfg.ID, err)
	}
	return &RaftNode{cfg: cfg, r: r, fsm: f, now: now}, nil
}

// Leader reports whether this member leads.
func (n *RaftNode) Leader() bool { return n.r.State() == raft.Leader }

// Raft exposes the underlying group member (AddVoter, RemoveVoter, ...).
func (n *RaftNode) Raft() *raft.Raft { return n.r }

// Shutdown stops the member.
func (n *RaftNode) Shutdown() error { return n.r.Shutdown().Error() }

func (n *RaftNode) apply(ctx context.Context, c Command) (Decision, error) {
	return n.applyEntry(ctx, raftEntry{Command: c})
}

// applyEntry proposes e, stamped with this member's clock, and waits for
// its decision (at most ApplyTimeout, less if ctx ends sooner).
func (n *RaftNode) applyEntry(ctx context.Context, e raftEntry) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	if n.r.State() != raft.Leader {
		_, id := n.r.LeaderWithID()
		return Decision{}, fmt.Errorf("%w: %s is not the leader (leader: %q)", ErrNoQuorum, n.cfg.ID, id)
	}
	e.Time = n.now()
	data, err := json.Marshal(e)
	if err != nil {
		return Decision{}, fmt.Errorf("encode command: %w", err)
	}
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	f := n.r.Apply(data, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrRaftShutdown):
			return Decision{}, fmt.Errorf("%w: %v", ErrNoQuorum, err)
		default:
			// Leadership lost or timed out after the entry was enqueued:
			// it may commit later. The caller re-reads (Get).
			return Decision{}, fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
		}
	}
	d, ok := f.Response().(Decision)
	if !ok {
		return Decision{}, fmt.Errorf("%w: unexpected response %T", ErrUnknownOutcome, f.Response())
	}
	return d, nil
}

// Register implements Arbiter.
func (n *RaftNode) Register(ctx context.Context, r Registration) (Decision, error) {
	return n.apply(ctx, Command{Op: OpRegister, Reg: r})
}

// Merge implements Arbiter.
func (n *RaftNode) Merge(ctx context.Context, p, q Ref) (Decision, error) {
	return n.apply(ctx, Command{Op: OpMerge, P: p, Q: q})
}

// Dissolve implements Arbiter.
func (n *RaftNode) Dissolve(ctx context.Context, r Ref) (Decision, error) {
	return n.apply(ctx, Command{Op: OpDissolve, P: r})
}

// Get implements Arbiter: on the leader, after a barrier, so the answer
// includes every committed decision (what a caller needs after an unknown
// outcome).
func (n *RaftNode) Get(ctx context.Context, id string) (Record, bool, error) {
	if n.r.State() != raft.Leader {
		return Record{}, false, fmt.Errorf("%w: %s is not the leader", ErrNoQuorum, n.cfg.ID)
	}
	if err := n.r.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
		return Record{}, false, fmt.Errorf("%w: barrier: %v", ErrNoQuorum, err)
	}
	n.fsm.mu.Lock()
	defer n.fsm.mu.Unlock()
	r, ok := n.fsm.fsm.Get(id)
	return r, ok, nil
}

var _ Arbiter = (*RaftNode)(nil)

// RaftGroup is the members of one group living in one process; its
// Arbiter methods go to the current leader, waiting up to ApplyTimeout
// for one to be elected.
type RaftGroup struct {
	mu      sync.Mutex
	members []*RaftNode
	wait    time.Duration
}

// NewRaftGroup wraps members.
func NewRaftGroup(wait time.Duration, members ...*RaftNode) *RaftGroup {
	return &RaftGroup{members: members, wait: wait}
}

// Remove drops a (stopped) member from the routing.
func (g *RaftGroup) Remove(n *RaftNode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, m := range g.members {
		if m == n {
			g.members = append(g.members[:i], g.members[i+1:]...)
			return
		}
	}
}

// Leader returns the current leader, waiting for an election.
func (g *RaftGroup) Leader(ctx context.Context) (*RaftNode, error) {
	end := time.Now().Add(g.wait)
	for {
		g.mu.Lock()
		for _, m := range g.members {
			if m.Leader() {
				g.mu.Unlock()
				return m, nil
			}
		}
		g.mu.Unlock()
		if time.Now().After(end) {
			return nil, fmt.Errorf("%w: no leader after %s", ErrNoQuorum, g.wait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (g *RaftGroup) leaderDo(ctx context.Context, f func(*RaftNode) (Decision, error)) (Decision, error) {
	l, err := g.Leader(ctx)
	if err != nil {
		return Decision{}, err
	}
	return f(l)
}

// Register implements Arbiter.
func (g *RaftGroup) Register(ctx context.Context, r Registration) (Decision, error) {
	return g.leaderDo(ctx, func(n *RaftNode) (Decision, error) { return n.Register(ctx, r) })
}

// Merge implements Arbiter.
func (g *RaftGroup) Merge(ctx context.Context, p, q Ref) (Decision, error) {
	return g.leaderDo(ctx, func(n *RaftNode) (Decision, error) { return n.Merge(ctx, p, q) })
}

// Dissolve implements Arbiter.
func (g *RaftGroup) Dissolve(ctx context.Context, r Ref) (Decision, error) {
	return g.leaderDo(ctx, func(n *RaftNode) (Decision, error) { return n.Dissolve(ctx, r) })
}

// Get implements Arbiter.
func (g *RaftGroup) Get(ctx context.Context, id string) (Record, bool, error) {
	l, err := g.Leader(ctx)
	if err != nil {
		return Record{}, false, err
	}
	return l.Get(ctx, id)
}

var _ Arbiter = (*RaftGroup)(nil)

// InProcessGroup is n voters in this process joined by raft's in-memory
// transport (for `dvms simulate` and tests).
type InProcessGroup struct {
	*RaftGroup
	Nodes      []*RaftNode
	Transports []*raft.InmemTransport
}

// StartInProcessGroup starts n voters named arbiter-0..n-1.
func StartInProcessGroup(n int, now func() time.Time) (*InProcessGroup, error) {
	var servers []raft.Server
	g := &InProcessGroup{Transports: make([]*raft.InmemTransport, n)}
	for i := range g.Transports {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("arbiter-%d", i)))
		g.Transports[i] = tr
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("arbiter-%d", i)), Address: addr})
	}
	for i, a := range g.Transports {
		for j, b := range g.Transports {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	for i, tr := range g.Transports {
		node, err := NewRaftNode(DefaultRaftConfig(fmt.Sprintf("arbiter-%d", i)), tr, now, servers)
		if err != nil {
			g.Shutdown()
			return nil, fmt.Errorf("merge arbiter: %w", err)
		}
		g.Nodes = append(g.Nodes, node)
	}
	g.RaftGroup = NewRaftGroup(10*time.Second, g.Nodes...)
	return g, nil
}

// Shutdown stops every voter.
func (g *InProcessGroup) Shutdown() {
	for _, n := range g.Nodes {
		_ = n.Shutdown()
	}
}
