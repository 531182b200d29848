package consensus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/consensus/arbitertest"
)

func TestSelectVoters(t *testing.T) {
	p := func(id, site string) consensus.Peer {
		return consensus.Peer{ID: id, Site: site, RaftAddr: "10.0.0." + id[1:] + ":7420"}
	}
	ids := func(ps []consensus.Peer) []string {
		var out []string
		for _, x := range ps {
			out = append(out, x.ID)
		}
		return out
	}
	cases := []struct {
		name  string
		peers []consensus.Peer
		n     int
		want  []string
	}{
		{"one site, sorted by host", []consensus.Peer{p("h5", ""), p("h2", ""), p("h9", ""), p("h1", "")}, 3, []string{"h1", "h2", "h5"}},
		{"round robin over sorted sites", []consensus.Peer{
			p("h1", "b"), p("h2", "b"), p("h3", "a"), p("h4", "a"), p("h5", "c"), p("h6", "a"),
		}, 5, []string{"h3", "h1", "h5", "h4", "h2"}},
		{"a small site gives what it has", []consensus.Peer{p("h1", "a"), p("h2", "b"), p("h3", "b"), p("h4", "b")}, 3, []string{"h1", "h2", "h3"}},
		{"fewer peers than voters", []consensus.Peer{p("h2", "x"), p("h1", "y")}, 5, []string{"h2", "h1"}},
		{"members without a raft address do not vote", []consensus.Peer{{ID: "h0"}, p("h3", ""), {ID: "h1", RaftAddr: ""}}, 3, []string{"h3"}},
		{"a host listed twice counts once", []consensus.Peer{p("h1", ""), p("h1", ""), p("h2", "")}, 3, []string{"h1", "h2"}},
		{"no peers", nil, 3, nil},
		{"zero voters", []consensus.Peer{p("h1", "")}, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ids(consensus.SelectVoters(tc.peers, tc.n))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("SelectVoters = %v, want %v", got, tc.want)
			}
			// The order peers are listed in does not matter.
			rng := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				sh := slices.Clone(tc.peers)
				rng.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
				if again := ids(consensus.SelectVoters(sh, tc.n)); !slices.Equal(again, got) {
					t.Fatalf("shuffled input: %v, want %v", again, got)
				}
			}
		})
	}
}

// --- harness: services on 127.0.0.1, one embedded NATS server ---

var (
	natsOnce sync.Once
	natsURL  string
	natsErr  error
	regionN  atomic.Int64
)

func natsServer(t *testing.T) string {
	t.Helper()
	natsOnce.Do(func() {
		var e *bus.Embedded
		e, natsErr = bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
		if natsErr == nil {
			natsURL = e.ClientURL()
		}
	})
	if natsErr != nil {
		t.Fatal(natsErr)
	}
	return natsURL
}

