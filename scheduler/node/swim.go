package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus/auth"
)

// SwimConfig configures the SWIM membership of one agent: a
// gossip failure detector with suspicion and Lifeguard, from
// hashicorp/memberlist, whose traffic per agent does not grow with the
// region, unlike the heartbeats of Membership (N² deliveries a second).
type SwimConfig struct {
	// Self is what this agent tells the others about itself (host, site,
	// incarnation, Raft address); it travels as memberlist node metadata.
	// Self.Host is the memberlist node name.
	Self Heartbeat
	// Seeds are "host:port" of members to join through; none: this agent
	// starts the region alone and others join it.
	Seeds []string
	// BindAddr and BindPort are where memberlist listens (TCP and UDP,
	// 7946 by default) when Transport is nil.
	BindAddr string
	BindPort int
	// Transport replaces the network (tests and `dvms simulate` run many
	// agents in one process over SwimNet).
	Transport memberlist.NodeAwareTransport
	// AdvertiseAddr and AdvertisePort, if set, are what the others dial
	// (a wildcard BindAddr has no address to tell them).
	AdvertiseAddr string
	AdvertisePort int
	// Key, when set (16, 24 or 32 bytes: AES-128/192/256), encrypts and
	// authenticates every membership message (memberlist's AES-GCM): only
	// holders of the region's key can join, or report a member up or
	// down. Without it anyone who reaches the port can.
	Key []byte
	// Coords, if set, gets every member's coordinate from its metadata
	// (and loses a member that leaves or dies); SelfCoord, if set, is
	// this agent's, put in its metadata and re-announced every
	// MetaRefresh (default 10 s) when it moved.
	Coords      *CoordTable
	SelfCoord   func() *coordinate.Coordinate
	MetaRefresh time.Duration
	// Observe, if set, gets an RTT sample from each of memberlist's
	// direct probes that a member acked (Vivaldi.Observe): the ack
	// carries the member's coordinate (its SelfCoord, EncodeCoord), so
	// the coordinates need no probes of their own. It is called from
	// memberlist's probe goroutine and must not block.
	Observe func(peer string, c *coordinate.Coordinate, rtt time.Duration) error
	// Tune, if set, adjusts memberlist's LAN defaults before start.
	Tune func(*memberlist.Config)
	// Signer and Keyring, when set (both or neither), bind members to
	// the region's keys (keys_dir): this agent's metadata travels signed
	// by Signer, and a member whose name has no key in Keyring, or whose
	// metadata that name's key did not sign, is ignored (never up, its
	// Raft address never used). Without them anyone holding Key can join
	// under any name and any Raft address.
	Signer  *auth.Signer
	Keyring *auth.Keyring
}

// SwimMetaSubject is the purpose SWIM metadata is signed for (it keeps
// a signature made for anything else from being taken for metadata).
const SwimMetaSubject = "dvms.swim.meta"

// Validate lists every problem.
func (c SwimConfig) Validate() error {
	var errs []error
	if c.Self.Host == "" || c.Self.Incarnation == "" {
		errs = append(errs, errors.New("swim: host and incarnation are required"))
	}
	if c.Transport == nil && (c.BindPort < 0 || c.BindPort > 65535) {
		errs = append(errs, fmt.Errorf("swim: bind port %d out of range", c.BindPort))
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		errs = append(errs, fmt.Errorf("swim: advertise port %d out of range", c.AdvertisePort))
	}
	if k := len(c.Key); k != 0 && k != 16 && k != 24 && k != 32 {
		errs = append(errs, fmt.Errorf("swim: key of %d bytes: want 16, 24 or 32", k))
	}
	if (c.Signer == nil) != (c.Keyring == nil) {
		errs = append(errs, errors.New("swim: signer and keyring go together"))
	} else if c.Signer != nil && c.Signer.Host() != c.Self.Host {
		errs = append(errs, fmt.Errorf("swim: signer is %s, not %s", c.Signer.Host(), c.Self.Host))
	}
	if c.MetaRefresh < 0 {
		errs = append(errs, fmt.Errorf("swim: meta refresh %s must not be negative", c.MetaRefresh))
	}
	return errors.Join(errs...)
}

// Swim follows the region's members with SWIM. It reports members up and
// down exactly as Membership does (OnUp, OnDown, Members), so the runner
// consumes either the same way.
type Swim struct {
	cfg SwimConfig
	log zerolog.Logger

	// OnUp and OnDown are called from Run's goroutine when membership
	// changes. They must not block. Set them before Run.
	OnUp, OnDown func(host string)

	mu      sync.Mutex
	ml      *memberlist.Memberlist
	members map[string]Member // live others, as last heard
	events  []swimEvent
	wake    chan struct{}
	// badAcks counts probe acks whose coordinate was refused; queueFull
	// the gossip messages memberlist dropped because its handler queue
	// was full (it says so only in its log).
	badAcks   atomic.Int64
	queueFull atomic.Int64
	// badMeta counts members ignored for metadata that is malformed or
	// not signed by their name's key; signedAt is the signing time of
	// each member's latest accepted metadata (older ones are replays).
	badMeta  atomic.Int64
	signedAt map[string]time.Time
}

