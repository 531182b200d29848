// Package control is the operators' run-time controls: `dvms mode`, `dvms pause` /
// `resume` and `dvms exclude` / `include` reach every agent of the region
// over NATS, without restarts.
//
// Who may send them. A command is signed (bus/auth envelope) with an
// operator's key, whose public half is keys_dir/operators/NAME.pub on the
// agents: a keyring of its own, so an agent's key cannot steer the region
// and an operator's key cannot speak as an agent. An agent with keys_dir
// refuses an unsigned, unknown, badly signed or stale command, logs why
// and answers the sender with the reason. An agent without keys_dir
// (insecure_unsigned) takes unsigned commands, as it takes every message.
//
// State. Each command sets one register: paused, the region's mode, one
// host's mode, one host's exclusion. A register holds the command with
// the latest signed time (then the larger id): commands commute, a
// repeated or replayed one changes nothing, and agents that heard the same
// commands agree whatever the order they heard them in.
//
// Convergence. Each agent keeps, for each register, the command as it
// received it, signature included, and passes it on: an agent that starts
// publishes what it holds on the state subject (an ask); an agent holding
// something newer than a message it hears answers after a random delay of
// up to AnswerJitter, unless an answer covering its own came
// first; the maintenance watch re-publishes every Republish, which
// heals an agent that missed a command. Every command passed on is
// verified again with the operators' keys by the agent that takes it, so
// no agent can forge one. Not a NATS JetStream KV bucket: the agents run
// on core NATS (a JetStream-enabled server is not required of operators)
// and the state is a handful of registers that every agent keeps in
// memory anyway. The limit: a region whose agents all stop at once
// forgets the controls (each agent's advise_only applies again); `dvms
// status` shows what every agent holds.
//
// Age. A command's time (Command.At, signed with it, and within the
// message window of its envelope's signing time) is its age: an agent
// refuses a command older than MaxAge (default 7 days), published or
// passed on, and forgets one it holds once it gets that old, so an old
// signed pause that some agent or eavesdropper kept cannot be replayed
// into the region. Passing on must outlive agent restarts, upgrades and
// a weekend without an operator (hence days, not the message window),
// but not for ever: a control meant to last longer is sent again (the
// same command, signed anew) before it expires. Every agent forgets a
// command at the same age, so the region stays agreed.

package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
)

const (
	// Republish: how often the maintenance watch re-publishes the
	// controls it holds (one message to the region, only when there are
	// controls).
	Republish = 30 * time.Second
	// AnswerJitter bounds the random delay before an agent answers
	// a state message that lacks something it holds.
	AnswerJitter = time.Second
	// DefaultMaxAge is how old a command may get (Service.MaxAge).
	DefaultMaxAge = 7 * 24 * time.Hour
	// OperatorsDir is the subdirectory of keys_dir with the operators'
	// public keys.
	OperatorsDir = "operators"
)

// Modes of `dvms mode`; ModeRegion (one host only) follows the region's.
const (
	ModeAdvise  = "advise"
	ModeEnforce = "enforce"
	ModeRegion  = "region"
)

// Operations of a control command.
const (
	OpMode    = "mode"
	OpPause   = "pause"
	OpResume  = "resume"
	OpExclude = "exclude"
	OpInclude = "include"
	// OpApprove and OpReject decide one advised plan (Command.Plan): not
	// a register; the agent holding the plan takes it (Service.Plans).
	OpApprove = "approve"
	OpReject  = "reject"
)

// Command is what an operator sends.
type Command struct {
	V  int    `json:"v"`
	ID string `json:"id"` // random: orders equal times, names the command in logs
	// At is the operator's clock when sending: the latest command of a
	// register wins.
	At   time.Time `json:"at"`
	Op   string    `json:"op"`
	Host string    `json:"host,omitempty"` // mode of one host; exclude, include
	Mode string    `json:"mode,omitempty"` // advise, enforce; region (with host)
	// Plan: the advised plan approved or rejected (its event's id).
	Plan string `json:"plan,omitempty"`
	// Reply: where agents answer (the sender's inbox); not kept.
	Reply string `json:"reply,omitempty"`
}