// testLog writes a service's logs to the test log (shown on failure or
// with -v) and keeps them for assertions; it goes quiet once the test
// ends (a late NATS delivery must not log into a finished test).
type testLog struct {
	mu   sync.Mutex
	t    *testing.T
	buf  bytes.Buffer
	done bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.buf.Write(p)
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

func (l *testLog) contains(s string) bool { return l.count(s) > 0 }

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// testRaft is DefaultRaftConfig made roomier for a loaded 2-core machine
// under -race: fewer spurious elections.
func testRaft() consensus.RaftConfig {
	return consensus.RaftConfig{HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond, CommitTimeout: 10 * time.Millisecond, ApplyTimeout: 2 * time.Second}
}

type agent struct {
	id     string
	site   string
	svc    *consensus.Service
	tr     *bus.NATS
	cancel context.CancelFunc
	done   chan error
}

type cluster struct {
	t       *testing.T
	region  string
	url     string
	now     func() time.Time
	voters  int
	timeout time.Duration
	log     *testLog
	// wrap, if set, wraps each agent's transport (fault injection).
	wrap func(id string, t bus.Transport) bus.Transport
	// security, if set, runs each agent's raft over mutual TLS.
	security func(id string) consensus.PeerSecurity

	mu     sync.Mutex
	agents map[string]*agent
}

func newCluster(t *testing.T, voters int, now func() time.Time) *cluster {
	c := &cluster{t: t, region: fmt.Sprintf("t%d", regionN.Add(1)), url: natsServer(t), now: now,
		voters: voters, timeout: 3 * time.Second, log: &testLog{t: t}, agents: map[string]*agent{}}
	t.Cleanup(func() {
		c.log.mu.Lock()
		c.log.done = true
		c.log.mu.Unlock()
	})
	t.Cleanup(c.stopAll) // runs first
	return c
}

// start runs a service for host id ("" bind = forward only).
func (c *cluster) start(id, site, bind string) *agent {
	c.t.Helper()
	return c.startAdvertising(id, site, bind, "")
}

func (c *cluster) startAdvertising(id, site, bind, advertise string) *agent {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := bus.ConnectNATS(ctx, bus.Config{URL: c.url, Name: id})
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := consensus.ServiceConfig{Region: c.region, ID: id, Site: site, Bind: bind, Advertise: advertise, Voters: c.voters, Raft: testRaft(),
		RequestTimeout: c.timeout, ProbeInterval: 100 * time.Millisecond, BootstrapAfter: 600 * time.Millisecond}
	if c.security != nil {
		cfg.Security = c.security(id)
	}
	log := zerolog.New(c.log).Level(zerolog.InfoLevel).With().Timestamp().Str("host", id).Logger()
	var bt bus.Transport = tr
	if c.wrap != nil {
		bt = c.wrap(id, tr)
	}
	svc, err := consensus.NewService(cfg, bt, c.now, log)
	if err != nil {
		_ = tr.Close()
		c.t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	a := &agent{id: id, site: site, svc: svc, tr: tr, cancel: rcancel, done: make(chan error, 1)}
	go func() { a.done <- svc.Run(rctx) }()
	c.mu.Lock()
	c.agents[id] = a
	c.mu.Unlock()
	return a
}

// kill stops id's service (as a crash of its agent would, minus the
// goodbye) and waits until Run has returned.
func (c *cluster) kill(id string) {
	c.t.Helper()
	c.mu.Lock()
	a := c.agents[id]
	delete(c.agents, id)
	c.mu.Unlock()
	if a == nil {
		return
	}
	a.cancel()
	select {
	case err := <-a.done:
		if err != nil {
			c.t.Errorf("%s: Run: %v", id, err)
		}
	case <-time.After(15 * time.Second):
		c.t.Errorf("%s: Run did not return 15 s after its ctx ended", id)
	}
	_ = a.tr.Close()
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	var ids []string
	for id := range c.agents {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { c.kill(id) })
	}
	wg.Wait()
}

func (c *cluster) agent(id string) *agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agents[id]
}

func (c *cluster) live() []*agent {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*agent
	for _, a := range c.agents {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *agent) int { return strings.Compare(a.id, b.id) })
	return out
}

// syncPeers gives every live service the live membership, as heartbeats
// would.
func (c *cluster) syncPeers() []consensus.Peer {
	var peers []consensus.Peer
	for _, a := range c.live() {
		peers = append(peers, consensus.Peer{ID: a.id, Site: a.site, RaftAddr: a.svc.RaftAddr()})
	}
	for _, a := range c.live() {
		a.svc.SetPeers(peers)
	}
	return peers
}

