package journal

import (
	"slices"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// MaxHeld is how many held records (RecHeld) an agent's journal keeps.
const MaxHeld = 20

// Held is an agent's record that its host's condition held but it raised
// no event (scheduler.RecHeld): `dvms explain HOST` for a hot host left
// alone.
type Held struct {
	At     time.Time `json:"at"`
	Agent  string    `json:"agent"`
	Host   string    `json:"host"`
	Kind   string    `json:"kind"`  // the condition: overload, underload, maintenance
	Class  string    `json:"class"` // scheduler.HoldClass
	Reason string    `json:"reason"`
}

// Approval is an operator's decision on an advised plan (`dvms plans
// approve|reject`), as the agent holding the plan took it.
type Approval struct {
	At time.Time `json:"at"`
	// State: approved (re-checked, executed), rejected (dropped) or
	// refused (the re-check found the cloud changed: nothing sent).
	State    string `json:"state"`
	Operator string `json:"operator,omitempty"` // the operator key's name ("" unsigned)
	Command  string `json:"command"`            // the command's id
	Reason   string `json:"reason,omitempty"`
}

// Approval states.
const (
	Approved = "approved"
	Rejected = "rejected"
	Refused  = "refused"
)

func (j *Journal) noteHeld(r scheduler.Record) Update {
	now := j.now()
	h := Held{At: now, Agent: j.host, Host: r.Event.Host, Kind: r.Event.Kind.String(), Class: string(r.Hold), Reason: r.Reason}
	j.mu.Lock()
	j.held = append(j.held, h)
	if len(j.held) > MaxHeld {
		j.held = slices.Delete(j.held, 0, len(j.held)-MaxHeld)
	}
	j.mu.Unlock()
	return Update{V: 1, Agent: j.host, At: now, Kind: h.Kind, Host: h.Host, Record: r.Kind.String(), Class: h.Class, Reason: h.Reason}
}

// Held returns the held records kept, oldest first.
func (j *Journal) Held() []Held {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.held)
}

// Decide notes an operator's decision on the plan of ev (a step of its
// entry, and its Approval).
func (j *Journal) Decide(ev scheduler.Event, a Approval) {
	now := j.now()
	a.At = now
	j.mu.Lock()
	e := j.entry(ev)
	e.seen = now
	c := a
	e.Approval = &c
	reason := a.Reason
	if a.Operator != "" {
		reason = "by " + a.Operator + ": " + reason
	}
	if len(e.Steps) < MaxSteps {
		e.Steps = append(e.Steps, Step{At: now, Agent: j.host, Record: "plan-" + a.State, Reason: reason})
	}
	u := Update{V: 1, Agent: j.host, At: now, Event: e.ID, Kind: e.Kind, Host: e.Host, Record: "plan-" + a.State, Reason: reason}
	j.mu.Unlock()
	if j.OnUpdate != nil {
		j.OnUpdate(u)
	}
}

// FilterHeld keeps the held records at or after since (zero: all).
func FilterHeld(hs []Held, since time.Time) []Held {
	if since.IsZero() {
		return hs
	}
	return slices.DeleteFunc(hs, func(h Held) bool { return h.At.Before(since) })
}
