package daemon

// systemd's notify protocol (sd_notify(3)) for `dvms agent` under a unit of
// Type=notify: READY=1 once every part started, WATCHDOG=1 while the
// runner runs (WatchdogSec=), STOPPING=1 on SIGTERM. Without
// $NOTIFY_SOCKET (not under systemd, or Type=simple) nothing is sent.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// notifier sends datagrams to systemd's notification socket.
type notifier struct {
	addr string // "" = not under systemd
	// watchdog is half of WatchdogSec when systemd asks this process for
	// keep-alives, else 0.
	watchdog time.Duration
}

// newNotifier reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from env.
func newNotifier(env func(string) (string, bool), pid int) notifier {
	var n notifier
	if v, ok := env("NOTIFY_SOCKET"); ok && v != "" {
		n.addr = v
		if strings.HasPrefix(v, "@") { // abstract socket
			n.addr = "\x00" + v[1:]
		}
	}
	us, _ := env("WATCHDOG_USEC")
	usec, err := strconv.ParseInt(us, 10, 64)
	if err != nil || usec <= 0 {
		return n
	}
	if p, ok := env("WATCHDOG_PID"); ok && p != "" && p != strconv.Itoa(pid) {
		return n // meant for another process
	}
	n.watchdog = time.Duration(usec) * time.Microsecond / 2
	return n
}

// send writes one notification ("READY=1", ...); a no-op off systemd.
func (n notifier) send(state string) error {
	if n.addr == "" {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// watch sends WATCHDOG=1 every n.watchdog while alive() holds, until ctx
// ends; a runner that stopped is left to systemd's watchdog.
func (n notifier) watch(ctx context.Context, alive func() bool) {
	if n.addr == "" || n.watchdog <= 0 {
		return
	}
	t := time.NewTicker(n.watchdog)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if alive() {
				_ = n.send("WATCHDOG=1")
			}
		}
	}
}
