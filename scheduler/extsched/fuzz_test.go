package extsched_test

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler/extsched"
)

// Whatever Nova (or anyone reaching scheduler-api) sends, parsing and
// weighing never panic, and the answer only ever names candidates of the
// request (Nova's hook refuses an answer with other hosts).
func FuzzWeighRequest(f *testing.F) {
	if b, err := os.ReadFile("testdata/nova_request.json"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{``, `{}`, `null`, `{"hosts":[{"host":""}],"spec":"x"}`,
		`{"spec":{"nova_object.data":{"flavor":{"nova_object.data":{"vcpus":-1,"memory_mb":1e300}},"num_instances":-5}},"hosts":[{"host":"compute-1"},{"compute_host":"compute-2"}],"weights":{"compute-1":"NaN"}}`,
		`{"spec":{"instance_group":{"policy":"anti-affinity","hosts":null}},"hosts":[{"host":"compute-1"},{"host":"compute-1"}]}`} {
		f.Add([]byte(s))
	}
	now := time.Unix(1_700_000_000, 0)
	v := extsched.NewView(time.Minute, time.Minute)
	for _, s := range []extsched.Summary{
		{V: 1, Host: "compute-1", CPUs: 8, RAMMB: 16384, CPUDemand: 2, RAMDemand: 1024, AllocVCPUs: 32, AllocRAMMB: 16384, At: now, SampledAt: now, Seq: 1},
		{V: 1, Host: "compute-2", CPUs: 8, RAMMB: 16384, CPUDemand: 7.9, RAMDemand: 16000, AllocVCPUs: 32, AllocRAMMB: 16384, Draining: true, At: now, SampledAt: now, Seq: 1},
	} {
		v.Update(s, now)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req extsched.Request
		if json.Unmarshal(data, &req) != nil {
			return
		}
		spec, err := extsched.ParseSpec(req.Spec)
		if err != nil {
			return
		}
		names := make([]string, len(req.Hosts))
		for i, h := range req.Hosts {
			names[i] = h.Name()
		}
		d := extsched.Weigh(extsched.DefaultConfig(), spec, req, v.States(names, now))
		for _, h := range d.Hosts {
			if !slices.Contains(names, h) {
				t.Fatalf("answer names %q, not a candidate of %v", h, names)
			}
		}
	})
}

// A summary from the bus is decoded or refused, never half taken.
func FuzzDecodeSummary(f *testing.F) {
	good, _ := extsched.Summary{Host: "compute-1", CPUs: 8, RAMMB: 1024, At: time.Unix(1_700_000_000, 0)}.Encode()
	for _, s := range [][]byte{good, []byte(`{}`), []byte(`{"v":1,"host":"h","cpus":-1}`), []byte(`{"v":1,"host":"h","cpus":1e309}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := extsched.DecodeSummary(data)
		if err == nil && (s.Host == "" || s.V != 1) {
			t.Fatalf("accepted %+v", s)
		}
	})
}
