package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/internal/backoff"
	"github.com/dvms-project/dvms/internal/sdtest"
	"github.com/dvms-project/dvms/nova"
)

// TestStartWaitBacksOff: a step failing transiently is retried after
// the policy's growing delays, each wait reported; a permanent error
// ends the wait at once; ctx ends it too.
func TestStartWaitBacksOff(t *testing.T) {
	var waits []time.Duration
	var statuses []string
	sw := &StartWait{
		policy: backoff.Policy{Base: time.Second, Max: 4 * time.Second, Rand: func(n int64) int64 { return n - 1 }},
		after: func(d time.Duration) <-chan time.Time {
			waits = append(waits, d)
			c := make(chan time.Time, 1)
			c <- time.Time{} // the fake clock: the wait is over at once
			return c
		},
		status: func(s string) { statuses = append(statuses, s) },
		log:    zerolog.Nop(),
	}
	down := fmt.Errorf("connection refused: %w", nova.ErrUnavailable)
	calls := 0
	err := sw.until(context.Background(), "Nova", func(context.Context) error {
		if calls++; calls <= 4 {
			return down
		}
		return nil
	}, unavailable)
	if err != nil || calls != 5 {
		t.Fatalf("err %v after %d calls, want nil after 5", err, calls)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v (doubling, capped)", waits, want)
	}
	if len(statuses) != 4 || !strings.HasPrefix(statuses[0], "waiting for Nova: connection refused") || !strings.Contains(statuses[3], "attempt 4") {
		t.Errorf("statuses %q", statuses)
	}

	waits, calls = nil, 0
	denied := errors.New("nova: HTTP 401: The request you have made requires authentication.")
	err = sw.until(context.Background(), "Keystone", func(context.Context) error {
		if calls++; calls > 3 {
			return nil // bounds a wrong retry
		}
		return denied
	}, unavailable)
	if !errors.Is(err, denied) || calls != 1 || len(waits) != 0 {
		t.Errorf("permanent error: err %v, %d calls, waits %v; want it at once", err, calls, waits)
	}

	ctx, cancel := context.WithCancel(context.Background())
	sw.after = func(time.Duration) <-chan time.Time { cancel(); return nil } // never over
	err = sw.until(ctx, "NATS", func(context.Context) error { return down }, unavailable)
	if err == nil || !strings.Contains(err.Error(), "stopped while waiting for NATS") {
		t.Errorf("ctx ended while waiting: err %v", err)
	}
}

// TestSDServiceNotifications: the watchdog is fed while the agent starts
// and while its runner runs, not once it stopped; STATUS= is sent only
// when it changes; READY=1 carries the status.
func TestSDServiceNotifications(t *testing.T) {
	sock := sdtest.NewSocket(t)
	env := fakeEnv("NOTIFY_SOCKET="+sock.Path, "WATCHDOG_USEC=20000", "WATCHDOG_PID=42")
	svc := newSDService(newNotifier(env, 42), zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.sd.watch(ctx, svc.alive) }()
	defer func() { cancel(); <-done }()

	svc.setStatus("waiting for NATS at nats://x:4222")
	svc.setStatus("waiting for NATS at nats://x:4222") // unchanged: not sent
	i := sock.WaitFor(t, 0, "WATCHDOG=1")              // fed while starting
	if n := strings.Count(strings.Join(sock.All(), "\n"), "STATUS=waiting for NATS"); n != 1 {
		t.Errorf("status sent %d times, want once", n)
	}

	tr := &bus.NATS{}
	var up atomic.Bool
	p := &Proc{tr: tr, running: up.Load}
	up.Store(true)
	svc.agent.Store(p)
	sock.WaitFor(t, i+1, "WATCHDOG=1") // fed while running
	up.Store(false)
	if svc.alive() {
		t.Error("alive with its runner stopped: the watchdog would be fed")
	}

	// The start timeout is extended while starting, not once ready.
	svc.agent.Store(nil)
	tick := make(chan time.Time)
	extDone := make(chan struct{})
	go func() { defer close(extDone); svc.extendStart(ctx, 10*time.Second, tick) }()
	n := len(sock.All())
	tick <- time.Time{}
	sock.WaitFor(t, n, "EXTEND_TIMEOUT_USEC=30000000")
	svc.agent.Store(p)
	select {
	case tick <- time.Time{}: // taken, then it sees the agent ready and returns
	case <-extDone:
	}
	<-extDone
	// Datagrams arrive in order: a marker after the last tick shows
	// whether the tick taken once ready sent an extension.
	svc.send("STATUS=marker")
	mk := sock.WaitFor(t, n, "STATUS=marker")
	if ext := strings.Count(strings.Join(sock.All()[n:mk], "\n"), "EXTEND_TIMEOUT_USEC"); ext != 1 {
		t.Errorf("%d start timeout extensions, want 1 (none once ready): %q", ext, sock.All()[n:mk])
	}

	ok, text := readiness("h1", true, nil)
	if !ok || !strings.HasPrefix(text, "ready: agent of h1") {
		t.Errorf("readiness(up) = %v %q", ok, text)
	}
	m := nova.NewMeter()
	m.Record(nova.Request{Class: nova.ClassTransport})
	if ok, text := readiness("h1", true, m); ok || !strings.Contains(text, "Nova/Keystone not answering") {
		t.Errorf("readiness after a transport error = %v %q", ok, text)
	}
	m.Record(nova.Request{Class: nova.ClassNotFound}) // an answer
	if ok, text := readiness("h1", false, m); ok || !strings.Contains(text, "NATS disconnected") || strings.Contains(text, "Nova") {
		t.Errorf("readiness NATS down = %v %q", ok, text)
	}
}