// eventually polls cond every 50 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(within)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(end) {
			t.Fatalf("%s: not reached within %s; last: %s", what, within, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// converged waits until the live services agree on one leader and on
// exactly the voters SelectVoters picks from the live membership, and
// returns the leader.
func (c *cluster) converged(within time.Duration) *agent {
	c.t.Helper()
	var leader *agent
	eventually(c.t, within, "group converged on SelectVoters", func() (bool, string) {
		peers := c.syncPeers()
		var want []string
		for _, p := range consensus.SelectVoters(peers, c.voters) {
			want = append(want, p.ID)
		}
		slices.Sort(want)
		leader = nil
		var state []string
		ok := true
		for _, a := range c.live() {
			st := a.svc.Status()
			state = append(state, fmt.Sprintf("%s%+v", a.id, st))
			isVoter := slices.Contains(want, a.id)
			if st.Voter != isVoter {
				ok = false
			}
			if st.Voter && st.Leader == a.id {
				leader = a
			}
			if isVoter && !slices.Equal(st.Voters, want) {
				ok = false
			}
			if st.Voter && st.Term == 0 { // a voter's node knows its term
				ok = false
			}
		}
		if leader == nil {
			ok = false
		} else {
			for _, id := range want {
				if st := c.agent(id).svc.Status(); st.Leader != leader.id || st.Term != leader.svc.Status().Term {
					ok = false
				}
			}
		}
		return ok, fmt.Sprintf("want voters %v; %s", want, strings.Join(state, " "))
	})
	return leader
}

func (c *cluster) nonLeader(leader *agent) *agent {
	for _, a := range c.live() {
		if a != leader && a.svc.RaftAddr() != "" {
			return a
		}
	}
	c.t.Fatal("no live non-leader")
	return nil
}

// --- tests ---

// The cross-process arbiter passes the same suite as Local and the
// in-process Raft group, asked through a member that does not lead (so
// every request crosses the bus to the leader and back).
func TestServiceArbiterSuite(t *testing.T) {
	arbitertest.Run(t, func(t *testing.T) (consensus.Arbiter, arbitertest.Clock) {
		clk := &clock{t: time.Unix(1_700_000_000, 0)}
		c := newCluster(t, 3, clk.Now)
		for i := range 3 {
			c.start(fmt.Sprintf("h%d", i+1), "", "127.0.0.1:0")
		}
		a := c.nonLeader(c.converged(20 * time.Second))
		t.Cleanup(func() {
			if a.svc.Forwarded() == 0 {
				t.Errorf("%s never forwarded a request on the bus", a.id)
			}
		})
		return a.svc, clk
	})
}

// A group forms from membership alone and settles on the selected voters:
// 3 of 5 services, then all 5 when 5 voters are configured. Sites spread
// the voters.
func TestServiceGroupForms(t *testing.T) {
	for _, voters := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d voters", voters), func(t *testing.T) {
			c := newCluster(t, voters, time.Now)
			sites := []string{"a", "a", "a", "b", "b"}
			for i, s := range sites {
				c.start(fmt.Sprintf("h%d", i+1), s, "127.0.0.1:0")
			}
			start := time.Now()
			leader := c.converged(30 * time.Second)
			t.Logf("%d voters, leader %s, formed in %s", voters, leader.id, time.Since(start).Round(time.Millisecond))
			want := []string{"h1", "h2", "h4"}
			if voters == 5 {
				want = []string{"h1", "h2", "h3", "h4", "h5"}
			}
			if got := leader.svc.Status().Voters; !slices.Equal(got, want) {
				t.Fatalf("voters %v, want %v", got, want)
			}
			// Any service, voter or not, reaches the leader.
			ctx := context.Background()
			for i, a := range c.live() {
				d, err := a.svc.Register(ctx, reg(fmt.Sprintf("p%d", i), a.id))
				if err != nil || !d.Committed {
					t.Fatalf("register through %s: %+v %v", a.id, d, err)
				}
			}
		})
	}
}

// A forward-only agent (no raft listener) never votes but is served.
func TestServiceForwardOnly(t *testing.T) {
	c := newCluster(t, 3, time.Now)
	for i := range 3 {
		c.start(fmt.Sprintf("h%d", i+1), "", "127.0.0.1:0")
	}
	client := c.start("h0", "", "")
	if client.svc.RaftAddr() != "" {
		t.Fatalf("forward-only service advertises %q", client.svc.RaftAddr())
	}
	c.converged(20 * time.Second)
	d, err := client.svc.Register(context.Background(), reg("p", "h9"))
	if err != nil || !d.Committed {
		t.Fatalf("register: %+v %v", d, err)
	}
	if st := client.svc.Status(); st.Voter || st.Leader == "" {
		t.Fatalf("forward-only status %+v: want a known leader and no vote", st)
	}
}

