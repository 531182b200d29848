package testing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova/openstack"
)

// cloud is an httptest server playing keystone (v3 tokens), nova
// (/compute/v2.1) and placement (/placement).
type cloud struct {
	t   *testing.T
	srv *httptest.Server
	mux *http.ServeMux

	mu       sync.Mutex
	tokens   int               // tokens issued
	requests []*recorded       // compute and placement requests, in order
	revoked  map[string]bool   // tokens answered 401
	calls    map[string]int    // "METHOD path" -> count
	bodies   map[string][]byte // "METHOD path" -> last body
}

type recorded struct {
	Method, Path string
	Query        url.Values
	Header       http.Header
	Body         []byte
}

func newCloud(t *testing.T) *cloud {
	t.Helper()
	c := &cloud{t: t, mux: http.NewServeMux(), revoked: map[string]bool{}, calls: map[string]int{}, bodies: map[string][]byte{}}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	c.mux.HandleFunc("POST /identity/v3/auth/tokens", c.token)
	// gophercloud discovers placement's versions when it makes the
	// service client.
	c.handle("GET /placement/", 200, placementVersions)
	return c
}

func (c *cloud) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !strings.HasPrefix(r.URL.Path, "/identity/") && r.URL.Path != "/placement/" {
		key := r.Method + " " + r.URL.Path
		c.mu.Lock()
		c.requests = append(c.requests, &recorded{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body})
		c.calls[key]++
		c.bodies[key] = body
		revoked := c.revoked[r.Header.Get("X-Auth-Token")]
		c.mu.Unlock()
		if r.Header.Get("X-Auth-Token") == "" || revoked {
			http.Error(w, `{"error": {"code": 401, "title": "Unauthorized"}}`, http.StatusUnauthorized)
			return
		}
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	c.mux.ServeHTTP(w, r)
}

// token answers a keystone v3 password authentication with a catalog.
func (c *cloud) token(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.tokens++
	n := c.tokens
	c.mu.Unlock()
	w.Header().Set("X-Subject-Token", fmt.Sprintf("token-%d", n))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, tokenBody, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), c.srv.URL, c.srv.URL)
}

// handle registers a canned answer: status, JSON body, and Nova's
// request id headers.
func (c *cloud) handle(pattern string, status int, body string) {
	c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		reply(w, status, body)
	})
}

func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("X-Openstack-Request-Id", localID)
	w.Header().Set("X-Compute-Request-Id", localID)
	if body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func (c *cloud) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[key]
}

func (c *cloud) body(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.bodies[key])
}

func (c *cloud) last() *recorded {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.requests) == 0 {
		c.t.Fatal("no request recorded")
	}
	return c.requests[len(c.requests)-1]
}

func (c *cloud) all() []*recorded {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*recorded(nil), c.requests...)
}

// client writes a clouds.yaml naming this cloud and connects to it.
func (c *cloud) client(mod ...func(*openstack.Config)) *openstack.Client {
	c.t.Helper()
	cl, err := connect(c.t, c.srv.URL, mod...)
	if err != nil {
		c.t.Fatalf("openstack.New: %v", err)
	}
	return cl
}

// connect writes a clouds.yaml whose keystone is at base and connects.
func connect(t *testing.T, base string, mod ...func(*openstack.Config)) (*openstack.Client, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(cloudsYAML, base)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := openstack.DefaultConfig("unit")
	cfg.CloudsFile = path
	cfg.RetryBase, cfg.RetryMax = time.Millisecond, 4*time.Millisecond
	cfg.RequestTimeout = 5 * time.Second
	for _, m := range mod {
		m(&cfg)
	}
	return openstack.New(context.Background(), cfg)
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("body %s, want %s", gb, wb)
	}
}

