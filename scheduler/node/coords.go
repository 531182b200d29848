package node

// Vivaldi coordinates (DESIGN §5.3). Each agent keeps its own coordinate
// with hashicorp/serf's coordinate package, fed by RTT samples: under SWIM
// membership, memberlist's own probes (their acks carry the member's
// coordinate, see Swim's ping delegate); under heartbeats, probes it sends
// to a random member over the bus (one a second by default; the answer
// carries the member's coordinate, as serf's probes do). Both apply a
// sample through Vivaldi.Observe. The members' coordinates travel with
// membership (heartbeats, SWIM metadata) into a CoordTable, from which the
// agent estimates the RTT between any two members: the distance the
// vivaldi next-node policy orders by.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/scheduler"
)

// CoordConfig tunes the coordinates.
type CoordConfig struct {
	// Probe is the interval between two RTT probes of this agent; 0 sends
	// none (the agent only answers).
	Probe time.Duration
	// MaxError: a coordinate whose error estimate (serf's, 1.5 at start,
	// falling as samples agree) has never been at or below it is not used
	// yet: distances to it are unknown and the ring decides. Once it has,
	// it stays used (see CoordTable.Distance).
	MaxError float64
}

// DefaultCoordConfig: a probe a second (four until this agent's own
// coordinate's error is below half the maximum), coordinates used below 0.75.
func DefaultCoordConfig() CoordConfig { return CoordConfig{Probe: time.Second, MaxError: 0.75} }

// Validate lists every problem.
func (c CoordConfig) Validate() error {
	var errs []error
	if c.Probe < 0 {
		errs = append(errs, errors.New("coordinates: probe_interval must be >= 0"))
	}
	if !(c.MaxError > 0) {
		errs = append(errs, errors.New("coordinates: max error must be > 0"))
	}
	return errors.Join(errs...)
}

// CoordTable holds the last coordinate known of each member. It is safe
// for concurrent use.
type CoordTable struct {
	mu sync.RWMutex
	m  map[string]*coordinate.Coordinate
	// best is the lowest error estimate each member's coordinate has had.
	best map[string]float64
}

// NewCoordTable returns an empty table.
func NewCoordTable() *CoordTable {
	return &CoordTable{m: map[string]*coordinate.Coordinate{}, best: map[string]float64{}}
}

// Set records host's coordinate (ignored when invalid: a member's bug or
// a forged value must not poison every distance).
func (t *CoordTable) Set(host string, c *coordinate.Coordinate) {
	if c == nil || !c.IsValid() || !c.IsCompatibleWith(coordinate.NewCoordinate(coordinate.DefaultConfig())) {
		return
	}
	t.mu.Lock()
	t.m[host] = c.Clone()
	if b, ok := t.best[host]; !ok || c.Error < b {
		t.best[host] = c.Error
	}
	t.mu.Unlock()
}

// Get returns host's coordinate.
func (t *CoordTable) Get(host string) (*coordinate.Coordinate, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.m[host]
	return c, ok
}

// Forget drops host (it left).
func (t *CoordTable) Forget(host string) {
	t.mu.Lock()
	delete(t.m, host)
	delete(t.best, host)
	t.mu.Unlock()
}

// Distance returns the estimated RTT between a and b, unknown when either
// coordinate is missing or has not converged yet: its error estimate has
// never been at or below maxErr.
//
// A coordinate that converged once stays used when its error estimate
// rises again. The estimate follows each sample's relative error, and at
// sub-millisecond to millisecond RTTs inside a site a little queueing on
// a busy host doubles a sample: an agent's own error wanders above the
// bound for seconds at a time while its position still tells its site
// from one 40 ms away. Dropping it then turned the agent's next-node
// order back into the ring for those seconds, and its partitions grew
// across the WAN first (1,000 hosts, 4 sites, seed 1: 4 of 4 inter-site
// migrations of events their site could solve came from partitions of
// two hosts, the initiator and its ring successor in another site: the
// ring's order, not Vivaldi's; none with this rule).
func (t *CoordTable) Distance(maxErr float64) scheduler.DistanceFunc {
	return func(a, b string) (time.Duration, bool) {
		t.mu.RLock()
		ca, oka := t.m[a]
		cb, okb := t.m[b]
		ea, eb := t.best[a], t.best[b]
		t.mu.RUnlock()
		if !oka || !okb || ea > maxErr || eb > maxErr {
			return 0, false
		}
		return ca.DistanceTo(cb), true
	}
}

