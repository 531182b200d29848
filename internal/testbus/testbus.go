// Package testbus starts a real NATS server in a test and connects to it
// (nats-server's own tests run a real server in-process the same way),
// and signs a test's connections with its hosts' keys.
package testbus

import (
	"context"
	"testing"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/bus/auth"
)

// Server starts an embedded NATS server on a random port, shut down when
// the test ends, and returns its client URL.
func Server(t testing.TB) string {
	t.Helper()
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

// Connect connects to url as name, closed when the test ends.
func Connect(t testing.TB, ctx context.Context, url, name string) *bus.NATS {
	t.Helper()
	bc := bus.DefaultConfig()
	bc.URL, bc.Name = url, name
	tr, err := bus.ConnectNATS(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// Keys are a region's host keys, generated in a test's directory, and
// the region's keyring loaded from it.
type Keys struct {
	t    testing.TB
	Dir  string
	Ring *auth.Keyring
}

// NewKeys generates a key in dir for each host and loads the keyring.
func NewKeys(t testing.TB, dir string, hosts ...string) *Keys {
	t.Helper()
	for _, h := range hosts {
		if _, err := auth.GenerateKey(dir, h); err != nil {
			t.Fatal(err)
		}
	}
	ring, err := auth.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &Keys{t: t, Dir: dir, Ring: ring}
}

// Wrap is tr signing with host's key and verifying with the keyring
// (auth.DefaultConfig), as an agent's protocol connection does.
func (k *Keys) Wrap(tr bus.Transport, host string) *auth.Transport {
	k.t.Helper()
	s, err := auth.LoadSigner(k.Dir, host)
	if err != nil {
		k.t.Fatal(err)
	}
	w, err := auth.Wrap(tr, s, k.Ring, auth.DefaultConfig())
	if err != nil {
		k.t.Fatal(err)
	}
	return w
}
