package scheduler

import (
	"fmt"
	"time"
)

// HoldClass sorts why an agent whose host's condition holds (an
// overload, an underload, a drain) raises no event for it (a RecHeld
// record): what `dvms explain HOST` says of a hot host left alone. Like
// EndClass, a bounded set of values.
type HoldClass string

// The hold classes.
const (
	// HoldPaused: the operator paused the region (dvms pause).
	HoldPaused HoldClass = "paused"
	// HoldExcluded: the operator excluded the host (dvms exclude).
	HoldExcluded HoldClass = "excluded"
	// HoldBackoff: the host's last event ended unsolved a moment ago; the
	// agent waits (retry_backoff, doubling to max_retry_backoff, but not
	// after a not_worth end) before raising it again.
	HoldBackoff HoldClass = "backoff"
	// HoldWindowClosed: the event kind's time window ([scheduler]
	// windows) is closed.
	HoldWindowClosed HoldClass = "window_closed"
	// HoldAdopting: the host's agent gave up on a plan's leader that had
	// moves of this host in Nova's hands; it raises nothing until Nova
	// says how they ended (fencing).
	HoldAdopting HoldClass = "adopting"
)

// held notes, once per change, why the agent raises no event for the
// condition k its samples show (hold class c; k NoEvent or c "": nothing
// holds it back, the note is forgotten). A record per change, not per
// sample: a host held back for hours records it once. Every sample comes
// here: nothing is allocated unless a record is made.
func (a *Agent) held(k EventKind, c HoldClass) {
	if k == NoEvent || c == "" {
		k, c = NoEvent, ""
	}
	if k == a.heldKind && c == a.heldClass {
		return
	}
	a.heldKind, a.heldClass = k, c
	if c == "" {
		return
	}
	a.record(Record{Kind: RecHeld, Event: Event{Kind: k, Host: a.cfg.ID, Detected: a.now}, Hold: c, Reason: a.holdReason(k, c)})
}

// holdOf is why the agent raises no event for condition k now ("" when
// nothing holds it back).
func (a *Agent) holdOf(k EventKind) HoldClass {
	switch {
	case k == NoEvent:
		return ""
	case a.paused:
		return HoldPaused
	case a.excluded:
		return HoldExcluded
	case a.adopting:
		return HoldAdopting
	case a.now.Before(a.retryAt):
		return HoldBackoff
	case !a.cfg.Windows.Open(k, a.now):
		return HoldWindowClosed
	}
	return ""
}

// holdReason says hold c of condition k in words, with the times.
func (a *Agent) holdReason(k EventKind, c HoldClass) string {
	switch c {
	case HoldPaused:
		return fmt.Sprintf("%s holds, no event raised: the region is paused by the operator (dvms resume)", k)
	case HoldExcluded:
		return fmt.Sprintf("%s holds, no event raised: %s is excluded by the operator (dvms include %s)", k, a.cfg.ID, a.cfg.ID)
	case HoldBackoff:
		return fmt.Sprintf("%s holds, no event raised: the last event ended unsolved, next try at %s (retry backoff %s)",
			k, a.retryAt.UTC().Format(time.RFC3339), a.retryAt.Sub(a.now).Round(time.Second))
	case HoldAdopting:
		return fmt.Sprintf("%s holds, no event raised: the moves of a lost leader's plan may still run in Nova; the agent follows them to their end first", k)
	case HoldWindowClosed:
		w := a.cfg.Windows.For(k)
		why := fmt.Sprintf("%s holds, no event raised: its time window (%s) is closed", k, w)
		if at, ok := w.Next(a.now); ok {
			why += ", opens at " + at.UTC().Format(time.RFC3339)
		}
		return why
	}
	return ""
}