const (
	localID  = "req-0c0c0c0c-1111-4222-8333-444444444444"
	globalID = "req-9a9a9a9a-5555-4666-8777-888888888888"
	server1  = "8a9b3c1d-0000-4000-8000-000000000001"
	server2  = "8a9b3c1d-0000-4000-8000-000000000002"
	group1   = "5e5e5e5e-0000-4000-8000-0000000000a1"
	rp1      = "11111111-0000-4000-8000-0000000000c1"
	rp2      = "22222222-0000-4000-8000-0000000000c2"
	svc1     = "a1a1a1a1-0000-4000-8000-0000000000b1"
	svc2     = "b2b2b2b2-0000-4000-8000-0000000000b2"
	svc3     = "c3c3c3c3-0000-4000-8000-0000000000b3"
)

const cloudsYAML = `clouds:
  unit:
    auth:
      auth_url: %s/identity/v3
      username: admin
      password: secret
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: RegionOne
    identity_api_version: 3
`

const tokenBody = `{"token": {
  "expires_at": %q,
  "methods": ["password"],
  "user": {"id": "u1", "name": "admin", "domain": {"id": "default", "name": "Default"}},
  "project": {"id": "p1", "name": "admin", "domain": {"id": "default", "name": "Default"}},
  "roles": [{"id": "r1", "name": "admin"}],
  "catalog": [
    {"type": "compute", "name": "nova", "id": "s1", "endpoints": [
      {"id": "e1", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": "%s/compute/v2.1"}]},
    {"type": "placement", "name": "placement", "id": "s2", "endpoints": [
      {"id": "e2", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": "%s/placement"}]}
  ]}}`

// Services: compute-1 (provider named like the host), compute-2
// (provider named by FQDN, disabled by dvms), compute-3 (no provider yet).
const placementVersions = `{"versions": [{"id": "v1.0", "max_version": "1.39", "min_version": "1.0",
  "status": "CURRENT", "links": [{"rel": "self", "href": ""}]}]}`

const servicesBody = `{"services": [
  {"id": "` + svc1 + `", "binary": "nova-compute", "host": "compute-1", "zone": "nova", "status": "enabled", "state": "up",
   "disabled_reason": null, "forced_down": false, "updated_at": "2026-11-22T13:42:28.000000"},
  {"id": "` + svc2 + `", "binary": "nova-compute", "host": "compute-2", "zone": "az2", "status": "disabled", "state": "down",
   "disabled_reason": "dvms:maintenance", "forced_down": true, "updated_at": "2026-11-22T13:40:00.000000"},
  {"id": "` + svc3 + `", "binary": "nova-compute", "host": "compute-3", "zone": "nova", "status": "enabled", "state": "up",
   "disabled_reason": null, "forced_down": false, "updated_at": null}
]}`

const service1Body = `{"services": [
  {"id": "` + svc1 + `", "binary": "nova-compute", "host": "compute-1", "zone": "nova", "status": "enabled", "state": "up",
   "disabled_reason": null, "forced_down": false, "updated_at": "2026-11-22T13:42:28.000000"}]}`

const providersBody = `{"resource_providers": [
  {"uuid": "` + rp1 + `", "name": "compute-1", "generation": 3},
  {"uuid": "` + rp2 + `", "name": "compute-2.example.org", "generation": 5}
]}`

const inventories1Body = `{"resource_provider_generation": 3, "inventories": {
  "VCPU": {"total": 8, "reserved": 1, "min_unit": 1, "max_unit": 8, "step_size": 1, "allocation_ratio": 4.0},
  "MEMORY_MB": {"total": 16384, "reserved": 512, "min_unit": 1, "max_unit": 16384, "step_size": 1, "allocation_ratio": 1.5},
  "DISK_GB": {"total": 100, "reserved": 0, "min_unit": 1, "max_unit": 100, "step_size": 1, "allocation_ratio": 1.0}}}`

const usages1Body = `{"resource_provider_generation": 3, "usages": {"VCPU": 3, "MEMORY_MB": 1536, "DISK_GB": 3}}`

const inventories2Body = `{"resource_provider_generation": 5, "inventories": {
  "VCPU": {"total": 4, "reserved": 0, "allocation_ratio": 1.0},
  "MEMORY_MB": {"total": 8192, "reserved": 0, "allocation_ratio": 1.0}}}`