// Vivaldi is this agent's coordinate: it probes members, answers their
// probes and keeps its own entry of the table current.
type Vivaldi struct {
	cfg    CoordConfig
	host   string
	region string
	bus    bus.Transport
	clock  Clock
	log    zerolog.Logger
	table  *CoordTable
	rng    *rand.Rand

	mu      sync.Mutex
	client  *coordinate.Client
	seq     uint64
	pending map[string]pendingProbe
	rounds  map[uint64]*probeRound
	peers   []string // sorted; this agent excluded
	// Samples counts the RTT samples applied.
	samples int64
	// settled: the coordinate's error has been at or below MaxError/2.
	settled bool
}

// probeTimeout: a probe not answered by then is lost (its answer, if it
// comes, is ignored). Well above any WAN round trip.
const probeTimeout = 5 * time.Second

// probeBurst: a probe round sends this many probes to one member at
// once and keeps the smallest RTT: queueing on either end only ever adds
// to an RTT, and a lone sample is as often late as not.
const probeBurst = 3

type pendingProbe struct {
	peer  string
	sent  time.Time
	round uint64
}

// probeRound is one burst: the smallest RTT so far and the member's
// coordinate from its last answer.
type probeRound struct {
	peer  string
	sent  time.Time
	got   int
	min   time.Duration
	coord *coordinate.Coordinate
}

type probe struct {
	V     int    `json:"v"`
	ID    string `json:"id"`
	Host  string `json:"host"`
	Reply string `json:"reply"`
}

type probeAnswer struct {
	V     int                    `json:"v"`
	ID    string                 `json:"id"`
	Host  string                 `json:"host"`
	Coord *coordinate.Coordinate `json:"coord"`
}

// NewVivaldi returns the coordinate of host, recorded in table (from
// the one table has, if any); Run probes and answers.
func NewVivaldi(cfg CoordConfig, region, host string, t bus.Transport, clock Clock, table *CoordTable, seed int64, log zerolog.Logger) (*Vivaldi, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cl, err := coordinate.NewClient(coordinate.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("vivaldi client: %w", err)
	}
	v := &Vivaldi{cfg: cfg, host: host, region: region, bus: t, clock: clock, log: log, table: table,
		rng: rand.New(rand.NewSource(seed)), client: cl, pending: map[string]pendingProbe{}, rounds: map[uint64]*probeRound{}}
	if c, ok := table.Get(host); ok {
		// The region knows this host's coordinate (a restart): resume
		// from it rather than from the origin.
		_ = cl.SetCoordinate(c)
	}
	table.Set(host, cl.GetCoordinate())
	return v, nil
}

// Coordinate returns this agent's coordinate.
func (v *Vivaldi) Coordinate() *coordinate.Coordinate {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.client.GetCoordinate()
}

// Settled reports whether the coordinate's error estimate has been at or
// below half CoordConfig.MaxError (well within use).
func (v *Vivaldi) Settled() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.settled
}

// Samples is the number of RTT samples applied so far.
func (v *Vivaldi) Samples() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.samples
}

// SetPeers replaces the members probed (this agent is skipped).
func (v *Vivaldi) SetPeers(members []string) {
	p := slices.DeleteFunc(slices.Clone(members), func(h string) bool { return h == v.host })
	slices.Sort(p)
	v.mu.Lock()
	v.peers = slices.Compact(p)
	v.mu.Unlock()
}

// PeerUp and PeerDown follow membership.
func (v *Vivaldi) PeerUp(h string) {
	if h == v.host {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if i, ok := slices.BinarySearch(v.peers, h); !ok {
		v.peers = slices.Insert(v.peers, i, h)
	}
}

// PeerDown: see PeerUp.
func (v *Vivaldi) PeerDown(h string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if i, ok := slices.BinarySearch(v.peers, h); ok {
		v.peers = slices.Delete(v.peers, i, i+1)
	}
	v.client.ForgetNode(h)
}

// Run answers probes and, every Probe, probes a random member, until ctx
// ends.
func (v *Vivaldi) Run(ctx context.Context) error {
	ping, err := bus.SubscribeFrom(v.bus, bus.PingSubject(v.region, v.host), v.answer)
	if err != nil {
		return fmt.Errorf("subscribe probes: %w", err)
	}
	defer func() { _ = ping.Unsubscribe() }()
	pong, err := bus.SubscribeFrom(v.bus, bus.PongSubject(v.region, v.host), v.answered)
	if err != nil {
		return fmt.Errorf("subscribe probe answers: %w", err)
	}
	defer func() { _ = pong.Unsubscribe() }()
	if v.cfg.Probe == 0 {
		<-ctx.Done()
		return nil
	}
	// Fast start: four probes per Probe until the coordinate is well
	// within use (half MaxError).
	t := v.clock.NewTicker(v.cfg.Probe / 4)
	defer t.Stop()
	fast := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			v.probe(ctx)
		}
		if fast && v.Settled() {
			fast = false
			t.Reset(v.cfg.Probe)
		}
	}
}

