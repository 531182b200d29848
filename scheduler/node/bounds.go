package node

// Bounds on one key, at the edge where messages arrive (trust against
// insiders). A signature proves who sent a message, not that its sender
// plays fair: a stolen key could lead partitions and never finish them,
// holding their members (and their events) for as long as it keeps
// heartbeating. So each agent bounds, per key (the signer; the sender's
// name on an unsigned bus):
//
//   - time: how long one key leads one partition this agent is in,
//     outside a plan (LeadTimeout) and while its plan runs
//     (LeadPlanTimeout); outside a plan, the time this agent spent in
//     the key's earlier partitions that it lost (left, timed out, torn
//     down) without the key planning, ending or handing one over counts
//     too, within LeadWindow (keyBound.unfair);
//   - count: how many partitions a key leads, as this agent hears of them
//     (requests, updates), within LeadWindow (MaxLeads);
//   - rate: how many protocol messages a key sends this agent per second
//     (Rate, Burst).
//
// A key past its time or count bound is refused for LeadWindow: the agent
// leaves the partition it leads (its own event, if that partition carried
// it, is raised again at once: scheduler.Agent.RefuseLeader), takes it out
// of its ring (no request goes to it), and drops the requests, updates and
// absorptions of partitions it leads before the state machine sees them.
// A message past the rate is dropped. Every drop is counted by reason
// (Runner.BoundDrops, the metric dvms_messages_bounded_total) and logged,
// at most one line per key and reason every boundLogEvery.

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/dvms-project/dvms/scheduler"
)

// BoundsConfig bounds what one key may do to this agent.
type BoundsConfig struct {
	// LeadTimeout: longest one key leads one partition this agent is in
	// while it grows or is blocked (0: no bound). A fair leader ends,
	// plans or hands over well within progress_timeout plus hop_timeout
	// per host, times a few tours.
	LeadTimeout time.Duration
	// LeadPlanTimeout: the same while the partition's plan runs
	// (Finishing; 0: no bound).
	LeadPlanTimeout time.Duration
	// MaxLeads: partitions one key may lead, as this agent hears of
	// them, within LeadWindow (0: no bound).
	MaxLeads int
	// LeadWindow is the window of MaxLeads and how long a key past a
	// bound is refused.
	LeadWindow time.Duration
	// Rate and Burst: protocol messages per second one key may send this
	// agent, and the burst above it (Rate 0: no bound).
	Rate  float64
	Burst int
}

// DefaultBoundsConfig returns the defaults (the options' table repeats
// them).
func DefaultBoundsConfig() BoundsConfig {
	return BoundsConfig{LeadTimeout: time.Minute, LeadPlanTimeout: 30 * time.Minute, MaxLeads: 100, LeadWindow: 10 * time.Minute,
		Rate: 100, Burst: 1000}
}

// Validate lists every problem.
func (c BoundsConfig) Validate() error {
	var errs []error
	if c.LeadTimeout < 0 || c.LeadPlanTimeout < 0 || c.MaxLeads < 0 || c.Rate < 0 {
		errs = append(errs, errors.New("lead_timeout, lead_plan_timeout, max_leads and sender_rate must be >= 0"))
	}
	if c.LeadWindow <= 0 && (c.LeadTimeout > 0 || c.LeadPlanTimeout > 0 || c.MaxLeads > 0) {
		errs = append(errs, errors.New("lead_window must be > 0 when a lead bound is set"))
	}
	if c.Rate > 0 && c.Burst < 1 {
		errs = append(errs, errors.New("sender_burst must be >= 1 when sender_rate is set"))
	}
	return errors.Join(errs...)
}

// Reasons a message is dropped by the bounds (Runner.BoundDrops).
const (
	BoundRate    = "rate"    // its sender is past Rate
	BoundRefused = "refused" // it is about a partition a refused key leads
)

// maxClaimLeaves bounds the partitions an agent leaves because a key it
// refuses claims them, per refusal: enough for the agents that followed
// the key to reach their own bounds, not a lever for the key.
const maxClaimLeaves = 3

// boundLogEvery spaces the log lines of one key's drops.
const boundLogEvery = 10 * time.Second

