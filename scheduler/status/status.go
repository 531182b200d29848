// Package status is the agents' status protocol: every agent answers
// the requests published on its region's status subject (bus.StatusSubject) with a report of
// itself: state, partition, members as it hears them, and its journal.
// `dvms status` and `dvms events` publish one request and gather the
// answers. Plain publish / reply-subject over the bus, not nats.go's micro
// framework: the agent talks to NATS only through bus.Transport (which
// also runs on the in-memory hub), and the CLI must gather every agent's
// answer anyway, which micro's request-reply does not do.
//
// It must not import the command line (cmd/) or the agent's assembly
// (scheduler/agentd), which fills a Report.
package status

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/journal"
	"github.com/dvms-project/dvms/scheduler/node"
)

// Request asks every agent of the region for its report.
type Request struct {
	V     int    `json:"v"`
	Reply string `json:"reply"` // subject the answers go to
	// Since: only events raised or changed at or after it (zero: all).
	Since time.Time `json:"since,omitzero"`
	// MaxEvents: at most this many of the newest events (0: all kept).
	MaxEvents int `json:"max_events,omitempty"`
}

// Report is one agent's answer.
type Report struct {
	V           int             `json:"v"`
	Host        string          `json:"host"`
	Site        string          `json:"site,omitempty"`
	Version     string          `json:"version"`
	Incarnation string          `json:"incarnation"`
	Started     time.Time       `json:"started"`
	Now         time.Time       `json:"now"`
	State       string          `json:"state"`    // free, member, leader, stopping
	Advise      bool            `json:"advise"`   // this host's mode now (scheduler/control)
	Excluded    bool            `json:"excluded"` // this host is excluded by the operator
	Control     control.View    `json:"control"`  // the operators' controls this agent holds
	Watch       bool            `json:"maintenance_watch"`
	Partition   *PartitionInfo  `json:"partition,omitempty"`
	Arbiter     *ArbiterInfo    `json:"arbiter,omitempty"`
	Members     []MemberInfo    `json:"members"`
	Demand      *DemandInfo     `json:"demand,omitempty"`  // the demand source's view of its host
	Windows     []WindowInfo    `json:"windows,omitempty"` // event kinds with a time window (none: always open)
	Events      []journal.Entry `json:"events"`
	// Held: the agent's host's conditions that raised no event, and why
	// (the latest journal.MaxHeld).
	Held []journal.Held `json:"held,omitempty"`
	// Oscillations: the oscillations this agent detected within its
	// [scheduler] oscillation_window (scheduler/oscillation).
	Oscillations int `json:"oscillations"`
	Truncated    int `json:"truncated,omitempty"` // events left out to fit a NATS message
}

// PartitionInfo is the partition an agent is in.
type PartitionInfo struct {
	ID        string    `json:"id"`
	Initiator string    `json:"initiator"`
	Leader    string    `json:"leader"`
	Nodes     []string  `json:"members"`
	State     string    `json:"state"`
	Event     string    `json:"event,omitempty"`
	EventKind string    `json:"event_kind,omitempty"`
	Detected  time.Time `json:"detected,omitzero"`
}

// DemandInfo is what the agent's demand source says of its coverage
// (sources that map guests to servers themselves: cgroup).
type DemandInfo struct {
	Source string `json:"source"`
	cgroup.Coverage
}

// String is the status column: "cgroup 3/4", "cgroup BLIND 0/4".
func (d *DemandInfo) String() string {
	if d == nil {
		return ""
	}
	if d.Listed < 0 {
		return d.Source + " (no listing yet)"
	}
	if d.Blind {
		return fmt.Sprintf("%s BLIND %d/%d", d.Source, d.Measured, d.Listed)
	}
	return fmt.Sprintf("%s %d/%d", d.Source, d.Measured, d.Listed)
}

// WindowInfo is the time window of one event kind (scheduler.Windows)
// at the report's time.
type WindowInfo struct {
	Kind   string    `json:"kind"`
	Window string    `json:"window"` // as configured
	Open   bool      `json:"open"`
	Next   time.Time `json:"next,omitzero"` // when it next opens or closes (zero: not within 8 days)
}

// WindowsOf are w's kinds that are not always open, at now.
func WindowsOf(w scheduler.Windows, now time.Time) []WindowInfo {
	var out []WindowInfo
	for _, k := range []scheduler.EventKind{scheduler.Overload, scheduler.Underload, scheduler.Maintenance} {
		win := w.For(k)
		if win.Always() {
			continue
		}
		next, _ := win.Next(now)
		out = append(out, WindowInfo{Kind: k.String(), Window: win.String(), Open: win.Open(now), Next: next})
	}
	return out
}

// String is the status column: "underload closed until 21:00Z".
func (w WindowInfo) String() string {
	state := "closed"
	if w.Open {
		state = "open"
	}
	if w.Next.IsZero() {
		return w.Kind + " " + state
	}
	return w.Kind + " " + state + " until " + w.Next.UTC().Format("Mon 15:04Z")
}

