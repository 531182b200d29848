package bus_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/dvms-project/dvms/bus"
)

func TestAllows(t *testing.T) {
	for _, c := range []struct {
		pattern, subject string
		want             bool
	}{
		{"dvms.r.agent.*", "dvms.r.agent.h1", true},
		{"dvms.r.agent.*", "dvms.r.agent.h1.x", false},
		{"dvms.r.agent.*", "dvms.r.agent", false},
		{"dvms.r.>", "dvms.r.agent.h1", true},
		{"dvms.r.>", "dvms.r", false},
		{"dvms.r.summary.h1", "dvms.r.summary.h2", false},
		{"_INBOX.dvms.*", "_INBOX.dvms.abc", true},
	} {
		if got := bus.Allows([]string{c.pattern}, c.subject); got != c.want {
			t.Errorf("Allows(%q, %q) = %v, want %v", c.pattern, c.subject, got, c.want)
		}
	}
	// An agent's own subjects only.
	p := bus.AgentPermissions("r", "h1")
	for subj, want := range map[string]bool{
		bus.SummarySubject("r", "h1"): true, bus.SummarySubject("r", "h2"): false,
		bus.AgentSubject("r", "h2"): true, bus.StatusSubject("r"): false,
	} {
		if bus.Allows(p.Publish, subj) != want {
			t.Errorf("h1 publish %s: want %v", subj, want)
		}
	}
	for subj, want := range map[string]bool{
		bus.AgentSubject("r", "h1"): true, bus.AgentSubject("r", "h2"): false,
		bus.DemandSubject("r", "h2"): false, bus.ReplySubject("r", "h2"): false, bus.StatusSubject("r"): true,
	} {
		if bus.Allows(p.Subscribe, subj) != want {
			t.Errorf("h1 subscribe %s: want %v", subj, want)
		}
	}
}

// seedFile writes a new nkeys user seed and returns its path and public key.
func seedFile(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	path := filepath.Join(dir, name+".key")
	if err := os.WriteFile(path, append(seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pub
}

// connectAs connects to ns with the nkey seed file seed, asynchronous
// errors to l, closed when the test ends.
func connectAs(ctx context.Context, t *testing.T, ns *bus.Embedded, seed string, l *errLog) *bus.NATS {
	t.Helper()
	tr, err := bus.ConnectNATS(ctx, bus.Config{URL: ns.ClientURL(), Name: seed, NkeySeedFile: seed, OnStateChange: l.on})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// errLog collects a connection's asynchronous errors (the server's
// permission violations arrive that way).
type errLog struct {
	mu   sync.Mutex
	errs []string
}

func (l *errLog) on(ev string, err error) {
	if ev == "error" && err != nil {
		l.mu.Lock()
		l.errs = append(l.errs, err.Error())
		l.mu.Unlock()
	}
}

func (l *errLog) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		if strings.Contains(e, sub) {
			return true
		}
	}
	return false
}

// On a server with users, a client without a key cannot connect; an
// agent can write to another agent but not publish that agent's summary
// nor read its inbox; the observer reads summaries.
func TestEmbeddedEnforcesPermissions(t *testing.T) {
	dir := t.TempDir()
	h1Seed, h1Pub := seedFile(t, dir, "h1")
	h2Seed, h2Pub := seedFile(t, dir, "h2")
	obsSeed, obsPub := seedFile(t, dir, "observer")
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1, Users: []bus.User{
		{Name: "h1", Nkey: h1Pub, Perms: bus.AgentPermissions("r", "h1")},
		{Name: "h2", Nkey: h2Pub, Perms: bus.AgentPermissions("r", "h2")},
		{Name: "observer", Nkey: obsPub, Perms: bus.ObserverPermissions("r", obsPub)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if tr, err := bus.ConnectNATS(ctx, bus.Config{URL: ns.ClientURL(), Name: "anon"}); err == nil {
		_ = tr.Close()
		t.Fatal("a client without a key connected")
	}
	connect := func(seed string, l *errLog) *bus.NATS { return connectAs(ctx, t, ns, seed, l) }
	var l1, l2, lo errLog
	h1, h2, obs := connect(h1Seed, &l1), connect(h2Seed, &l2), connect(obsSeed, &lo)

	got := make(chan string, 16)
	record := func(s string, d []byte) { got <- s + "=" + string(d) }
	for _, s := range []struct {
		tr   *bus.NATS
		subj string
	}{{h2, bus.AgentSubject("r", "h2")}, {obs, bus.SummarySubject("r", "*")}} {
		if _, err := s.tr.Subscribe(s.subj, record); err != nil {
			t.Fatal(err)
		}
		_ = s.tr.Flush(ctx)
	}
	// h1 tries to read h2's inbox: refused by the server.
	if _, err := h1.Subscribe(bus.AgentSubject("r", "h2"), record); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ subj, data string }{
		{bus.SummarySubject("r", "h2"), "forged"}, // refused
		{bus.SummarySubject("r", "h1"), "own"},
		{bus.AgentSubject("r", "h2"), "hello"},
	} {
		if err := h1.Publish(ctx, m.subj, []byte(m.data)); err != nil {
			t.Fatal(err)
		}
	}
	_ = h1.Flush(ctx)
	want := map[string]bool{bus.SummarySubject("r", "h1") + "=own": true, bus.AgentSubject("r", "h2") + "=hello": true}
	deadline := time.After(5 * time.Second)
	for len(want) > 0 {
		select {
		case g := <-got:
			if !want[g] {
				t.Fatalf("delivered %s", g)
			}
			delete(want, g)
		case <-deadline:
			t.Fatalf("not delivered: %v", want)
		}
	}
	// Nothing more (h1's subscription to h2's inbox got nothing).
	select {
	case g := <-got:
		t.Fatalf("delivered %s", g)
	case <-time.After(300 * time.Millisecond):
	}
	if !l1.has("Permissions Violation for Publish") || !l1.has("Permissions Violation for Subscription") {
		t.Errorf("h1's violations not reported: %v", l1.errs)
	}
}

func TestServerConfigRender(t *testing.T) {
	out := bus.ServerConfig{Listen: "10.0.0.1:4222", TLSCert: "/etc/nats/cert.pem", TLSKey: "/etc/nats/key.pem",
		Users: []bus.User{{Name: "h1", Nkey: "UABC", Perms: bus.AgentPermissions("r", "h1")}}}.Render()
	for _, want := range []string{`listen: "10.0.0.1:4222"`, `cert_file: "/etc/nats/cert.pem"`, `nkey: "UABC"`, `"dvms.r.summary.h1"`, "# h1"} {
		if !strings.Contains(out, want) {
			t.Errorf("config lacks %s:\n%s", want, out)
		}
	}
}