type bounds struct {
	cfg  BoundsConfig
	self string
	log  zerolog.Logger

	mu      sync.Mutex
	senders map[string]*rate.Limiter
	keys    map[string]*keyBound
	// stint: the partition this agent is in and its leader, as of the
	// agent goroutine's last flush (agent goroutine only).
	stint stint
	// refusals to hand to the agent (agent goroutine: check).
	refusals []refusal
	// current: the partition this agent is in (observe); initiator:
	// this agent initiated it (its own event's partition).
	current   string
	initiator bool
	// memberDown: hosts membership says are down (not put back in the
	// ring when their refusal ends).
	memberDown map[string]bool

	// framed: a key refused since the agent goroutine's last check, and
	// when (b.mu): the time this agent spent in other keys' partitions
	// until then is forgiven (see refuse).
	framed   string
	framedAt time.Time
	// claimed: the partition this agent is in that a refused key claimed
	// (its update dropped): the agent leaves it, and its leader is not
	// blamed for that stint (b.mu).
	claimed string

	rateDrops, refusedDrops atomic.Int64
}

type keyBound struct {
	leads       map[string]time.Time // partition id -> first heard of, within the window
	claimLeaves int                  // partitions left because the refused key claimed them
	heard       time.Time            // its last message to this agent
	// unfair is the time this agent spent in partitions the key led,
	// without a plan, that ended without the key ending, planning or
	// handing over one (it was left, timed out, torn down): counted
	// against lead_timeout with the partition it leads now, so a key
	// whose partitions keep being torn down before one stint reaches
	// the bound is refused all the same. unfairAt: when it last grew
	// (forgotten after lead_window).
	unfair   time.Duration
	unfairAt time.Time
	// dissolved: the partition this agent is in that the key dissolved
	// (its dissolution heard): the key ended it, a fair end.
	dissolved    string
	refusedUntil time.Time
	logged       map[string]time.Time // reason -> last log line
	dropped      map[string]int64     // reason -> drops since the last line
}

type stint struct {
	part, leader    string
	since, planFrom time.Time
}

type refusal struct {
	key, why string
	taken    string // a partition the refused key claimed (its update dropped)
	back     bool   // the refusal ended: MemberUp
}

func newBounds(cfg BoundsConfig, self string, log zerolog.Logger) *bounds {
	return &bounds{cfg: cfg, self: self, log: log, senders: map[string]*rate.Limiter{}, keys: map[string]*keyBound{}, memberDown: map[string]bool{}}
}

func (b *bounds) key(k string) *keyBound {
	kb := b.keys[k]
	if kb == nil {
		kb = &keyBound{leads: map[string]time.Time{}, logged: map[string]time.Time{}, dropped: map[string]int64{}}
		b.keys[k] = kb
	}
	return kb
}