// Validate says what is wrong with a command.
func (c Command) Validate() error {
	switch {
	case c.V != 1:
		return fmt.Errorf("version %d", c.V)
	case c.ID == "" || c.At.IsZero():
		return errors.New("no id or time")
	case c.Host != "" && !auth.ValidHost(c.Host):
		return fmt.Errorf("host %q", c.Host)
	}
	switch c.Op {
	case OpPause, OpResume:
		if c.Host != "" {
			return fmt.Errorf("%s is region-wide: no host", c.Op)
		}
	case OpExclude, OpInclude:
		if c.Host == "" {
			return fmt.Errorf("%s needs a host", c.Op)
		}
	case OpMode:
		if c.Mode != ModeAdvise && c.Mode != ModeEnforce && !(c.Mode == ModeRegion && c.Host != "") {
			return fmt.Errorf("mode %q: want advise or enforce (region: a host follows the region's)", c.Mode)
		}
	case OpApprove, OpReject:
		if c.Plan == "" || c.Host != "" || c.Mode != "" {
			return fmt.Errorf("%s needs a plan, and no host nor mode", c.Op)
		}
	default:
		return fmt.Errorf("operation %q", c.Op)
	}
	if c.Plan != "" && c.Op != OpApprove && c.Op != OpReject {
		return fmt.Errorf("%s takes no plan", c.Op)
	}
	return nil
}

// NoPlanHere is the answer to an approve or reject of an agent that does
// not hold the plan (the agent that holds it answers with Ack.Plan set).
const NoPlanHere = "no such advised plan on this agent"

// decision: c decides a plan (not a register).
func (c Command) decision() bool { return c.Op == OpApprove || c.Op == OpReject }

// register is the one register a command sets, and the value it sets.
func (c Command) register() (key, value string) {
	switch c.Op {
	case OpPause, OpResume:
		return "paused", fmt.Sprint(c.Op == OpPause)
	case OpExclude, OpInclude:
		return "excluded/" + c.Host, fmt.Sprint(c.Op == OpExclude)
	}
	if c.Host != "" {
		return "mode/" + c.Host, c.Mode
	}
	return "mode", c.Mode
}

// after: c wins over o in a register.
func (c Command) after(o Command) bool {
	if !c.At.Equal(o.At) {
		return c.At.After(o.At)
	}
	return c.ID > o.ID
}

// record is a command an agent holds: as received (raw, passed on
// as is) and decoded.
type record struct {
	cmd Command
	by  string // the operator's key name ("" unsigned)
	raw []byte
}

// Registers are the controls one agent holds. Safe for concurrent use;
// implements node.Controls.
type Registers struct {
	mu   sync.Mutex
	recs map[string]record
	// advise is the configured advise_only: the mode while no command
	// set one.
	advise bool
	// maxAge and now (set by Service.Run; zero: no age limit): a command
	// older than maxAge no longer counts, before the sweep forgets it.
	maxAge time.Duration
	now    func() time.Time
}

// limitAge makes commands older than maxAge by now count no more.
func (c *Registers) limitAge(maxAge time.Duration, now func() time.Time) {
	c.mu.Lock()
	c.maxAge, c.now = maxAge, now
	c.mu.Unlock()
}

// expired: r is too old to count (c.mu held).
func (c *Registers) expired(r record) bool {
	return c.now != nil && c.maxAge > 0 && c.now().Sub(r.cmd.At) > c.maxAge
}

// sweep forgets the commands too old to count and returns them.
func (c *Registers) sweep() []record {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gone []record
	for _, k := range slices.Sorted(maps.Keys(c.recs)) {
		if r := c.recs[k]; c.expired(r) {
			gone = append(gone, r)
			delete(c.recs, k)
		}
	}
	return gone
}

