package auth

import (
	"bytes"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
)

// FuzzOpen: whatever bytes arrive, opening never panics, and nothing but
// the envelope h1 sealed verifies.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	s, err := GenerateKey(dir, "h1")
	if err != nil {
		f.Fatal(err)
	}
	k, _ := LoadKeyring(dir)
	now := time.Unix(1_800_000_000, 0)
	c := DefaultConfig()
	c.Now = func() time.Time { return now }
	w, _ := Wrap(bus.NewHub(1).Transport("h1"), s, k, c)
	valid := w.se.seal("s", []byte(`{"v":1}`), now)
	f.Add(valid)
	f.Add(valid[:len(valid)-1])
	f.Add([]byte("dvE1\x02h1"))
	f.Add([]byte(`{"v":1,"m":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, payload, reason := w.open("s", data, newReplayCache())
		if reason == "" && !bytes.Equal(data, valid) {
			t.Fatalf("accepted a forged envelope %q (payload %q)", data, payload)
		}
	})
}