// Losing one voter of three (the leader, the hardest case) does not stop
// merges, and the new leader brings in a replacement from the live peers.
func TestServiceMinorityLoss(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, time.Now)
	for i := range 5 {
		c.start(fmt.Sprintf("h%d", i+1), "", "127.0.0.1:0")
	}
	leader := c.converged(30 * time.Second)
	via := c.nonLeader(leader)
	for _, r := range []consensus.Registration{reg("p", "h9"), reg("q", "h1")} {
		if d, err := via.svc.Register(ctx, r); err != nil || !d.Committed {
			t.Fatalf("register: %+v %v", d, err)
		}
	}
	killed := leader.id
	start := time.Now()
	c.kill(killed)
	c.syncPeers() // membership drops it
	var survivor *agent
	for _, a := range c.live() {
		if a.svc.Status().Voter {
			survivor = a
		}
	}
	if survivor == nil {
		t.Fatal("no surviving voter")
	}
	// A surviving service that is not the leader carries the merge.
	var d consensus.Decision
	eventually(t, 20*time.Second, "merge committed after the leader was killed", func() (bool, string) {
		var err error
		via := c.live()[0]
		if via.svc.Status().Leader == via.id {
			via = c.live()[1]
		}
		d, err = via.svc.Merge(ctx, consensus.Ref{ID: "p", Version: 1}, consensus.Ref{ID: "q", Version: 1})
		if errors.Is(err, consensus.ErrUnknownOutcome) {
			// Re-read, as callers must.
			r, ok, gerr := via.svc.Get(ctx, "p")
			if gerr == nil && ok && r.Absorbed && r.Into == "q" {
				return true, ""
			}
		}
		return err == nil && d.Committed, fmt.Sprintf("%+v %v", d, err)
	})
	t.Logf("merge committed %s after the leader was killed", time.Since(start).Round(time.Millisecond))
	newLeader := c.converged(30 * time.Second)
	if slices.Contains(newLeader.svc.Status().Voters, killed) {
		t.Fatalf("killed voter %s still in the configuration", killed)
	}
	if n := len(newLeader.svc.Status().Voters); n != 3 {
		t.Fatalf("%d voters after reconciliation, want 3", n)
	}
	r, ok, err := c.live()[0].svc.Get(ctx, "p")
	if err != nil || !ok || !r.Absorbed || r.Into != "q" {
		t.Fatalf("p after the merge: %+v %v %v", r, ok, err)
	}
}

