package consensus_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/internal/testwait"
)

// tlsStream is a raft stream layer that dials over mutual TLS with a
// ring member's key (an insider's raft client) and accepts nothing.
type tlsStream struct {
	cfg  *tls.Config
	done chan struct{}
}

func (s tlsStream) Accept() (net.Conn, error) { <-s.done; return nil, net.ErrClosed }
func (s tlsStream) Close() error              { return nil }
func (s tlsStream) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (s tlsStream) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(a), s.cfg)
}

// Issue 27: a ring member's key gets through mutual TLS, and nothing
// else tied the raft RPC to the peer. h4, a live voter candidate that is
// not a voter (a compromised host running an agent), sends the issue's
// AppendEntries (term 2^40, an entry dated 2999, a commit index beyond
// the log: it panicked a voter with "log not found"), in its own name and
// in the leader's, a heartbeat in the leader's name and a RequestVote:
// every one is refused, no voter's term moves, the leader stays, the
// registration stays and the group still commits.
func TestServiceRaftRPCBoundToPeer(t *testing.T) {
	hosts := []string{"h1", "h2", "h3", "h4"}
	keys := ringTLS(t, hosts)
	c, leader, follower := keys.cluster(t, hosts)
	ctx := context.Background()
	done := make(chan struct{})
	defer close(done)
	tr := raft.NewNetworkTransport(tlsStream{cfg: keys.tls["h4"].Client(""), done: done}, 1, 3*time.Second, io.Discard)
	defer tr.Close()

	leaderAddr := []byte(leader.svc.RaftAddr())
	forged := func(as string, addr []byte, entries bool) *raft.AppendEntriesRequest {
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(as), Addr: addr},
			Term:      1 << 40, Leader: addr,
		}
		if entries {
			req.LeaderCommitIndex = 1 << 40
			req.Entries = []*raft.Log{{Index: 1 << 40, Term: 1 << 40, Type: raft.LogCommand, Data: []byte(`{"Op":2}`),
				AppendedAt: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}}
		}
		return req
	}
	for _, a := range c.live() {
		if a.id == "h4" {
			continue
		}
		target := raft.ServerAddress(a.svc.RaftAddr())
		for name, req := range map[string]*raft.AppendEntriesRequest{
			"append entries in its own name":      forged("h4", []byte(c.agent("h4").svc.RaftAddr()), true),
			"append entries in the leader's name": forged(leader.id, leaderAddr, true),
			"heartbeat in the leader's name":      forged(leader.id, leaderAddr, false),
		} {
			var resp raft.AppendEntriesResponse
			err := tr.AppendEntries(raft.ServerID(a.id), target, req, &resp)
			if err == nil || !strings.Contains(err.Error(), "raft rpc refused") {
				t.Errorf("%s took the %s (err %v, resp %+v)", a.id, name, err, resp)
			}
		}
		vote := &raft.RequestVoteRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("h4"),
			Addr: []byte(c.agent("h4").svc.RaftAddr())}, Term: 1 << 40, LastLogIndex: 1 << 40, LastLogTerm: 1 << 40}
		var vresp raft.RequestVoteResponse
		if err := tr.RequestVote(raft.ServerID(a.id), target, vote, &vresp); err == nil {
			t.Errorf("%s took h4's RequestVote (granted %v)", a.id, vresp.Granted)
		}
	}
	for _, a := range c.live() {
		// On a busy machine the group may elect another of its voters
		// (heartbeats late); never the forger, never at its term.
		if st := a.svc.Status(); st.Term >= 1<<40 || (st.Voter && st.Leader == "h4") {
			t.Errorf("%s after the forged RPCs: %+v", a.id, st)
		}
	}
	// The registration is kept and the group still commits: retried while
	// a busy machine's election (if any) settles ("no quorum" meanwhile).
	attempt := 0
	testwait.Until(t, 30*time.Second, "the registration kept and a new one committed after the forged RPCs", func() (bool, string) {
		attempt++
		r, ok, err := follower.svc.Get(ctx, "p")
		if err != nil || !ok || r.Initiator != follower.id {
			return false, fmt.Sprintf("get p: %+v %v %v", r, ok, err)
		}
		id := fmt.Sprintf("q%d", attempt) // a fresh partition each try: an unknown outcome may have committed the last
		d, err := follower.svc.Register(ctx, reg(id, follower.id))
		return err == nil && d.Committed, fmt.Sprintf("register %s: %+v %v", id, d, err)
	})

	// A voter that does not lead answers the follower's requests first,
	// signed with its own key, "committed": the follower, a member of
	// the group, takes answers from the leader its raft node follows
	// only. The merge of two unregistered partitions stays refused.
	var other *agent
	for _, a := range c.live() {
		if a.id != leader.id && a.id != follower.id && a.id != "h4" {
			other = a
		}
	}
	tr2, err := bus.ConnectNATS(ctx, bus.Config{URL: c.url, Name: "forger"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	forger := keys.signed(t)(other.id, tr2)
	forgedN := 0
	var fmu sync.Mutex
	sub, err := forger.Subscribe(consensus.RequestSubject(c.region), func(_ string, data []byte) {
		var req struct{ ID, From, Reply, Kind string }
		if json.Unmarshal(data, &req) != nil || req.From != follower.id || req.Kind != "merge" {
			return
		}
		ans, _ := json.Marshal(map[string]any{"v": 1, "id": req.ID, "from": other.id,
			"decision": map[string]any{"Committed": true, "Version": 99, "Nodes": []string{"h4"}}})
		_ = forger.Publish(context.Background(), req.Reply, ans)
		fmu.Lock()
		forgedN++
		fmu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = tr2.Flush(ctx)
	for i := range 5 {
		d, err := follower.svc.Merge(ctx, consensus.Ref{ID: fmt.Sprintf("ghost-%d", i), Version: 1}, consensus.Ref{ID: "p", Version: 1})
		if d.Committed || d.Version == 99 {
			t.Fatalf("forged merge %d taken from %s, a voter that does not lead: %+v %v", i, other.id, d, err)
		}
	}
	// The forger's handler runs on its own connection: on a busy machine
	// it may answer after the follower took the leader's answer, or miss a
	// request the follower sent before its subscription took effect. The
	// attack ran if it answered some (every answer it sent was refused
	// above).
	testwait.Until(t, 30*time.Second, "the forger to answer the follower's requests", func() (bool, string) {
		fmu.Lock()
		defer fmu.Unlock()
		return forgedN >= 1, fmt.Sprintf("%d of 5 answered", forgedN)
	})
}

// A current voter's key gets its raft RPCs through the gate (the header
// names it, it votes): Raft trusts voters. h2 (or whichever voter does
// not lead) sends, in its own name, the AppendEntries no leader writes:
// an entry numbered 2^40 after none with a commit index there (the
// issue's "log not found" panic), entries not numbered on from the one
// they follow, and, in the term the leader leads, an entry after the
// follower's last one that dissolves "p" with a commit index on it (the
// follower would apply it at once, beside the leader's log, and keep it
// when the leader's entry of the same index and term comes). Every one
// is refused, to the follower and to the leader; no voter crashes (a
// panic ends the test binary), no term moves to 2^40, each voter still
// holds "p" as registered and the group still commits.
func TestServiceRaftRPCForgedByAVoter(t *testing.T) {
	hosts := []string{"h1", "h2", "h3"}
	keys := ringTLS(t, hosts)
	c, leader, _ := keys.cluster(t, hosts)
	ctx := context.Background()
	var forger *agent
	for _, a := range c.live() {
		if a.id != leader.id && a.svc.Status().Voter {
			forger = a
		}
	}
	if forger == nil {
		t.Fatal("no voter besides the leader")
	}
	registered := map[string]consensus.Record{}
	for _, a := range c.live() {
		testwait.Until(t, 10*time.Second, a.id+" to apply p", func() (bool, string) {
			r, ok := a.svc.LocalRecord("p")
			registered[a.id] = r
			return ok, "not applied"
		})
	}
	done := make(chan struct{})
	defer close(done)
	tr := raft.NewNetworkTransport(tlsStream{cfg: keys.tls[forger.id].Client(""), done: done}, 1, 3*time.Second, io.Discard)
	defer tr.Close()
	addr := []byte(forger.svc.RaftAddr())
	dissolve, err := json.Marshal(consensus.Command{Op: consensus.OpDissolve, Time: time.Now(), P: consensus.Ref{ID: "p", Version: 1}})
	if err != nil {
		t.Fatal(err)
	}
	entry := func(index, term uint64) *raft.Log {
		return &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: dissolve, AppendedAt: time.Now()}
	}
	snap := []byte(`{}`)
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(forger.id), Address: raft.ServerAddress(addr)}}})
	for _, a := range c.live() {
		if a == forger {
			continue
		}
		last, lastTerm := a.svc.LastLog()
		term := a.svc.Status().Term
		target := raft.ServerAddress(a.svc.RaftAddr())
		hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(forger.id), Addr: addr}
		for name, req := range map[string]*raft.AppendEntriesRequest{
			"an entry numbered 2^40 after none": {Term: 1 << 40, LeaderCommitIndex: 1 << 40, Entries: []*raft.Log{entry(1<<40, 1<<40)}},
			"an entry past the log's end":       {Term: term + 1, PrevLogEntry: last, PrevLogTerm: lastTerm, LeaderCommitIndex: last + 3, Entries: []*raft.Log{entry(last+3, term+1)}},
			"entries with a gap":                {Term: term + 1, PrevLogEntry: last, PrevLogTerm: lastTerm, LeaderCommitIndex: last + 3, Entries: []*raft.Log{entry(last+1, term+1), entry(last+3, term+1)}},
			"an entry in the leader's term":     {Term: term, PrevLogEntry: last, PrevLogTerm: lastTerm, LeaderCommitIndex: last + 1, Entries: []*raft.Log{entry(last+1, term)}},
			"a heartbeat 2^40 terms on":         {Term: term + 1<<40, PrevLogEntry: last, PrevLogTerm: lastTerm, LeaderCommitIndex: last},
			"a configuration that does not decode": {Term: term + 1, PrevLogEntry: last, PrevLogTerm: lastTerm, LeaderCommitIndex: last,
				Entries: []*raft.Log{{Index: last + 1, Term: term + 1, Type: raft.LogConfiguration, Data: []byte("not msgpack"), AppendedAt: time.Now()}}},
		} {
			req.RPCHeader, req.Leader = hdr, addr
			var resp raft.AppendEntriesResponse
			err := tr.AppendEntries(raft.ServerID(a.id), target, req, &resp)
			if err == nil || !strings.Contains(err.Error(), "raft rpc refused") {
				t.Errorf("%s took %s from voter %s (err %v, resp %+v)", a.id, name, forger.id, err, resp)
			}
		}
		// The other RPCs that carry a term: a vote request 2^40 terms on
		// (Raft moves a node to any higher term it hears of: near 2^64 the
		// next election wraps), a snapshot in the term the leader leads
		// (it would replace the arbiter's state with the forger's) and one
		// whose configuration does not decode (raft panics decoding it).
		var vresp raft.RequestVoteResponse
		err := tr.RequestVote(raft.ServerID(a.id), target, &raft.RequestVoteRequest{RPCHeader: hdr, Term: term + 1<<40, LastLogIndex: last, LastLogTerm: lastTerm}, &vresp)
		if err == nil || !strings.Contains(err.Error(), "raft rpc refused") {
			t.Errorf("%s took a vote request 2^40 terms on from voter %s (err %v, resp %+v)", a.id, forger.id, err, vresp)
		}
		for name, req := range map[string]*raft.InstallSnapshotRequest{
			"a snapshot in the leader's term":                {Term: term, Configuration: conf},
			"a snapshot whose configuration does not decode": {Term: term + 1},
		} {
			req.RPCHeader, req.SnapshotVersion, req.Leader = hdr, raft.SnapshotVersionMax, addr
			req.LastLogIndex, req.LastLogTerm, req.ConfigurationIndex, req.Size = last+10, req.Term, last+10, int64(len(snap))
			var sresp raft.InstallSnapshotResponse
			err = tr.InstallSnapshot(raft.ServerID(a.id), target, req, &sresp, bytes.NewReader(snap))
			if err == nil || !strings.Contains(err.Error(), "raft rpc refused") {
				t.Errorf("%s took %s from voter %s (err %v, resp %+v)", a.id, name, forger.id, err, sresp)
			}
		}
	}
	for _, a := range c.live() {
		if st := a.svc.Status(); st.Term >= 1<<40 {
			t.Errorf("%s after the forged RPCs: %+v", a.id, st)
		}
		if r, ok := a.svc.LocalRecord("p"); !ok || r.Version != registered[a.id].Version {
			t.Errorf("%s's arbiter state: p %+v (found %v), was %+v", a.id, r, ok, registered[a.id])
		}
	}
	attempt := 0
	testwait.Until(t, 30*time.Second, "a registration committed after the forged RPCs", func() (bool, string) {
		attempt++
		id := fmt.Sprintf("q%d", attempt)
		d, err := forger.svc.Register(ctx, reg(id, forger.id))
		return err == nil && d.Committed, fmt.Sprintf("register %s: %+v %v", id, d, err)
	})
}
