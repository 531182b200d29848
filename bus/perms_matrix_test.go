package bus_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/bus"
)

// matrixCase is one subject a role may or may not publish or read.
type matrixCase struct {
	subject string
	allowed bool
}

// Issue 27: the permission matrix, enforced by a real nats-server. Each
// role (an agent, an operator's tools, a read-only tool, scheduler-api)
// publishes and subscribes on the subjects it needs and is refused the
// others: no agent reads another agent's inbox, arbiter answers or
// queries, nor any tool's inbox, nor issues operator commands; a tool
// reads only the request inboxes of its own key; scheduler-api only
// reads summaries. Hosts with dots in their names are served. A "spy"
// user with every right sees what is published and publishes what the
// role should (or should not) read.
func TestPermissionMatrixOnARealServer(t *testing.T) {
	dir := t.TempDir()
	const r = "r"
	h1Seed, h1Pub := seedFile(t, dir, "h1")
	_, h2Pub := seedFile(t, dir, "h2.lan")
	opsSeed, opsPub := seedFile(t, dir, "ops")
	dashSeed, dashPub := seedFile(t, dir, "dash")
	apiSeed, apiPub := seedFile(t, dir, "api")
	spySeed, spyPub := seedFile(t, dir, "spy")
	ns, err := bus.StartEmbedded(bus.EmbeddedConfig{Port: -1, Users: []bus.User{
		{Name: "h1", Nkey: h1Pub, Perms: bus.AgentPermissions(r, "h1")},
		{Name: "h2.lan", Nkey: h2Pub, Perms: bus.AgentPermissions(r, "h2.lan")},
		{Name: "ops", Nkey: opsPub, Perms: bus.ObserverPermissions(r, opsPub)},
		{Name: "dash", Nkey: dashPub, Perms: bus.ReaderPermissions(r, dashPub)},
		{Name: "api", Nkey: apiPub, Perms: bus.SchedulerAPIPermissions(r)},
		{Name: "spy", Nkey: spyPub, Perms: bus.Permissions{Publish: []string{">"}, Subscribe: []string{">"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	connect := func(seed string, l *errLog) *bus.NATS { return connectAs(ctx, t, ns, seed, l) }
	var spyLog errLog
	spy := connect(spySeed, &spyLog)
	var mu sync.Mutex
	seen := map[string]bool{} // subject=payload the spy received
	if _, err := spy.Subscribe(">", func(s string, d []byte) { mu.Lock(); seen[s+"="+string(d)] = true; mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	_ = spy.Flush(ctx)
	got := func(key string) bool { mu.Lock(); defer mu.Unlock(); return seen[key] }

	s := func(f func(string, string) string, host string) string { return f(r, host) }
	arbReply := func(host string) string { return "dvms." + r + ".arbiter.reply." + host + ".tok" }
	inbox := func(pub string) string { return bus.InboxPrefix + pub + ".tok" }
	roles := []struct {
		name      string
		seed, pub string
		publish   []matrixCase
		subscribe []matrixCase
	}{
		{"agent h1", h1Seed, h1Pub, []matrixCase{
			{s(bus.AgentSubject, "h2.lan"), true}, {bus.HeartbeatSubject(r), true}, {bus.EventsSubject(r), true},
			{s(bus.ServiceSubject, "h2.lan"), true}, {bus.ShelvedSubject(r), true}, {s(bus.DemandSubject, "h2.lan"), true},
			{s(bus.ReplySubject, "h2.lan"), true}, {s(bus.SummarySubject, "h1"), true}, {inbox(opsPub), true},
			{bus.ControlStateSubject(r), true}, {s(bus.PingSubject, "h2.lan"), true}, {s(bus.PongSubject, "h2.lan"), true},
			{"dvms." + r + ".arbiter.req", true}, {arbReply("h2.lan"), true},
			{s(bus.SummarySubject, "h2.lan"), false}, {bus.StatusSubject(r), false}, {bus.ControlSubject(r), false},
			{"dvms.other.agent.h2", false},
		}, []matrixCase{
			{s(bus.AgentSubject, "h1"), true}, {bus.HeartbeatSubject(r), true}, {s(bus.ServiceSubject, "h1"), true},
			{s(bus.DemandSubject, "h1"), true}, {s(bus.ReplySubject, "h1"), true}, {bus.StatusSubject(r), true},
			{bus.ControlSubject(r), true}, {bus.ControlStateSubject(r), true}, {s(bus.PingSubject, "h1"), true},
			{"dvms." + r + ".arbiter.req", true}, {arbReply("h1"), true},
			{s(bus.AgentSubject, "h2.lan"), false}, {s(bus.ReplySubject, "h2.lan"), false}, {s(bus.DemandSubject, "h2.lan"), false},
			{arbReply("h2.lan"), false}, {"dvms." + r + ".arbiter.reply.>", false}, {bus.InboxPrefix + ">", false},
			{inbox(opsPub), false}, {s(bus.SummarySubject, "h2.lan"), false}, {bus.EventsSubject(r), false},
		}},
		{"observer (operator's tools)", opsSeed, opsPub, []matrixCase{
			{bus.StatusSubject(r), true}, {s(bus.ServiceSubject, "h2.lan"), true}, {bus.ControlSubject(r), true},
			{s(bus.AgentSubject, "h1"), false}, {bus.HeartbeatSubject(r), false}, {s(bus.SummarySubject, "h1"), false},
			{bus.ControlStateSubject(r), false}, {"dvms." + r + ".arbiter.req", false}, {arbReply("h1"), false},
			{s(bus.ReplySubject, "h1"), false}, {inbox(dashPub), false},
		}, []matrixCase{
			{inbox(opsPub), true}, {bus.EventsSubject(r), true}, {s(bus.SummarySubject, "h2.lan"), true},
			{inbox(dashPub), false}, {bus.InboxPrefix + ">", false}, {bus.InboxPrefix + "*", false},
			{s(bus.AgentSubject, "h1"), false}, {bus.ControlSubject(r), false}, {"dvms." + r + ".arbiter.req", false},
		}},
		{"reader", dashSeed, dashPub, []matrixCase{
			{bus.StatusSubject(r), true},
			{bus.ControlSubject(r), false}, {s(bus.ServiceSubject, "h1"), false}, {s(bus.SummarySubject, "h1"), false},
		}, []matrixCase{
			{inbox(dashPub), true}, {bus.EventsSubject(r), true},
			{inbox(opsPub), false}, {s(bus.SummarySubject, "h1"), false}, {bus.ControlSubject(r), false},
		}},
		{"scheduler-api", apiSeed, apiPub, []matrixCase{
			{bus.StatusSubject(r), false}, {bus.ControlSubject(r), false}, {s(bus.SummarySubject, "h1"), false},
			{inbox(apiPub), false},
		}, []matrixCase{
			{s(bus.SummarySubject, "h1"), true}, {s(bus.SummarySubject, "h2.lan"), true},
			{bus.InboxPrefix + ">", false}, {bus.EventsSubject(r), false}, {s(bus.AgentSubject, "h1"), false},
		}},
	}
	// until waits for cond (no fixed sleep: every case has a positive
	// signal, a delivery or the server's violation error).
	until := func(what string, cond func() bool) {
		t.Helper()
		end := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(end) {
				t.Errorf("%s: not within 10 s", what)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, role := range roles {
		var l errLog
		tr := connect(role.seed, &l)
		if got, want := bus.InboxFor(tr), bus.InboxPrefix+role.pub+"."; got != want {
			t.Errorf("%s: inbox prefix %q, want %q (its own key's)", role.name, got, want)
		}
		for i, c := range role.publish {
			payload := fmt.Sprintf("%s-%d", role.name, i)
			if err := tr.Publish(ctx, c.subject, []byte(payload)); err != nil {
				t.Fatal(err)
			}
			_ = tr.Flush(ctx)
			if c.allowed {
				until(role.name+" publishes "+c.subject, func() bool { return got(c.subject + "=" + payload) })
			} else {
				until(role.name+" is refused publishing "+c.subject, func() bool {
					return l.has(`Permissions Violation for Publish to "` + c.subject + `"`)
				})
			}
		}
		var rmu sync.Mutex
		recv := map[string]bool{}
		for i, c := range role.subscribe {
			if _, err := tr.Subscribe(c.subject, func(s string, d []byte) { rmu.Lock(); recv[s+"="+string(d)] = true; rmu.Unlock() }); err != nil {
				t.Fatal(err)
			}
			_ = tr.Flush(ctx)
			subj := strings.ReplaceAll(strings.ReplaceAll(c.subject, ">", "x"), "*", "x")
			payload := fmt.Sprintf("%s-sub-%d", role.name, i)
			if !c.allowed {
				until(role.name+" is refused reading "+c.subject, func() bool {
					return l.has(`Permissions Violation for Subscription to "` + c.subject + `"`)
				})
			}
			if err := spy.Publish(ctx, subj, []byte(payload)); err != nil {
				t.Fatal(err)
			}
			_ = spy.Flush(ctx)
			key := subj + "=" + payload
			until("the spy's "+subj+" delivered", func() bool { return got(key) })
			if c.allowed {
				until(role.name+" reads "+c.subject, func() bool { rmu.Lock(); defer rmu.Unlock(); return recv[key] })
			} else {
				// The spy's own copy arrived; the role's would have been
				// sent first (one server, one connection each way) but
				// a round trip on the role's connection makes sure.
				_ = tr.Flush(ctx)
				rmu.Lock()
				if recv[key] {
					t.Errorf("%s read %s", role.name, subj)
				}
				rmu.Unlock()
			}
		}
	}
}
