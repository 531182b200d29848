package nova

import (
	"sync"
	"testing"
	"time"
)

func TestPathTemplate(t *testing.T) {
	for _, tc := range []struct{ path, query, want string }{
		{"/servers/detail", "all_tenants=True&limit=1000&host=compute-1", "/servers/detail?all_tenants&host&limit"},
		{"/servers/8a9b3c1d-0000-4000-8000-000000000001/action", "", "/servers/{id}/action"},
		{"/resource_providers/11111111-0000-4000-8000-0000000000c1/usages", "", "/resource_providers/{id}/usages"},
		{"/servers/8A9B3C1D00004000800000000000000A", "", "/servers/{id}"},
		{"/servers/42/migrations/7", "", "/servers/{id}/migrations/{id}"},
		{"/servers/web-1", "", "/servers/web-1"},                                                               // a name is not an id
		{"/servers/8a9b3c1d-0000-4000-8000-00000000000g", "", "/servers/8a9b3c1d-0000-4000-8000-00000000000g"}, // not hex
		{"/os-services", "host=a&binary=nova-compute&host=b", "/os-services?binary&host"},
		{"/", "", "/"},
		{"/os-migrations/", "instance_uuid=x&", "/os-migrations?instance_uuid"},
	} {
		if got := PathTemplate(tc.path, tc.query); got != tc.want {
			t.Errorf("PathTemplate(%q, %q) = %q, want %q", tc.path, tc.query, got, tc.want)
		}
	}
}

func TestClassOf(t *testing.T) {
	for status, want := range map[int]string{
		0: ClassTransport, 200: ClassOK, 202: ClassOK, 204: ClassOK, 300: ClassOK,
		400: ClassBadRequest, 401: ClassUnauthorized, 403: ClassUnauthorized, 404: ClassNotFound,
		409: ClassConflict, 413: ClassClientError, 429: ClassServerError, 500: ClassServerError, 503: ClassServerError,
	} {
		if got := ClassOf(status); got != want {
			t.Errorf("ClassOf(%d) = %q, want %q", status, got, want)
		}
	}
}

func TestMeterCounts(t *testing.T) {
	m := NewMeter()
	list := Template{ServiceCompute, "GET", "/servers/detail?all_tenants&host&limit"}
	usage := Template{ServicePlacement, "GET", "/resource_providers/{id}/usages"}
	post := Template{ServiceCompute, "POST", "/servers/{id}/action"}
	for range 3 {
		m.Record(Request{Caller: "a", Template: list, Latency: time.Millisecond, Class: ClassOK})
	}
	m.Record(Request{Caller: "b", Template: usage, Latency: time.Millisecond, Class: ClassOK})
	m.Record(Request{Caller: "b", Template: post, Latency: time.Millisecond, Class: ClassConflict})
	m.Record(Request{Caller: "b", Template: post, Latency: time.Millisecond, Class: ClassOK})

	s := m.Snapshot()
	if s.Total != 6 || s.Errors != 1 {
		t.Fatalf("total %d errors %d, want 6 and 1", s.Total, s.Errors)
	}
	want := []struct {
		t      Template
		n, err int64
	}{{list, 3, 0}, {post, 2, 1}, {usage, 1, 0}}
	if len(s.Templates) != len(want) {
		t.Fatalf("templates %+v", s.Templates)
	}
	for i, w := range want {
		if g := s.Templates[i]; g.Template != w.t || g.Count != w.n || g.Errors != w.err {
			t.Errorf("template %d = %+v, want %v x%d (%d errors)", i, g, w.t, w.n, w.err)
		}
	}
	if s.Callers["a"] != 3 || s.Callers["b"] != 3 || m.CallerTotal("a") != 3 || m.CallerTotal("nobody") != 0 {
		t.Errorf("callers %v", s.Callers)
	}
	if m.CallerCount("b", post) != 2 || m.CallerCount("a", post) != 0 {
		t.Errorf("caller b posted %d, a %d", m.CallerCount("b", post), m.CallerCount("a", post))
	}
	if cc := m.CallerCounts("b"); len(cc) != 2 || cc[post] != 2 || cc[usage] != 1 || len(m.CallerCounts("nobody")) != 0 {
		t.Errorf("CallerCounts(b) = %v", cc)
	}
	if got := list.String(); got != "GET compute /servers/detail?all_tenants&host&limit" {
		t.Errorf("String() = %q", got)
	}
	m.Reset()
	if s := m.Snapshot(); s.Total != 0 || len(s.Templates) != 0 || m.CallerTotal("a") != 0 {
		t.Errorf("after Reset: %+v", s)
	}
}