// NewRegisters are empty registers; advise is the configured
// advise_only, the mode while no command set one.
func NewRegisters(advise bool) *Registers {
	return &Registers{recs: map[string]record{}, advise: advise}
}

// merge keeps r if it is the latest of its register; it reports whether
// the register's value changed.
func (c *Registers) merge(r record) bool {
	key, val := r.cmd.register()
	r.cmd.Reply = ""
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.recs[key]
	if ok && !r.cmd.after(old.cmd) {
		return false
	}
	c.recs[key] = r
	if !ok {
		return true
	}
	_, was := old.cmd.register()
	return was != val
}

func (c *Registers) value(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.recs[key]
	if !ok || c.expired(r) {
		return ""
	}
	_, v := r.cmd.register()
	return v
}

// Paused implements node.Controls.
func (c *Registers) Paused() bool { return c.value("paused") == "true" }

// Excluded implements node.Controls.
func (c *Registers) Excluded(host string) bool { return c.value("excluded/"+host) == "true" }

// Advise implements node.Controls: the host's mode, else the region's,
// else the configured advise_only.
func (c *Registers) Advise(host string) bool {
	if m := c.value("mode/" + host); m != "" && m != ModeRegion {
		return m == ModeAdvise
	}
	if m := c.value("mode"); m != "" {
		return m == ModeAdvise
	}
	return c.advise
}

// ahead: c holds a command newer than (or missing from) theirs.
func (c *Registers) ahead(theirs map[string]Command) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, r := range c.recs {
		if c.expired(r) {
			continue
		}
		if t, ok := theirs[k]; !ok || r.cmd.after(t) {
			return true
		}
	}
	return false
}

// raws are the commands held, as received.
func (c *Registers) raws() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([][]byte, 0, len(c.recs))
	for _, k := range slices.Sorted(maps.Keys(c.recs)) {
		out = append(out, c.recs[k].raw)
	}
	return out
}

// View is what an agent holds, for `dvms status` and answers.
type View struct {
	Paused bool `json:"paused"`
	// Mode is the region's ("" while no command set it: each agent's
	// advise_only).
	Mode      string            `json:"mode,omitempty"`
	HostModes map[string]string `json:"host_modes,omitempty"`
	Excluded  []string          `json:"excluded,omitempty"`
	// Latest is the time of the newest command held.
	Latest time.Time `json:"latest,omitzero"`
}

func (c *Registers) View() View {
	c.mu.Lock()
	defer c.mu.Unlock()
	var v View
	for _, k := range slices.Sorted(maps.Keys(c.recs)) {
		r := c.recs[k]
		if c.expired(r) {
			continue
		}
		_, val := r.cmd.register()
		switch {
		case k == "paused":
			v.Paused = val == "true"
		case k == "mode":
			v.Mode = val
		case strings.HasPrefix(k, "mode/") && val != ModeRegion:
			if v.HostModes == nil {
				v.HostModes = map[string]string{}
			}
			v.HostModes[r.cmd.Host] = val
		case strings.HasPrefix(k, "excluded/") && val == "true":
			v.Excluded = append(v.Excluded, r.cmd.Host)
		}
		if r.cmd.At.After(v.Latest) {
			v.Latest = r.cmd.At
		}
	}
	return v
}

// state is what agents pass on (ControlStateSubject).
type state struct {
	V    int    `json:"v"`
	From string `json:"from"`
	// Ask: the sender just started: agents that hold more answer.
	Ask     bool     `json:"ask,omitempty"`
	Records [][]byte `json:"records"`
}

// Ack is an agent's answer to a command.
type Ack struct {
	V        int    `json:"v"`
	ID       string `json:"id"`
	Host     string `json:"host"`
	Accepted bool   `json:"accepted"`
	Changed  bool   `json:"changed,omitempty"`
	Reason   string `json:"reason,omitempty"` // why refused
	// Plan: the plan decided (approve, reject), set by the agent that
	// holds it; its result is in Reason.
	Plan    string   `json:"plan,omitempty"`
	Control View     `json:"control"`
	Advise  bool     `json:"advise"` // this host's mode now
	Members []string `json:"members,omitempty"`
}

