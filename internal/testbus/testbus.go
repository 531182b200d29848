// Package testbus starts a real NATS server in a test and connects to it
// (nats-server's own tests run a real server in-process the same way).
package testbus

import (
	"context"
	"testing"

	"github.com/dvms-project/dvms/bus"
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
