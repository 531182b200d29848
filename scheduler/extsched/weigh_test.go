package extsched

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// summary builds a fresh summary of an 8-core, 32 GB host.
func summary(host string, opts ...func(*Summary)) Summary {
	s := Summary{V: 1, Host: host, At: t0, Seq: 1, CPUs: 8, RAMMB: 32768, AllocVCPUs: 32, AllocRAMMB: 32768}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func demand(cpu, ram float64) func(*Summary) {
	return func(s *Summary) { s.CPUDemand, s.RAMDemand = cpu, ram }
}
func draining(s *Summary) { s.Draining, s.Disabled = true, true }
func disabled(s *Summary) { s.Disabled = true }
func planMoves(host string, in, out int) func(*Summary) {
	return func(s *Summary) {
		if s.PlanMoves == nil {
			s.PlanMoves = map[string]Moves{}
		}
		s.PlanMoves[host] = Moves{In: in, Out: out}
	}
}

func request(hosts ...string) Request {
	r := Request{Weights: map[string]float64{}}
	for _, h := range hosts {
		r.Hosts = append(r.Hosts, RequestHost{Host: h, HypervisorHostname: h})
		r.Weights[h] = 1
	}
	return r
}

var small = Spec{Flavor: "m1.small", VCPUs: 1, RAMMB: 2048}

func TestWeigh(t *testing.T) {
	cases := []struct {
		name      string
		cfg       func(*Config)
		spec      Spec
		req       Request
		weights   map[string]float64
		summaries []Summary
		received  map[string]time.Time // default t0
		want      []string
		tiers     map[string]Tier
	}{
		{name: "most measured headroom first although Nova ranks it last",
			req:       request("busy", "half", "idle"),
			weights:   map[string]float64{"busy": 3, "half": 2, "idle": 1},
			summaries: []Summary{summary("busy", demand(6.5, 4096)), summary("half", demand(4, 4096)), summary("idle", demand(0.5, 4096))},
			want:      []string{"idle", "half", "busy"}},
		{name: "a flavor that pushes demand over the threshold goes after unknown hosts",
			spec:      Spec{VCPUs: 4, RAMMB: 2048},
			req:       request("hot", "new", "cool"),
			summaries: []Summary{summary("hot", demand(5, 1024)), summary("cool", demand(1, 1024))},
			want:      []string{"cool", "new", "hot"},
			tiers:     map[string]Tier{"hot": Tight, "new": Unknown, "cool": Roomy}},
		{name: "draining, disabled and moving hosts last, in Nova's order",
			req: request("drain", "off", "moving", "ok"),
			summaries: []Summary{summary("drain", draining), summary("off", disabled), summary("moving"),
				summary("ok", demand(7, 0)), summary("leader", planMoves("moving", 1, 0))},
			want:  []string{"ok", "drain", "off", "moving"},
			tiers: map[string]Tier{"drain": Avoided, "off": Avoided, "moving": Avoided}},
		{name: "moves within the limit are allowed",
			cfg:       func(c *Config) { c.MaxMoves = 1 },
			req:       request("moving", "busy"),
			summaries: []Summary{summary("moving", planMoves("moving", 0, 1)), summary("busy", demand(6, 0))},
			want:      []string{"moving", "busy"}},
		{name: "own migrating servers count as moves out",
			req:       request("a", "b"),
			summaries: []Summary{summary("a", func(s *Summary) { s.MovesOut = 1 }), summary("b", demand(6, 0))},
			want:      []string{"b", "a"}},
		{name: "drop avoided hosts when configured",
			cfg:       func(c *Config) { c.DropAvoided = true },
			req:       request("drain", "ok"),
			summaries: []Summary{summary("drain", draining), summary("ok")},
			want:      []string{"ok"}},
		{name: "never drop every candidate",
			cfg:       func(c *Config) { c.DropAvoided = true },
			req:       request("d1", "d2"),
			summaries: []Summary{summary("d1", draining), summary("d2", draining)},
			want:      []string{"d1", "d2"}},
		{name: "stale and unknown hosts keep Nova's order",
			req:       request("c", "a", "b"),
			summaries: []Summary{summary("a", demand(7, 0))},
			received:  map[string]time.Time{"a": t0.Add(-time.Hour)},
			want:      []string{"c", "a", "b"},
			tiers:     map[string]Tier{"a": Unknown}},
		{name: "a stale draining host is unknown, not avoided",
			req:       request("x", "y"),
			summaries: []Summary{summary("x", draining)},
			received:  map[string]time.Time{"x": t0.Add(-time.Hour)},
			want:      []string{"x", "y"}},
		{name: "anti-affinity: hosts of the group go last",
			spec:      Spec{VCPUs: 1, RAMMB: 512, GroupPolicy: "anti-affinity", GroupHosts: []string{"idle"}},
			req:       request("idle", "half"),
			summaries: []Summary{summary("idle"), summary("half", demand(4, 0))},
			want:      []string{"half", "idle"},
			tiers:     map[string]Tier{"idle": Avoided}},
		{name: "affinity: Nova's order",
			spec:      Spec{VCPUs: 1, GroupPolicy: "affinity", GroupHosts: []string{"busy"}},
			req:       request("busy", "idle"),
			summaries: []Summary{summary("busy", demand(7, 0)), summary("idle")},
			want:      []string{"busy", "idle"}},
		{name: "Nova's weight breaks near ties",
			req:       request("a", "b"),
			weights:   map[string]float64{"a": 0, "b": 10},
			summaries: []Summary{summary("a", demand(1, 0)), summary("b", demand(1.5, 0))},
			want:      []string{"b", "a"}},
		{name: "ram counts too",
			spec:      Spec{VCPUs: 1, RAMMB: 8192},
			req:       request("fullram", "ok"),
			summaries: []Summary{summary("fullram", demand(0, 30000)), summary("ok", demand(4, 0))},
			want:      []string{"ok", "fullram"},
			tiers:     map[string]Tier{"fullram": Tight}},
		{name: "rebuild keeps Nova's order",
			req:       func() Request { r := request("busy", "idle"); r.Rebuild = true; return r }(),
			summaries: []Summary{summary("busy", demand(7, 0)), summary("idle")},
			want:      []string{"busy", "idle"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			spec := tc.spec
			if spec.VCPUs == 0 && spec.RAMMB == 0 && spec.GroupPolicy == "" {
				spec = small
			}
			for h, w := range tc.weights {
				tc.req.Weights[h] = w
			}
			v := NewView(cfg.StaleAfter, cfg.PendingTTL)
			for _, s := range tc.summaries {
				at, ok := tc.received[s.Host]
				if !ok {
					at = t0
				}
				v.Update(s, at)
			}
			var names []string
			for _, h := range tc.req.Hosts {
				names = append(names, h.Name())
			}
			d := Weigh(cfg, spec, tc.req, v.States(names, t0.Add(time.Second)))
			if !reflect.DeepEqual(d.Hosts, tc.want) {
				t.Errorf("hosts %v, want %v\n%+v", d.Hosts, tc.want, d.Ranked)
			}
			for h, tier := range tc.tiers {
				for _, r := range d.Ranked {
					if r.Host == h && r.Tier != tier {
						t.Errorf("%s: tier %s, want %s (%s)", h, r.Tier, tier, r.Reason)
					}
				}
			}
			for _, r := range d.Ranked {
				if r.Reason == "" && d.Reason == "" {
					t.Errorf("%s: no reason", r.Host)
				}
			}
		})
	}
}

// A host put first for a boot carries the flavor until the TTL, so a
// burst of boots spreads instead of piling on the roomiest host.
func TestPendingBootsSpread(t *testing.T) {
	cfg := DefaultConfig()
	v := NewView(cfg.StaleAfter, cfg.PendingTTL)
	v.Update(summary("a", demand(1, 0)), t0)
	v.Update(summary("b", demand(2, 0)), t0)
	req := request("a", "b")
	spec := Spec{VCPUs: 2, RAMMB: 1024}
	var firsts []string
	for i := 0; i < 4; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		d := Weigh(cfg, spec, req, v.States([]string{"a", "b"}, now))
		firsts = append(firsts, d.Hosts[0])
		v.Reserve(d.Hosts[0], float64(spec.VCPUs), float64(spec.RAMMB), now)
	}
	if want := []string{"a", "b", "a", "b"}; !reflect.DeepEqual(firsts, want) {
		t.Fatalf("boots went to %v, want %v", firsts, want)
	}
	st := v.States([]string{"a"}, t0.Add(cfg.PendingTTL+5*time.Second))
	if st[0].PendingVCPUs != 0 {
		t.Fatalf("pending boots outlive their TTL: %+v", st[0])
	}
}

