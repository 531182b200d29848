package consensus_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/bus/auth/authtest"
	"github.com/dvms-project/dvms/consensus"
)

// ringKeys are the keys of a test region.
type ringKeys struct {
	tls     map[string]*auth.PeerTLS
	signers map[string]*auth.Signer
	ring    *auth.Keyring
}

// signed wraps an agent's transport as the agent does (bus/auth).
func (k ringKeys) signed(t *testing.T) func(id string, tr bus.Transport) bus.Transport {
	return func(id string, tr bus.Transport) bus.Transport {
		w, err := auth.Wrap(tr, k.signers[id], k.ring, auth.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
}

// cluster runs hosts as agents do (signed messages, raft over mutual
// TLS), waits for the group, and registers "p" through a follower.
func (k ringKeys) cluster(t *testing.T, hosts []string) (c *cluster, leader, follower *agent) {
	t.Helper()
	c = newCluster(t, 3, time.Now)
	c.security = func(id string) consensus.PeerSecurity { return k.tls[id] }
	c.wrap = k.signed(t)
	for _, h := range hosts {
		c.start(h, "", "127.0.0.1:0")
	}
	leader = c.converged(40 * time.Second)
	follower = c.nonLeader(leader)
	if d, err := follower.svc.Register(context.Background(), reg("p", follower.id)); err != nil || !d.Committed {
		t.Fatalf("register over mutual TLS: %+v %v", d, err)
	}
	return c, leader, follower
}

// ringTLS makes a key per host and the keyring of the ring members
// (strangers have keys but are not in the ring).
func ringTLS(t *testing.T, members []string, strangers ...string) ringKeys {
	t.Helper()
	signers, ring := authtest.Signers(t, members, strangers...)
	out := ringKeys{tls: map[string]*auth.PeerTLS{}, signers: signers, ring: ring}
	for h, s := range signers {
		p, err := auth.NewPeerTLS(s, ring)
		if err != nil {
			t.Fatal(err)
		}
		out.tls[h] = p
	}
	return out
}

// inject is the issue-10 attack: a plain hashicorp/raft TCP client sends
// AppendEntries with a huge term to a voter (with entries: an entry dated
// 2999 and a commit index beyond the log, which makes hashicorp/raft
// panic — over plain TCP one such RPC kills the agent). It returns the
// transport's error (nil = the voter took the RPC and answered).
func inject(t *testing.T, target string, entries bool) error {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("attacker"), Addr: []byte("203.0.113.7:7420")},
		Term:      1 << 40, Leader: []byte("203.0.113.7:7420"),
	}
	if entries {
		req.LeaderCommitIndex = 1 << 40
		req.Entries = []*raft.Log{{Index: 1 << 40, Term: 1 << 40, Type: raft.LogCommand, Data: []byte(`{}`), AppendedAt: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}}
	}
	var resp raft.AppendEntriesResponse
	return tr.AppendEntries("attacker", raft.ServerAddress(target), req, &resp)
}

// Raft over mutual TLS pinned by the region's keys: the group forms and
// commits as over TCP; a plain TCP raft client (issue 10's injection), a
// key outside the ring, and a ring member that membership does not show
// as a voter candidate are all refused at the handshake, and the group's
// state is untouched. Over plain TCP the same injection is answered (the
// control: the test can fail).
func TestServiceRaftMutualTLS(t *testing.T) {
	hosts := []string{"h1", "h2", "h3"}
	keys := ringTLS(t, append(hosts, "h9"), "stranger")

	t.Run("control: plain TCP takes the injection", func(t *testing.T) {
		c := newCluster(t, 3, time.Now)
		for _, h := range hosts {
			c.start(h, "", "127.0.0.1:0")
		}
		leader := c.converged(20 * time.Second)
		// Without entries (with them the follower panics, see inject).
		if err := inject(t, c.nonLeader(leader).svc.RaftAddr(), false); err != nil {
			t.Fatalf("over plain TCP the injected AppendEntries was not answered (%v): the control does not hold", err)
		}
	})

	// As agents run it: signed messages (statuses taken only from live
	// voter candidates) and raft over mutual TLS.
	c, leader, follower := keys.cluster(t, hosts)
	ctx := context.Background()
	for _, a := range c.live() {
		for _, entries := range []bool{false, true} {
			if err := inject(t, a.svc.RaftAddr(), entries); err == nil {
				t.Errorf("%s answered a plain TCP AppendEntries (entries %v)", a.id, entries)
			}
		}
	}
	// TLS clients: a key outside the ring; a ring member that is not a
	// live candidate; and, as the control, a live voter's own key.
	dial := func(as string) error {
		cfg := keys.tls[as].Client("")
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", follower.svc.RaftAddr(), cfg)
		if err != nil {
			return err
		}
		defer conn.Close()
		// TLS 1.3: the server's verdict on the client certificate arrives
		// after the client's handshake; a read shows it.
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil // still open: accepted
		}
		return fmt.Errorf("closed: %v", err)
	}
	if err := dial("stranger"); err == nil {
		t.Error("a key outside the ring was accepted")
	}
	if err := dial("h9"); err == nil {
		t.Error("a ring member that is not a live voter candidate was accepted")
	}
	if err := dial(leader.id); err != nil {
		t.Errorf("a live voter's own key was refused (control): %v", err)
	}
	// Nothing changed: same leader, the registration is there, the group
	// still commits.
	if st := follower.svc.Status(); st.Leader != leader.id {
		t.Errorf("leader changed to %q after the injection", st.Leader)
	}
	if r, ok, err := follower.svc.Get(ctx, "p"); err != nil || !ok || r.Initiator != follower.id {
		t.Errorf("registration after the injection: %+v %v %v", r, ok, err)
	}
	if d, err := follower.svc.Register(ctx, reg("q", follower.id)); err != nil || !d.Committed {
		t.Fatalf("register after the injection: %+v %v", d, err)
	}
}
