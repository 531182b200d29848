package auth

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dvms-project/dvms/bus"
)

// Config of a wrapped transport.
type Config struct {
	// Window is how far a message's signing time may be from the
	// receiver's clock, either way (clock skew plus delivery delay); a
	// message is remembered for as long, to refuse its replay.
	Window time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnDrop, if set, is told of every dropped message, with the count
	// of drops for that reason so far. It runs on the delivery goroutine:
	// it must not block (rate-limit logging there).
	OnDrop func(subject, sender, reason string, count int64)
}

// DefaultConfig accepts messages signed within 30 s of now.
func DefaultConfig() Config { return Config{Window: 30 * time.Second} }

// Validate lists every problem.
func (c Config) Validate() error {
	if c.Window <= 0 {
		return errors.New("auth: window must be > 0")
	}
	return nil
}

// Transport signs what it publishes as its signer's host and delivers
// only what verifies. It implements bus.Transport and bus.Authenticated;
// handlers registered with Subscribe get the payload, with SubscribeFrom
// also the verified sender. Safe for concurrent use.
type Transport struct {
	inner bus.Transport
	se    *sealer
	keys  *Keyring
	cfg   Config

	mu      sync.Mutex
	dropped map[string]*atomic.Int64
}

// ErrVerifyOnly is returned by Publish on a transport without a signer.
var ErrVerifyOnly = errors.New("auth: verify-only transport cannot publish")

// Wrap returns t signing as s and verifying against keys. With s nil the
// transport only verifies (a service that reads what agents publish, like
// `dvms scheduler-api`): Publish returns ErrVerifyOnly.
func Wrap(t bus.Transport, s *Signer, keys *Keyring, cfg Config) (*Transport, error) {
	if t == nil || keys == nil {
		return nil, errors.New("auth: transport and keyring are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Transport{inner: t, keys: keys, cfg: cfg, dropped: map[string]*atomic.Int64{}}
	if s != nil {
		w.se = newSealer(s)
	}
	for _, r := range []string{DropMalformed, DropUnknown, DropSignature, DropStale, DropReplay} {
		w.dropped[r] = &atomic.Int64{}
	}
	return w, nil
}

// Host is the host this transport signs as ("" when verify-only).
func (w *Transport) Host() string {
	if w.se == nil {
		return ""
	}
	return w.se.s.host
}

// Dropped returns the drops so far by reason (Drop* constants).
func (w *Transport) Dropped() map[string]int64 {
	out := make(map[string]int64, len(w.dropped))
	for r, c := range w.dropped {
		out[r] = c.Load()
	}
	return out
}

// DroppedTotal is the number of messages dropped so far.
func (w *Transport) DroppedTotal() int64 {
	var n int64
	for _, c := range w.dropped {
		n += c.Load()
	}
	return n
}

// Publish implements bus.Transport: data is sealed for subject.
func (w *Transport) Publish(ctx context.Context, subject string, data []byte) error {
	if w.se == nil {
		return ErrVerifyOnly
	}
	return w.inner.Publish(ctx, subject, w.se.seal(subject, data, w.cfg.Now()))
}

// Subscribe implements bus.Transport: h gets verified payloads only.
func (w *Transport) Subscribe(subject string, h bus.Handler) (bus.Subscription, error) {
	return w.SubscribeFrom(subject, func(subj, _ string, data []byte) { h(subj, data) })
}

// SubscribeFrom implements bus.Authenticated: h gets verified payloads
// with their sender's host. Each subscription remembers the nonces it
// accepted for one window, so a replay is dropped even when another
// subscription of this transport took the original.
func (w *Transport) SubscribeFrom(subject string, h bus.FromHandler) (bus.Subscription, error) {
	seen := newReplayCache()
	return w.inner.Subscribe(subject, func(subj string, data []byte) {
		sender, payload, reason := w.open(subj, data, seen)
		if reason != "" {
			n := w.dropped[reason].Add(1)
			if w.cfg.OnDrop != nil {
				w.cfg.OnDrop(subj, sender, reason, n)
			}
			return
		}
		h(subj, sender, payload)
	})
}

// open verifies data received on subject; reason is "" when it holds.
func (w *Transport) open(subject string, data []byte, seen *replayCache) (sender string, payload []byte, reason string) {
	v, reason := check(w.keys, w.cfg.Window, subject, data, w.cfg.Now(), seen)
	if reason != "" {
		return v.Host, nil, reason
	}
	return v.Host, v.Payload, ""
}

// check is what a subscription checks of an envelope received on
// subject at now: its signature (Keyring.Verify), its signing time within
// window of now (DropStale) and its nonce not seen within the window
// (DropReplay, remembered in seen). v.Host is set whenever the envelope
// names a host.
func check(keys *Keyring, window time.Duration, subject string, data []byte, now time.Time, seen *replayCache) (v Verified, reason string) {
	v, reason = keys.Verify(subject, data)
	if reason != "" {
		return v, reason
	}
	if d := now.Sub(v.At); d > window || d < -window {
		return v, DropStale
	}
	if !seen.add(v.Host, v.nonce, v.At.Add(window), now) {
		return v, DropReplay
	}
	return v, ""
}

// Opener checks envelopes as a Transport's subscription does (check),
// for a reader that signs nothing, such as the command line following
// the agents' journal updates.
type Opener struct {
	keys   *Keyring
	window time.Duration
	seen   *replayCache
}

// NewOpener checks envelopes against keys, window wide.
func NewOpener(keys *Keyring, window time.Duration) *Opener {
	return &Opener{keys: keys, window: window, seen: newReplayCache()}
}

// Open checks data received on subject at now; reason (a Drop* constant)
// is "" when it holds, and v.Host is set whenever the envelope names a
// host.
func (o *Opener) Open(subject string, data []byte, now time.Time) (v Verified, reason string) {
	return check(o.keys, o.window, subject, data, now, o.seen)
}

// Close implements bus.Transport (closes the wrapped transport).
func (w *Transport) Close() error { return w.inner.Close() }

var (
	_ bus.Transport     = (*Transport)(nil)
	_ bus.Authenticated = (*Transport)(nil)
)

// replayCache remembers accepted nonces until they would be stale anyway.
// Only verified messages enter it, so its size is bounded by the
// legitimate traffic of one window.
type replayCache struct {
	mu        sync.Mutex
	until     map[replayKey]time.Time
	nextSweep time.Time
}

type replayKey struct {
	host  string
	nonce nonce
}

func newReplayCache() *replayCache { return &replayCache{until: map[replayKey]time.Time{}} }

// add records the nonce; false if it was already there.
func (c *replayCache) add(host string, n nonce, until, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.After(c.nextSweep) {
		for k, t := range c.until {
			if now.After(t) {
				delete(c.until, k)
			}
		}
		c.nextSweep = now.Add(time.Second)
	}
	k := replayKey{host, n}
	if _, dup := c.until[k]; dup {
		return false
	}
	c.until[k] = until
	return true
}
