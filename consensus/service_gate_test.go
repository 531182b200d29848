package consensus_test

import (
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