// Losing two voters of three stops every decision (errors within the
// timeout, nothing unsafe committed); the two restarted with empty stores
// on the same addresses do not start a second group: they rejoin, and
// merges commit again.
func TestServiceMajorityLoss(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, time.Now)
	c.timeout = 1500 * time.Millisecond
	addrs := map[string]string{}
	for i := range 3 {
		id := fmt.Sprintf("h%d", i+1)
		addrs[id] = c.start(id, "", "127.0.0.1:0").svc.RaftAddr()
	}
	client := c.start("h0", "", "")
	c.converged(20 * time.Second)
	for _, r := range []consensus.Registration{reg("p", "h9"), reg("q", "h1"), reg("q2", "h2")} {
		if d, err := client.svc.Register(ctx, r); err != nil || !d.Committed {
			t.Fatalf("register: %+v %v", d, err)
		}
	}
	// Kill two voters, the leader among them.
	leader := c.converged(time.Second)
	victims := []string{leader.id}
	for _, id := range []string{"h1", "h2", "h3"} {
		if id != leader.id && len(victims) < 2 {
			victims = append(victims, id)
		}
	}
	for _, id := range victims {
		c.kill(id)
	}
	c.syncPeers()

	start := time.Now()
	_, err := client.svc.Merge(ctx, consensus.Ref{ID: "p", Version: 1}, consensus.Ref{ID: "q", Version: 1})
	took := time.Since(start)
	if !errors.Is(err, consensus.ErrUnknownOutcome) && !errors.Is(err, consensus.ErrNoQuorum) {
		t.Fatalf("merge without a majority: err = %v, want ErrUnknownOutcome or ErrNoQuorum", err)
	}
	if took > c.timeout+time.Second {
		t.Fatalf("merge without a majority took %s (timeout %s)", took, c.timeout)
	}
	if d, err := client.svc.Register(ctx, reg("r", "h8")); !errors.Is(err, consensus.ErrNoQuorum) {
		t.Fatalf("register without a majority: %+v %v, want ErrNoQuorum", d, err)
	}
	if _, _, err := client.svc.Get(ctx, "p"); !errors.Is(err, consensus.ErrNoQuorum) {
		t.Fatalf("get without a majority: %v, want ErrNoQuorum", err)
	}

	// Restart both, empty, on their old addresses.
	for _, id := range victims {
		c.start(id, "", addrs[id])
	}
	c.converged(30 * time.Second)
	// The merge tried during the outage may have committed since (its
	// outcome was unknown); either way p is absorbed at most once.
	p, ok, err := client.svc.Get(ctx, "p")
	if err != nil || !ok {
		t.Fatalf("p after the restart: %+v %v %v", p, ok, err)
	}
	if !p.Absorbed {
		d, err := client.svc.Merge(ctx, consensus.Ref{ID: "p", Version: 1}, consensus.Ref{ID: "q", Version: 1})
		if err != nil || !d.Committed {
			t.Fatalf("merge after the restart: %+v %v", d, err)
		}
	}
	if d, err := client.svc.Merge(ctx, consensus.Ref{ID: "p", Version: 1}, consensus.Ref{ID: "q2", Version: 1}); err != nil || d.Committed {
		t.Fatalf("p absorbed a second time: %+v %v", d, err)
	}
	q, _, err := client.svc.Get(ctx, "q")
	if err != nil || q.Version != 2 || len(q.Nodes) != 2 {
		t.Fatalf("q after one merge: %+v %v", q, err)
	}
	if n := c.log.count("bootstrapped one"); n != 1 {
		t.Fatalf("%d groups bootstrapped, want 1 (a restarted voter started a second group?)", n)
	}
}

// Garbage on the request subject is dropped with a warning; the group
// keeps serving.
func TestServiceMalformedRequests(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, time.Now)
	for i := range 3 {
		c.start(fmt.Sprintf("h%d", i+1), "", "127.0.0.1:0")
	}
	leader := c.converged(20 * time.Second)
	reply := consensus.ReplySubject(c.region) + ".b.x"
	bad := []string{
		``, `not json`, `null`, `[]`, `{}`, `{"v":2,"id":"a","from":"b","reply":"` + reply + `","kind":"get","key":"p"}`,
		`{"v":1,"id":"a","from":"b","reply":"` + reply + `","kind":"register"}`,
		`{"v":1,"id":"a","from":"b","reply":"` + reply + `","kind":"merge","p":{"ID":"p","Version":1}}`,
		`{"v":1,"id":"a","from":"b","reply":"` + reply + `","kind":"dissolve"}`,
		`{"v":1,"id":"a","from":"b","reply":"` + reply + `","kind":"status"}`,
		`{"v":1,"id":"a","from":"b","reply":"elsewhere","kind":"get","key":"p"}`,
		`{"v":1,"id":"a","from":"b","reply":"` + reply + `","kind":"explode"}`,
		`{"v":1,"id":"a","from":"b","reply":"` + reply + `","kind":"register","reg":{"Lease":"soon"}}`,
		`{"v":1,"id":"","from":"","reply":"` + reply + `","kind":"get","key":"p"}`,
	}
	for _, m := range bad {
		if err := leader.tr.Publish(ctx, consensus.RequestSubject(c.region), []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "malformed requests logged", func() (bool, string) {
		return c.log.contains("malformed request dropped"), ""
	})
	via := c.nonLeader(leader)
	if d, err := via.svc.Register(ctx, reg("p", "h9")); err != nil || !d.Committed {
		t.Fatalf("register after garbage: %+v %v", d, err)
	}
	if _, ok, err := via.svc.Get(ctx, "p"); err != nil || !ok {
		t.Fatalf("get after garbage: %v %v", ok, err)
	}
}

