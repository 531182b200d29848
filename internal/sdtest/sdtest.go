// Package sdtest is systemd's notification socket for tests of
// sd_notify (READY=1, STATUS=, WATCHDOG=1 ...).
package sdtest

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Socket is systemd's notification socket in a test: every datagram
// the agent sends, in order.
type Socket struct {
	Path string
	mu   sync.Mutex
	msgs []string
	more chan struct{} // signalled on each datagram
}

// NewSocket listens on a new notification socket until t ends.
func NewSocket(t *testing.T) *Socket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd") // short: a socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Socket{Path: filepath.Join(dir, "notify"), more: make(chan struct{}, 1)}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.Path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, string(buf[:n]))
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

// All returns the datagrams received so far.
func (s *Socket) All() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// WaitFor returns the index of the first datagram from index from on
// that contains want, waiting up to 30 s for it.
func (s *Socket) WaitFor(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		for i, m := range s.All() {
			if i >= from && strings.Contains(m, want) {
				return i
			}
		}
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("no notification %q after #%d in 30 s; got:\n%s", want, from, strings.Join(s.All(), "\n--\n"))
		}
	}
}