// TestReloadClassifiesChanges: a reload applies the live options (the
// log level), names the others that changed as needing a restart, keeps
// their running values, and refuses a configuration that does not
// validate; systemd is told RELOADING=1, then READY=1, each time.
func TestReloadClassifiesChanges(t *testing.T) {
	base, err := Load(Source{Env: fakeEnv("OS_CLOUD=c")}, "h1")
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	var level []zerolog.Level
	var next Config
	var loadErr error
	var logged strings.Builder
	r := &reloader{
		load: func() (Config, error) { return next, loadErr }, running: base,
		setLevel: func(l zerolog.Level) { level = append(level, l) },
		log:      zerolog.New(&logged).Level(zerolog.WarnLevel), // the level a reload may have just set
		notify:   func(s string) { notes = append(notes, s) }, status: func() string { return "ready: x" },
	}

	next = base
	next.LogLevel, next.NATSURL, next.Agent.Thresholds.CPUOverload = "debug", "nats://other:4222", 0.5
	res := r.reload()
	if !slices.Equal(res.applied, []string{"[DEFAULT] log_level"}) || !slices.Equal(level, []zerolog.Level{zerolog.DebugLevel}) {
		t.Errorf("applied %v, levels %v; want the log level, debug", res.applied, level)
	}
	if !slices.Equal(res.restart, []string{"[nats] url", "[scheduler] cpu_overload"}) {
		t.Errorf("needing a restart: %v", res.restart)
	}
	if r.running.LogLevel != "debug" || r.running.NATSURL != base.NATSURL {
		t.Errorf("running config: log level %q (want debug), url %q (want the running %q)", r.running.LogLevel, r.running.NATSURL, base.NATSURL)
	}
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "RELOADING=1") || !strings.HasPrefix(notes[1], "READY=1\nSTATUS=ready: x") {
		t.Errorf("notifications %q", notes)
	}
	if !strings.Contains(logged.String(), `"level":"info","applied":["[DEFAULT] log_level"]`) {
		t.Errorf("the applied reload is not acknowledged at level warn: %s", logged.String())
	}

	// The same file again: the live option is already applied, the
	// others still differ from what runs.
	level, notes = nil, nil
	res = r.reload()
	if len(res.applied) != 0 || len(level) != 0 || len(res.restart) != 2 {
		t.Errorf("second reload: applied %v levels %v restart %v", res.applied, level, res.restart)
	}

	// A configuration that does not validate is refused whole.
	level, notes = nil, nil
	next.LogLevel, loadErr = "error", errors.New("[DEFAULT] log_level = \"loud\": want one of debug, info, warn, error")
	res = r.reload()
	if res.err == nil || len(level) != 0 || r.running.LogLevel != "debug" {
		t.Errorf("refused reload: err %v, levels %v, running level %q", res.err, level, r.running.LogLevel)
	}
	if len(notes) != 2 || !strings.HasPrefix(notes[1], "READY=1") {
		t.Errorf("refused reload: notifications %q (READY=1 must follow RELOADING=1)", notes)
	}
}