func (v *Vivaldi) probe(ctx context.Context) {
	now := v.clock.Now()
	v.mu.Lock()
	for id, p := range v.pending {
		if now.Sub(p.sent) > probeTimeout {
			delete(v.pending, id) // lost
		}
	}
	var done []uint64
	for id, r := range v.rounds {
		if now.Sub(r.sent) > probeTimeout || r.got > 0 {
			done = append(done, id) // a part of the burst answered: enough
		}
	}
	slices.Sort(done)
	for _, id := range done {
		v.apply(id)
	}
	if len(v.peers) == 0 {
		v.mu.Unlock()
		return
	}
	peer := v.peers[v.rng.Intn(len(v.peers))]
	v.seq++
	round := v.seq
	v.rounds[round] = &probeRound{peer: peer, sent: now}
	ids := make([]string, probeBurst)
	for k := range ids {
		ids[k] = strconv.FormatUint(round, 36) + "." + strconv.Itoa(k)
		v.pending[ids[k]] = pendingProbe{peer: peer, sent: now, round: round}
	}
	v.mu.Unlock()
	for _, id := range ids {
		data, _ := json.Marshal(probe{V: 1, ID: id, Host: v.host, Reply: bus.PongSubject(v.region, v.host)})
		if err := v.bus.Publish(ctx, bus.PingSubject(v.region, peer), data); err != nil && ctx.Err() == nil {
			v.log.Debug().Err(err).Str("member", peer).Msg("rtt probe not sent")
		}
	}
}

// apply ends round id (v.mu held): its smallest RTT, if any, is one
// sample of the coordinate.
func (v *Vivaldi) apply(id uint64) {
	r := v.rounds[id]
	delete(v.rounds, id)
	if r == nil || r.got == 0 {
		return
	}
	if err := v.observe(r.peer, r.coord, r.min); err != nil {
		v.log.Debug().Err(err).Str("member", r.peer).Msg("rtt sample refused")
	}
}

// Observe applies one RTT sample: rtt to peer, whose coordinate is c.
// This agent's coordinate moves and is recorded in the table, and so is
// peer's (fresher than the one membership last carried). An invalid or
// incompatible coordinate, or an RTT outside serf's range, is refused
// and changes nothing. Safe for concurrent use.
func (v *Vivaldi) Observe(peer string, c *coordinate.Coordinate, rtt time.Duration) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.observe(peer, c, rtt)
}

// observe is Observe with v.mu held: the one place a sample is applied,
// whether it came from a bus probe or a SWIM probe.
func (v *Vivaldi) observe(peer string, c *coordinate.Coordinate, rtt time.Duration) error {
	if peer == v.host {
		return errors.New("rtt sample: from this agent itself")
	}
	if err := checkCoord(c); err != nil {
		return fmt.Errorf("rtt sample from %s: %w", peer, err)
	}
	own, err := v.client.Update(peer, c, rtt)
	if err != nil {
		return fmt.Errorf("rtt sample from %s: %w", peer, err)
	}
	v.samples++
	v.table.Set(v.host, own)
	v.table.Set(peer, c)
	if !v.settled && own.Error <= v.cfg.MaxError/2 {
		v.settled = true
		v.log.Info().Float64("error", own.Error).Int64("samples", v.samples).Msg("coordinate settled")
	}
	return nil
}

// The coordinate on the wire of SWIM acks (EncodeCoord, DecodeCoord): a
// version byte, the dimensionality, then Vec, Error, Adjustment and
// Height as big-endian float64s. 90 bytes for serf's 8 dimensions.
const (
	coordWireV1 = 1
	// maxCoordDims bounds what a peer may send (serf's default is 8).
	maxCoordDims = 16
	// MaxCoordPayload is the largest encoded coordinate accepted.
	MaxCoordPayload = 2 + (maxCoordDims+3)*8
	// maxCoordSeconds bounds every component, the adjustment and the
	// height: a coordinate 100 s from the origin describes no network.
	maxCoordSeconds = 100
)

// errBadCoord marks a coordinate refused on receipt.
var errBadCoord = errors.New("coordinates: bad coordinate")