// Service is one agent's part of the protocol: it takes commands and
// passes on what it holds. Fields are set before Run and not changed
// after.
type Service struct {
	Region, Host string
	// Bus is the plain transport: commands carry their own signature.
	Bus bus.Transport
	// Secure: keys_dir is set, commands must be signed by an operator's
	// key in Ring (nil: keys_dir/operators has none, every command is
	// refused).
	Secure bool
	Ring   *auth.Keyring
	// Window is how old a command just published may be (the message
	// window).
	Window time.Duration
	// MaxAge is how old a command may be, published or passed on, and
	// how long an agent holds one (0: DefaultMaxAge). At least Window.
	MaxAge    time.Duration
	Registers *Registers
	Watch     func() bool     // this agent is the maintenance watch
	Members   func() []string // live members, for answers
	Apply     func()          // tell the runner (the controls changed)
	// Plans, if set, takes an approve or reject (verified: signed by the
	// operator key by, "" unsigned) and calls answer once, at once or
	// later from any goroutine, with the agent's answer (Accepted and
	// Plan set when it holds the plan); nil: refused.
	Plans   func(cmd Command, by string, answer func(Ack))
	Log     zerolog.Logger
	DropLog zerolog.Logger // rate-limited: refusals
	Now     func() time.Time
	Rand    *rand.Rand
	// expired counts the commands refused or forgotten for their age.
	expired atomic.Int64
}

// Expired is how many commands this agent refused (published or passed
// on) or forgot for their age (MaxAge).
func (s *Service) Expired() int64 { return s.expired.Load() }

func (s *Service) maxAge() time.Duration {
	if s.MaxAge > 0 {
		return s.MaxAge
	}
	return DefaultMaxAge
}

// ValidateMaxAge says what is wrong with a control_max_age beside the
// message window.
func ValidateMaxAge(maxAge, window time.Duration) error {
	if maxAge < window {
		return fmt.Errorf("control_max_age %s must be >= message_window %s", maxAge, window)
	}
	return nil
}

// sweep forgets the held commands past MaxAge (logged, counted) and
// tells the runner when the controls changed.
func (s *Service) sweep() {
	gone := s.Registers.sweep()
	for _, r := range gone {
		s.expired.Add(1)
		s.logCommand(r, "operator control expired: older than control_max_age, forgotten (send it again to keep it)", "")
	}
	if len(gone) > 0 {
		s.Apply()
	}
}

// Run serves until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	s.Registers.limitAge(s.maxAge(), s.Now)
	s.sweep()
	cmds := make(chan []byte, 64)
	states := make(chan state, 64)
	sub, err := s.Bus.Subscribe(bus.ControlSubject(s.Region), func(_ string, data []byte) {
		select {
		case cmds <- data:
		default:
			s.DropLog.Warn().Msg("operator command dropped: too many at once")
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", bus.ControlSubject(s.Region), err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	ssub, err := s.Bus.Subscribe(bus.ControlStateSubject(s.Region), func(_ string, data []byte) {
		var st state
		if json.Unmarshal(data, &st) != nil || st.V != 1 || st.From == "" {
			s.DropLog.Debug().Int("bytes", len(data)).Msg("malformed control state ignored")
			return
		}
		if st.From == s.Host {
			return
		}
		select {
		case states <- st:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", bus.ControlStateSubject(s.Region), err)
	}
	defer func() { _ = ssub.Unsubscribe() }()
	if f, ok := s.Bus.(interface{ Flush(context.Context) error }); ok {
		_ = f.Flush(ctx)
	}
	s.publishState(ctx, true)

	tick := time.NewTicker(Republish)
	defer tick.Stop()
	answer := time.NewTimer(time.Hour)
	answer.Stop()
	defer answer.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case raw := <-cmds:
			s.command(ctx, raw)
		case st := <-states:
			switch s.takeState(st) {
			case true:
				if !pending {
					pending = true
					answer.Reset(time.Duration(s.Rand.Int63n(int64(AnswerJitter))))
				}
			case false:
				if pending { // someone covered what this agent holds
					pending = false
					answer.Stop()
				}
			}
		case <-answer.C:
			pending = false
			s.publishState(ctx, false)
		case <-tick.C:
			s.sweep()
			if s.Watch() {
				s.publishState(ctx, false)
			}
		}
	}
}