const usages2Body = `{"resource_provider_generation": 5, "usages": {"VCPU": 0, "MEMORY_MB": 0}}`

// Servers on compute-1: one in a group with metadata, one migrating (and
// locked).
const serversBody = `{"servers": [
  {"id": "` + server1 + `", "name": "web-1", "status": "ACTIVE",
   "OS-EXT-SRV-ATTR:host": "compute-1", "OS-EXT-AZ:availability_zone": "nova", "OS-EXT-STS:task_state": null,
   "flavor": {"vcpus": 2, "ram": 1024, "disk": 1, "ephemeral": 0, "swap": 0, "original_name": "dvms.small", "extra_specs": {}},
   "metadata": {"dvms:priority": "5", "dvms:pin": "true"}},
  {"id": "` + server2 + `", "name": "db-1", "status": "MIGRATING", "locked": true,
   "OS-EXT-SRV-ATTR:host": "compute-1", "OS-EXT-AZ:availability_zone": "nova", "OS-EXT-STS:task_state": "migrating",
   "flavor": {"vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0, "original_name": "dvms.tiny", "extra_specs": {}},
   "metadata": {}}
]}`

const groupsBody = `{"server_groups": [
  {"id": "` + group1 + `", "name": "web", "policy": "anti-affinity", "rules": {}, "members": ["` + server1 + `"],
   "project_id": "p1", "user_id": "u1"}]}`

const server1Body = `{"server": {"id": "` + server1 + `", "name": "web-1", "status": "ACTIVE",
   "OS-EXT-SRV-ATTR:host": "compute-1", "OS-EXT-AZ:availability_zone": "nova", "OS-EXT-STS:task_state": null,
   "flavor": {"vcpus": 2, "ram": 1024, "original_name": "dvms.small"},
   "metadata": {"dvms:priority": "5"}, "server_groups": ["` + group1 + `"]}}`

const group1Body = `{"server_group": {"id": "` + group1 + `", "name": "web", "policy": "anti-affinity", "rules": {}, "members": ["` + server1 + `"]}}`

// Migrations of server1, deliberately not newest first.
const migrationsBody = `{"migrations": [
  {"id": 4, "uuid": "m-4", "instance_uuid": "` + server1 + `", "source_compute": "compute-1", "dest_compute": "compute-2",
   "migration_type": "live-migration", "status": "error", "created_at": "2026-11-22T12:00:00.000000", "updated_at": "2026-11-22T12:00:09.000000"},
  {"id": 9, "uuid": "m-9", "instance_uuid": "` + server1 + `", "source_compute": "compute-2", "dest_compute": "compute-1",
   "migration_type": "live-migration", "status": "completed", "created_at": "2026-11-22T13:00:00.000000", "updated_at": "2026-11-22T13:00:08.000000"},
  {"id": 7, "uuid": "m-7", "instance_uuid": "` + server1 + `", "source_compute": "compute-1", "dest_compute": "compute-2",
   "migration_type": "live-migration", "status": "completed", "created_at": "2026-11-22T12:30:00.000000", "updated_at": "2026-11-22T12:30:07.000000"}
]}`

const notFoundBody = `{"itemNotFound": {"code": 404, "message": "Instance ` + server1 + ` could not be found."}}`
const conflictBody = `{"conflictingRequest": {"code": 409, "message": "Cannot 'os-migrateLive' instance while it is in task_state migrating"}}`
const badRequestBody = `{"badRequest": {"code": 400, "message": "Compute host nowhere could not be found."}}`

const diagnosticsBody = `{"state": "running", "driver": "libvirt", "hypervisor": "kvm", "uptime": 46664,
  "num_cpus": 1, "cpu_details": [{"id": 0, "time": 17300000000, "utilisation": null}],
  "memory_details": {"maximum": 512, "used": 256}, "nic_details": [], "disk_details": []}`
