package journal

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// MaxEvents is how many events an agent's journal keeps (the oldest
// is forgotten first); MaxSteps bounds the steps kept per event.
const (
	MaxEvents = 100
	MaxSteps  = 32
)

// Entry is what one agent saw of one event: the agent that raised it
// has raised and ended, the leader that planned it has planned and the
// actions; `dvms events` joins the entries of every agent by ID.
type Entry struct {
	ID      string     `json:"id"`
	Kind    string     `json:"kind"`
	Host    string     `json:"host"`
	Agent   string     `json:"agent"` // the agent that kept this entry
	Raised  time.Time  `json:"raised"`
	Planned *time.Time `json:"planned,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	// Class sorts Reason (scheduler.EndClass); an older agent's entry has
	// none: readers derive it (EndClass).
	Class     string `json:"class,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Partition string `json:"partition,omitempty"`
	Size      int    `json:"size,omitempty"`
	Moves     int    `json:"moves,omitempty"`
	Leader    string `json:"leader,omitempty"` // the agent that planned it
	// PlanReason is the solver's reason for the plan.
	PlanReason string   `json:"plan_reason,omitempty"`
	Steps      []Step   `json:"steps,omitempty"`
	Actions    []Action `json:"actions,omitempty"`
	// Approval: the operator's decision on the advised plan (the latest).
	Approval *Approval `json:"approval,omitempty"`
	// seen orders entries for eviction (last change).
	seen time.Time
}

// Step is one record of the event's partition (raised, joined,
// blocked, merged, planned, dissolved, ended...).
type Step struct {
	At     time.Time `json:"at"`
	Agent  string    `json:"agent"`
	Record string    `json:"record"`
	Class  string    `json:"class,omitempty"` // scheduler.EndClass of a dissolved or event-ended record
	Reason string    `json:"reason,omitempty"`
}

// Action is one Nova action of the event's plan, as it ended.
type Action struct {
	Kind      string    `json:"kind"`
	Server    string    `json:"server"`
	From      string    `json:"from,omitempty"`
	To        string    `json:"to,omitempty"`
	Outcome   string    `json:"outcome"`
	Class     string    `json:"class,omitempty"` // node.ReasonClass: why skipped or failed
	Reason    string    `json:"reason,omitempty"`
	RequestID string    `json:"request_id,omitempty"`      // dvms's global request id (req-<uuid of the event>)
	NovaReqID string    `json:"nova_request_id,omitempty"` // Nova's own, as `openstack server event list` shows
	Ended     time.Time `json:"ended"`
	// Grant is the id of the source host's grant (node.Grant): the
	// leader's record of the action and its source agent's (which
	// follows it in Nova when it gave up on the leader) share it, and
	// Join keeps one of the two.
	Grant string `json:"grant,omitempty"`
	// Adopted: recorded by the source host's agent, which followed the
	// move of a leader it gave up on in Nova to its end.
	Adopted bool `json:"adopted,omitempty"`
}

// Journal keeps the last MaxEvents events an agent took part in,
// fed by the runner's hooks. Safe for concurrent use.
type Journal struct {
	host string
	now  func() time.Time

	// OnUpdate, if set (before the journal is fed), is told of every
	// step and action noted (`dvms events --follow`), outside the
	// journal's lock.
	OnUpdate func(Update)

	mu     sync.Mutex
	events map[string]*Entry
	parts  map[string]string // partition id -> its first event
	held   []Held            // the last MaxHeld held records
}

// New is the journal of the agent of host; now stamps what it notes.
func New(host string, now func() time.Time) *Journal {
	return &Journal{host: host, now: now, events: map[string]*Entry{}, parts: map[string]string{}}
}