type swimEvent struct {
	host string
	up   bool
}

// NewSwim returns a SWIM membership; Run starts it.
func NewSwim(cfg SwimConfig, log zerolog.Logger) (*Swim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Self.V = 1
	if cfg.MetaRefresh == 0 {
		cfg.MetaRefresh = 10 * time.Second
	}
	return &Swim{cfg: cfg, log: log, members: map[string]Member{}, wake: make(chan struct{}, 1), signedAt: map[string]time.Time{}}, nil
}

// Members returns the live members, sorted by host, this agent included.
func (s *Swim) Members() []Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Member, 0, len(s.members)+1)
	out = append(out, Member{Heartbeat: s.cfg.Self, Seen: time.Now()})
	for _, v := range s.members {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Host, b.Host) })
	return out
}

// Knows reports whether host is a live member as this agent last heard.
func (s *Swim) Knows(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.members[host]
	return ok
}

// RejectedAcks is the number of probe acks whose coordinate was dropped:
// malformed, oversized, unusable, refused by Observe, or from a host that
// is not a member.
func (s *Swim) RejectedAcks() int64 { return s.badAcks.Load() }

// QueueFullDrops is the number of gossip messages (alive, suspect, dead)
// memberlist dropped unread because its handler queue was full: a
// process that does not keep up loses them on top of the network's loss.
func (s *Swim) QueueFullDrops() int64 { return s.queueFull.Load() }

// RejectedMeta is the number of membership updates ignored because the
// member's metadata was malformed, not signed by its name's key, or
// older than the one already taken.
func (s *Swim) RejectedMeta() int64 { return s.badMeta.Load() }

// Run joins the region, reports changes until ctx ends, then leaves.
func (s *Swim) Run(ctx context.Context) error {
	mc := memberlist.DefaultLANConfig()
	mc.Name = s.cfg.Self.Host
	mc.Delegate = swimMeta{s}
	mc.Events = swimEvents{s}
	if s.cfg.Observe != nil || s.cfg.SelfCoord != nil {
		mc.Ping = swimPing{s}
	}
	mc.Logger = log.New(swimLogWriter{s.log, &s.queueFull}, "", 0)
	if s.cfg.Transport != nil {
		mc.Transport = s.cfg.Transport
	} else {
		if s.cfg.BindAddr != "" {
			mc.BindAddr = s.cfg.BindAddr
		}
		mc.BindPort, mc.AdvertisePort = s.cfg.BindPort, s.cfg.BindPort
		if s.cfg.AdvertiseAddr != "" {
			mc.AdvertiseAddr = s.cfg.AdvertiseAddr
		}
		if s.cfg.AdvertisePort != 0 {
			mc.AdvertisePort = s.cfg.AdvertisePort
		}
	}
	if len(s.cfg.Key) > 0 {
		mc.SecretKey = s.cfg.Key
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	if s.cfg.Tune != nil {
		s.cfg.Tune(mc)
	}
	if c := s.selfCoord(); c != nil && c.IsValid() {
		s.mu.Lock()
		s.cfg.Self.Coord = c
		s.mu.Unlock()
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("swim start %s: %w", s.cfg.Self.Host, err)
	}
	s.mu.Lock()
	s.ml = ml
	s.mu.Unlock()
	defer func() {
		if err := ml.Leave(time.Second); err != nil {
			s.log.Warn().Err(err).Msg("swim leave")
		}
		_ = ml.Shutdown()
	}()
	joined := len(s.cfg.Seeds) == 0
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	announced := s.cfg.Self.Coord
	lastMeta := time.Now()
	for {
		if s.cfg.SelfCoord != nil && time.Since(lastMeta) >= s.cfg.MetaRefresh {
			lastMeta = time.Now()
			if c := s.selfCoord(); coordMoved(announced, c) {
				s.mu.Lock()
				s.cfg.Self.Coord = c
				s.mu.Unlock()
				if err := ml.UpdateNode(time.Second); err != nil {
					s.log.Debug().Err(err).Msg("swim: coordinate not re-announced")
				} else {
					announced = c
				}
			}
		}
		if !joined {
			if n, err := ml.Join(s.cfg.Seeds); err != nil {
				s.log.Warn().Err(err).Strs("seeds", s.cfg.Seeds).Msg("swim join failed; retrying")
			} else {
				joined = true
				s.log.Info().Int("contacted", n).Msg("swim joined")
			}
		}
		s.dispatch()
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-retry.C:
		}
	}
}

