package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// fixture: hosts h1..h3 with keys in dir; a hub; h1 and h2 wrapped.
type fixture struct {
	dir     string
	hub     *bus.Hub
	signers map[string]*Signer
	keys    *Keyring
	now     time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), hub: bus.NewHub(1), signers: map[string]*Signer{}, now: t0}
	for _, h := range []string{"h1", "h2", "h3"} {
		s, err := GenerateKey(f.dir, h)
		if err != nil {
			t.Fatal(err)
		}
		f.signers[h] = s
	}
	k, err := LoadKeyring(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	f.keys = k
	return f
}

func (f *fixture) wrap(t *testing.T, host string) *Transport {
	t.Helper()
	c := DefaultConfig()
	c.Now = func() time.Time { return f.now }
	w, err := Wrap(f.hub.Transport(host), f.signers[host], f.keys, c)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

type got struct{ from, data string }

func collect(t *testing.T, w *Transport, subject string) *[]got {
	t.Helper()
	var out []got
	if _, err := w.SubscribeFrom(subject, func(_, from string, d []byte) { out = append(out, got{from, string(d)}) }); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestSignedMessageDeliveredWithSender(t *testing.T) {
	f := newFixture(t)
	a, b := f.wrap(t, "h1"), f.wrap(t, "h2")
	in := collect(t, b, "s.>")
	if err := a.Publish(context.Background(), "s.x", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	f.hub.DeliverAll(5)
	if len(*in) != 1 || (*in)[0] != (got{"h1", "hello"}) {
		t.Fatalf("delivered %+v, want one hello from h1", *in)
	}
	// Plain Subscribe gets the payload too.
	var plain []string
	_, _ = b.Subscribe("s.y", func(_ string, d []byte) { plain = append(plain, string(d)) })
	_ = a.Publish(context.Background(), "s.y", []byte("p"))
	f.hub.DeliverAll(5)
	if len(plain) != 1 || plain[0] != "p" {
		t.Fatalf("plain subscriber got %q", plain)
	}
}

// raw publishes bytes as they are, as an attacker on the bus would.
func TestForgedMessagesDropped(t *testing.T) {
	f := newFixture(t)
	a := f.wrap(t, "h1")
	legit := func(subject, payload string) []byte {
		return a.se.seal(subject, []byte(payload), f.now)
	}
	// An attacker's own key, claiming to be h1.
	evilDir := t.TempDir()
	evil, err := GenerateKey(evilDir, "h1")
	if err != nil {
		t.Fatal(err)
	}
	forged := newSealer(evil).seal("s.x", []byte("forged"), f.now)
	// A key the ring does not know ("h9").
	h9, _ := GenerateKey(evilDir, "h9")
	stranger := newSealer(h9).seal("s.x", []byte("stranger"), f.now)
	tampered := legit("s.x", "pay")
	tampered[len(tampered)-ed25519SigLen-1] ^= 1 // last payload byte
	// A sender name rewritten: the signature was over "h1".
	renamed := legit("s.x", "pay")
	renamed[len(magic)+2] = '2' // h1 -> h2
	for name, tc := range map[string]struct {
		data   []byte
		reason string
	}{
		"unsigned":           {[]byte(`{"v":1}`), DropMalformed},
		"truncated":          {legit("s.x", "pay")[:20], DropMalformed},
		"attacker key as h1": {forged, DropSignature},
		"unknown host":       {stranger, DropUnknown},
		"tampered payload":   {tampered, DropSignature},
		"sender renamed":     {renamed, DropSignature},
		"other subject":      {legit("s.other", "pay"), DropSignature},
		"too old":            {a.se.seal("s.x", []byte("old"), f.now.Add(-31*time.Second)), DropStale},
		"from the future":    {a.se.seal("s.x", []byte("new"), f.now.Add(31*time.Second)), DropStale},
	} {
		t.Run(name, func(t *testing.T) {
			b := f.wrap(t, "h2")
			var reasons []string
			b.cfg.OnDrop = func(_, _, r string, _ int64) { reasons = append(reasons, r) }
			in := collect(t, b, "s.x")
			attacker := f.hub.Transport("attacker")
			if err := attacker.Publish(context.Background(), "s.x", tc.data); err != nil {
				t.Fatal(err)
			}
			f.hub.DeliverAll(5)
			if len(*in) != 0 {
				t.Fatalf("delivered %+v", *in)
			}
			if len(reasons) != 1 || reasons[0] != tc.reason || b.Dropped()[tc.reason] != 1 {
				t.Fatalf("drop reasons %v (counters %v), want [%s]", reasons, b.Dropped(), tc.reason)
			}
		})
	}
}

const ed25519SigLen = 64

func TestReplayDroppedWithinWindowStaleAfter(t *testing.T) {
	f := newFixture(t)
	a, b := f.wrap(t, "h1"), f.wrap(t, "h2")
	in := collect(t, b, "s.x")
	msg := a.se.seal("s.x", []byte("once"), f.now)
	attacker := f.hub.Transport("attacker")
	for range 3 {
		_ = attacker.Publish(context.Background(), "s.x", msg)
	}
	f.hub.DeliverAll(5)
	if len(*in) != 1 || b.Dropped()[DropReplay] != 2 {
		t.Fatalf("delivered %d (want 1), replays dropped %d (want 2)", len(*in), b.Dropped()[DropReplay])
	}
	// Past the window the cache forgot it, and freshness refuses it.
	f.now = f.now.Add(31 * time.Second)
	_ = attacker.Publish(context.Background(), "s.x", msg)
	f.hub.DeliverAll(5)
	if len(*in) != 1 || b.Dropped()[DropStale] != 1 {
		t.Fatalf("after the window: delivered %d, stale %d", len(*in), b.Dropped()[DropStale])
	}
	// Fresh messages from the same signer still pass (distinct nonces).
	_ = a.Publish(context.Background(), "s.x", []byte("two"))
	_ = a.Publish(context.Background(), "s.x", []byte("two"))
	f.hub.DeliverAll(5)
	if len(*in) != 3 {
		t.Fatalf("two fresh identical payloads: delivered %d in all, want 3", len(*in))
	}
}

func TestVerifyOnly(t *testing.T) {
	f := newFixture(t)
	a := f.wrap(t, "h1")
	c := DefaultConfig()
	c.Now = func() time.Time { return f.now }
	v, err := Wrap(f.hub.Transport("api"), nil, f.keys, c)
	if err != nil {
		t.Fatal(err)
	}
	in := collect(t, v, "s.x")
	_ = f.hub.Transport("attacker").Publish(context.Background(), "s.x", []byte("unsigned"))
	_ = a.Publish(context.Background(), "s.x", []byte("signed"))
	f.hub.DeliverAll(5)
	if len(*in) != 1 || (*in)[0] != (got{"h1", "signed"}) || v.DroppedTotal() != 1 {
		t.Fatalf("verify-only got %+v, dropped %v", *in, v.Dropped())
	}
	if err := v.Publish(context.Background(), "s.x", nil); !errors.Is(err, ErrVerifyOnly) {
		t.Fatalf("verify-only Publish: %v", err)
	}
}

func TestSubscribeFromUnauthenticated(t *testing.T) {
	hub := bus.NewHub(1)
	var from []string
	_, _ = bus.SubscribeFrom(hub.Transport("b"), "s", func(_, f string, _ []byte) { from = append(from, f) })
	_ = hub.Transport("a").Publish(context.Background(), "s", []byte("x"))
	hub.DeliverAll(2)
	if len(from) != 1 || from[0] != "" {
		t.Fatalf("from = %q, want one unauthenticated (\"\")", from)
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := GenerateKey(dir, "compute-1")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(dir, "compute-1.key"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("seed mode %04o, want 0600", st.Mode().Perm())
	}
	if _, err := GenerateKey(dir, "compute-1"); err == nil {
		t.Fatal("GenerateKey overwrote an existing key")
	}
	l, err := LoadSigner(dir, "compute-1")
	if err != nil || l.PublicKey() != s.PublicKey() || !strings.HasPrefix(s.PublicKey(), "U") {
		t.Fatalf("LoadSigner: %v (%s vs %s)", err, l.PublicKey(), s.PublicKey())
	}
	if err := os.Chmod(filepath.Join(dir, "compute-1.key"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(dir, "compute-1"); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("group-readable seed: err = %v, want ErrKeyFile", err)
	}
	_ = os.Chmod(filepath.Join(dir, "compute-1.key"), 0o600)
	// A public key that does not match the seed.
	other, _ := GenerateKey(t.TempDir(), "x")
	_ = os.WriteFile(filepath.Join(dir, "compute-1.pub"), []byte(other.PublicKey()), 0o644)
	if _, err := LoadSigner(dir, "compute-1"); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("mismatched pub: err = %v, want ErrKeyFile", err)
	}
	for _, h := range []string{"", "../etc/x", ".hidden", "a/b", "a b"} {
		if _, err := GenerateKey(dir, h); err == nil {
			t.Fatalf("GenerateKey accepted host %q", h)
		}
	}
	if _, err := LoadKeyring(t.TempDir()); !errors.Is(err, ErrNoKey) {
		t.Fatalf("empty keys dir: err = %v, want ErrNoKey", err)
	}
	// A seed in a .pub file is refused.
	bad := t.TempDir()
	_ = os.WriteFile(filepath.Join(bad, "h.pub"), []byte("SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4"), 0o644)
	if _, err := LoadKeyring(bad); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("seed as public key: err = %v, want ErrKeyFile", err)
	}
}

// BenchmarkSealOpen is the cost of one message: sign on the sender and
// verify (with the replay check) on one receiver, for a typical 1 KiB
// payload.
func BenchmarkSealOpen(b *testing.B) {
	dir := b.TempDir()
	s, _ := GenerateKey(dir, "compute-1")
	k, _ := LoadKeyring(dir)
	w, _ := Wrap(bus.NewHub(1).Transport("x"), s, k, DefaultConfig())
	seen := newReplayCache()
	payload := make([]byte, 1024)
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		env := w.se.seal("dvms.RegionOne.agent.compute-2", payload, time.Now())
		if _, _, r := w.open("dvms.RegionOne.agent.compute-2", env, seen); r != "" {
			b.Fatal(r)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	dir := b.TempDir()
	s, _ := GenerateKey(dir, "compute-1")
	se := newSealer(s)
	payload := make([]byte, 1024)
	for b.Loop() {
		se.seal("dvms.RegionOne.agent.compute-2", payload, time.Now())
	}
}

// A kept record verifies long after it was signed (no freshness check),
// only on its subject and only with its signer's key.
func TestVerifyKeptRecord(t *testing.T) {
	f := newFixture(t)
	rec := f.signers["h1"].Seal("s.control", []byte("pause"), f.now.Add(-time.Hour))
	v, reason := f.keys.Verify("s.control", rec)
	if reason != "" || v.Host != "h1" || string(v.Payload) != "pause" || !v.At.Equal(f.now.Add(-time.Hour)) {
		t.Fatalf("Verify = %+v, %q", v, reason)
	}
	tampered := slices.Clone(rec)
	tampered[len(tampered)-ed25519SigLen-1] ^= 1
	stranger, _ := GenerateKey(t.TempDir(), "op")
	for name, tc := range map[string]struct {
		subject string
		data    []byte
		want    string
	}{
		"other subject": {"s.other", rec, DropSignature},
		"tampered":      {"s.control", tampered, DropSignature},
		"unknown key":   {"s.control", stranger.Seal("s.control", []byte("pause"), f.now), DropUnknown},
		"not signed":    {"s.control", []byte(`{"op":"pause"}`), DropMalformed},
	} {
		if _, r := f.keys.Verify(tc.subject, tc.data); r != tc.want {
			t.Errorf("%s: reason %q, want %q", name, r, tc.want)
		}
	}
	if h, p, ok := Unverified(tampered); !ok || h != "h1" || len(p) != len("pause") {
		t.Errorf("Unverified = %q %q %v", h, p, ok)
	}
}
