package node_test

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler/node"
)

// swimProbeFast probes twice as often as swimFast, so coordinates get
// their samples within seconds; the timeout stays well above 40 ms.
func swimProbeFast(c *memberlist.Config) {
	swimFast(c)
	c.ProbeInterval, c.ProbeTimeout = 100*time.Millisecond, 90*time.Millisecond
}

// coordSwim is one agent of a coordinates test: SWIM membership feeding
// a Vivaldi coordinate that never probes over the bus (its Run is never
// called: it has no bus at all).
type coordSwim struct {
	host  string
	viv   *node.Vivaldi
	table *node.CoordTable
	cfg   node.SwimConfig
	// refused counts the acks whose sample Vivaldi refused, apart from
	// those Swim dropped before (from a host not, or no longer, a member).
	refused atomic.Int64
	why     atomic.Value // the last refusal's error
}

func newCoordSwim(t *testing.T, sn *node.SwimNet, host string) *coordSwim {
	t.Helper()
	cc := node.DefaultCoordConfig()
	cc.Probe = 0
	table := node.NewCoordTable()
	viv, err := node.NewVivaldi(cc, "t", host, nil, node.Wall{}, table, 1, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	a := &coordSwim{host: host, viv: viv, table: table}
	a.cfg = node.SwimConfig{
		Self: node.Heartbeat{Host: host, Incarnation: "1"}, Transport: sn.Transport(host), Tune: swimProbeFast,
		Coords: table, SelfCoord: viv.Coordinate, Observe: func(peer string, c *coordinate.Coordinate, rtt time.Duration) error {
			err := viv.Observe(peer, c, rtt)
			if err != nil {
				a.refused.Add(1)
				a.why.Store(err.Error())
			}
			return err
		}}
	return a
}

// Two sites, 1 ms RTT inside each and 40 ms across, and no probe on the
// bus: memberlist's probes alone bring every agent's estimate of the RTT
// to every other within half the true RTT across sites, and well below
// it inside a site.
func TestSwimProbesFeedCoordinates(t *testing.T) {
	t.Parallel() // its own in-memory network; waits on memberlist's wall-clock timers, little CPU
	const perSite = 3
	sn := newSwimNet(t, 0)
	site := map[string]int{}
	var agents []*coordSwim
	for s := range 2 {
		for i := range perSite {
			h := fmt.Sprintf("s%dh%d", s, i)
			site[h] = s
			agents = append(agents, newCoordSwim(t, sn, h))
		}
	}
	const intra, inter = time.Millisecond, 40 * time.Millisecond
	rtt := func(a, b string) time.Duration {
		if site[a] == site[b] {
			return intra
		}
		return inter
	}
	sn.SetDelay(func(from, to string) time.Duration { return rtt(from, to) / 2 })
	cfgs := make([]node.SwimConfig, len(agents))
	for i, a := range agents {
		cfgs[i] = a.cfg
		if i > 0 {
			cfgs[i].Seeds = []string{sn.Addr(agents[0].cfg.Transport)}
		}
	}
	worstLag := watchLag()
	sw := startSwims(t, cfgs)
	var worst atomic.Value
	worst.Store("")
	converged := func() bool {
		for _, a := range agents {
			dist := a.table.Distance(node.DefaultCoordConfig().MaxError)
			for _, b := range agents {
				if a == b {
					continue
				}
				d, ok := dist(a.host, b.host)
				want := rtt(a.host, b.host)
				switch {
				case !ok:
					worst.Store(fmt.Sprintf("%s has no usable distance to %s", a.host, b.host))
					return false
				case want == inter && math.Abs(float64(d-want)) >= 0.5*float64(want):
					worst.Store(fmt.Sprintf("%s estimates %s at %s across sites, want %s ± 50 %%", a.host, b.host, d, want))
					return false
				case want == intra && d >= inter/4:
					worst.Store(fmt.Sprintf("%s estimates %s at %s inside its site, want < %s", a.host, b.host, d, inter/4))
					return false
				}
			}
		}
		return true
	}
	if !waitFor(t, 30*time.Second, converged) {
		// An RTT sample is a wall-clock round trip: a process woken
		// later than a quarter of the inter-site RTT measures its run
		// queue (beside another test run s0h0 put s0h1, 1 ms away, at
		// 17 ms), and the estimates are then the machine's.
		if lag := worstLag(); lag > inter/4 {
			t.Skipf("coordinates did not converge (%s), and a goroutine woke %s late, over a quarter of the %s inter-site RTT: not judged", worst.Load(), lag, inter)
		}
		t.Fatalf("coordinates did not converge: %s", worst.Load())
	}
	// An honest agent's coordinate is never refused. An ack is dropped
	// before that when its sender is not a member (any more): one
	// declared dead while its ack was on the way. A probe waits 90 ms
	// for its ack (swimProbeFast); a process woken over half that late
	// (another test run on the two cores) declares live agents dead, and
	// such a drop is then the machine's doing: excused only then.
	lag := worstLag()
	for i, a := range agents {
		if a.viv.Samples() == 0 {
			t.Errorf("%s: no RTT sample applied", a.host)
		}
		if n := a.refused.Load(); n != 0 {
			t.Errorf("%s: %d probe acks' coordinates refused between honest agents, the last: %v", a.host, n, a.why.Load())
		}
		if n := sw[i].RejectedAcks() - a.refused.Load(); n != 0 {
			if lag > 45*time.Millisecond {
				t.Logf("%s: %d probe acks from non-members dropped; a goroutine woke %s late (over half the 90 ms probe timeout): excused", a.host, n, lag)
				continue
			}
			t.Errorf("%s: %d probe acks from honest agents dropped as from non-members (the process kept up: worst wake-up %s late)", a.host, n, lag)
		}
	}
}

// rogue is a memberlist member with valid metadata whose probe acks carry
// bad coordinates, one kind after another.
type rogue struct {
	meta []byte
	bad  [][]byte
	next atomic.Int64
}

func (r *rogue) NodeMeta(int) []byte                                      { return r.meta }
func (*rogue) NotifyMsg([]byte)                                           {}
func (*rogue) GetBroadcasts(int, int) [][]byte                            { return nil }
func (*rogue) LocalState(bool) []byte                                     { return nil }
func (*rogue) MergeRemoteState([]byte, bool)                              {}
func (*rogue) NotifyPingComplete(*memberlist.Node, time.Duration, []byte) {}
func (r *rogue) AckPayload() []byte {
	return r.bad[int(r.next.Add(1)-1)%len(r.bad)]
}

// A member whose acks carry malformed, oversized, non-finite or absurd
// coordinates never moves this agent's coordinate nor enters its table;
// every such ack is counted.
func TestSwimDropsBadAckCoordinates(t *testing.T) {
	t.Parallel() // its own in-memory network; waits on memberlist's wall-clock timers, little CPU
	sn := newSwimNet(t, 0)
	a := newCoordSwim(t, sn, "honest")
	origin := a.viv.Coordinate()
	nan := coordinate.NewCoordinate(coordinate.DefaultConfig())
	nan.Vec[3] = math.NaN()
	far := coordinate.NewCoordinate(coordinate.DefaultConfig())
	far.Vec[0] = 1e6 // a million seconds from the origin
	good := node.EncodeCoord(coordinate.NewCoordinate(coordinate.DefaultConfig()))
	wrongVersion := append([]byte{9}, good[1:]...)
	r := &rogue{bad: [][]byte{
		make([]byte, 4096),    // oversized
		good[:len(good)-3],    // truncated
		wrongVersion,          // another version
		node.EncodeCoord(nan), // not finite
		node.EncodeCoord(far), // absurd
		{1, 200},              // 200 dimensions announced, none sent
	}}
	r.meta, _ = json.Marshal(node.Heartbeat{V: 1, Host: "rogue", Incarnation: "1"})
	mc := memberlist.DefaultLANConfig()
	tr := sn.Transport("rogue")
	mc.Name, mc.Transport, mc.Delegate, mc.Ping = "rogue", tr, r, r
	mc.Logger = nil
	mc.LogOutput = discard{}
	swimFast(mc)
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	a.cfg.Seeds = []string{sn.Addr(tr)}
	sw := startSwims(t, []node.SwimConfig{a.cfg})[0]
	if !waitFor(t, 20*time.Second, func() bool { return sw.RejectedAcks() >= int64(2*len(r.bad)) }) {
		t.Fatalf("%d bad acks counted, want %d (the rogue sent %d)", sw.RejectedAcks(), 2*len(r.bad), r.next.Load())
	}
	if n := a.viv.Samples(); n != 0 {
		t.Errorf("%d samples applied from bad acks", n)
	}
	if c := a.viv.Coordinate(); !reflect.DeepEqual(c, origin) {
		t.Errorf("coordinate moved to %+v", c)
	}
	if c, ok := a.table.Get("rogue"); ok {
		t.Errorf("the rogue's coordinate %+v entered the table", c)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
