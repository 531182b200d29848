package agentd

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/internal/testbus"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/oscillation"
	"github.com/dvms-project/dvms/scheduler/status"
)

// The runner's hooks feed the detector: only this host's OVERLOAD events
// ended solved count as reliefs, only live migrations done as moves; each
// detection is one warning with host, count and window, one count of
// dvms_oscillations_total{kind}, and one in the agent's Recent count.
func TestOscillationHooks(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := oscillation.New(oscillation.Config{Events: 3, Window: 30 * time.Minute}, func() time.Time { return now })
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dvms_oscillations_total", Help: "h"}, []string{"kind"})
	var logs bytes.Buffer
	h := oscillationHooks("c1", d, c, zerolog.New(&logs))

	ended := func(host string, kind scheduler.EventKind, o scheduler.Outcome) scheduler.Record {
		return scheduler.Record{Kind: scheduler.RecEventEnded, Event: scheduler.Event{ID: "e", Kind: kind, Host: host}, Outcome: o}
	}
	// Not reliefs of c1: another host's, an underload, a failed one, a raise.
	h.OnRecord("c1", ended("c2", scheduler.Overload, scheduler.Solved))
	h.OnRecord("c1", ended("c1", scheduler.Underload, scheduler.Solved))
	h.OnRecord("c1", ended("c1", scheduler.Overload, scheduler.Failed))
	h.OnRecord("c1", scheduler.Record{Kind: scheduler.RecEventRaised, Event: scheduler.Event{Kind: scheduler.Overload, Host: "c1"}})
	for range 2 {
		h.OnRecord("c1", ended("c1", scheduler.Overload, scheduler.Solved))
		now = now.Add(10 * time.Minute)
	}
	if n := count(t, c.WithLabelValues(string(oscillation.HostRelieved))); n != 0 {
		t.Fatalf("host_relieved = %v after 2 reliefs (and 4 records that are none), want 0", n)
	}
	h.OnRecord("c1", ended("c1", scheduler.Overload, scheduler.Solved))
	if n := count(t, c.WithLabelValues(string(oscillation.HostRelieved))); n != 1 {
		t.Fatalf("host_relieved = %v after 3 reliefs in 20 min, want 1", n)
	}

	mig := func(server, from, to string, o node.ActionOutcome) node.ExecResult {
		return node.ExecResult{Actions: []node.ActionResult{{Action: scheduler.Action{Kind: scheduler.LiveMigrate, Server: server, From: from, To: to}, Outcome: o}}}
	}
	h.OnExec("c1", scheduler.Event{}, mig("s1", "c1", "c2", node.ActionDone))
	h.OnExec("c1", scheduler.Event{}, mig("s1", "c2", "c1", node.ActionSkipped)) // not moved
	if n := count(t, c.WithLabelValues(string(oscillation.ServerMovedBack))); n != 0 {
		t.Fatalf("server_moved_back = %v after a skipped move back, want 0", n)
	}
	now = now.Add(5 * time.Minute)
	h.OnAdopt("c2", scheduler.Event{}, mig("s1", "c2", "c1", node.ActionDone))
	if n := count(t, c.WithLabelValues(string(oscillation.ServerMovedBack))); n != 1 {
		t.Fatalf("server_moved_back = %v after s1 c1→c2→c1 in 5 min, want 1", n)
	}
	if got := d.Recent(); got != 2 {
		t.Errorf("Recent = %d, want 2", got)
	}

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want one per detection:\n%s", len(lines), logs.String())
	}
	for i, want := range []map[string]any{
		{"level": "warn", "kind": "host_relieved", "host": "c1", "count": 3.0},
		{"level": "warn", "kind": "server_moved_back", "host": "c2", "server": "s1", "from": "c2", "to": "c1", "count": 2.0},
	} {
		for k, v := range want {
			if lines[i][k] != v {
				t.Errorf("log line %d: %s = %v, want %v (%v)", i, k, lines[i][k], v, lines[i])
			}
		}
		if lines[i]["window"] == nil {
			t.Errorf("log line %d: no window: %v", i, lines[i])
		}
	}
}

func count(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The agent's detector follows [scheduler] oscillation_* (Runtime) and
// its count within the window is in the agent's status report.
func TestReportCountsOscillations(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := testAgent(t, ctx, url, "r1", func(o *Options, _ *fake.Cloud) {
		o.Runtime.Oscillation = oscillation.Config{Events: 2, Window: time.Hour}
	})
	if got := a.Report(status.Request{}).Oscillations; got != 0 {
		t.Fatalf("fresh agent: Oscillations = %d", got)
	}
	if _, ok := a.osc.Relieved("c1"); ok {
		t.Fatal("1 relief with oscillation_events = 2: detected")
	}
	if _, ok := a.osc.Relieved("c1"); !ok {
		t.Fatal("2 reliefs with oscillation_events = 2: not detected")
	}
	if got := a.Report(status.Request{}).Oscillations; got != 1 {
		t.Fatalf("Oscillations = %d, want 1", got)
	}
	if a.osc.Window() != time.Hour {
		t.Fatalf("window %s, want the configured 1h", a.osc.Window())
	}
}
