package agentd

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/cgroup"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/status"
)

// Every family the agent registers is in metricNames, and only those:
// the dashboard test trusts that list.
func TestMetricNamesAreWhatTheAgentRegisters(t *testing.T) {
	meter := nova.NewMeter()
	meter.Record(nova.Request{Template: nova.Template{Service: nova.ServiceCompute, Method: "GET", Path: "/servers/detail"}, Latency: time.Millisecond, Class: nova.ClassOK})
	m := newAgentMetrics(metricsSources{host: "h1", version: "test", meter: meter,
		dropped: func() int64 { return 0 }, members: func() int { return 1 }, watch: func() bool { return true },
		partition: func() *scheduler.Partition { return nil }, arbiter: func() *status.ArbiterInfo { return nil },
		advise: func() bool { return false }, paused: func() bool { return false }, excluded: func() bool { return false },
		coverage: func() (cgroup.Coverage, bool) { return cgroup.Coverage{}, true }})
	now := time.Now()
	ev := scheduler.Event{ID: "e1", Kind: scheduler.Overload, Host: "h1", Detected: now.Add(-time.Second)}
	h := observeHooks(m, nil, func() time.Time { return now })
	for _, k := range []scheduler.RecordKind{scheduler.RecEventRaised, scheduler.RecPlanned, scheduler.RecEventEnded, scheduler.RecMergeCommitted, scheduler.RecDropped} {
		h.OnRecord("h1", scheduler.Record{Kind: k, Event: ev, Outcome: scheduler.Solved, Size: 2})
	}
	h.OnSend("h1", scheduler.Message{Type: scheduler.MsgGrow})
	h.OnExec("h1", ev, node.ExecResult{Actions: []node.ActionResult{{Action: scheduler.Action{Kind: scheduler.LiveMigrate}, Outcome: node.ActionDone}}})
	h.OnSolve("h1", scheduler.SolveRequest{}, scheduler.Solution{}, time.Millisecond)
	h.OnCompletion("h1", node.CompleteAbort, node.CompletionAccepted)
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "dvms_") {
			got = append(got, f.GetName())
		}
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(metricNames), novaMetricNames...)))
	if !slices.Equal(got, want) {
		t.Fatalf("registered families:\n %v\nmetricNames:\n %v", got, want)
	}
}

// The Grafana dashboard is well formed and every query names metrics the
// agents export.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile("../../etc/grafana/dvms.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title         string `json:"title"`
		UID           string `json:"uid"`
		SchemaVersion int    `json:"schemaVersion"`
		Panels        []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			GridPos *struct {
				X, Y, W, H int
			} `json:"gridPos"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatal(err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 || len(d.Panels) == 0 {
		t.Fatalf("not a dashboard: title %q uid %q schemaVersion %d, %d panels", d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	known := map[string]bool{}
	for _, n := range append(slices.Clone(metricNames), novaMetricNames...) {
		known[n] = true
		for _, s := range []string{"_bucket", "_count", "_sum"} {
			known[n+s] = true // histogram series
		}
	}
	name := regexp.MustCompile(`\bdvms_[a-z0-9_]+`)
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 || p.Type == "" || p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %d %q: needs a unique id, a type, a title and a grid position", p.ID, p.Title)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			used := name.FindAllString(q.Expr, -1)
			if len(used) == 0 || q.RefID == "" {
				t.Errorf("panel %q: query %q names no dvms metric (or has no refId)", p.Title, q.Expr)
			}
			for _, u := range used {
				if !known[u] {
					t.Errorf("panel %q: %s is not a metric the agents export", p.Title, u)
				}
			}
		}
	}
}

// The metrics' reason label is the class the executor set where it
// decided, not a reading of the reason's words.
func TestReasonClass(t *testing.T) {
	for _, c := range []struct {
		r    node.ActionResult
		want string
	}{
		{node.ActionResult{Outcome: node.ActionDone, Class: node.ReasonNone}, "none"},
		{node.ActionResult{Outcome: node.ActionSkipped, Class: node.ReasonDestinationDisabled, Reason: "anything at all"}, "destination_disabled"},
		{node.ActionResult{Outcome: node.ActionSkipped, Class: node.ReasonPaused, Reason: "destination is disabled/up"}, "paused"},
		{node.ActionResult{Outcome: node.ActionFailed, Reason: "destination is disabled/up"}, "other"},
	} {
		if got := reasonClass(c.r); got != c.want {
			t.Errorf("reasonClass(%+v) = %s, want %s", c.r, got, c.want)
		}
	}
}