func TestViewKeepsTheNewestSummary(t *testing.T) {
	v := NewView(time.Minute, 0)
	newer := summary("a", demand(3, 0))
	newer.At = t0.Add(time.Second)
	v.Update(newer, t0)
	if v.Update(summary("a", demand(1, 0)), t0.Add(2*time.Second)) {
		t.Fatal("an older summary replaced a newer one")
	}
	if st := v.States([]string{"a"}, t0); st[0].Summary.CPUDemand != 3 {
		t.Fatalf("view has %+v", st[0].Summary)
	}
}

func TestParseSpecNovaPrimitive(t *testing.T) {
	raw := `{"nova_object.name": "RequestSpec", "nova_object.namespace": "nova", "nova_object.version": "1.14",
	  "nova_object.data": {"instance_uuid": "u-1", "project_id": "p", "num_instances": 2,
	    "flavor": {"nova_object.name": "Flavor", "nova_object.data": {"name": "m1.small", "vcpus": 1, "memory_mb": 2048, "extra_specs": {}}},
	    "instance_group": {"nova_object.name": "InstanceGroup", "nova_object.data": {"policy": "anti-affinity", "hosts": ["compute-2"], "members": ["u-0"]}},
	    "scheduler_hints": {"group": ["g-1"]}}}`
	s, err := ParseSpec(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{InstanceUUID: "u-1", ProjectID: "p", NumInstances: 2, Flavor: "m1.small", VCPUs: 1, RAMMB: 2048,
		GroupPolicy: "anti-affinity", GroupHosts: []string{"compute-2"}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("spec %+v, want %+v", s, want)
	}
	old, err := ParseSpec(json.RawMessage(`{"flavor": {"vcpus": 2, "memory_mb": 1}, "instance_group": {"policies": ["affinity"]}}`))
	if err != nil || old.VCPUs != 2 || old.GroupPolicy != "affinity" {
		t.Fatalf("plain spec: %+v %v", old, err)
	}
	for _, bad := range []string{``, `null`, `{"flavor": {"vcpus": "two"}}`, `{"flavor": {"vcpus": -1}}`} {
		if _, err := ParseSpec(json.RawMessage(bad)); err == nil {
			t.Errorf("spec %q accepted", bad)
		}
	}
}

func TestSummaryRoundTripAndChange(t *testing.T) {
	s := summary("a", demand(2, 1024), planMoves("b", 1, 0))
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSummary(data)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip %+v %v", got, err)
	}
	for _, bad := range []string{`{}`, `{"v":1,"at":"2026-01-01T00:00:00Z"}`, `{"v":2,"host":"a","at":"2026-01-01T00:00:00Z"}`, `{"v":1,"host":"a"}`, `[`} {
		if _, err := DecodeSummary([]byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "extsched: summary") {
			t.Errorf("summary %s: error %v", bad, err)
		}
	}
	if Changed(s, s, 0.1) {
		t.Error("a summary changed from itself")
	}
	for name, f := range map[string]func(*Summary){
		"draining":   draining,
		"cpu demand": func(x *Summary) { x.CPUDemand += 1 },
		"plan moves": planMoves("b", 2, 0),
		"partition":  func(x *Summary) { x.Partition = "finishing" },
	} {
		c := summary("a", demand(2, 1024), planMoves("b", 1, 0))
		f(&c)
		if !Changed(s, c, 0.1) {
			t.Errorf("%s: not a change", name)
		}
	}
	small := summary("a", demand(2.5, 1024), planMoves("b", 1, 0))
	if Changed(s, small, 0.1) {
		t.Error("0.5 core on 8 is a change at 10%")
	}
}

