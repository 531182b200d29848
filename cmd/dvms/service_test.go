package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/internal/daemon"
	"github.com/dvms-project/dvms/internal/sdtest"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/nova/fakeapi"
	"github.com/rs/zerolog"
)

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
func runServiceAgent(t *testing.T, ctx context.Context, b *serviceBed, sock *sdtest.Socket) <-chan int {
	t.Helper()
	t.Setenv("NOTIFY_SOCKET", sock.Path)
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
	sock := sdtest.NewSocket(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := runServiceAgent(t, ctx, b, sock)

	i := sock.WaitFor(t, 0, "STATUS=waiting for NATS at nats://127.0.0.1:"+strconv.Itoa(b.natsPort))
	// Healthy while it waits, and waiting for NATS only: three watchdog
	// periods on, it has not gone on to Keystone (which would fail at
	// once, the gate dropping connections) nor said it is ready.
	w := i
	for range 3 {
		w = sock.WaitFor(t, w+1, "WATCHDOG=1")
	}
	for _, m := range sock.All()[i:] {
		if strings.Contains(m, "Keystone") || strings.Contains(m, "READY=1") {
			t.Fatalf("NATS down, yet %q", m)
		}
	}
	b.startNATS(t)
	i = sock.WaitFor(t, i, "STATUS=waiting for Keystone (cloud bed)")
	sock.WaitFor(t, i, "WATCHDOG=1")
	b.keystone.down.Store(false)
	ready := sock.WaitFor(t, i, "READY=1")
	for _, m := range sock.All()[:ready] {
		if strings.Contains(m, "READY=1") {
			t.Fatalf("READY=1 before NATS and Nova: %q", sock.All()[:ready+1])
		}
	}
	if m := sock.All()[ready]; !strings.Contains(m, "STATUS=ready: agent of svc-1") {
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
	i = sock.WaitFor(t, ready, "STATUS=degraded: agent of svc-1: NATS disconnected")
	b.startNATS(t)
	i = sock.WaitFor(t, i, "STATUS=ready: agent of svc-1")
	b.keystone.down.Store(true)
	i = sock.WaitFor(t, i, "STATUS=degraded: agent of svc-1: Nova/Keystone not answering")
	b.keystone.down.Store(false)
	sock.WaitFor(t, i, "STATUS=ready: agent of svc-1")

	// Reload: log level info -> debug, same process.
	if zerolog.GlobalLevel() != zerolog.InfoLevel {
		t.Fatalf("running level %s, want info", zerolog.GlobalLevel())
	}
	b.writeConfig(t, "debug")
	n := len(sock.All())
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r := sock.WaitFor(t, n, "RELOADING=1")
	sock.WaitFor(t, r, "READY=1")
	if zerolog.GlobalLevel() != zerolog.DebugLevel {
		t.Errorf("after the reload: level %s, want debug", zerolog.GlobalLevel())
	}
	// A bad level: refused, debug stays.
	b.writeConfig(t, "loud")
	n = len(sock.All())
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r = sock.WaitFor(t, n, "RELOADING=1")
	sock.WaitFor(t, r, "READY=1")
	if zerolog.GlobalLevel() != zerolog.DebugLevel {
		t.Errorf("after a refused reload: level %s, want debug still", zerolog.GlobalLevel())
	}

	cancel()
	sock.WaitFor(t, r, "STOPPING=1")
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
	sock := sdtest.NewSocket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	select {
	case c := <-runServiceAgent(t, ctx, b, sock):
		if c != daemon.ExitConfig {
			t.Errorf("wrong password: exit %d, want %d", c, daemon.ExitConfig)
		}
		if h := b.keystone.hits.Load(); h > 3 {
			t.Errorf("%d requests to keystone: a refused password must not be retried", h)
		}
	case <-ctx.Done():
		t.Fatal("wrong password: the agent did not exit")
	}
	b.writeConfig(t, "loud")
	if c := run([]string{"dvms", "agent", "--host", "svc-1", "--config", b.cfgPath}, io.Discard, io.Discard); c != daemon.ExitConfig {
		t.Errorf("invalid configuration: exit %d, want %d", c, daemon.ExitConfig)
	}
}
