package fakeapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fakeapi"
)

// token authenticates with a raw keystone request.
func (b *bed) token(t *testing.T) string {
	t.Helper()
	body := `{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "password": "x",
	  "domain": {"name": "Default"}}}}, "scope": {"project": {"name": "admin", "domain": {"name": "Default"}}}}}`
	resp, err := http.Post(b.srv.URL+"/identity/v3/auth/tokens", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Token struct {
			Catalog []struct {
				Type      string `json:"type"`
				Endpoints []struct {
					Interface, Region, URL string
				} `json:"endpoints"`
			} `json:"catalog"`
		} `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("token: HTTP %d, %v", resp.StatusCode, err)
	}
	types := map[string]string{}
	for _, e := range doc.Token.Catalog {
		for _, ep := range e.Endpoints {
			if ep.Interface == "internal" && ep.Region == "RegionOne" {
				types[e.Type] = ep.URL
			}
		}
	}
	if types["compute"] != b.srv.URL+"/compute/v2.1" || types["placement"] != b.srv.URL+"/placement" {
		t.Errorf("catalog internal endpoints %v", types)
	}
	return resp.Header.Get("X-Subject-Token")
}

// do sends one request and returns its status and decoded JSON body.
func do(t *testing.T, method, url, token, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	req.Header.Set("OpenStack-API-Version", "compute 2.91")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s %s: body %q is not JSON", method, url, raw)
		}
	}
	return resp.StatusCode, doc
}

// TestRequestsRefused: bodies, paths, tokens and versions the API
// refuses, each with its status and a body in the service's format.
func TestRequestsRefused(t *testing.T) {
	b := newBed(t, fakeapi.Options{})
	noErr(t, b.cloud.AddServer(nova.Server{ID: "s1", Name: "s1", Host: "compute-1", VCPUs: 1, RAMMB: 512}))
	tok := b.token(t)
	compute, placement := b.srv.URL+"/compute/v2.1", b.srv.URL+"/placement"
	for _, tc := range []struct {
		name, method, url, token, body string
		header                         []string
		status                         int
		key, contains                  string // error body member and message part
	}{
		{"malformed action", "POST", compute + "/servers/s1/action", tok, `{"shelve": `, nil, 400, "badRequest", "Malformed request body"},
		{"empty action", "POST", compute + "/servers/s1/action", tok, ``, nil, 400, "badRequest", "Malformed request body"},
		{"two actions", "POST", compute + "/servers/s1/action", tok, `{"shelve": null, "shelveOffload": null}`, nil, 400, "badRequest", "exactly one"},
		{"unknown action", "POST", compute + "/servers/s1/action", tok, `{"reboot": {"type": "HARD"}}`, nil, 400, "badRequest", "no such action"},
		{"migrate without block_migration", "POST", compute + "/servers/s1/action", tok, `{"os-migrateLive": {"host": "compute-2"}}`, nil, 400, "badRequest", "block_migration"},
		{"migrate with an unknown member", "POST", compute + "/servers/s1/action", tok, `{"os-migrateLive": {"host": null, "block_migration": "auto", "force": true}}`, nil, 400, "badRequest", "force"},
		{"migrate to an empty host name", "POST", compute + "/servers/s1/action", tok, `{"os-migrateLive": {"host": "", "block_migration": "auto"}}`, nil, 400, "badRequest", "too short"},
		{"unshelve with an availability zone", "POST", compute + "/servers/s1/action", tok, `{"unshelve": {"availability_zone": "az1"}}`, nil, 400, "badRequest", "availability_zone"},
		{"shelve with arguments", "POST", compute + "/servers/s1/action", tok, `{"shelve": {"x": 1}}`, nil, 400, "badRequest", "null"},
		{"malformed service update", "PUT", compute + "/os-services/" + "a1a1a1a1-0000-4000-8000-0000000000b1", tok, `{"status": }`, nil, 400, "badRequest", "Malformed"},
		{"service update by name", "PUT", compute + "/os-services/compute-1", tok, `{"status": "enabled"}`, nil, 400, "badRequest", "Invalid uuid"},
		{"unknown service", "PUT", compute + "/os-services/a1a1a1a1-0000-4000-8000-0000000000b1", tok, `{"status": "enabled"}`, nil, 404, "itemNotFound", "could not be found"},
		{"reason with enable", "PUT", compute + "/os-services/a1a1a1a1-0000-4000-8000-0000000000b1", tok, `{"status": "enabled", "disabled_reason": "x"}`, nil, 400, "badRequest", "disabled_reason"},
		{"metadata mismatch", "PUT", compute + "/servers/s1/metadata/a", tok, `{"meta": {"b": "1"}}`, nil, 400, "badRequest", "mismatch"},
		{"metadata not a string", "PUT", compute + "/servers/s1/metadata/a", tok, `{"meta": {"a": 1}}`, nil, 400, "badRequest", "Malformed"},
		{"absent metadata key", "DELETE", compute + "/servers/s1/metadata/nope", tok, ``, nil, 404, "itemNotFound", "not found"},
		{"unknown server", "GET", compute + "/servers/nope", tok, ``, nil, 404, "itemNotFound", "nope"},
		{"unknown query parameter", "GET", compute + "/servers/detail?changes-since=2026-01-01", tok, ``, nil, 400, "badRequest", "changes-since"},
		{"unknown marker", "GET", compute + "/servers/detail?marker=nope", tok, ``, nil, 400, "badRequest", "marker"},
		{"bad limit", "GET", compute + "/servers/detail?limit=-1", tok, ``, nil, 400, "badRequest", "limit"},
		{"unknown group", "GET", compute + "/os-server-groups/nope", tok, ``, nil, 404, "itemNotFound", "nope"},
		{"diagnostics of an offloaded server", "GET", compute + "/servers/off/diagnostics", tok, ``, nil, 409, "conflictingRequest", "vm_state"},
		{"unknown compute path", "GET", compute + "/os-hypervisors", tok, ``, nil, 404, "itemNotFound", "os-hypervisors"},
		{"unknown root path", "GET", b.srv.URL + "/nothing", "", ``, nil, 404, "itemNotFound", "nothing"},
		{"no token", "GET", compute + "/servers/s1", "", ``, nil, 401, "unauthorized", "authentication"},
		{"unknown token", "GET", compute + "/servers/s1", "forged", ``, nil, 401, "unauthorized", "authentication"},
		{"other microversion", "GET", compute + "/servers/s1", tok, ``, []string{"OpenStack-API-Version", "compute 2.95"}, 406, "computeFault", "2.95"},
		{"placement without token", "GET", placement + "/resource_providers", "", ``, nil, 401, "errors", "authentication"},
		{"unknown provider", "GET", placement + "/resource_providers/nope/usages", tok, ``, nil, 404, "errors", "nope"},
		{"unknown placement path", "GET", placement + "/allocation_candidates", tok, ``, nil, 404, "errors", "allocation_candidates"},
		{"malformed token request", "POST", b.srv.URL + "/identity/v3/auth/tokens", "", `{"auth": `, nil, 400, "error", "Malformed"},
		{"token for another project", "POST", b.srv.URL + "/identity/v3/auth/tokens", "",
			`{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "admin", "password": "x"}}}, "scope": {"project": {"name": "other"}}}}`,
			nil, 401, "error", "project"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "diagnostics of an offloaded server" {
				noErr(t, b.cloud.AddServer(nova.Server{ID: "off", Name: "off", Status: nova.StatusShelvedOffloaded, VCPUs: 1, RAMMB: 512}))
				t.Cleanup(func() { _ = b.cloud.DeleteServer("off") })
			}
			status, doc := do(t, tc.method, tc.url, tc.token, tc.body, tc.header...)
			if status != tc.status {
				t.Errorf("HTTP %d, want %d (%v)", status, tc.status, doc)
			}
			member, ok := doc[tc.key]
			if !ok {
				t.Fatalf("body %v has no %q", doc, tc.key)
			}
			raw, _ := json.Marshal(member)
			if !strings.Contains(strings.ToLower(string(raw)), strings.ToLower(tc.contains)) {
				t.Errorf("body %s does not say %q", raw, tc.contains)
			}
		})
	}
	// Nothing refused changed the server.
	s, err := b.cloud.Server(context.Background(), "s1")
	if err != nil || s.Status != nova.StatusActive || s.TaskState != "" || len(s.Metadata) != 0 {
		t.Errorf("after refused requests: %+v, %v", s, err)
	}
}

// TestPagingAndFilters: servers/detail pages by marker with a next link
// on a full page, filters by status, and migrations list every server's.
func TestPagingAndFilters(t *testing.T) {
	b := newBed(t, fakeapi.Options{})
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		noErr(t, b.cloud.AddServer(nova.Server{ID: id, Name: id, Host: "compute-1", VCPUs: 1, RAMMB: 256}))
	}
	ctx := context.Background()
	must(t)(b.cloud.Shelve(ctx, "c"))
	must(t)(b.cloud.LiveMigrate(ctx, "d", "compute-2"))
	tok := b.token(t)
	var got []string
	next := b.srv.URL + "/compute/v2.1/servers/detail?all_tenants=True&limit=2"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		status, doc := do(t, "GET", next, tok, "")
		if status != http.StatusOK {
			t.Fatalf("HTTP %d: %v", status, doc)
		}
		for _, s := range doc["servers"].([]any) {
			got = append(got, s.(map[string]any)["id"].(string))
		}
		next = ""
		if links, ok := doc["servers_links"].([]any); ok {
			next = links[0].(map[string]any)["href"].(string)
		}
	}
	if strings.Join(got, ",") != "a,b,c,d,e" {
		t.Errorf("paged servers %v, want a..e once each", got)
	}
	_, doc := do(t, "GET", b.srv.URL+"/compute/v2.1/servers/detail?status=SHELVED&status=MIGRATING", tok, "")
	var st []string
	for _, s := range doc["servers"].([]any) {
		m := s.(map[string]any)
		st = append(st, m["id"].(string)+":"+m["OS-EXT-STS:vm_state"].(string))
	}
	if strings.Join(st, ",") != "c:shelved,d:active" {
		t.Errorf("status filter: %v", st)
	}
	_, doc = do(t, "GET", b.srv.URL+"/compute/v2.1/os-migrations", tok, "")
	if ms := doc["migrations"].([]any); len(ms) != 1 || ms[0].(map[string]any)["instance_uuid"] != "d" {
		t.Errorf("all migrations: %v", ms)
	}
	_, doc = do(t, "GET", b.srv.URL+"/compute/v2.1/servers/c/os-instance-actions", tok, "")
	if as := doc["instanceActions"].([]any); len(as) != 1 || as[0].(map[string]any)["action"] != "shelve" {
		t.Errorf("instance actions of c: %v", as)
	}
}

// TestGroupsAndDiagnosticsThroughTheClient: the real client sees the
// fake's server groups and, through diagnostics, its demand.
func TestGroupsAndDiagnosticsThroughTheClient(t *testing.T) {
	b := newBed(t, fakeapi.Options{})
	g := &nova.ServerGroup{ID: "5e5e5e5e-0000-4000-8000-0000000000a1", Name: "web", Policy: nova.PolicyAntiAffinity}
	noErr(t, b.cloud.AddServer(nova.Server{ID: "w1", Name: "w1", Host: "compute-1", VCPUs: 2, RAMMB: 1024, Group: g}))
	noErr(t, b.cloud.SetDemand("w1", nova.Demand{CPU: 1.5, RAMMB: 700}))
	c := b.client(t)
	ctx := context.Background()
	ss, err := c.Servers(ctx, "compute-1")
	if err != nil || len(ss) != 1 || ss[0].Group == nil || *ss[0].Group != *g {
		t.Fatalf("Servers = %+v, %v; want w1 in group %+v", ss, err, g)
	}
	// A server added later joins its group at once for the client: its
	// creation is newer than the client's group index.
	b.clock.Advance(2 * time.Minute)
	noErr(t, b.cloud.AddServer(nova.Server{ID: "w2", Name: "w2", Host: "compute-1", VCPUs: 1, RAMMB: 512, Group: g}))
	ss, err = c.Servers(ctx, "compute-1")
	if err != nil || len(ss) != 2 || ss[1].Group == nil || ss[1].Group.ID != g.ID {
		t.Errorf("after w2 joined: %+v, %v", ss, err)
	}
	s, err := c.Server(ctx, "w1")
	if err != nil || s.Group == nil || s.Group.Policy != nova.PolicyAntiAffinity {
		t.Errorf("Server(w1) = %+v, %v", s, err)
	}
	raw, err := c.Diagnostics(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		CPU []struct {
			Utilisation float64 `json:"utilisation"`
		} `json:"cpu_details"`
		Mem struct {
			Used float64 `json:"used"`
		} `json:"memory_details"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, c := range d.CPU {
		sum += c.Utilisation
	}
	if len(d.CPU) != 2 || sum != 150 || d.Mem.Used != 700 {
		t.Errorf("diagnostics %s, want 2 vCPUs at 150 %% in all and 700 MB", raw)
	}
}