// ArbiterInfo is what an agent knows of its region's merge arbiter.
type ArbiterInfo struct {
	Kind   string   `json:"kind"` // raft or local
	Voter  bool     `json:"voter"`
	Leader string   `json:"leader,omitempty"`
	Voters []string `json:"voters,omitempty"`
	// Term is the Raft term as this agent's node knows it (0: it runs
	// no raft node, or the arbiter is local).
	Term uint64 `json:"term,omitempty"`
}

// MemberInfo is a member as an agent hears it.
type MemberInfo struct {
	Host      string    `json:"host"`
	Site      string    `json:"site,omitempty"`
	Version   string    `json:"version,omitempty"`
	LastHeard time.Time `json:"last_heard"`
}

// MaxReport bounds an answer (NATS's default max_payload is 1 MiB).
const MaxReport = 512 << 10

// Service answers status requests for one agent.
type Service struct {
	Region string
	Bus    bus.Transport // plain: `dvms status` has no key
	// Signed, if set, publishes the answers sealed with the agent's own
	// key (bus/auth): `dvms status --keys-dir` takes an answer only when
	// the key of the host it reports on signed it for that request's
	// reply subject, so one stolen key cannot pose as every agent.
	Signed bus.Transport
	Log    zerolog.Logger
	// Answer is this agent's report for a request; called from Run's
	// goroutine.
	Answer func(req Request) Report
}

// Run subscribes and answers until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	reqs := make(chan Request, 16)
	sub, err := s.Bus.Subscribe(bus.StatusSubject(s.Region), func(_ string, data []byte) {
		var r Request
		if err := json.Unmarshal(data, &r); err != nil || r.V != 1 || r.Reply == "" {
			s.Log.Debug().Int("bytes", len(data)).Msg("malformed status request ignored")
			return
		}
		select {
		case reqs <- r:
		default: // a burst of requests: the CLI times out on this one
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", bus.StatusSubject(s.Region), err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-reqs:
			data := Encode(s.Answer(r))
			out := s.Bus
			if s.Signed != nil {
				out = s.Signed
			}
			if err := out.Publish(ctx, r.Reply, data); err != nil && ctx.Err() == nil {
				s.Log.Warn().Err(err).Msg("status answer not sent")
			}
		}
	}
}

// Encode marshals rep, leaving out its oldest events until it fits
// MaxReport.
func Encode(rep Report) []byte {
	for {
		data, _ := json.Marshal(rep)
		if len(data) <= MaxReport || len(rep.Events) == 0 {
			return data
		}
		drop := max(1, len(rep.Events)/4)
		rep.Events = rep.Events[drop:]
		rep.Truncated += drop
	}
}

// StateOf names what the agent is doing.
func StateOf(host string, p *scheduler.Partition, stopping bool) string {
	switch {
	case stopping:
		return "stopping"
	case p == nil:
		return "free"
	case p.Leader == host:
		return "leader"
	}
	return "member"
}

// PartitionOf is p for a report (nil: in none).
func PartitionOf(p *scheduler.Partition) *PartitionInfo {
	if p == nil {
		return nil
	}
	pi := &PartitionInfo{ID: p.ID, Initiator: p.Initiator, Leader: p.Leader, Nodes: slices.Clone(p.Nodes), State: p.State.String()}
	if len(p.Events) > 0 {
		pi.Event, pi.EventKind, pi.Detected = p.Events[0].ID, p.Events[0].Kind.String(), p.Events[0].Detected
	}
	return pi
}

// MembersOf are ms for a report.
func MembersOf(ms []node.Member) []MemberInfo {
	out := make([]MemberInfo, 0, len(ms))
	for _, m := range ms {
		out = append(out, MemberInfo{Host: m.Host, Site: m.Site, Version: m.Version, LastHeard: m.Seen})
	}
	return out
}

// ---- the CLI side ----

// GatherConfig says how long to wait for the agents' answers.
type GatherConfig struct {
	Region string
	// Timeout bounds the wait; it ends earlier once every member any
	// answer lists has answered.
	Timeout time.Duration
	Since   time.Time
	Max     int
	// Keys, if set, are the agents' public keys: an answer is taken only
	// when it is signed for this request by the key of the host it
	// reports on (an agent of this version with keys_dir); others are
	// dropped and told to OnDrop. Nil: answers are taken as they come,
	// signed or not (nothing verified).
	Keys   *auth.Keyring
	OnDrop func(host, reason string)
}

// openAnswer is the report in an answer received on inbox: verified
// against keys (nil: unverified, an envelope only unwrapped); reason
// says why it is dropped ("" when taken).
func openAnswer(keys *auth.Keyring, inbox string, data []byte) (r Report, reason string) {
	payload := data
	signer := ""
	if keys != nil {
		v, why := keys.Verify(inbox, data)
		if why != "" {
			if v.Host == "" {
				return r, "not signed (an agent without keys_dir, an older agent, or a forger)"
			}
			return r, fmt.Sprintf("signature of %s does not hold (%s)", v.Host, why)
		}
		payload, signer = v.Payload, v.Host
	} else if _, p, ok := auth.Unverified(data); ok {
		payload = p
	}
	if json.Unmarshal(payload, &r) != nil || r.V != 1 || r.Host == "" {
		return Report{}, "malformed"
	}
	if keys != nil && r.Host != signer {
		return Report{}, fmt.Sprintf("report on %s signed by %s", r.Host, signer)
	}
	return r, ""
}

