package status

import (
	"crypto/sha256"
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

	mu   sync.Mutex
	seen map[[sha256.Size]byte]time.Time
}

// DefaultUpdateWindow is the agents' own freshness window for signed
// messages (auth.DefaultConfig).
var DefaultUpdateWindow = auth.DefaultConfig().Window

// Open is the update in data received on subject at now; reason says
// why it is dropped ("" when taken).
func (r *UpdateReader) Open(subject string, data []byte, now time.Time) (u journal.Update, reason string) {
	payload := data
	signer := ""
	if r.Keys != nil {
		v, why := r.Keys.Verify(subject, data)
		if why != "" {
			if v.Host == "" {
				return u, "not signed (an agent without keys_dir, an older agent, or a forger)"
			}
			return u, fmt.Sprintf("signature of %s does not hold (%s)", v.Host, why)
		}
		window := r.window()
		if d := now.Sub(v.At); d > window || d < -window {
			return u, fmt.Sprintf("signed by %s at %s, not within %s of now: an old update passed on", v.Host, v.At.UTC().Format(time.RFC3339), window)
		}
		payload, signer = v.Payload, v.Host
	} else if _, p, ok := auth.Unverified(data); ok {
		payload = p
	}
	if json.Unmarshal(payload, &u) != nil || u.V != 1 || u.Agent == "" {
		return journal.Update{}, "malformed"
	}
	if r.Keys != nil && u.Agent != signer {
		return journal.Update{}, fmt.Sprintf("update of %s signed by %s", u.Agent, signer)
	}
	if r.Keys != nil && !r.firstTime(sha256.Sum256(data), now, r.window()) {
		return journal.Update{}, fmt.Sprintf("update of %s already shown (passed on again)", signer)
	}
	return u, ""
}

func (r *UpdateReader) window() time.Duration {
	if r.Window <= 0 {
		return DefaultUpdateWindow
	}
	return r.Window
}

// firstTime notes an envelope and says whether it is new; envelopes are
// forgotten two windows after they were seen (older ones are stale).
func (r *UpdateReader) firstTime(sum [sha256.Size]byte, now time.Time, window time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[[sha256.Size]byte]time.Time{}
	}
	for k, at := range r.seen {
		if now.Sub(at) > 2*window {
			delete(r.seen, k)
		}
	}
	if _, ok := r.seen[sum]; ok {
		return false
	}
	r.seen[sum] = now
	return true
}
