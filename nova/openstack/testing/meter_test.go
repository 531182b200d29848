package testing

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
)

// The client's meter sees every request at the HTTP transport: the
// token, a re-authentication after a 401, read retries after a 503, and
// each request of a composite call, by template.
func TestMeterCountsEveryRequest(t *testing.T) {
	c := newCloud(t)
	c.mux.HandleFunc("GET "+computePrefix+"/os-services", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, service1Body)
	})
	c.handle("GET "+placementPrefix+"/resource_providers", 200, `{"resource_providers": [{"uuid": "`+rp1+`", "name": "compute-1"}]}`)
	c.handle("GET "+placementPrefix+"/resource_providers/"+rp1+"/inventories", 200, inventories1Body)
	c.handle("GET "+placementPrefix+"/resource_providers/"+rp1+"/usages", 200, usages1Body)
	var flaky atomic.Int32
	c.mux.HandleFunc("GET "+computePrefix+"/servers/"+server1, func(w http.ResponseWriter, r *http.Request) {
		if flaky.Add(1) == 1 {
			reply(w, 503, `{"computeFault": {"code": 503, "message": "busy"}}`)
			return
		}
		reply(w, 200, `{"server": {"id": "`+server1+`", "status": "ACTIVE"}}`)
	})
	c.handle("POST "+computePrefix+"/servers/"+server1+"/action", 409, conflictBody)
	cl := c.client()
	m := cl.Meter()
	ctx := context.Background()

	if _, err := cl.Host(ctx, "compute-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Server(ctx, server1); err != nil { // 503, then 200
		t.Fatal(err)
	}
	c.mu.Lock()
	c.revoked["token-1"] = true
	c.mu.Unlock()
	if _, err := cl.Server(ctx, server1); err != nil { // 401, token, 200
		t.Fatal(err)
	}
	if _, err := cl.LiveMigrate(ctx, server1, "compute-2"); err == nil {
		t.Fatal("live-migrate answered 409 succeeded")
	}

	s := m.Snapshot()
	got := map[string][2]int64{}
	for _, ts := range s.Templates {
		got[ts.Template.String()] = [2]int64{ts.Count, ts.Errors}
	}
	want := map[string][2]int64{
		"POST identity /auth/tokens":                         {2, 0},
		"GET other /placement":                               {1, 0}, // version discovery while connecting
		"GET compute /os-services?binary&host":               {1, 0},
		"GET placement /resource_providers?name":             {1, 0},
		"GET placement /resource_providers/{id}/inventories": {1, 0},
		"GET placement /resource_providers/{id}/usages":      {1, 0},
		"GET compute /servers/{id}":                          {4, 2}, // 503 + 200, 401 + 200
		"POST compute /servers/{id}/action":                  {1, 1},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %v (count, errors), want %v", k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected template %s: %v", k, g)
		}
	}
	if s.Total != 12 || s.Errors != 3 {
		t.Errorf("total %d errors %d, want 12 and 3", s.Total, s.Errors)
	}
	if s.P99 <= 0 || s.P50 > s.P99 {
		t.Errorf("latency p50 %s p99 %s", s.P50, s.P99)
	}
}
