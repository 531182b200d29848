package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/internal/backoff"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/nova/fakeapi"
)

// sdSocket is systemd's notification socket in a test: every datagram
// the agent sends, in order.
type sdSocket struct {
	path string
	mu   sync.Mutex
	msgs []string
	more chan struct{} // signalled on each datagram
}

func newSDSocket(t *testing.T) *sdSocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd") // short: a socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &sdSocket{path: filepath.Join(dir, "notify"), more: make(chan struct{}, 1)}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.path, Net: "unixgram"})
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

// all returns the datagrams received so far.
func (s *sdSocket) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// waitFor returns the index of the first datagram from index from on
// that contains want, waiting up to 30 s for it.
func (s *sdSocket) waitFor(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		for i, m := range s.all() {
			if i >= from && strings.Contains(m, want) {
				return i
			}
		}
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("no notification %q after #%d in 30 s; got:\n%s", want, from, strings.Join(s.all(), "\n--\n"))
		}
	}
}

// TestStartWaitBacksOff: a step failing transiently is retried after
// the policy's growing delays, each wait reported; a permanent error
// ends the wait at once; ctx ends it too.
func TestStartWaitBacksOff(t *testing.T) {
	var waits []time.Duration
	var statuses []string
	sw := &startWait{
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
	sock := newSDSocket(t)
	env := fakeEnv("NOTIFY_SOCKET="+sock.path, "WATCHDOG_USEC=20000", "WATCHDOG_PID=42")
	svc := newSDService(newNotifier(env, 42), zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.sd.watch(ctx, svc.alive) }()
	defer func() { cancel(); <-done }()

	svc.setStatus("waiting for NATS at nats://x:4222")
	svc.setStatus("waiting for NATS at nats://x:4222") // unchanged: not sent
	i := sock.waitFor(t, 0, "WATCHDOG=1")              // fed while starting
	if n := strings.Count(strings.Join(sock.all(), "\n"), "STATUS=waiting for NATS"); n != 1 {
		t.Errorf("status sent %d times, want once", n)
	}

	tr := &bus.NATS{}
	var up atomic.Bool
	p := &agentProc{tr: tr, running: up.Load}
	up.Store(true)
	svc.agent.Store(p)
	sock.waitFor(t, i+1, "WATCHDOG=1") // fed while running
	up.Store(false)
	if svc.alive() {
		t.Error("alive with its runner stopped: the watchdog would be fed")
	}

	// The start timeout is extended while starting, not once ready.
	svc.agent.Store(nil)
	tick := make(chan time.Time)
	extDone := make(chan struct{})
	go func() { defer close(extDone); svc.extendStart(ctx, 10*time.Second, tick) }()
	n := len(sock.all())
	tick <- time.Time{}
	sock.waitFor(t, n, "EXTEND_TIMEOUT_USEC=30000000")
	svc.agent.Store(p)
	select {
	case tick <- time.Time{}: // taken, then it sees the agent ready and returns
	case <-extDone:
	}
	<-extDone
	// Datagrams arrive in order: a marker after the last tick shows
	// whether the tick taken once ready sent an extension.
	svc.send("STATUS=marker")
	mk := sock.waitFor(t, n, "STATUS=marker")
	if ext := strings.Count(strings.Join(sock.all()[n:mk], "\n"), "EXTEND_TIMEOUT_USEC"); ext != 1 {
		t.Errorf("%d start timeout extensions, want 1 (none once ready): %q", ext, sock.all()[n:mk])
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
	base, err := loadConfig(configSource{env: fakeEnv("OS_CLOUD=c")}, "h1")
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	var level []zerolog.Level
	var next fileConfig
	var loadErr error
	var logged strings.Builder
	r := &reloader{
		load: func() (fileConfig, error) { return next, loadErr }, running: base,
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

// keystoneGate serves fakeapi's keystone, or, while down, drops every
// connection unanswered (a keystone that is not there).
type keystoneGate struct {
	h    http.Handler
	down atomic.Bool
	hits atomic.Int64
}

func (g *keystoneGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.hits.Add(1)
	if g.down.Load() {
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	g.h.ServeHTTP(w, r)
}

// serviceBed is what `dvms agent` needs around it in process: a fake
// Nova over HTTP whose keystone is on its own gated listener, a NATS
// port (no server until started), a config file and clouds.yaml.
type serviceBed struct {
	cfgPath  string
	natsPort int
	keystone *keystoneGate
	nats     *bus.Embedded
}

func newServiceBed(t *testing.T, password string) *serviceBed {
	t.Helper()
	dir := t.TempDir()
	cloud := fake.New(fake.DefaultConfig(), fake.NewManualClock(time.Now().UTC().Truncate(time.Second)))
	cloud.AddHost(nova.Host{Name: "svc-1", VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 1, RAMAllocRatio: 1})
	var api http.Handler
	compute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.ServeHTTP(w, r) }))
	t.Cleanup(compute.Close)
	api = fakeapi.New(cloud, fakeapi.Options{Username: "dvms", ProjectName: "dvms", Password: "right", BaseURL: compute.URL,
		TokenTTL: 2 * time.Second}) // re-authentication at run time too
	b := &serviceBed{keystone: &keystoneGate{h: api}}
	ks := httptest.NewServer(b.keystone)
	t.Cleanup(ks.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.natsPort = l.Addr().(*net.TCPAddr).Port
	l.Close()
	clouds := filepath.Join(dir, "clouds.yaml")
	write(t, clouds, fmt.Sprintf("clouds:\n  bed:\n    auth:\n      auth_url: %s/identity/v3\n      username: dvms\n      password: %s\n"+
		"      project_name: dvms\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n    identity_api_version: 3\n",
		ks.URL, password))
	demand := filepath.Join(dir, "demand.json")
	write(t, demand, "{}")
	b.cfgPath = filepath.Join(dir, "dvms.conf")
	b.writeConfig(t, "info")
	return b
}

func (b *serviceBed) writeConfig(t *testing.T, level string) {
	t.Helper()
	dir := filepath.Dir(b.cfgPath)
	write(t, b.cfgPath, fmt.Sprintf("[DEFAULT]\nregion = svc\nlog_level = %s\nmetrics_listen =\ninsecure_unsigned = true\n"+
		"[nova]\nos_cloud = bed\nclouds_yaml = %s\nrequest_timeout = 5\n"+
		"[nats]\nurl = nats://127.0.0.1:%d\n[monitor]\nsource = file\nfile_path = %s\nrefresh_interval = 1\nplacement_refresh_interval = 1\n[consensus]\nbind = 127.0.0.1:0\n",
		level, filepath.Join(dir, "clouds.yaml"), b.natsPort, filepath.Join(dir, "demand.json")))
}

func (b *serviceBed) startNATS(t *testing.T) {
	t.Helper()
	n, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: b.natsPort})
	if err != nil {
		t.Fatal(err)
	}
	b.nats = n
	t.Cleanup(n.Shutdown)
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runServiceAgent runs `dvms agent` in process under the test's
// notification socket until ctx ends; the exit code comes on the channel.
func runServiceAgent(t *testing.T, ctx context.Context, b *serviceBed, sock *sdSocket) <-chan int {
	t.Helper()
	t.Setenv("NOTIFY_SOCKET", sock.path)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	prev := zerolog.GlobalLevel()
	t.Cleanup(func() { zerolog.SetGlobalLevel(prev) })
	code := make(chan int, 1)
	go func() {
		code <- runContext(ctx, []string{"dvms", "agent", "--host", "svc-1", "--config", b.cfgPath}, io.Discard, io.Discard)
	}()
	return code
}

// TestAgentServiceStartsThroughOutages: `dvms agent` started while NATS
// and Keystone are down does not exit: it says what it waits for, feeds
// the watchdog, and sends READY=1 only once NATS is connected and Nova
// answered. NATS and Keystone outages at run time turn its status
// degraded, then ready again. SIGHUP then changes the log level without a restart (a
// configuration that does not validate is refused), and SIGTERM's
// context ends it with STOPPING=1 and exit 0.
func TestAgentServiceStartsThroughOutages(t *testing.T) {
	b := newServiceBed(t, "right")
	b.keystone.down.Store(true)
	sock := newSDSocket(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := runServiceAgent(t, ctx, b, sock)

	i := sock.waitFor(t, 0, "STATUS=waiting for NATS at nats://127.0.0.1:"+strconv.Itoa(b.natsPort))
	// Healthy while it waits, and waiting for NATS only: three watchdog
	// periods on, it has not gone on to Keystone (which would fail at
	// once, the gate dropping connections) nor said it is ready.
	w := i
	for range 3 {
		w = sock.waitFor(t, w+1, "WATCHDOG=1")
	}
	for _, m := range sock.all()[i:] {
		if strings.Contains(m, "Keystone") || strings.Contains(m, "READY=1") {
			t.Fatalf("NATS down, yet %q", m)
		}
	}
	b.startNATS(t)
	i = sock.waitFor(t, i, "STATUS=waiting for Keystone (cloud bed)")
	sock.waitFor(t, i, "WATCHDOG=1")
	b.keystone.down.Store(false)
	ready := sock.waitFor(t, i, "READY=1")
	for _, m := range sock.all()[:ready] {
		if strings.Contains(m, "READY=1") {
			t.Fatalf("READY=1 before NATS and Nova: %q", sock.all()[:ready+1])
		}
	}
	if m := sock.all()[ready]; !strings.Contains(m, "STATUS=ready: agent of svc-1") {
		t.Errorf("READY=1 without the ready status: %q", m)
	}
	select {
	case c := <-code:
		t.Fatalf("agent exited (%d)", c)
	default:
	}

	// Run-time outages: NATS, then Keystone (the token expires every
	// 2 s, Nova is read every second): degraded, then ready again.
	b.nats.Shutdown()
	i = sock.waitFor(t, ready, "STATUS=degraded: agent of svc-1: NATS disconnected")
	b.startNATS(t)
	i = sock.waitFor(t, i, "STATUS=ready: agent of svc-1")
	b.keystone.down.Store(true)
	i = sock.waitFor(t, i, "STATUS=degraded: agent of svc-1: Nova/Keystone not answering")
	b.keystone.down.Store(false)
	sock.waitFor(t, i, "STATUS=ready: agent of svc-1")

	// Reload: log level info -> debug, same process.
	if zerolog.GlobalLevel() != zerolog.InfoLevel {
		t.Fatalf("running level %s, want info", zerolog.GlobalLevel())
	}
	b.writeConfig(t, "debug")
	n := len(sock.all())
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r := sock.waitFor(t, n, "RELOADING=1")
	sock.waitFor(t, r, "READY=1")
	if zerolog.GlobalLevel() != zerolog.DebugLevel {
		t.Errorf("after the reload: level %s, want debug", zerolog.GlobalLevel())
	}
	// A bad level: refused, debug stays.
	b.writeConfig(t, "loud")
	n = len(sock.all())
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r = sock.waitFor(t, n, "RELOADING=1")
	sock.waitFor(t, r, "READY=1")
	if zerolog.GlobalLevel() != zerolog.DebugLevel {
		t.Errorf("after a refused reload: level %s, want debug still", zerolog.GlobalLevel())
	}

	cancel()
	sock.waitFor(t, r, "STOPPING=1")
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit %d after stop, want 0", c)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("agent did not stop")
	}
}

// TestAgentServiceConfigErrorsExit78: wrong credentials (Keystone's 401)
// and an invalid configuration end the agent at once with exit status
// 78, which the unit's RestartPreventExitStatus names.
func TestAgentServiceConfigErrorsExit78(t *testing.T) {
	b := newServiceBed(t, "wrong")
	b.startNATS(t)
	sock := newSDSocket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	select {
	case c := <-runServiceAgent(t, ctx, b, sock):
		if c != exitConfig {
			t.Errorf("wrong password: exit %d, want %d", c, exitConfig)
		}
		if h := b.keystone.hits.Load(); h > 3 {
			t.Errorf("%d requests to keystone: a refused password must not be retried", h)
		}
	case <-ctx.Done():
		t.Fatal("wrong password: the agent did not exit")
	}
	b.writeConfig(t, "loud")
	if c := run([]string{"dvms", "agent", "--host", "svc-1", "--config", b.cfgPath}, io.Discard, io.Discard); c != exitConfig {
		t.Errorf("invalid configuration: exit %d, want %d", c, exitConfig)
	}
}