// entry returns the entry of ev, created if new (evicting the oldest).
func (j *Journal) entry(ev scheduler.Event) *Entry {
	e := j.events[ev.ID]
	if e == nil {
		if len(j.events) >= MaxEvents {
			j.evict()
		}
		e = &Entry{ID: ev.ID, Kind: ev.Kind.String(), Host: ev.Host, Agent: j.host, Raised: ev.Detected}
		j.events[ev.ID] = e
	}
	return e
}

func (j *Journal) evict() {
	var oldest *Entry
	for _, e := range j.events {
		if oldest == nil || e.seen.Before(oldest.seen) {
			oldest = e
		}
	}
	delete(j.events, oldest.ID)
	for p, id := range j.parts {
		if id == oldest.ID {
			delete(j.parts, p)
		}
	}
}

// Update is one step or action of an event as it is noted.
type Update struct {
	V      int       `json:"v"`
	Agent  string    `json:"agent"`
	At     time.Time `json:"at"`
	Event  string    `json:"event"`
	Kind   string    `json:"kind"`
	Host   string    `json:"host"`
	Record string    `json:"record,omitempty"`
	Class  string    `json:"class,omitempty"` // scheduler.EndClass of a dissolved or event-ended record
	Reason string    `json:"reason,omitempty"`
	Action *Action   `json:"action,omitempty"`
}

// Record notes a record of the agent.
func (j *Journal) Record(r scheduler.Record) {
	if r.Kind == scheduler.RecHeld {
		u := j.noteHeld(r)
		if j.OnUpdate != nil {
			j.OnUpdate(u)
		}
		return
	}
	if u, ok := j.noteRecord(r); ok && j.OnUpdate != nil {
		j.OnUpdate(u)
	}
}

func (j *Journal) noteRecord(r scheduler.Record) (Update, bool) {
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	var e *Entry
	switch {
	case r.Event.ID != "":
		e = j.entry(r.Event)
		if r.Partition != "" {
			if _, ok := j.parts[r.Partition]; !ok {
				j.parts[r.Partition] = r.Event.ID
			}
		}
	case r.Partition != "":
		if id, ok := j.parts[r.Partition]; ok {
			e = j.events[id]
		}
	}
	if e == nil {
		return Update{}, false // a record of no event this agent knows (a member's view)
	}
	e.seen = now
	switch r.Kind {
	case scheduler.RecPlanned:
		e.Planned, e.Leader, e.Moves, e.PlanReason = &now, j.host, r.Moves, r.Reason
	case scheduler.RecEventEnded:
		e.Ended = &now
		e.Outcome, e.Class, e.Reason = r.Outcome.String(), string(r.Class), r.Reason
	}
	if r.Partition != "" {
		e.Partition = r.Partition
	}
	if r.Size > 0 {
		e.Size = r.Size
	}
	if len(e.Steps) < MaxSteps {
		e.Steps = append(e.Steps, Step{At: now, Agent: j.host, Record: r.Kind.String(), Class: string(r.Class), Reason: r.Reason})
	}
	return Update{V: 1, Agent: j.host, At: now, Event: e.ID, Kind: e.Kind, Host: e.Host, Record: r.Kind.String(), Class: string(r.Class), Reason: r.Reason}, true
}

// Exec notes the actions of ev's plan once it was executed.
func (j *Journal) Exec(ev scheduler.Event, res node.ExecResult) { j.exec(ev, res, false) }

// Adopted notes the moves of ev's plan that this agent granted and
// followed in Nova to their end after it gave up on their leader
// (node.Hooks.OnAdopt): each with its true outcome, and a step saying
// what the lost plan did.
func (j *Journal) Adopted(ev scheduler.Event, res node.ExecResult) {
	reason := fmt.Sprintf("the lost leader's plan, followed in Nova: %d done, %d failed, %d never sent", res.Done, res.Failed, res.Skipped)
	now := j.now()
	j.mu.Lock()
	e := j.entry(ev)
	e.seen = now
	u := Update{V: 1, Agent: j.host, At: now, Event: e.ID, Kind: e.Kind, Host: e.Host, Record: RecAdopted, Reason: reason}
	if len(e.Steps) < MaxSteps {
		e.Steps = append(e.Steps, Step{At: now, Agent: j.host, Record: RecAdopted, Reason: reason})
	}
	j.mu.Unlock()
	if j.OnUpdate != nil {
		j.OnUpdate(u)
	}
	j.exec(ev, res, true)
}