func TestMeterPercentiles(t *testing.T) {
	m := NewMeter()
	tp := Template{ServiceCompute, "GET", "/servers/{id}"}
	for range 98 {
		m.Record(Request{Template: tp, Latency: 10 * time.Millisecond})
	}
	m.Record(Request{Template: tp, Latency: 2 * time.Second})
	m.Record(Request{Template: tp, Latency: 3 * time.Second})
	s := m.Snapshot()
	if s.P50 < 10*time.Millisecond || s.P50 > 12500*time.Microsecond {
		t.Errorf("p50 %s, want 10 ms within 25 %%", s.P50)
	}
	if s.P99 < 2*time.Second || s.P99 > 2500*time.Millisecond {
		t.Errorf("p99 %s, want 2 s within 25 %%", s.P99)
	}
	if s.Max != 3*time.Second || s.Templates[0].P99 != s.P99 {
		t.Errorf("max %s, template p99 %s", s.Max, s.Templates[0].P99)
	}
	// Every bucket's bounds hold its values, for all magnitudes.
	for d := time.Duration(0); d < time.Hour; d = d*5/4 + time.Microsecond {
		b := bucketOf(d)
		if up := upper(b); up < d.Truncate(time.Microsecond) || (b > 0 && upper(b-1) >= d.Truncate(time.Microsecond)) {
			t.Fatalf("%s in bucket %d, bounds (%s, %s]", d, b, upper(b-1), up)
		}
	}
}

// The latency of the requests since a mark leaves out those before it
// (a start-up storm must not hide what comes after).
func TestMeterLatencySince(t *testing.T) {
	m := NewMeter()
	tp := Template{ServiceCompute, "GET", "/servers/{id}"}
	for range 100 {
		m.Record(Request{Template: tp, Latency: 20 * time.Second})
	}
	mark := m.Mark()
	for range 100 {
		m.Record(Request{Template: tp, Latency: 10 * time.Millisecond})
	}
	n, p50, p99 := m.LatencySince(mark)
	if n != 100 || p50 > 12500*time.Microsecond || p99 > 12500*time.Microsecond {
		t.Fatalf("%d requests since the mark, p50 %s, p99 %s: want 100 at 10 ms", n, p50, p99)
	}
	if s := m.Snapshot(); s.P99 < 20*time.Second {
		t.Fatalf("p99 of every request %s, want the 20 s ones counted", s.P99)
	}
}

func TestMeterConcurrent(t *testing.T) {
	m := NewMeter()
	tp := Template{ServicePlacement, "GET", "/resource_providers"}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				m.Record(Request{Caller: string(rune('a' + i)), Template: tp, Latency: time.Duration(i) * time.Millisecond})
				_ = m.CallerTotal("a")
			}
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = m.Snapshot() }()
	wg.Wait()
	if s := m.Snapshot(); s.Total != 8000 || len(s.Callers) != 8 {
		t.Fatalf("total %d over %d callers", s.Total, len(s.Callers))
	}
}

// The exported histogram counts each request below exactly the bounds
// it is faster than, and sums the latencies.
func TestMeterLatencyHistograms(t *testing.T) {
	m := NewMeter()
	tmpl := Template{Service: ServiceCompute, Method: "GET", Path: "/servers/detail"}
	lat := []time.Duration{500 * time.Microsecond, 1023 * time.Microsecond, 1024 * time.Microsecond, 3 * time.Millisecond, 2 * time.Second, 100 * time.Second}
	for _, d := range lat {
		m.Record(Request{Template: tmpl, Latency: d, Class: ClassOK})
	}
	hs := m.LatencyHistograms()
	if len(hs) != 1 || hs[0].Template != tmpl || hs[0].Count != int64(len(lat)) {
		t.Fatalf("histograms %+v", hs)
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	if hs[0].Sum != sum {
		t.Errorf("sum %s, want %s", hs[0].Sum, sum)
	}
	for i, b := range LatencyBounds {
		var want int64
		for _, d := range lat {
			if d < b {
				want++
			}
		}
		if got := hs[0].Cumulative[i]; got != want {
			t.Errorf("below %s: %d, want %d", b, got, want)
		}
	}
}
