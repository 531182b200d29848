package prometheus_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/prometheus"
)

const (
	cpuQuery = `sum by (instance_uuid) (rate(cpu_seconds{host="$host"}[1m]))`
	ramQuery = `sum by (instance_uuid) (mem_bytes{host="$host"})`
)

func vector(series string) string {
	return `{"status": "success", "data": {"resultType": "vector", "result": [` + series + `]}}`
}

// prom answers the CPU and RAM queries with canned bodies and records
// the queries it got.
func prom(t *testing.T, cpu, ram string, status int) (*httptest.Server, *[]string) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			t.Errorf("path %s", r.URL.Path)
		}
		q := r.URL.Query().Get("query")
		got = append(got, q)
		w.WriteHeader(status)
		if strings.Contains(q, "cpu_seconds") {
			w.Write([]byte(cpu))
		} else {
			w.Write([]byte(ram))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func config(url string) prometheus.Config {
	cfg := prometheus.DefaultConfig()
	cfg.URL, cfg.CPUQuery, cfg.RAMQuery, cfg.UUIDLabel = url, cpuQuery, ramQuery, "instance_uuid"
	return cfg
}

func TestDemand(t *testing.T) {
	srv, got := prom(t,
		vector(`{"metric": {"instance_uuid": "s1"}, "value": [1700000000.5, "1.25"]},
		        {"metric": {"instance_uuid": "s2"}, "value": [1700000000.5, "0"]},
		        {"metric": {"instance_uuid": "s3"}, "value": [1700000000.5, "2"]}`),
		vector(`{"metric": {"instance_uuid": "s1"}, "value": [1700000000.5, "536870912"]},
		        {"metric": {"instance_uuid": "s2"}, "value": [1700000000.5, "1048576"]}`), 200)
	src, err := prometheus.New(config(srv.URL + "/"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := src.Demand(context.Background(), `compute-1`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]nova.Demand{"s1": {CPU: 1.25, RAMMB: 512}, "s2": {CPU: 0, RAMMB: 1}}
	if len(d) != 2 || d["s1"] != want["s1"] || d["s2"] != want["s2"] {
		t.Errorf("demand %v, want %v (s3 has no RAM series)", d, want)
	}
	if len(*got) != 2 || (*got)[0] != `sum by (instance_uuid) (rate(cpu_seconds{host="compute-1"}[1m]))` {
		t.Errorf("queries sent %q", *got)
	}
}

func TestHostIsEscaped(t *testing.T) {
	srv, got := prom(t, vector(""), vector(""), 200)
	src, _ := prometheus.New(config(srv.URL))
	if _, err := src.Demand(context.Background(), `evil"} or vector(1) #`); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains((*got)[0], `host="evil\"} or vector(1) #"`) {
		t.Errorf("host not escaped: %q", (*got)[0])
	}
}

func TestFailures(t *testing.T) {
	ok := vector(`{"metric": {"instance_uuid": "s1"}, "value": [1, "1"]}`)
	for _, tc := range []struct {
		name, cpu, ram string
		status         int
		want           string
	}{
		{"query error", `{"status": "error", "errorType": "bad_data", "error": "parse error"}`, ok, 400, "parse error"},
		{"not json", `<html>`, ok, 502, "HTTP 502"},
		{"matrix", `{"status": "success", "data": {"resultType": "matrix", "result": []}}`, ok, 200, "want vector"},
		{"no label", vector(`{"metric": {"uuid": "s1"}, "value": [1, "1"]}`), ok, 200, "no \"instance_uuid\" label"},
		{"duplicate", vector(`{"metric": {"instance_uuid": "s1"}, "value": [1, "1"]}, {"metric": {"instance_uuid": "s1"}, "value": [1, "2"]}`), ok, 200, "several series"},
		{"NaN", vector(`{"metric": {"instance_uuid": "s1"}, "value": [1, "NaN"]}`), ok, 200, "not a non-negative"},
		{"ram fails", ok, `{"status": "error", "error": "timeout"}`, 200, "RAM query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := prom(t, tc.cpu, tc.ram, tc.status)
			src, _ := prometheus.New(config(srv.URL))
			d, err := src.Demand(context.Background(), "h")
			if err == nil || d != nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Demand = %v, %v; want an error about %q", d, err, tc.want)
			}
		})
	}
	srv, _ := prom(t, ok, ok, 200)
	srv.Close()
	src, _ := prometheus.New(config(srv.URL))
	if _, err := src.Demand(context.Background(), "h"); err == nil {
		t.Error("unreachable Prometheus: no error")
	}
}

func TestValidate(t *testing.T) {
	err := prometheus.Config{URL: "ftp://x"}.Validate()
	for _, want := range []string{"url", "CPU query", "RAM query", "uuid label", "timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
}