// RecAdopted is the step of an event whose lost plan's moves were
// followed to their end by their source's agent (Adopted).
const RecAdopted = "adopted"

func (j *Journal) exec(ev scheduler.Event, res node.ExecResult, adopted bool) {
	now := j.now()
	var us []Update
	j.mu.Lock()
	e := j.entry(ev)
	e.seen = now
	for _, a := range res.Actions {
		ae := Action{
			Kind: a.Action.Kind.String(), Server: a.Action.Server, From: a.Action.From, To: a.Action.To,
			Outcome: a.Outcome.String(), Class: string(a.Class), Reason: a.Reason,
			RequestID: a.Receipt.GlobalRequestID, NovaReqID: a.Receipt.LocalRequestID, Ended: now,
			Grant: a.Grant, Adopted: adopted,
		}
		e.Actions = append(e.Actions, ae)
		us = append(us, Update{V: 1, Agent: j.host, At: now, Event: e.ID, Kind: e.Kind, Host: e.Host, Action: &ae})
	}
	j.mu.Unlock()
	if j.OnUpdate != nil {
		for _, u := range us {
			j.OnUpdate(u)
		}
	}
}

// Snapshot returns copies of the entries, oldest raised first.
func (j *Journal) Snapshot() []Entry {
	j.mu.Lock()
	out := make([]Entry, 0, len(j.events))
	for _, e := range j.events {
		c := *e
		c.Steps, c.Actions = slices.Clone(e.Steps), slices.Clone(e.Actions)
		if e.Approval != nil {
			a := *e.Approval
			c.Approval = &a
		}
		out = append(out, c)
	}
	j.mu.Unlock()
	Sort(out)
	return out
}

// Sort orders entries by time raised, then event, then agent.
func Sort(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := a.Raised.Compare(b.Raised); c != 0 {
			return c
		}
		if a.ID != b.ID {
			if a.ID < b.ID {
				return -1
			}
			return 1
		}
		if a.Agent < b.Agent {
			return -1
		}
		if a.Agent > b.Agent {
			return 1
		}
		return 0
	})
}

// EndClass is the class of e's end: the one its agent recorded, or,
// for an entry of an older agent (no class), the one derived from its
// outcome and reason (scheduler.DeriveEndClass: "unknown" when its text
// says nothing known); "" while the event has not ended.
func EndClass(e Entry) string {
	if e.Outcome == "" {
		return ""
	}
	return string(scheduler.EndClass(e.Class).Of(scheduler.ParseOutcome(e.Outcome), e.Reason))
}

// Filter keeps the entries raised or changed since (zero: all), the
// newest maxN (0: all).
func Filter(es []Entry, since time.Time, maxN int) []Entry {
	if !since.IsZero() {
		es = slices.DeleteFunc(es, func(e Entry) bool { return LastChange(e).Before(since) })
	}
	if maxN > 0 && len(es) > maxN {
		es = es[len(es)-maxN:]
	}
	return es
}

// LastChange is the latest time an entry shows.
func LastChange(e Entry) time.Time {
	t := e.Raised
	for _, p := range []*time.Time{e.Planned, e.Ended} {
		if p != nil && p.After(t) {
			t = *p
		}
	}
	for _, s := range e.Steps {
		if s.At.After(t) {
			t = s.At
		}
	}
	for _, a := range e.Actions {
		if a.Ended.After(t) {
			t = a.Ended
		}
	}
	return t
}