// admit says whether m, sent by key, reaches the agent (any goroutine).
func (b *bounds) admit(now time.Time, key string, m scheduler.Message) bool {
	if key == "" || key == b.self {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.key(key).heard = now
	switch {
	case m.Type == scheduler.MsgDissolve && m.PartID != "" && m.PartID == b.current:
		b.key(key).dissolved = m.PartID // its leader ended it
	case m.Type == scheduler.MsgAbsorbed && m.Other != nil && m.Other.ID != "" && m.Other.ID == b.current:
		b.key(m.Other.Leader).dissolved = m.Other.ID // merged away: handed over
	}
	if b.cfg.Rate > 0 {
		l := b.senders[key]
		if l == nil {
			l = rate.NewLimiter(rate.Limit(b.cfg.Rate), b.cfg.Burst)
			b.senders[key] = l
		}
		if !l.AllowN(now, 1) {
			b.drop(now, key, BoundRate, m)
			return false
		}
	}
	p := m.Part
	if p == nil || p.Leader == b.self {
		return true
	}
	leader := p.Leader
	kb := b.key(leader)
	if now.Before(kb.refusedUntil) {
		b.drop(now, leader, BoundRefused, m)
		if m.Type == scheduler.MsgUpdate && p.ID == b.current && (kb.claimLeaves < maxClaimLeaves || b.initiator) {
			// A refused key claims this agent's partition: its other
			// members may have followed it (scheduler.Agent.RefuseLeader).
			// The partition of this agent's own event it leaves every
			// time, whatever maxClaimLeaves: the event goes on in a fresh
			// partition, where staying would lose it (the key, or the
			// members that followed it, remove an initiator that sends
			// them no snapshot, and the partition ends member_lost).
			// This agent's own copy says it is the initiator, not the
			// key's message.
			if !b.initiator {
				kb.claimLeaves++
			}
			b.claimed = p.ID
			b.refusals = append(b.refusals, refusal{key: leader, taken: p.ID, why: "leader " + leader + " refused: it claimed this partition"})
		}
		return false
	}
	if b.cfg.MaxLeads > 0 && (m.Type == scheduler.MsgGrow || m.Type == scheduler.MsgUpdate) {
		if _, ok := kb.leads[p.ID]; !ok {
			for id, at := range kb.leads {
				if now.Sub(at) > b.cfg.LeadWindow {
					delete(kb.leads, id)
				}
			}
			kb.leads[p.ID] = now
			if len(kb.leads) > b.cfg.MaxLeads {
				b.refuse(now, leader, "led more than max_leads partitions within lead_window")
				b.drop(now, leader, BoundRefused, m)
				return false
			}
		}
	}
	return true
}

// refuse refuses key until LeadWindow from now (b.mu held). A key
// refused for the first time in its window forgives the others: the time
// this agent spent in their partitions until now (unfair, and the stint
// it is in) no longer counts against them. A key that holds agents also
// holds the fair leaders it takes partitions from (they follow it, their
// members wait for them): without this, one key made the members of a
// fair leader it hijacked refuse that leader too, and a host refusing
// every other leader of its region cannot solve its event for
// lead_window.
func (b *bounds) refuse(now time.Time, key, why string) {
	kb := b.key(key)
	if !now.Before(kb.refusedUntil) {
		b.log.Warn().Str("key", key).Dur("for", b.cfg.LeadWindow).Str("why", why).Msg("key refused: past its bounds")
		b.refusals = append(b.refusals, refusal{key: key, why: "leader " + key + " refused: " + why})
		for k, other := range b.keys {
			if k != key {
				other.unfair = 0
			}
		}
		b.framed, b.framedAt = key, now
	}
	kb.refusedUntil = now.Add(b.cfg.LeadWindow)
}

// drop counts a dropped message and logs it, at most one line per key
// and reason every boundLogEvery (b.mu held).
func (b *bounds) drop(now time.Time, key, reason string, m scheduler.Message) {
	if reason == BoundRate {
		b.rateDrops.Add(1)
	} else {
		b.refusedDrops.Add(1)
	}
	kb := b.key(key)
	kb.dropped[reason]++
	if last, ok := kb.logged[reason]; ok && now.Sub(last) < boundLogEvery {
		return
	}
	kb.logged[reason] = now
	b.log.Warn().Str("key", key).Str("reason", reason).Int64("dropped", kb.dropped[reason]).Str("type", m.Type.String()).
		Str("partition", m.PartID).Msg("messages dropped by the bounds on one key")
	kb.dropped[reason] = 0
}

// observe notes the agent's partition after a step (agent goroutine).
func (b *bounds) observe(now time.Time, p *scheduler.Partition) {
	b.mu.Lock()
	b.current, b.initiator = "", false
	if p != nil {
		b.current, b.initiator = p.ID, p.Initiator == b.self
	}
	b.mu.Unlock()
	if p == nil || p.Leader == b.self {
		b.endStint(now, p)
		b.stint = stint{}
		return
	}
	if b.stint.part != p.ID || b.stint.leader != p.Leader {
		b.endStint(now, p)
		b.stint = stint{part: p.ID, leader: p.Leader, since: now}
	}
	switch {
	case p.State != scheduler.Finishing:
		b.stint.planFrom = time.Time{}
	case b.stint.planFrom.IsZero():
		b.stint.planFrom = now
		b.mu.Lock()
		b.key(p.Leader).unfair = 0 // its plan runs: fair
		b.mu.Unlock()
	}
}

// endStint settles the stint that ends (the agent is now in p, or none):
// a key that planned, ended its partition or handed it over (the same
// partition goes on under another leader) played fair; one whose
// partition this agent left without any of these, while the key was not
// silent, held it: the stint counts against its next ones
// (keyBound.unfair). Agent goroutine.
func (b *bounds) endStint(now time.Time, p *scheduler.Partition) {
	s := b.stint
	if s.leader == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	kb := b.key(s.leader)
	if now.Sub(kb.unfairAt) > b.cfg.LeadWindow {
		kb.unfair = 0
	}
	switch {
	case !s.planFrom.IsZero(), kb.dissolved == s.part, p != nil && p.ID == s.part:
		kb.unfair = 0
	case b.claimed == s.part:
		// A refused key took it: the key held this agent, not its leader.
	case now.Sub(kb.heard) > b.cfg.LeadTimeout/2:
		// Silent: it held nobody (the partition timed out).
	default:
		kb.unfair += now.Sub(s.since)
		kb.unfairAt = now
	}
	kb.dissolved = ""
	b.claimed = ""
}

// check refuses the leader of the agent's partition past its time bound,
// and returns the refusals (and their ends) the agent must apply (agent
// goroutine).
func (b *bounds) check(now time.Time) []refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.framed != "" {
		if b.stint.leader != "" && b.stint.leader != b.framed && b.stint.since.Before(b.framedAt) {
			b.stint.since = b.framedAt // forgiven (refuse)
		}
		b.framed = ""
	}
	if s := b.stint; s.leader != "" {
		kb := b.key(s.leader)
		switch {
		case now.Before(kb.refusedUntil):
			b.refusals = append(b.refusals, refusal{key: s.leader, why: "leader " + s.leader + " refused"})
		case !s.planFrom.IsZero() && b.cfg.LeadPlanTimeout > 0 && now.Sub(s.planFrom) > b.cfg.LeadPlanTimeout:
			b.refuse(now, s.leader, "its plan ran longer than lead_plan_timeout")
		case now.Sub(kb.heard) > b.cfg.LeadTimeout/2:
			// A silent leader holds nobody: the partition timeout ends
			// its partition, and it is not refused for it.
		case s.planFrom.IsZero() && b.cfg.LeadTimeout > 0 && now.Sub(s.since)+kb.unfair > b.cfg.LeadTimeout:
			b.refuse(now, s.leader, "led partitions longer than lead_timeout without a plan")
		}
	}
	for k, kb := range b.keys {
		if !kb.refusedUntil.IsZero() && !now.Before(kb.refusedUntil) {
			kb.refusedUntil, kb.claimLeaves = time.Time{}, 0
			if !b.memberDown[k] {
				b.refusals = append(b.refusals, refusal{key: k, back: true})
			}
		}
		if kb.refusedUntil.IsZero() && len(kb.leads) == 0 && now.Sub(kb.heard) > b.cfg.LeadWindow {
			delete(b.keys, k)
		}
	}
	out := b.refusals
	b.refusals = nil
	return out
}

// member notes membership's word on host (any goroutine).
func (b *bounds) member(host string, up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if up {
		delete(b.memberDown, host)
	} else {
		b.memberDown[host] = true
	}
}

// refused says whether key is refused now (membership must not put it
// back in the ring).
func (b *bounds) refused(now time.Time, key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	kb := b.keys[key]
	return kb != nil && now.Before(kb.refusedUntil)
}

// BoundDrops are the received messages dropped by the bounds on one key,
// by reason (BoundRate, BoundRefused).
func (r *Runner) BoundDrops() map[string]int64 {
	return map[string]int64{BoundRate: r.bounds.rateDrops.Load(), BoundRefused: r.bounds.refusedDrops.Load()}
}

// applyBounds hands the bounds' refusals to the agent (agent goroutine).
func (r *Runner) applyBounds(now time.Time) {
	for _, rf := range r.bounds.check(now) {
		if rf.back {
			r.agent.MemberUp(rf.key)
			continue
		}
		r.agent.RefuseLeader(now, rf.key, rf.taken, rf.why)
	}
}