func (s *Swim) selfCoord() *coordinate.Coordinate {
	if s.cfg.SelfCoord == nil {
		return nil
	}
	return s.cfg.SelfCoord()
}

// coordMoved: worth re-announcing (a new coordinate, or one that moved by
// more than a tenth of its height plus 0.5 ms from the last announced).
func coordMoved(old, c *coordinate.Coordinate) bool {
	if c == nil || !c.IsValid() {
		return false
	}
	if old == nil {
		return true
	}
	if !old.IsCompatibleWith(c) {
		return true
	}
	return old.DistanceTo(c) > 500*time.Microsecond+time.Duration(c.Height*float64(time.Second)/10)
}

// dispatch reports the queued changes, in order, from Run's goroutine.
func (s *Swim) dispatch() {
	s.mu.Lock()
	evs := s.events
	s.events = nil
	s.mu.Unlock()
	for _, e := range evs {
		f := s.OnDown
		if e.up {
			f = s.OnUp
		}
		if f != nil {
			f(e.host)
		}
	}
}

// change records a member's new state (called from memberlist, which must
// not be blocked) and wakes Run.
func (s *Swim) change(n *memberlist.Node, alive bool) {
	if n.Name == s.cfg.Self.Host {
		return
	}
	var hb Heartbeat
	if alive {
		meta, err := s.openMeta(n.Name, n.Meta)
		if err == nil {
			if err = json.Unmarshal(meta, &hb); err == nil && (hb.V != 1 || hb.Host != n.Name || hb.Incarnation == "") {
				err = errors.New("not a heartbeat of this member")
			}
		}
		if err != nil {
			s.badMeta.Add(1)
			s.log.Warn().Err(err).Str("member", n.Name).Int("bytes", len(n.Meta)).Msg("swim: member metadata rejected: member ignored")
			return
		}
	}
	if s.cfg.Coords != nil {
		if !alive {
			s.cfg.Coords.Forget(n.Name)
		} else if hb.Coord != nil && hb.Coord.IsValid() {
			s.cfg.Coords.Set(n.Name, hb.Coord)
		}
	}
	s.mu.Lock()
	old, known := s.members[n.Name]
	switch {
	case !alive:
		delete(s.signedAt, n.Name) // a restart may sign with a clock set back
		if known {
			delete(s.members, n.Name)
			s.events = append(s.events, swimEvent{n.Name, false})
			s.log.Warn().Str("member", n.Name).Msg("member dead or left")
		}
	case !known:
		s.members[n.Name] = Member{Heartbeat: hb, Seen: time.Now()}
		s.events = append(s.events, swimEvent{n.Name, true})
		s.log.Info().Str("member", n.Name).Str("site", hb.Site).Msg("member up")
	default:
		s.members[n.Name] = Member{Heartbeat: hb, Seen: time.Now()}
		if old.Incarnation != hb.Incarnation {
			s.events = append(s.events, swimEvent{n.Name, false}, swimEvent{n.Name, true})
			s.log.Info().Str("member", n.Name).Msg("member restarted")
		}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Signed metadata: swimMetaMagic, the signing time (Unix nanoseconds,
// 8 bytes big-endian), the heartbeat's JSON, and the signer's detached
// signature (64 bytes) of everything before it, for the member's name.
// It is smaller than a bus envelope: memberlist allows 512 bytes and the
// coordinate must fit.
const (
	swimMetaMagic = "dvS1"
	swimSigLen    = 64
)

// sealMeta signs the heartbeat hb (JSON) as this agent.
func (s *Swim) sealMeta(hb []byte, now time.Time) []byte {
	b := make([]byte, 0, len(swimMetaMagic)+8+len(hb)+swimSigLen)
	b = append(b, swimMetaMagic...)
	b = binary.BigEndian.AppendUint64(b, uint64(now.UnixNano()))
	b = append(b, hb...)
	return append(b, s.cfg.Signer.SignDetached(SwimMetaSubject, b)...)
}

// openMeta is the heartbeat a member's metadata carries: with a keyring,
// signed by its name's key, not older than the last one taken.
func (s *Swim) openMeta(name string, meta []byte) ([]byte, error) {
	if s.cfg.Keyring == nil {
		return meta, nil
	}
	head := len(swimMetaMagic) + 8
	if len(meta) < head+swimSigLen || string(meta[:len(swimMetaMagic)]) != swimMetaMagic {
		return nil, errors.New("metadata not signed")
	}
	body, sig := meta[:len(meta)-swimSigLen], meta[len(meta)-swimSigLen:]
	if !s.cfg.Keyring.VerifyDetached(name, SwimMetaSubject, body, sig) {
		if !s.cfg.Keyring.Has(name) {
			return nil, fmt.Errorf("no key for %q in keys_dir", name)
		}
		return nil, fmt.Errorf("metadata not signed by %s's key", name)
	}
	at := time.Unix(0, int64(binary.BigEndian.Uint64(meta[len(swimMetaMagic):head])))
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.signedAt[name]; ok && at.Before(last) {
		return nil, fmt.Errorf("metadata signed at %s, before the last taken (%s): replayed", at.UTC().Format(time.RFC3339Nano), last.UTC().Format(time.RFC3339Nano))
	}
	s.signedAt[name] = at
	return body[head:], nil
}

type swimEvents struct{ s *Swim }

func (e swimEvents) NotifyJoin(n *memberlist.Node)   { e.s.change(n, true) }
func (e swimEvents) NotifyLeave(n *memberlist.Node)  { e.s.change(n, false) }
func (e swimEvents) NotifyUpdate(n *memberlist.Node) { e.s.change(n, true) }

// swimMeta gives memberlist this agent's metadata; the protocol itself
// stays on NATS, so no user messages travel over memberlist.
type swimMeta struct{ s *Swim }

func (d swimMeta) NodeMeta(limit int) []byte {
	d.s.mu.Lock()
	hb := d.s.cfg.Self
	d.s.mu.Unlock()
	enc := func() []byte {
		b, _ := json.Marshal(hb)
		if d.s.cfg.Signer != nil {
			b = d.s.sealMeta(b, time.Now())
		}
		return b
	}
	b := enc()
	if len(b) > limit && hb.Coord != nil {
		hb.Coord = nil // the membership matters more than the coordinate
		b = enc()
	}
	if len(b) > limit {
		d.s.log.Error().Int("bytes", len(b)).Int("limit", limit).Msg("swim: metadata too large; sent empty")
		return nil
	}
	return b
}
func (swimMeta) NotifyMsg([]byte)                    {}
func (swimMeta) GetBroadcasts(int, int) [][]byte     { return nil }
func (swimMeta) LocalState(bool) []byte              { return nil }
func (swimMeta) MergeRemoteState(buf []byte, _ bool) {}

// swimPing carries coordinates in memberlist's probe acks and turns each
// direct probe's RTT into a Vivaldi sample (memberlist does not call it
// for indirect probes nor TCP fallbacks, whose RTT is not the link's).
type swimPing struct{ s *Swim }

// AckPayload is this agent's coordinate, at most MaxCoordPayload bytes.
func (p swimPing) AckPayload() []byte { return EncodeCoord(p.s.selfCoord()) }

// NotifyPingComplete applies the sample, or drops and counts it.
func (p swimPing) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	s := p.s
	if s.cfg.Observe == nil || len(payload) == 0 {
		return // no coordinates here, or none offered (an older agent)
	}
	if err := s.ackSample(other.Name, rtt, payload); err != nil {
		s.badAcks.Add(1)
		s.log.Debug().Err(err).Str("member", other.Name).Int("bytes", len(payload)).Msg("swim: probe ack coordinate dropped")
	}
}

func (s *Swim) ackSample(host string, rtt time.Duration, payload []byte) error {
	s.mu.Lock()
	_, member := s.members[host]
	s.mu.Unlock()
	if !member {
		return fmt.Errorf("swim: probe ack of %q: not a member", host)
	}
	c, err := DecodeCoord(payload)
	if err != nil {
		return fmt.Errorf("swim: probe ack of %s: %w", host, err)
	}
	return s.cfg.Observe(host, c, rtt)
}

// swimLogWriter turns memberlist's "[LEVEL] memberlist: ..." lines into
// structured logs, and counts its handler queue's drops in queueFull.
type swimLogWriter struct {
	log       zerolog.Logger
	queueFull *atomic.Int64
}

// swimQueueFull is how memberlist (net.go) logs a gossip message dropped
// for a full handler queue.
var swimQueueFull = []byte("handler queue full, dropping message")

func (w swimLogWriter) Write(p []byte) (int, error) {
	if w.queueFull != nil && bytes.Contains(p, swimQueueFull) {
		w.queueFull.Add(1)
	}
	line := string(bytes.TrimSpace(p))
	ev := w.log.Debug()
	switch {
	case strings.HasPrefix(line, "[ERR]"):
		ev = w.log.Error()
	case strings.HasPrefix(line, "[WARN]"):
		ev = w.log.Warn()
	}
	ev.Str("component", "memberlist").Msg(line)
	return len(p), nil
}

var _ io.Writer = swimLogWriter{}
