package agentd

import (
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
	"github.com/dvms-project/dvms/scheduler/extsched/schedapi"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/status"
)

// Every family the agent registers is in metricNames, and only those:
// the dashboard test trusts that list.
func TestMetricNamesAreWhatTheAgentRegisters(t *testing.T) {
	meter := nova.NewMeter()
	meter.Record(nova.Request{Template: nova.Template{Service: nova.ServiceCompute, Method: "GET", Path: "/servers/detail"}, Latency: time.Millisecond, Class: nova.ClassOK})
	m := newAgentMetrics(metricsSources{host: "h1", version: "test", meter: meter,
		dropped: func() int64 { return 0 }, bounded: func() map[string]int64 { return nil }, members: func() int { return 1 }, watch: func() bool { return true },
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

// The Grafana dashboard is well formed: region, host and scheduler-api
// variables, a row per component, panels that do not overlap, and every
// query names metrics the agents or scheduler-api export, filtered by
// the variables.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 || len(d.Panels) == 0 {
		t.Fatalf("not a dashboard: title %q uid %q schemaVersion %d, %d panels", d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"datasource", "region", "host", "scheduler_api"} {
		if !vars[v] {
			t.Errorf("no $%s variable", v)
		}
	}
	known := map[string]bool{"process_resident_memory_bytes": true, "process_cpu_seconds_total": true, "go_memstats_heap_inuse_bytes": true}
	for _, n := range slices.Concat(metricNames, novaMetricNames, schedapi.MetricNames) {
		known[n] = true
		for _, s := range []string{"_bucket", "_count", "_sum"} {
			known[n+s] = true // histogram series
		}
	}
	name := regexp.MustCompile(`\b(?:dvms|go|process)_[a-z0-9_]+(\{[^}]*\})?`)
	ids := map[int]bool{}
	var rows []string
	var cells []gridPos
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 || p.Type == "" || p.Title == "" || p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %d %q: needs a unique id, a type, a title and a grid position within 24 columns", p.ID, p.Title)
			continue
		}
		ids[p.ID] = true
		g := *p.GridPos
		for _, o := range cells {
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				t.Errorf("panel %q at %+v overlaps another at %+v", p.Title, g, o)
			}
		}
		cells = append(cells, g)
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			used := name.FindAllStringSubmatch(q.Expr, -1)
			if len(used) == 0 || q.RefID == "" {
				t.Errorf("panel %q: query %q names no dvms metric (or has no refId)", p.Title, q.Expr)
			}
			for _, u := range used {
				metric := strings.TrimSuffix(u[0], u[1])
				if !known[metric] {
					t.Errorf("panel %q: %s is not a metric the agents or scheduler-api export", p.Title, metric)
				}
				if !strings.Contains(u[1], `region=~"$region"`) ||
					!strings.Contains(u[1], `host=~"$host"`) && !strings.Contains(u[1], `instance=~"$scheduler_api"`) {
					t.Errorf("panel %q: %s is not filtered by $region and $host (or $scheduler_api)", p.Title, u[0])
				}
			}
		}
	}
	if !slices.Equal(rows, []string{"Agents", "scheduler-api"}) {
		t.Errorf("rows %v, want Agents and scheduler-api", rows)
	}
}

type gridPos struct{ X, Y, W, H int }

// dashboard is what the tests read of etc/grafana/dvms.json.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID      int      `json:"id"`
		Type    string   `json:"type"`
		Title   string   `json:"title"`
		GridPos *gridPos `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("../../etc/grafana/dvms.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d
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
