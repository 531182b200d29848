package status

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/scheduler/journal"
)

// UpdateReader opens the journal updates the agents publish on the
// region's events subject (bus.EventsSubject), which `dvms events
// --follow` prints. An agent with keys_dir signs its updates with its
// own key, as its status answers. With Keys set, an update is taken only
// when the key of the agent it names signed it for that subject, within
// Window of the reader's clock, and only once: one stolen key cannot
// speak for every agent, and an old update passed on again is not shown
// as news. Without Keys, updates are taken as they come, signed or not
// (nothing verified). Safe for concurrent use.
type UpdateReader struct {
	Keys *auth.Keyring
	// Window: an update signed further than this from the reader's
	// clock is dropped (0: DefaultUpdateWindow).
	Window time.Duration

	once   sync.Once
	opener *auth.Opener // the agents' own checks (auth.Opener), with Keys
	window time.Duration
}

// DefaultUpdateWindow is the agents' own freshness window for signed
// messages (auth.DefaultConfig).
var DefaultUpdateWindow = auth.DefaultConfig().Window

// Open is the update in data received on subject at now; reason says
// why it is dropped ("" when taken).
func (r *UpdateReader) Open(subject string, data []byte, now time.Time) (u journal.Update, reason string) {
	payload := data
	if r.Keys == nil {
		if _, p, ok := auth.Unverified(data); ok {
			payload = p
		}
		return decodeUpdate(payload)
	}
	r.once.Do(func() {
		r.window = r.Window
		if r.window <= 0 {
			r.window = DefaultUpdateWindow
		}
		r.opener = auth.NewOpener(r.Keys, r.window)
	})
	v, why := r.opener.Open(subject, data, now)
	switch why {
	case "":
	case auth.DropStale:
		return u, fmt.Sprintf("signed by %s at %s, not within %s of now: an old update passed on", v.Host, v.At.UTC().Format(time.RFC3339), r.window)
	case auth.DropReplay:
		return u, fmt.Sprintf("update of %s already shown (passed on again)", v.Host)
	default:
		if v.Host == "" {
			return u, "not signed (an agent without keys_dir, an older agent, or a forger)"
		}
		return u, fmt.Sprintf("signature of %s does not hold (%s)", v.Host, why)
	}
	if u, why = decodeUpdate(v.Payload); why != "" {
		return u, why
	}
	if u.Agent != v.Host {
		return journal.Update{}, fmt.Sprintf("update of %s signed by %s", u.Agent, v.Host)
	}
	return u, ""
}

// decodeUpdate is the journal update in payload ("malformed" if it is
// none).
func decodeUpdate(payload []byte) (u journal.Update, reason string) {
	if json.Unmarshal(payload, &u) != nil || u.V != 1 || u.Agent == "" {
		return journal.Update{}, "malformed"
	}
	return u, ""
}
