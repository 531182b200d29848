package daemon

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// The agent speaks systemd's notify protocol on $NOTIFY_SOCKET: READY,
// and WATCHDOG only while the runner is alive; nothing off systemd.
func TestSdNotify(t *testing.T) {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := dir + "/notify"
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	read := func(d time.Duration) (string, bool) {
		buf := make([]byte, 256)
		_ = ln.SetReadDeadline(time.Now().Add(d))
		n, err := ln.Read(buf)
		return string(buf[:n]), err == nil
	}
	if n := newNotifier(fakeEnv(), 1); n.send("READY=1") != nil || n.addr != "" || n.watchdog != 0 {
		t.Fatalf("off systemd: %+v", n)
	}
	if n := newNotifier(fakeEnv("NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=20000", "WATCHDOG_PID=2"), 1); n.watchdog != 0 {
		t.Fatalf("a watchdog meant for pid 2 taken by pid 1: %+v", n)
	}
	n := newNotifier(fakeEnv("NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=20000", "WATCHDOG_PID=1"), 1)
	if n.watchdog != 10*time.Millisecond {
		t.Fatalf("watchdog every %s, want half of 20 ms", n.watchdog)
	}
	if err := n.send("READY=1"); err != nil {
		t.Fatal(err)
	}
	if got, ok := read(10 * time.Second); !ok || got != "READY=1" {
		t.Fatalf("got %q, want READY=1", got)
	}
	var alive atomic.Bool
	alive.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.watch(ctx, alive.Load) }()
	for range 3 {
		if got, ok := read(10 * time.Second); !ok || got != "WATCHDOG=1" {
			t.Fatalf("got %q, want WATCHDOG=1", got)
		}
	}
	alive.Store(false)
	// Drain a keep-alive decided before the store (at most one is in
	// flight), then expect silence for 20 periods.
	for range 3 {
		if _, ok := read(200 * time.Millisecond); !ok {
			break
		}
	}
	if got, ok := read(200 * time.Millisecond); ok {
		t.Fatalf("runner stopped, yet %q", got)
	}
	cancel()
	<-done
}