func (s *Service) publishState(ctx context.Context, ask bool) {
	s.sweep() // an expired command is not passed on
	recs := s.Registers.raws()
	if len(recs) == 0 && !ask {
		return
	}
	data, _ := json.Marshal(state{V: 1, From: s.Host, Ask: ask, Records: recs})
	if err := s.Bus.Publish(ctx, bus.ControlStateSubject(s.Region), data); err != nil && ctx.Err() == nil {
		s.Log.Warn().Err(err).Msg("operator controls not passed on")
	}
}

// takeState merges what a peer passed on and reports whether this agent
// holds something newer than the peer said.
func (s *Service) takeState(st state) (ahead bool) {
	theirs := map[string]Command{}
	changed := false
	for _, raw := range st.Records {
		r, why := s.open(raw, false)
		if why == "" && r.cmd.decision() {
			why = "a plan's approval is not passed on"
		}
		if why != "" {
			by, cmd := s.peek(raw)
			s.DropLog.Warn().Str("from", st.From).Str("reason", why).Str("signer", by).Str("op", cmd.Op).Str("command", cmd.ID).
				Msg("operator command passed on by a peer refused")
			continue
		}
		k, _ := r.cmd.register()
		if t, ok := theirs[k]; !ok || r.cmd.after(t) {
			theirs[k] = r.cmd
		}
		if s.Registers.merge(r) {
			changed = true
			s.logCommand(r, "operator control learned from a peer", st.From)
		}
	}
	if changed {
		s.Apply()
	}
	return s.Registers.ahead(theirs)
}

// command takes one command an operator published.
func (s *Service) command(ctx context.Context, raw []byte) {
	r, why := s.open(raw, true)
	if why != "" {
		by, cmd := s.peek(raw)
		s.DropLog.Warn().Str("reason", why).Str("signer", by).Str("op", cmd.Op).Str("command", cmd.ID).Msg("operator command refused")
		if strings.HasPrefix(cmd.Reply, "_INBOX.") { // the sender learns why (the CLI's inbox only)
			s.reply(ctx, cmd, Ack{Reason: why})
		}
		return
	}
	if r.cmd.decision() {
		s.decide(ctx, r)
		return
	}
	changed := s.Registers.merge(r)
	if changed {
		s.logCommand(r, "operator control applied", "")
		s.Apply()
	}
	s.reply(ctx, r.cmd, Ack{Accepted: true, Changed: changed})
}

// decide hands an approve or reject to Plans.
func (s *Service) decide(ctx context.Context, r record) {
	if s.Plans == nil {
		s.reply(ctx, r.cmd, Ack{Reason: "this agent takes no plan approvals"})
		return
	}
	s.logCommand(r, "operator decision on an advised plan", "")
	s.Plans(r.cmd, r.by, func(a Ack) { s.reply(ctx, r.cmd, a) })
}

func (s *Service) logCommand(r record, msg, from string) {
	e := s.Log.Info().Str("op", r.cmd.Op).Str("operator", r.by).Str("command", r.cmd.ID).Time("at", r.cmd.At)
	if r.cmd.Host != "" {
		e = e.Str("target", r.cmd.Host)
	}
	if r.cmd.Mode != "" {
		e = e.Str("mode", r.cmd.Mode)
	}
	if r.cmd.Plan != "" {
		e = e.Str("plan", r.cmd.Plan)
	}
	if from != "" {
		e = e.Str("from", from)
	}
	e.Msg(msg)
}