// ErrNoAgent: no agent answered within the timeout.
var ErrNoAgent = errors.New("no dvms agent answered (is --nats-url the agents' NATS, --region their region?)")

// Gather asks every agent of the region for its report.
func Gather(ctx context.Context, tr bus.Transport, gc GatherConfig) ([]Report, error) {
	got, err := gatherFrom(ctx, tr, gc.Timeout, bus.StatusSubject(gc.Region), func(inbox string) []byte {
		req, _ := json.Marshal(Request{V: 1, Reply: inbox, Since: gc.Since, MaxEvents: gc.Max})
		return req
	}, func(inbox string, data []byte) (r Report, host string, members []string, ok bool) {
		r, why := openAnswer(gc.Keys, inbox, data)
		if why != "" {
			if gc.OnDrop != nil {
				h, _, _ := auth.Unverified(data)
				gc.OnDrop(h, why)
			}
			return r, "", nil, false
		}
		for _, m := range r.Members {
			members = append(members, m.Host)
		}
		return r, r.Host, members, true
	})
	if err != nil {
		return nil, err
	}
	out := make([]Report, 0, len(got))
	for _, h := range slices.Sorted(maps.Keys(got)) {
		out = append(out, got[h])
	}
	return out, nil
}

// GatherAnswers publishes the request req builds (given the reply
// subject) on subject and collects the agents' answers, by host, until
// every member any answer lists has answered or timeout passed; decode
// returns an answer's host and the members it lists (ok false: ignored).
// No answer at all is ErrNoAgent.
func GatherAnswers[T any](ctx context.Context, tr bus.Transport, timeout time.Duration, subject string,
	req func(inbox string) []byte, decode func([]byte) (T, string, []string, bool)) (map[string]T, error) {
	return gatherFrom(ctx, tr, timeout, subject, req, func(_ string, data []byte) (T, string, []string, bool) { return decode(data) })
}

// gatherFrom is GatherAnswers whose decode is told the reply subject
// (an answer signed for it).
func gatherFrom[T any](ctx context.Context, tr bus.Transport, timeout time.Duration, subject string,
	req func(inbox string) []byte, decode func(inbox string, data []byte) (T, string, []string, bool)) (map[string]T, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	inbox := bus.InboxFor(tr) + hex.EncodeToString(b)
	var mu sync.Mutex
	got := map[string]T{}
	lists := map[string][]string{}
	changed := make(chan struct{}, 1)
	sub, err := tr.Subscribe(inbox, func(subj string, data []byte) {
		v, host, members, ok := decode(subj, data)
		if !ok {
			return
		}
		mu.Lock()
		got[host], lists[host] = v, members
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if f, ok := tr.(interface{ Flush(context.Context) error }); ok {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := f.Flush(fctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("nats: %w", err)
		}
	}
	if err := tr.Publish(ctx, subject, req(inbox)); err != nil {
		return nil, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	result := func() (map[string]T, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return nil, ErrNoAgent
		}
		return maps.Clone(got), nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return result()
		case <-changed:
			mu.Lock()
			done := allAnswered(lists)
			mu.Unlock()
			if done {
				return result()
			}
		}
	}
}

// SendControl publishes an operator's command on region's control
// subject, with a fresh inbox as its Reply and sealed by seal (nil:
// unsigned), and gathers the agents' acks of it (same id) by host, as
// GatherAnswers: until every host of expect has answered, or (expect nil)
// every member an ack lists, or timeout passed. It lives here, not in
// package control, because this package imports control.
func SendControl(ctx context.Context, tr bus.Transport, timeout time.Duration, region string, cmd control.Command,
	seal func(subject string, data []byte) []byte, expect []string) (map[string]control.Ack, error) {
	subject := bus.ControlSubject(region)
	return GatherAnswers(ctx, tr, timeout, subject, func(inbox string) []byte {
		cmd.Reply = inbox
		data, _ := json.Marshal(cmd) // plain fields: cannot fail
		if seal != nil {
			return seal(subject, data)
		}
		return data
	}, func(data []byte) (a control.Ack, host string, members []string, ok bool) {
		if json.Unmarshal(data, &a) != nil || a.V != 1 || a.Host == "" || a.ID != cmd.ID {
			return a, "", nil, false
		}
		if expect != nil {
			return a, a.Host, expect, true
		}
		return a, a.Host, a.Members, true
	})
}

// allAnswered: every member any answer lists has answered.
func allAnswered(lists map[string][]string) bool {
	for _, ms := range lists {
		for _, m := range ms {
			if _, ok := lists[m]; !ok {
				return false
			}
		}
	}
	return len(lists) > 0
}

// Events merges the agents' entries of each event (journal.Join), as the
// operator commands show them.
func Events(reps []Report) []journal.Entry {
	lists := make([][]journal.Entry, 0, len(reps))
	for _, r := range reps {
		lists = append(lists, r.Events)
	}
	return journal.Join(lists...)
}
