package diagnostics_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/diagnostics"
)

// api is a canned Nova: servers on a host and diagnostics per server.
type api struct {
	mu      sync.Mutex
	servers []nova.Server
	docs    map[string]string
	errs    map[string]error
	listErr error
}

func (a *api) Servers(context.Context, string) ([]nova.Server, error) {
	return a.servers, a.listErr
}

func (a *api) Diagnostics(_ context.Context, id string) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.errs[id]; err != nil {
		return nil, err
	}
	return []byte(a.docs[id]), nil
}

func (a *api) set(id, doc string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.docs[id] = doc
}

// libvirtDoc: cumulative time only (utilisation null), as libvirt does.
func libvirtDoc(timeNS ...float64) string {
	var cpus []string
	for i, ns := range timeNS {
		cpus = append(cpus, fmt.Sprintf(`{"id": %d, "time": %.0f, "utilisation": null}`, i, ns))
	}
	return `{"state": "running", "driver": "libvirt", "cpu_details": [` + strings.Join(cpus, ",") +
		`], "memory_details": {"maximum": 2048, "used": 1024}}`
}

func TestDemand(t *testing.T) {
	a := &api{
		servers: []nova.Server{
			{ID: "lv", Status: nova.StatusActive},
			{ID: "util", Status: nova.StatusMigrating},
			{ID: "off", Status: "SHUTOFF"},
			{ID: "gone", Status: nova.StatusActive},
			{ID: "busy", Status: nova.StatusActive},
		},
		docs: map[string]string{
			"lv":   libvirtDoc(1e9, 2e9),
			"util": `{"cpu_details": [{"id": 0, "time": null, "utilisation": 50}, {"id": 1, "utilisation": 25}], "memory_details": {"maximum": 512, "used": 300}}`,
		},
		errs: map[string]error{"gone": fmt.Errorf("x: %w", nova.ErrNotFound), "busy": fmt.Errorf("x: %w", nova.ErrConflict)},
	}
	now := time.Unix(0, 0)
	cfg := diagnostics.DefaultConfig()
	cfg.MinInterval = 10 * time.Second
	src, err := diagnostics.NewWithClock(cfg, a, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	d, err := src.Demand(context.Background(), "compute-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 1 || d["util"] != (nova.Demand{CPU: 0.75, RAMMB: 300}) {
		t.Fatalf("first call %v, want only the server with utilisation", d)
	}
	now = now.Add(4 * time.Second)
	a.set("lv", libvirtDoc(1e9+2e9, 2e9+4e9))
	if d, err = src.Demand(context.Background(), "compute-1"); err != nil || len(d) != 1 {
		t.Fatalf("call within MinInterval: %v, %v; want the first measurement again (no Nova request)", d, err)
	}
	now = now.Add(8 * time.Second)
	a.set("lv", libvirtDoc(1e9+6e9, 2e9+12e9)) // 18 s of CPU in 12 s
	d, err = src.Demand(context.Background(), "compute-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := d["lv"]; math.Abs(got.CPU-1.5) > 1e-9 || got.RAMMB != 1024 || len(d) != 2 {
		t.Errorf("second call %v, want lv at 1.5 cores / 1024 MB", d)
	}
}

func TestFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    *api
		want string
	}{
		{"listing fails", &api{listErr: nova.ErrUnavailable}, "unavailable"},
		{"diagnostics fail", &api{servers: []nova.Server{{ID: "s", Status: nova.StatusActive}}, errs: map[string]error{"s": nova.ErrUnavailable}}, "unavailable"},
		{"bad json", &api{servers: []nova.Server{{ID: "s", Status: nova.StatusActive}}, docs: map[string]string{"s": `{`}}, "document"},
		{"no memory", &api{servers: []nova.Server{{ID: "s", Status: nova.StatusActive}}, docs: map[string]string{"s": `{"cpu_details": [{"id": 0, "time": 1}]}`}}, "memory_details"},
		{"no cpu", &api{servers: []nova.Server{{ID: "s", Status: nova.StatusActive}}, docs: map[string]string{"s": `{"memory_details": {"used": 1}}`}}, "cpu_details"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, _ := diagnostics.New(diagnostics.DefaultConfig(), tc.a)
			d, err := src.Demand(context.Background(), "h")
			if err == nil || d != nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Demand = %v, %v; want an error about %q", d, err, tc.want)
			}
		})
	}
	if _, err := diagnostics.New(diagnostics.Config{}, &api{}); err == nil {
		t.Error("concurrency 0 accepted")
	}
	if _, err := diagnostics.New(diagnostics.DefaultConfig(), nil); err == nil || errors.Is(err, nova.ErrNotFound) {
		t.Error("nil API accepted")
	}
}