// EncodeCoord is c on the wire (nil for nil, or a coordinate of more
// dimensions than the wire carries).
func EncodeCoord(c *coordinate.Coordinate) []byte {
	if c == nil || len(c.Vec) > maxCoordDims {
		return nil
	}
	b := make([]byte, 2, 2+(len(c.Vec)+3)*8)
	b[0], b[1] = coordWireV1, byte(len(c.Vec))
	for _, f := range c.Vec {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(f))
	}
	for _, f := range []float64{c.Error, c.Adjustment, c.Height} {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(f))
	}
	return b
}

// DecodeCoord reads a coordinate EncodeCoord wrote, and refuses one that
// is truncated, oversized, of another version, or not usable (checkCoord).
func DecodeCoord(b []byte) (*coordinate.Coordinate, error) {
	if len(b) < 2 || len(b) > MaxCoordPayload {
		return nil, fmt.Errorf("%w: %d bytes", errBadCoord, len(b))
	}
	if b[0] != coordWireV1 {
		return nil, fmt.Errorf("%w: version %d", errBadCoord, b[0])
	}
	dims := int(b[1])
	if len(b) != 2+(dims+3)*8 {
		return nil, fmt.Errorf("%w: %d bytes for %d dimensions", errBadCoord, len(b), dims)
	}
	f := make([]float64, dims+3)
	for i := range f {
		f[i] = math.Float64frombits(binary.BigEndian.Uint64(b[2+8*i:]))
	}
	c := &coordinate.Coordinate{Vec: f[:dims], Error: f[dims], Adjustment: f[dims+1], Height: f[dims+2]}
	if err := checkCoord(c); err != nil {
		return nil, err
	}
	return c, nil
}

// checkCoord refuses a coordinate this agent cannot use: missing, of
// another dimensionality than serf's default, not finite, or absurd (a
// component, the adjustment or the height beyond maxCoordSeconds, a
// negative height or error).
func checkCoord(c *coordinate.Coordinate) error {
	switch {
	case c == nil:
		return fmt.Errorf("%w: none", errBadCoord)
	case !c.IsValid():
		return fmt.Errorf("%w: not finite", errBadCoord)
	case !c.IsCompatibleWith(coordinate.NewCoordinate(coordinate.DefaultConfig())):
		return fmt.Errorf("%w: %d dimensions", errBadCoord, len(c.Vec))
	case c.Height < 0 || c.Error < 0 || c.Height > maxCoordSeconds || c.Error > maxCoordSeconds || math.Abs(c.Adjustment) > maxCoordSeconds:
		return fmt.Errorf("%w: height %g, error %g, adjustment %g out of range", errBadCoord, c.Height, c.Error, c.Adjustment)
	}
	for _, x := range c.Vec {
		if math.Abs(x) > maxCoordSeconds {
			return fmt.Errorf("%w: component %g s out of range", errBadCoord, x)
		}
	}
	return nil
}

// answer is the handler of this agent's probe subject: it answers at
// once, from the bus's goroutine, so the RTT measures the network.
func (v *Vivaldi) answer(_, from string, data []byte) {
	var p probe
	if err := json.Unmarshal(data, &p); err != nil || p.V != 1 || p.ID == "" || p.Reply == "" || (from != "" && p.Host != from) {
		v.log.Debug().Int("bytes", len(data)).Msg("malformed rtt probe rejected")
		return
	}
	out, _ := json.Marshal(probeAnswer{V: 1, ID: p.ID, Host: v.host, Coord: v.Coordinate()})
	if err := v.bus.Publish(context.Background(), p.Reply, out); err != nil {
		v.log.Debug().Err(err).Msg("rtt probe answer not sent")
	}
}

// answered is the handler of this agent's probe answers: one RTT sample.
func (v *Vivaldi) answered(_, from string, data []byte) {
	now := v.clock.Now()
	var a probeAnswer
	if err := json.Unmarshal(data, &a); err != nil || a.V != 1 || a.Coord == nil || (from != "" && a.Host != from) {
		v.log.Debug().Int("bytes", len(data)).Msg("malformed rtt probe answer rejected")
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	p, ok := v.pending[a.ID]
	delete(v.pending, a.ID)
	r := v.rounds[p.round]
	if !ok || p.peer != a.Host || r == nil {
		return
	}
	if rtt := now.Sub(p.sent); r.got == 0 || rtt < r.min {
		r.min = rtt
	}
	r.got++
	r.coord = a.Coord
	if r.got == probeBurst {
		v.apply(p.round)
	}
}