func TestServiceConfigValidation(t *testing.T) {
	tr := bus.NewHub(1).Transport("x")
	cases := map[string]consensus.ServiceConfig{
		"no region":          {ID: "h1"},
		"no id":              {Region: "r"},
		"even voters":        {Region: "r", ID: "h1", Voters: 4},
		"wildcard bind":      {Region: "r", ID: "h1", Bind: "0.0.0.0:0"},
		"wildcard advertise": {Region: "r", ID: "h1", Bind: "127.0.0.1:0", Advertise: "0.0.0.0:1"},
	}
	for name, cfg := range cases {
		if _, err := consensus.NewService(cfg, tr, time.Now, zerolog.Nop()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := consensus.NewService(consensus.ServiceConfig{Region: "r", ID: "h1", Bind: "0.0.0.0:0", Advertise: "10.1.2.3:0"}, tr, time.Now, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if a := s.RaftAddr(); !strings.HasPrefix(a, "10.1.2.3:") || strings.HasSuffix(a, ":0") {
		t.Fatalf("advertised %q: want 10.1.2.3 with the bound port", a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil { // releases the listener
		t.Fatal(err)
	}
}

// cutNet cuts the bus between two sides: every message is tagged with its
// sender, and a receiver on the other side drops it while the cut holds.
type cutNet struct {
	mu   sync.Mutex
	side map[string]string
	cut  bool
}

func (n *cutNet) blocked(from, to string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut && n.side[from] != n.side[to]
}

type cutTransport struct {
	bus.Transport
	net *cutNet
	id  string
}

func (c *cutTransport) Publish(ctx context.Context, subject string, data []byte) error {
	return c.Transport.Publish(ctx, subject, append([]byte(c.id+"\x00"), data...))
}

func (c *cutTransport) Subscribe(subject string, h bus.Handler) (bus.Subscription, error) {
	return c.Transport.Subscribe(subject, func(s string, d []byte) {
		i := bytes.IndexByte(d, 0)
		if i < 0 || c.net.blocked(string(d[:i]), c.id) {
			return
		}
		h(s, d[i+1:])
	})
}

// Two sides cut apart from the start each form a group (no voter on the
// other side answers); when the cut heals, the younger group's members
// leave it and the region ends with one group on the selected voters,
// never more than Voters+1 of them at a time.
func TestServiceTwoGroupsMeet(t *testing.T) {
	c := newCluster(t, 3, time.Now)
	cn := &cutNet{side: map[string]string{}, cut: true}
	c.wrap = func(id string, tr bus.Transport) bus.Transport { return &cutTransport{Transport: tr, net: cn, id: id} }
	sides := map[string][]string{"a": {"h1", "h2", "h3"}, "b": {"h4", "h5", "h6"}}
	cn.mu.Lock()
	for side, ids := range sides {
		for _, id := range ids {
			cn.side[id] = side
		}
	}
	cn.mu.Unlock()
	// Side b forms first, so its group is the older one, whose voters are
	// not the ones selected once the sides meet: its leader must bring
	// h1-h3 in, hand leadership over and retire h4-h6.
	for _, side := range []string{"b", "a"} {
		ids := sides[side]
		var peers []consensus.Peer
		for _, id := range ids {
			peers = append(peers, consensus.Peer{ID: id, RaftAddr: c.start(id, "", "127.0.0.1:0").svc.RaftAddr()})
		}
		for _, id := range ids {
			c.agent(id).svc.SetPeers(peers)
		}
		eventually(t, 20*time.Second, "a group on side "+side, func() (bool, string) {
			st := c.agent(ids[0]).svc.Status()
			return st.Leader != "" && slices.Equal(st.Voters, ids), fmt.Sprintf("%+v", st)
		})
	}
	cn.mu.Lock()
	cn.cut = false
	cn.mu.Unlock()
	leader := c.converged(30 * time.Second)
	if !c.log.contains("two groups in this region") {
		t.Fatal("the younger group's members did not report leaving it")
	}
	if regexp.MustCompile(`"voters":\["[^"]*"(,"[^"]*"){4,}\]`).MatchString(c.log.String()) {
		t.Fatal("the group grew past Voters+1 while moving")
	}
	if d, err := c.agent("h5").svc.Register(context.Background(), reg("p", "h5")); err != nil || !d.Committed {
		t.Fatalf("register after the groups met: %+v %v", d, err)
	}
	t.Logf("one group after the cut healed: leader %s, voters %v", leader.id, leader.svc.Status().Voters)
}

// Once Run has returned, nothing it started is left running: no raft
// goroutine, no connection handler, no accept loop, no worker.
func TestServiceRunLeavesNoGoroutines(t *testing.T) {
	t.Run("plain TCP", func(t *testing.T) { testServiceRunLeavesNoGoroutines(t, false) })
	t.Run("mutual TLS, RPCs gated", func(t *testing.T) { testServiceRunLeavesNoGoroutines(t, true) })
}

func testServiceRunLeavesNoGoroutines(t *testing.T, secure bool) {
	c := newCluster(t, 3, time.Now)
	if secure {
		keys := ringTLS(t, []string{"h1", "h2", "h3"})
		c.security = func(id string) consensus.PeerSecurity { return keys.tls[id] }
		c.wrap = keys.signed(t)
	}
	for i := range 3 {
		c.start(fmt.Sprintf("h%d", i+1), "", "127.0.0.1:0")
	}
	leader := c.converged(30 * time.Second)
	if d, err := c.nonLeader(leader).svc.Register(context.Background(), reg("p", "h9")); err != nil || !d.Committed {
		t.Fatalf("register: %+v %v", d, err)
	}
	c.stopAll()
	eventually(t, 30*time.Second, "goroutines of stopped services gone", func() (bool, string) {
		buf := make([]byte, 1<<20)
		var left []string
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "hashicorp/raft") || strings.Contains(g, "dvms/consensus.(*") {
				left = append(left, g)
			}
		}
		return len(left) == 0, strings.Join(left, "\n\n")
	})
}

// A selected agent that advertises an address the leader cannot reach
// joins as a learner and is never promoted: the others still form a
// group that decides (added straight as a voter, it would have wedged the
// group of one that bootstrapped: two voters, one unreachable).
func TestServiceUnreachableVoterNotPromoted(t *testing.T) {
	c := newCluster(t, 3, time.Now)
	c.start("h1", "", "127.0.0.1:0")
	c.startAdvertising("h2", "", "127.0.0.1:0", "127.0.0.1:1") // nothing listens there
	c.start("h3", "", "127.0.0.1:0")
	c.syncPeers()
	eventually(t, 20*time.Second, "h1 and h3 vote, h2 does not", func() (bool, string) {
		c.syncPeers()
		st := c.agent("h1").svc.Status()
		return st.Leader != "" && slices.Equal(st.Voters, []string{"h1", "h3"}), fmt.Sprintf("%+v", st)
	})
	if d, err := c.agent("h2").svc.Register(context.Background(), reg("p", "h2")); err != nil || !d.Committed {
		t.Fatalf("register through the unreachable agent: %+v %v", d, err)
	}
	if st := c.agent("h2").svc.Status(); st.Voter {
		t.Fatalf("unreachable h2 became a voter: %+v", st)
	}
}
