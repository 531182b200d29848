package main

import (
	"slices"
	"sync"
	"time"

	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
)

// journalEvents is how many events an agent's journal keeps (the oldest
// is forgotten first); journalSteps bounds the steps kept per event.
const (
	journalEvents = 100
	journalSteps  = 32
)

// eventEntry is what one agent saw of one event: the agent that raised it
// has raised and ended, the leader that planned it has planned and the
// actions; `dvms events` joins the entries of every agent by ID.
type eventEntry struct {
	ID      string     `json:"id"`
	Kind    string     `json:"kind"`
	Host    string     `json:"host"`
	Agent   string     `json:"agent"` // the agent that kept this entry
	Raised  time.Time  `json:"raised"`
	Planned *time.Time `json:"planned,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	// Class sorts Reason (scheduler.EndClass); an older agent's entry has
	// none: readers derive it (endClassOf).
	Class     string `json:"class,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Partition string `json:"partition,omitempty"`
	Size      int    `json:"size,omitempty"`
	Moves     int    `json:"moves,omitempty"`
	Leader    string `json:"leader,omitempty"` // the agent that planned it
	// PlanReason is the solver's reason for the plan.
	PlanReason string        `json:"plan_reason,omitempty"`
	Steps      []eventStep   `json:"steps,omitempty"`
	Actions    []actionEntry `json:"actions,omitempty"`
	// seen orders entries for eviction (last change).
	seen time.Time
}

// eventStep is one record of the event's partition (raised, joined,
// blocked, merged, planned, dissolved, ended...).
type eventStep struct {
	At     time.Time `json:"at"`
	Agent  string    `json:"agent"`
	Record string    `json:"record"`
	Class  string    `json:"class,omitempty"` // scheduler.EndClass of a dissolved or event-ended record
	Reason string    `json:"reason,omitempty"`
}

// actionEntry is one Nova action of the event's plan, as it ended.
type actionEntry struct {
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
}

// journal keeps the last journalEvents events an agent took part in,
// fed by the runner's hooks. Safe for concurrent use.
type journal struct {
	host string
	now  func() time.Time

	// onUpdate, if set, is told of every step and action noted (`dvms
	// events --follow`), outside the journal's lock.
	onUpdate func(followUpdate)

	mu     sync.Mutex
	events map[string]*eventEntry
	parts  map[string]string // partition id -> its first event
}

func newJournal(host string, now func() time.Time) *journal {
	return &journal{host: host, now: now, events: map[string]*eventEntry{}, parts: map[string]string{}}
}

// entry returns the entry of ev, created if new (evicting the oldest).
func (j *journal) entry(ev scheduler.Event) *eventEntry {
	e := j.events[ev.ID]
	if e == nil {
		if len(j.events) >= journalEvents {
			j.evict()
		}
		e = &eventEntry{ID: ev.ID, Kind: ev.Kind.String(), Host: ev.Host, Agent: j.host, Raised: ev.Detected}
		j.events[ev.ID] = e
	}
	return e
}

func (j *journal) evict() {
	var oldest *eventEntry
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

// followUpdate is one step or action of an event as it is noted.
type followUpdate struct {
	V      int          `json:"v"`
	Agent  string       `json:"agent"`
	At     time.Time    `json:"at"`
	Event  string       `json:"event"`
	Kind   string       `json:"kind"`
	Host   string       `json:"host"`
	Record string       `json:"record,omitempty"`
	Class  string       `json:"class,omitempty"` // scheduler.EndClass of a dissolved or event-ended record
	Reason string       `json:"reason,omitempty"`
	Action *actionEntry `json:"action,omitempty"`
}

// record notes a record of the agent.
func (j *journal) record(r scheduler.Record) {
	if u, ok := j.noteRecord(r); ok && j.onUpdate != nil {
		j.onUpdate(u)
	}
}

func (j *journal) noteRecord(r scheduler.Record) (followUpdate, bool) {
	now := j.now()
	j.mu.Lock()
	defer j.mu.Unlock()
	var e *eventEntry
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
		return followUpdate{}, false // a record of no event this agent knows (a member's view)
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
	if len(e.Steps) < journalSteps {
		e.Steps = append(e.Steps, eventStep{At: now, Agent: j.host, Record: r.Kind.String(), Class: string(r.Class), Reason: r.Reason})
	}
	return followUpdate{V: 1, Agent: j.host, At: now, Event: e.ID, Kind: e.Kind, Host: e.Host, Record: r.Kind.String(), Class: string(r.Class), Reason: r.Reason}, true
}

// exec notes the actions of ev's plan once it was executed.
func (j *journal) exec(ev scheduler.Event, res node.ExecResult) {
	now := j.now()
	var us []followUpdate
	j.mu.Lock()
	e := j.entry(ev)
	e.seen = now
	for _, a := range res.Actions {
		ae := actionEntry{
			Kind: a.Action.Kind.String(), Server: a.Action.Server, From: a.Action.From, To: a.Action.To,
			Outcome: a.Outcome.String(), Class: string(a.Class), Reason: a.Reason,
			RequestID: a.Receipt.GlobalRequestID, NovaReqID: a.Receipt.LocalRequestID, Ended: now,
		}
		e.Actions = append(e.Actions, ae)
		us = append(us, followUpdate{V: 1, Agent: j.host, At: now, Event: e.ID, Kind: e.Kind, Host: e.Host, Action: &ae})
	}
	j.mu.Unlock()
	if j.onUpdate != nil {
		for _, u := range us {
			j.onUpdate(u)
		}
	}
}

// snapshot returns copies of the entries, oldest raised first.
func (j *journal) snapshot() []eventEntry {
	j.mu.Lock()
	out := make([]eventEntry, 0, len(j.events))
	for _, e := range j.events {
		c := *e
		c.Steps, c.Actions = slices.Clone(e.Steps), slices.Clone(e.Actions)
		out = append(out, c)
	}
	j.mu.Unlock()
	sortEntries(out)
	return out
}

func sortEntries(es []eventEntry) {
	slices.SortFunc(es, func(a, b eventEntry) int {
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

// endClassOf is the class of e's end: the one its agent recorded, or,
// for an entry of an older agent (no class), the one derived from its
// outcome and reason (scheduler.DeriveEndClass: "unknown" when its text
// says nothing known); "" while the event has not ended.
func endClassOf(e eventEntry) string {
	if e.Outcome == "" {
		return ""
	}
	return string(scheduler.EndClass(e.Class).Of(scheduler.ParseOutcome(e.Outcome), e.Reason))
}