// testdata/nova_request.json is what dvms_nova's weigher sends for a real
// RequestSpec of Debian's Nova (its test FixtureTest checks the same
// bytes): the service reads the flavor, the group and Nova's weights from it.
func TestNovaRequestFixture(t *testing.T) {
	data, err := os.ReadFile("testdata/nova_request.json")
	if err != nil {
		t.Fatal(err)
	}
	var req Request
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatal(err)
	}
	spec, err := ParseSpec(req.Spec)
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{InstanceUUID: "11111111-2222-3333-4444-555555555555", ProjectID: "p1", NumInstances: 1,
		Flavor: "m1.small", VCPUs: 2, RAMMB: 2048, GroupPolicy: "anti-affinity", GroupHosts: []string{"compute-2"}}
	if !reflect.DeepEqual(spec, want) {
		t.Fatalf("spec %+v, want %+v", spec, want)
	}
	if len(req.Hosts) != 3 || req.Hosts[0].Name() != "compute-1" || req.Hosts[0].HypervisorHostname != "compute-1.node" ||
		req.Weights["compute-1"] != 1.5 || req.Rebuild {
		t.Fatalf("request %+v", req)
	}
	cfg := DefaultConfig()
	v := NewView(cfg.StaleAfter, cfg.PendingTTL)
	for _, h := range []string{"compute-1", "compute-2", "compute-3"} {
		v.Update(summary(h), t0)
	}
	d := Weigh(cfg, spec, req, v.States([]string{"compute-1", "compute-2", "compute-3"}, t0))
	if want := []string{"compute-1", "compute-3", "compute-2"}; !reflect.DeepEqual(d.Hosts, want) {
		t.Fatalf("hosts %v, want %v (compute-2 holds a member of the anti-affinity group)", d.Hosts, want)
	}
}