// TestServiceForcedDown: PUT os-services/{uuid} with forced_down puts
// the fake's service down, and the answer shows it.
func TestServiceForcedDown(t *testing.T) {
	b := newBed(t, fakeapi.Options{})
	tok := b.token(t)
	h, err := b.cloud.Host(context.Background(), "compute-2")
	if err != nil {
		t.Fatal(err)
	}
	url := b.srv.URL + "/compute/v2.1/os-services/" + h.Service.ID
	status, doc := do(t, "PUT", url, tok, `{"forced_down": true}`)
	svc, _ := doc["service"].(map[string]any)
	if status != http.StatusOK || svc["state"] != "down" || svc["forced_down"] != true || svc["host"] != "compute-2" {
		t.Errorf("HTTP %d %v, want compute-2 forced down", status, doc)
	}
	if h, _ := b.cloud.Host(context.Background(), "compute-2"); h.Service.State != nova.ServiceDown {
		t.Errorf("the fake's service is %+v, want down", h.Service)
	}
	status, doc = do(t, "PUT", url, tok, `{"status": "disabled", "disabled_reason": "dvms:maintenance", "forced_down": false}`)
	svc, _ = doc["service"].(map[string]any)
	if status != http.StatusOK || svc["state"] != "up" || svc["status"] != "disabled" || svc["disabled_reason"] != "dvms:maintenance" {
		t.Errorf("HTTP %d %v, want compute-2 up and disabled with its reason", status, doc)
	}
}
