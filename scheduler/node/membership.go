package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
)

// Heartbeat is what an agent publishes on its region's heartbeat subject.
type Heartbeat struct {
	V           int    `json:"v"`
	Host        string `json:"host"`
	Site        string `json:"site,omitempty"`
	Version     string `json:"version,omitempty"` // dvms build
	Incarnation string `json:"incarnation"`       // changes at every start
	Seq         uint64 `json:"seq"`
	// Raft is the address the merge arbiter of this agent listens on, if
	// it may vote.
	Raft string `json:"raft,omitempty"`
	// Leaving is the last heartbeat of an agent that stops: the others
	// drop it at once instead of after DeadAfter.
	Leaving bool `json:"leaving,omitempty"`
	// Coord is the agent's Vivaldi coordinate (DESIGN §5.3), if it has one.
	Coord *coordinate.Coordinate `json:"coord,omitempty"`
}

// MembershipConfig tunes failure detection.
type MembershipConfig struct {
	Region string
	Self   Heartbeat
	// Interval between heartbeats; DeadAfter of silence declares a member dead.
	Interval  time.Duration
	DeadAfter time.Duration
}

// DefaultMembershipConfig: a heartbeat every second, dead after 5 s.
func DefaultMembershipConfig() MembershipConfig {
	return MembershipConfig{Region: "RegionOne", Interval: time.Second, DeadAfter: 5 * time.Second}
}

// Validate lists every problem.
func (c MembershipConfig) Validate() error {
	var errs []error
	if c.Region == "" || c.Self.Host == "" {
		errs = append(errs, errors.New("membership: region and host are required"))
	}
	if c.Interval <= 0 || c.DeadAfter <= c.Interval {
		errs = append(errs, fmt.Errorf("membership: need 0 < heartbeat interval (%s) < dead_after (%s)", c.Interval, c.DeadAfter))
	}
	return errors.Join(errs...)
}

// Member is a live member as last heard.
type Member struct {
	Heartbeat
	Seen time.Time
}

// Membership publishes this agent's heartbeats and follows the others':
// a member silent for DeadAfter is dead; a new incarnation of a host is a
// restart (the old one is reported dead first, then the new one up).
type Membership struct {
	cfg   MembershipConfig
	bus   bus.Transport
	clock Clock
	log   zerolog.Logger

	mu      sync.Mutex
	members map[string]Member
	// OnUp and OnDown are called (from Run's goroutine) when membership
	// changes. They must not block.
	OnUp, OnDown func(host string)
	// Coords, if set, gets every member's coordinate as heard (and loses
	// a member that leaves or dies); SelfCoord, if set, is this agent's,
	// sent in each heartbeat. Set both before Run.
	Coords    *CoordTable
	SelfCoord func() *coordinate.Coordinate
	seq       uint64
}

// NewMembership returns a membership tracker; Run starts it.
func NewMembership(cfg MembershipConfig, t bus.Transport, clock Clock, log zerolog.Logger) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Self.V = 1
	return &Membership{cfg: cfg, bus: t, clock: clock, log: log, members: map[string]Member{}}, nil
}

// Members returns the live members, sorted by host, this agent included.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.members)+1)
	out = append(out, Member{Heartbeat: m.cfg.Self, Seen: m.clock.Now()})
	for _, v := range m.members {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Host, b.Host) })
	return out
}

// Run publishes and follows heartbeats until ctx ends.
func (m *Membership) Run(ctx context.Context) error {
	in := make(chan Heartbeat, 1024)
	sub, err := bus.SubscribeFrom(m.bus, bus.HeartbeatSubject(m.cfg.Region), func(_, from string, data []byte) {
		var hb Heartbeat
		if err := json.Unmarshal(data, &hb); err != nil || hb.V != 1 || hb.Host == "" || hb.Incarnation == "" {
			m.log.Warn().Int("bytes", len(data)).Msg("malformed heartbeat rejected")
			return
		}
		if from != "" && hb.Host != from {
			// Signed by another host: a forged heartbeat (or leaving).
			m.log.Warn().Str("member", hb.Host).Str("signer", from).Msg("heartbeat rejected: host is not its signer")
			return
		}
		select {
		case in <- hb:
		default: // overloaded: a later heartbeat will do
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe heartbeats: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	t := m.clock.NewTicker(m.cfg.Interval)
	defer t.Stop()
	m.publish(ctx, false)
	for {
		select {
		case <-ctx.Done():
			// Say goodbye on a context of its own: ctx is already done.
			bye, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			m.publish(bye, true)
			cancel()
			return nil
		case hb := <-in:
			m.heard(hb)
		case <-t.C:
			m.publish(ctx, false)
			m.expire()
		}
	}
}

func (m *Membership) publish(ctx context.Context, leaving bool) {
	m.seq++
	hb := m.cfg.Self
	hb.Seq, hb.Leaving = m.seq, leaving
	if m.SelfCoord != nil {
		hb.Coord = m.SelfCoord()
	}
	data, _ := json.Marshal(hb)
	if err := m.bus.Publish(ctx, bus.HeartbeatSubject(m.cfg.Region), data); err != nil && ctx.Err() == nil {
		m.log.Warn().Err(err).Msg("heartbeat not sent")
	}
}

func (m *Membership) heard(hb Heartbeat) {
	if hb.Host == m.cfg.Self.Host {
		return
	}
	m.mu.Lock()
	old, known := m.members[hb.Host]
	if m.Coords != nil {
		if hb.Leaving {
			m.Coords.Forget(hb.Host)
		} else if hb.Coord != nil {
			m.Coords.Set(hb.Host, hb.Coord)
		}
	}
	if hb.Leaving {
		delete(m.members, hb.Host)
	} else {
		m.members[hb.Host] = Member{Heartbeat: hb, Seen: m.clock.Now()}
	}
	m.mu.Unlock()
	switch {
	case hb.Leaving:
		if known {
			m.log.Info().Str("member", hb.Host).Msg("member left")
			m.notify(m.OnDown, hb.Host)
		}
	case !known:
		m.log.Info().Str("member", hb.Host).Str("site", hb.Site).Msg("member up")
		m.notify(m.OnUp, hb.Host)
	case old.Incarnation != hb.Incarnation:
		m.log.Info().Str("member", hb.Host).Msg("member restarted")
		m.notify(m.OnDown, hb.Host)
		m.notify(m.OnUp, hb.Host)
	}
}

func (m *Membership) expire() {
	now := m.clock.Now()
	var dead []string
	m.mu.Lock()
	for h, v := range m.members {
		if now.Sub(v.Seen) > m.cfg.DeadAfter {
			dead = append(dead, h)
			delete(m.members, h)
		}
	}
	m.mu.Unlock()
	slices.Sort(dead)
	for _, h := range dead {
		if m.Coords != nil {
			m.Coords.Forget(h)
		}
		m.log.Warn().Str("member", h).Dur("silence", m.cfg.DeadAfter).Msg("member dead")
		m.notify(m.OnDown, h)
	}
}

func (m *Membership) notify(f func(string), host string) {
	if f != nil {
		f(host)
	}
}