// oncePerGrant keeps one record of each granted action (the leader's and
// its source agent's share the grant id): the one that knows how it
// ended (the leader's, unless it recorded no end in time or an unknown
// outcome and its source's agent followed it in Nova), in order.
func oncePerGrant(as []Action) []Action {
	best := map[string]int{} // grant -> index kept
	for i, a := range as {
		if a.Grant == "" || a.Grant == "local" {
			continue
		}
		k, ok := best[a.Grant]
		if !ok || knows(a) && !knows(as[k]) {
			best[a.Grant] = i
		}
	}
	out := make([]Action, 0, len(as))
	for i, a := range as {
		if k, ok := best[a.Grant]; !ok || k == i {
			out = append(out, a)
		}
	}
	return out
}

// knows: the record says how the action ended (not an unknown outcome).
func knows(a Action) bool { return a.Class != string(node.ReasonTimeout) }

// Join merges the entries of each event kept by several agents (the
// raising agent has raised/ended, the leader planned/actions), oldest
// raised first; an older agent's entry gets its end class derived.
func Join(lists ...[]Entry) []Entry {
	byID := map[string]*Entry{}
	var order []string
	for _, l := range lists {
		for _, e := range l {
			j, ok := byID[e.ID]
			if !ok {
				c := e
				c.Steps, c.Actions = slices.Clone(e.Steps), slices.Clone(e.Actions)
				byID[e.ID] = &c
				order = append(order, e.ID)
				continue
			}
			if j.Raised.IsZero() || (!e.Raised.IsZero() && e.Raised.Before(j.Raised)) {
				j.Raised = e.Raised
			}
			if e.Planned != nil && (j.Planned == nil || e.Planned.After(*j.Planned)) {
				j.Planned, j.Leader, j.Moves, j.PlanReason = e.Planned, e.Leader, e.Moves, e.PlanReason
			}
			if e.Ended != nil && (j.Ended == nil || e.Ended.After(*j.Ended)) {
				j.Ended, j.Outcome, j.Class, j.Reason = e.Ended, e.Outcome, e.Class, e.Reason
			}
			if e.Host == e.Agent { // the raising agent's view of the partition
				j.Partition, j.Size = e.Partition, e.Size
			}
			if e.Approval != nil && (j.Approval == nil || e.Approval.At.After(j.Approval.At)) {
				j.Approval = e.Approval
			}
			j.Steps = append(j.Steps, e.Steps...)
			j.Actions = append(j.Actions, e.Actions...)
		}
	}
	out := make([]Entry, 0, len(order))
	for _, id := range order {
		e := byID[id]
		slices.SortStableFunc(e.Steps, func(a, b Step) int { return a.At.Compare(b.At) })
		slices.SortStableFunc(e.Actions, func(a, b Action) int { return a.Ended.Compare(b.Ended) })
		e.Actions = oncePerGrant(e.Actions)
		e.Class = EndClass(*e) // an older agent's entry has none
		out = append(out, *e)
	}
	Sort(out)
	return out
}

// State is the event's outcome, or where it stands while it has none
// ("executing" once planned, else "in progress").
func (e Entry) State() string {
	switch {
	case e.Outcome != "":
		return e.Outcome
	case e.Planned != nil:
		return "executing"
	}
	return "in progress"
}

// Decided says an operator approved or rejected the event's advised plan
// (a refused approval leaves it undecided: the operator may reject it).
func (e Entry) Decided() bool {
	return e.Approval != nil && (e.Approval.State == Approved || e.Approval.State == Rejected)
}

// Touching keeps the events of host and those that moved servers from or
// to it (all of them for host ""); it reuses es.
func Touching(es []Entry, host string) []Entry {
	if host == "" {
		return es
	}
	return slices.DeleteFunc(es, func(e Entry) bool {
		if e.Host == host {
			return false
		}
		for _, a := range e.Actions {
			if a.From == host || a.To == host {
				return false
			}
		}
		return true
	})
}