func (s *Service) reply(ctx context.Context, cmd Command, a Ack) {
	if cmd.Reply == "" {
		return
	}
	a.V, a.ID, a.Host, a.Control, a.Advise, a.Members = 1, cmd.ID, s.Host, s.Registers.View(), s.Registers.Advise(s.Host), s.Members()
	data, _ := json.Marshal(a)
	if err := s.Bus.Publish(ctx, cmd.Reply, data); err != nil && ctx.Err() == nil {
		s.Log.Warn().Err(err).Msg("answer to an operator command not sent")
	}
}

// open verifies and decodes a command (live: just published, so its
// signing time must be within the message window); why says why it is
// refused ("" when it is not).
func (s *Service) open(raw []byte, live bool) (record, string) {
	payload, by := raw, ""
	var signed time.Time
	if s.Secure {
		if s.Ring == nil {
			return record{}, "no operator key on this agent (keys_dir/" + OperatorsDir + "/*.pub): operator commands are refused"
		}
		v, drop := s.Ring.Verify(bus.ControlSubject(s.Region), raw)
		switch drop {
		case "":
		case auth.DropMalformed:
			return record{}, "not signed: this region takes operator commands signed with an operator's key (--key)"
		case auth.DropUnknown:
			return record{}, fmt.Sprintf("signed by %q, which is not an operator's key (keys_dir/%s/%s%s)", v.Host, OperatorsDir, v.Host, auth.PubExt)
		default:
			return record{}, "signature of " + v.Host + ": " + drop
		}
		if d := s.Now().Sub(v.At); live && (d > s.Window || d < -s.Window) {
			return record{}, fmt.Sprintf("stale: signed %s from this agent's clock (message_window %s)", d.Round(time.Second), s.Window)
		}
		payload, by, signed = v.Payload, v.Host, v.At
	} else if h, p, ok := auth.Unverified(raw); ok {
		payload, by = p, h // unsigned region: a signature is not checked
	}
	var cmd Command
	if err := json.Unmarshal(payload, &cmd); err != nil {
		return record{}, "malformed command: " + err.Error()
	}
	if err := cmd.Validate(); err != nil {
		return record{}, "malformed command: " + err.Error()
	}
	if why := s.tooOld(cmd, signed); why != "" {
		s.expired.Add(1)
		return record{}, why
	}
	return record{cmd: cmd, by: by, raw: raw}, ""
}

// tooOld says why cmd's time refuses it ("" when it does not): its time
// is its age, so it must be its signing time (signed, zero when the
// region is unsigned) within the message window; older than MaxAge, or
// ahead of this agent's clock by more than the window (it would win its
// register, and never expire, for as long), it is refused.
func (s *Service) tooOld(cmd Command, signed time.Time) string {
	if d := cmd.At.Sub(signed); !signed.IsZero() && (d > s.Window || d < -s.Window) {
		return fmt.Sprintf("command time %s is %s from its signing time (message_window %s)", cmd.At.Format(time.RFC3339), d.Round(time.Second), s.Window)
	}
	age := s.Now().Sub(cmd.At)
	switch {
	case age > s.maxAge():
		return fmt.Sprintf("expired: sent %s ago, older than control_max_age %s (send it again)", age.Round(time.Second), s.maxAge())
	case age < -s.Window:
		return fmt.Sprintf("from the future: sent %s ahead of this agent's clock (message_window %s)", (-age).Round(time.Second), s.Window)
	}
	return ""
}

// peek reads a refused command for the log and the answer, trusting
// nothing.
func (s *Service) peek(raw []byte) (by string, cmd Command) {
	payload := raw
	if h, p, ok := auth.Unverified(raw); ok {
		by, payload = h, p
	}
	_ = json.Unmarshal(payload, &cmd)
	return by, cmd
}
