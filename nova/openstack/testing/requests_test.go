package testing

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/diagnostics"
	"github.com/dvms-project/dvms/nova/openstack"
)

const (
	computePrefix   = "/compute/v2.1"
	placementPrefix = "/placement"
)

func TestConfigValidate(t *testing.T) {
	if err := openstack.DefaultConfig("c").Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := openstack.Config{ReadAttempts: 0, RetryBase: time.Second, RetryMax: time.Millisecond, GroupCacheTTL: -1}
	err := bad.Validate()
	for _, want := range []string{"cloud name", "request timeout", "read attempts", "retry backoff", "group cache", "concurrency"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want a problem about %q", err, want)
		}
	}
}

func TestNewFailsOnUnknownCloud(t *testing.T) {
	cfg := openstack.DefaultConfig("nope")
	cfg.CloudsFile = t.TempDir() + "/clouds.yaml"
	if _, err := openstack.New(context.Background(), cfg); err == nil {
		t.Fatal("New with a missing clouds.yaml succeeded")
	}
}

// Every compute request pins the microversion, carries the token and,
// when the context has one, the global request id.
func TestHeaders(t *testing.T) {
	c := newCloud(t)
	c.handle("GET "+computePrefix+"/servers/"+server1, 200, strings.Replace(server1Body, `"server_groups": ["`+group1+`"]`, `"server_groups": []`, 1))
	cl := c.client()

	if _, err := cl.Server(nova.WithRequestID(context.Background(), globalID), server1); err != nil {
		t.Fatal(err)
	}
	h := c.last().Header
	for k, want := range map[string]string{
		"OpenStack-API-Version":        "compute " + openstack.ComputeMicroversion,
		"X-OpenStack-Nova-API-Version": openstack.ComputeMicroversion,
		"X-Auth-Token":                 "token-1",
		"X-OpenStack-Request-ID":       globalID,
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if _, err := cl.Server(context.Background(), server1); err != nil {
		t.Fatal(err)
	}
	if got := c.last().Header.Get("X-OpenStack-Request-ID"); got != "" {
		t.Errorf("request without an id sent X-OpenStack-Request-ID %q", got)
	}
}

func TestHosts(t *testing.T) {
	c := newCloud(t)
	c.handle("GET "+computePrefix+"/os-services", 200, servicesBody)
	c.handle("GET "+placementPrefix+"/resource_providers", 200, providersBody)
	c.handle("GET "+placementPrefix+"/resource_providers/"+rp1+"/inventories", 200, inventories1Body)
	c.handle("GET "+placementPrefix+"/resource_providers/"+rp1+"/usages", 200, usages1Body)
	c.handle("GET "+placementPrefix+"/resource_providers/"+rp2+"/inventories", 200, inventories2Body)
	c.handle("GET "+placementPrefix+"/resource_providers/"+rp2+"/usages", 200, usages2Body)
	cl := c.client()

	hs, err := cl.Hosts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 3 || hs[0].Name != "compute-1" || hs[1].Name != "compute-2" || hs[2].Name != "compute-3" {
		t.Fatalf("hosts %+v", hs)
	}
	h1 := hs[0]
	if h1.VCPUs != 8 || h1.ReservedVCPUs != 1 || h1.CPUAllocRatio != 4 || h1.RAMMB != 16384 || h1.ReservedRAMMB != 512 ||
		h1.RAMAllocRatio != 1.5 || h1.VCPUsUsed != 3 || h1.RAMMBUsed != 1536 || h1.Zone != "nova" {
		t.Errorf("compute-1 %+v", h1)
	}
	if h1.AllocatableVCPUs() != 28 || h1.AllocatableRAMMB() != 23808 {
		t.Errorf("compute-1 allocatable %v VCPU / %v MB", h1.AllocatableVCPUs(), h1.AllocatableRAMMB())
	}
	want := time.Date(2026, 11, 22, 13, 42, 28, 0, time.UTC)
	if s := h1.Service; s.ID != svc1 || s.Host != "compute-1" || s.Status != "enabled" || s.State != "up" || s.Disabled() || !s.UpdatedAt.Equal(want) {
		t.Errorf("compute-1 service %+v", s)
	}
	h2 := hs[1]
	if h2.VCPUs != 4 || h2.RAMMB != 8192 || h2.Zone != "az2" {
		t.Errorf("compute-2 (FQDN provider) %+v", h2)
	}
	if s := h2.Service; !s.Disabled() || s.DisabledReason != "dvms:maintenance" || !s.ForcedDown || s.State != "down" {
		t.Errorf("compute-2 service %+v", s)
	}
	if h3 := hs[2]; h3.VCPUs != 0 || h3.Service.ID != svc3 {
		t.Errorf("compute-3 (no provider) %+v", h3)
	}
	for _, r := range c.all() {
		if r.Path == computePrefix+"/os-services" && r.Query.Get("binary") != "nova-compute" {
			t.Errorf("os-services query %v, want binary=nova-compute", r.Query)
		}
		if strings.HasPrefix(r.Path, placementPrefix) && r.Header.Get("OpenStack-API-Version") != "" {
			t.Errorf("placement request %s carries %q", r.Path, r.Header.Get("OpenStack-API-Version"))
		}
	}
}

func TestHost(t *testing.T) {
	c := newCloud(t)
	c.mux.HandleFunc("GET "+computePrefix+"/os-services", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("host") == "compute-1" && r.URL.Query().Get("binary") == "nova-compute" {
			reply(w, 200, service1Body)
			return
		}
		reply(w, 200, `{"services": []}`)
	})
	c.mux.HandleFunc("GET "+placementPrefix+"/resource_providers", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != "compute-1" {
			t.Errorf("provider query %v, want name=compute-1", r.URL.Query())
		}
		reply(w, 200, `{"resource_providers": [{"uuid": "`+rp1+`", "name": "compute-1"}]}`)
	})
	c.handle("GET "+placementPrefix+"/resource_providers/"+rp1+"/inventories", 200, inventories1Body)
	c.handle("GET "+placementPrefix+"/resource_providers/"+rp1+"/usages", 200, usages1Body)
	cl := c.client()

	h, err := cl.Host(context.Background(), "compute-1")
	if err != nil || h.Name != "compute-1" || h.VCPUs != 8 || h.VCPUsUsed != 3 || h.Service.ID != svc1 {
		t.Fatalf("Host = %+v, %v", h, err)
	}
	if _, err := cl.Host(context.Background(), "nowhere"); !errors.Is(err, nova.ErrNotFound) {
		t.Errorf("unknown host: err = %v, want ErrNotFound", err)
	}
}

func TestServers(t *testing.T) {
	c := newCloud(t)
	c.handle("GET "+computePrefix+"/servers/detail", 200, serversBody)
	c.mux.HandleFunc("GET "+computePrefix+"/os-server-groups", func(w http.ResponseWriter, r *http.Request) {
		if off := r.URL.Query().Get("offset"); off != "" && off != "0" {
			reply(w, 200, `{"server_groups": []}`)
			return
		}
		reply(w, 200, groupsBody)
	})
	cl := c.client(func(cfg *openstack.Config) { cfg.ServerMetadataControls = true }) // dvms:priority is in the server's metadata

	for range 2 { // the second listing reuses the cached group index
		ss, err := cl.Servers(context.Background(), "compute-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != 2 {
			t.Fatalf("servers %+v", ss)
		}
		s1, s2 := ss[0], ss[1]
		if s1.ID != server1 || s1.Name != "web-1" || s1.Host != "compute-1" || s1.Status != nova.StatusActive || s1.TaskState != "" ||
			s1.VCPUs != 2 || s1.RAMMB != 1024 || s1.Flavor != "dvms.small" || s1.Metadata[nova.MetaPriority] != "5" || s1.Zone != "nova" {
			t.Errorf("server 1 %+v", s1)
		}
		if s1.Group == nil || s1.Group.ID != group1 || s1.Group.Policy != nova.PolicyAntiAffinity || s1.Group.Name != "web" {
			t.Errorf("server 1 group %+v", s1.Group)
		}
		if s1.Locked || !s2.Locked {
			t.Errorf("locked: server 1 %v, server 2 %v (want false, true)", s1.Locked, s2.Locked)
		}
		if s2.Status != nova.StatusMigrating || s2.TaskState != "migrating" || s2.Group != nil || s2.Metadata == nil {
			t.Errorf("server 2 %+v", s2)
		}
	}
	// One listing (two pages: the second, empty, ends it), then cached.
	if n := c.count("GET " + computePrefix + "/os-server-groups"); n != 2 {
		t.Errorf("server groups requested %d times, want 2 (one listing, cached)", n)
	}
	for _, r := range c.all() {
		switch r.Path {
		case computePrefix + "/servers/detail":
			if r.Query.Get("all_tenants") != "True" || r.Query.Get("host") != "compute-1" || r.Query.Get("limit") == "" {
				t.Errorf("servers query %v", r.Query)
			}
		case computePrefix + "/os-server-groups":
			if r.Query.Get("all_projects") != "True" {
				t.Errorf("server groups query %v", r.Query)
			}
		}
	}
}

// Nova caps pages at its max_limit and links the next one.
func TestServersFollowsNextLinks(t *testing.T) {
	c := newCloud(t)
	c.mux.HandleFunc("GET "+computePrefix+"/servers/detail", func(w http.ResponseWriter, r *http.Request) {
		one := func(id string) string {
			return `{"id": "` + id + `", "status": "ACTIVE", "OS-EXT-SRV-ATTR:host": "compute-1", "flavor": {"vcpus": 1, "ram": 512}}`
		}
		switch r.URL.Query().Get("marker") {
		case "":
			reply(w, 200, `{"servers": [`+one("a")+`,`+one("b")+`], "servers_links": [{"rel": "next", "href": "x?marker=b"}]}`)
		case "b":
			reply(w, 200, `{"servers": [`+one("c")+`]}`)
		default:
			t.Errorf("unexpected marker %q", r.URL.Query().Get("marker"))
			reply(w, 200, `{"servers": []}`)
		}
	})
	c.handle("GET "+computePrefix+"/os-server-groups", 200, `{"server_groups": []}`)
	ss, err := c.client().Servers(context.Background(), "compute-1")
	if err != nil || len(ss) != 3 || ss[2].ID != "c" {
		t.Fatalf("Servers = %+v, %v; want a, b, c", ss, err)
	}
}

func TestServerWithGroup(t *testing.T) {
	c := newCloud(t)
	c.handle("GET "+computePrefix+"/servers/"+server1, 200, server1Body)
	c.handle("GET "+computePrefix+"/os-server-groups/"+group1, 200, group1Body)
	c.handle("GET "+computePrefix+"/servers/"+server2, 404, notFoundBody)
	cl := c.client()

	s, err := cl.Server(context.Background(), server1)
	if err != nil || s.Group == nil || s.Group.Policy != nova.PolicyAntiAffinity || s.VCPUs != 2 {
		t.Fatalf("Server = %+v, %v", s, err)
	}
	_, err = cl.Server(context.Background(), server2)
	if !errors.Is(err, nova.ErrNotFound) || !strings.Contains(err.Error(), "could not be found") {
		t.Errorf("unknown server: err = %v, want ErrNotFound with Nova's message", err)
	}
}

func TestActionBodiesAndReceipts(t *testing.T) {
	action := "POST " + computePrefix + "/servers/" + server1 + "/action"
	for _, tc := range []struct {
		name string
		call func(context.Context, *openstack.Client) (nova.Receipt, error)
		body string
	}{
		{"live-migrate to host", func(ctx context.Context, c *openstack.Client) (nova.Receipt, error) {
			return c.LiveMigrate(ctx, server1, "compute-3")
		}, `{"os-migrateLive": {"host": "compute-3", "block_migration": "auto"}}`},
		{"live-migrate anywhere", func(ctx context.Context, c *openstack.Client) (nova.Receipt, error) {
			return c.LiveMigrate(ctx, server1, "")
		}, `{"os-migrateLive": {"host": null, "block_migration": "auto"}}`},
		{"shelve", func(ctx context.Context, c *openstack.Client) (nova.Receipt, error) {
			return c.Shelve(ctx, server1)
		}, `{"shelve": null}`},
		{"shelve offload", func(ctx context.Context, c *openstack.Client) (nova.Receipt, error) {
			return c.ShelveOffload(ctx, server1)
		}, `{"shelveOffload": null}`},
		{"unshelve", func(ctx context.Context, c *openstack.Client) (nova.Receipt, error) {
			return c.Unshelve(ctx, server1, "")
		}, `{"unshelve": null}`},
		{"unshelve to host", func(ctx context.Context, c *openstack.Client) (nova.Receipt, error) {
			return c.Unshelve(ctx, server1, "compute-2")
		}, `{"unshelve": {"host": "compute-2"}}`},
		{"cold-migrate to host", func(ctx context.Context, c *openstack.Client) (nova.Receipt, error) {
			return c.Migrate(ctx, server1, "compute-3")
		}, `{"migrate": {"host": "compute-3"}}`},
		{"cold-migrate anywhere", func(ctx context.Context, c *openstack.Client) (nova.Receipt, error) {
			return c.Migrate(ctx, server1, "")
		}, `{"migrate": null}`},
		{"revert resize", func(ctx context.Context, c *openstack.Client) (nova.Receipt, error) {
			return c.RevertResize(ctx, server1)
		}, `{"revertResize": null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCloud(t)
			c.handle(action, 202, "")
			cl := c.client()
			rc, err := tc.call(nova.WithRequestID(context.Background(), globalID), cl)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, c.body(action), tc.body)
			if rc.GlobalRequestID != globalID || rc.LocalRequestID != localID {
				t.Errorf("receipt %+v, want global %s local %s", rc, globalID, localID)
			}
			r := c.last()
			if r.Header.Get("X-OpenStack-Request-ID") != globalID || r.Header.Get("OpenStack-API-Version") != "compute 2.91" ||
				!strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Errorf("headers %v", r.Header)
			}
		})
	}
}

// Nova answers a resize confirmation 204, not 202.
func TestConfirmResize(t *testing.T) {
	action := "POST " + computePrefix + "/servers/" + server1 + "/action"
	c := newCloud(t)
	c.handle(action, 204, "")
	rc, err := c.client().ConfirmResize(nova.WithRequestID(context.Background(), globalID), server1)
	if err != nil || rc.LocalRequestID != localID {
		t.Fatalf("confirm: %+v %v", rc, err)
	}
	jsonEqual(t, c.body(action), `{"confirmResize": null}`)
}

func TestServerActions(t *testing.T) {
	c := newCloud(t)
	c.handle("GET "+computePrefix+"/servers/"+server1+"/os-instance-actions", 200, `{"instanceActions": [
		{"action": "confirmResize", "request_id": "req-2", "message": null, "start_time": "2026-01-01T00:01:00.000000"},
		{"action": "migrate", "request_id": "req-1", "message": "boom", "start_time": "2026-01-01T00:00:00.000000"}]}`)
	as, err := c.client().ServerActions(context.Background(), server1)
	if err != nil || len(as) != 2 || as[0].Action != "confirmResize" || as[1].Message != "boom" || as[1].RequestID != "req-1" ||
		as[0].Start.Minute() != 1 {
		t.Fatalf("actions %+v %v", as, err)
	}
}

func TestComputeRequestIDHeaderFallback(t *testing.T) {
	c := newCloud(t)
	c.mux.HandleFunc("POST "+computePrefix+"/servers/"+server1+"/action", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Compute-Request-Id", localID)
		w.WriteHeader(202)
	})
	rc, err := c.client().Shelve(context.Background(), server1)
	if err != nil || rc.LocalRequestID != localID || rc.GlobalRequestID != "" {
		t.Fatalf("receipt %+v, %v", rc, err)
	}
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   error
	}{
		{404, notFoundBody, nova.ErrNotFound},
		{409, conflictBody, nova.ErrConflict},
		{400, badRequestBody, nova.ErrBadRequest},
		{500, `{"computeFault": {"code": 500, "message": "Unexpected API Error."}}`, nova.ErrUnavailable},
		{503, `Service Unavailable`, nova.ErrUnavailable},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			c := newCloud(t)
			c.handle("POST "+computePrefix+"/servers/"+server1+"/action", tc.status, tc.body)
			rc, err := c.client().LiveMigrate(nova.WithRequestID(context.Background(), globalID), server1, "nowhere")
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "live-migrate "+server1+" to nowhere: ") {
				t.Errorf("err %q lacks context", err)
			}
			if rc.LocalRequestID != localID || rc.GlobalRequestID != globalID {
				t.Errorf("receipt of a refused action %+v, want both ids for the logs", rc)
			}
			// Actions are never retried: their outcome is unknown.
			if n := c.count("POST " + computePrefix + "/servers/" + server1 + "/action"); n != 1 {
				t.Errorf("action sent %d times, want 1", n)
			}
		})
	}
	t.Run("forbidden is no sentinel", func(t *testing.T) {
		c := newCloud(t)
		c.handle("GET "+computePrefix+"/servers/"+server1, 403, `{"forbidden": {"code": 403, "message": "Policy doesn't allow"}}`)
		_, err := c.client().Server(context.Background(), server1)
		if err == nil || errors.Is(err, nova.ErrNotFound) || errors.Is(err, nova.ErrUnavailable) || !strings.Contains(err.Error(), "403") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestReadsRetryOnUnavailable(t *testing.T) {
	c := newCloud(t)
	fails := 2
	c.mux.HandleFunc("GET "+computePrefix+"/servers/"+server1, func(w http.ResponseWriter, r *http.Request) {
		if fails > 0 {
			fails--
			reply(w, 503, `{"computeFault": {"code": 503, "message": "busy"}}`)
			return
		}
		reply(w, 200, `{"server": {"id": "`+server1+`", "status": "ACTIVE"}}`)
	})
	c.handle("GET "+computePrefix+"/servers/"+server2, 502, "bad gateway")
	cl := c.client(func(cfg *openstack.Config) { cfg.ReadAttempts = 3 })

	s, err := cl.Server(context.Background(), server1)
	if err != nil || s.ID != server1 {
		t.Fatalf("Server after two 503s = %+v, %v", s, err)
	}
	if n := c.count("GET " + computePrefix + "/servers/" + server1); n != 3 {
		t.Errorf("GET sent %d times, want 3", n)
	}
	if _, err := cl.Server(context.Background(), server2); !errors.Is(err, nova.ErrUnavailable) || !strings.Contains(err.Error(), "3 attempts") {
		t.Errorf("err = %v, want ErrUnavailable after 3 attempts", err)
	}
	if n := c.count("GET " + computePrefix + "/servers/" + server2); n != 3 {
		t.Errorf("GET sent %d times, want 3 (bounded)", n)
	}
	// A 404 is an answer, not a failure: no retry.
	c.handle("GET "+computePrefix+"/servers/gone", 404, notFoundBody)
	if _, err := cl.Server(context.Background(), "gone"); !errors.Is(err, nova.ErrNotFound) {
		t.Errorf("err = %v", err)
	}
	if n := c.count("GET " + computePrefix + "/servers/gone"); n != 1 {
		t.Errorf("404 retried: %d requests", n)
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	c := newCloud(t)
	c.handle("GET "+computePrefix+"/servers/"+server1, 503, "")
	cl := c.client(func(cfg *openstack.Config) {
		cfg.ReadAttempts, cfg.RetryBase, cfg.RetryMax = 20, time.Second, time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cl.Server(ctx, server1)
	if !errors.Is(err, nova.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want ErrUnavailable and the deadline", err)
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("retry outlived its context by %s", d)
	}
}

func TestConnectionErrorIsUnavailable(t *testing.T) {
	c := newCloud(t)
	c.mux.HandleFunc("GET "+computePrefix+"/servers/"+server1, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	c.mux.HandleFunc("POST "+computePrefix+"/servers/"+server1+"/action", func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	cl := c.client(func(cfg *openstack.Config) { cfg.ReadAttempts = 2 })
	if _, err := cl.Server(context.Background(), server1); !errors.Is(err, nova.ErrUnavailable) {
		t.Errorf("GET: err = %v, want ErrUnavailable", err)
	}
	// net/http itself retries an idempotent request once on a reused
	// connection that closed: 2 attempts are 2 to 4 requests.
	if n := c.count("GET " + computePrefix + "/servers/" + server1); n < 2 || n > 4 {
		t.Errorf("GET tried %d times, want 2 attempts", n)
	}
	if _, err := cl.Shelve(context.Background(), server1); !errors.Is(err, nova.ErrUnavailable) {
		t.Errorf("POST: err = %v, want ErrUnavailable", err)
	}
	if n := c.count("POST " + computePrefix + "/servers/" + server1 + "/action"); n != 1 {
		t.Errorf("POST tried %d times, want 1", n)
	}
}

func TestUnreachableCloud(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if _, err := connect(t, "http://"+addr); !errors.Is(err, nova.ErrUnavailable) {
		t.Errorf("New against a closed port: err = %v, want ErrUnavailable", err)
	}
}

func TestReauthOnExpiredToken(t *testing.T) {
	c := newCloud(t)
	c.handle("GET "+computePrefix+"/servers/"+server1, 200, `{"server": {"id": "`+server1+`", "status": "ACTIVE"}}`)
	cl := c.client()
	c.mu.Lock()
	c.revoked["token-1"] = true
	c.mu.Unlock()
	if _, err := cl.Server(context.Background(), server1); err != nil {
		t.Fatalf("after token expiry: %v", err)
	}
	c.mu.Lock()
	n := c.tokens
	c.mu.Unlock()
	if n != 2 {
		t.Errorf("%d tokens issued, want 2 (reauthenticated once)", n)
	}
	if got := c.last().Header.Get("X-Auth-Token"); got != "token-2" {
		t.Errorf("retried with token %q", got)
	}
}

func TestMigrations(t *testing.T) {
	c := newCloud(t)
	c.mux.HandleFunc("GET "+computePrefix+"/os-migrations", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("instance_uuid") == server1 {
			reply(w, 200, migrationsBody)
			return
		}
		reply(w, 200, `{"migrations": []}`)
	})
	c.handle("GET "+computePrefix+"/servers/"+server2, 200, `{"server": {"id": "`+server2+`", "status": "ACTIVE"}}`)
	c.handle("GET "+computePrefix+"/servers/gone", 404, notFoundBody)
	cl := c.client()

	ms, err := cl.Migrations(context.Background(), server1)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "9,7,4" {
		t.Fatalf("migration order %v, want newest first 9,7,4", ids)
	}
	m := ms[0]
	if m.ServerID != server1 || m.Source != "compute-2" || m.Dest != "compute-1" || m.Type != "live-migration" ||
		!m.Succeeded() || !m.CreatedAt.Equal(time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)) || m.UpdatedAt.Sub(m.CreatedAt) != 8*time.Second {
		t.Errorf("newest migration %+v", m)
	}
	if ms, err := cl.Migrations(context.Background(), server2); err != nil || len(ms) != 0 {
		t.Errorf("server without migrations: %v, %v", ms, err)
	}
	if _, err := cl.Migrations(context.Background(), "gone"); !errors.Is(err, nova.ErrNotFound) {
		t.Errorf("unknown server: err = %v, want ErrNotFound", err)
	}

	// WaitMigration works on this client too.
	got, err := nova.WaitMigration(context.Background(), cl, server1, time.Date(2026, 11, 22, 12, 59, 0, 0, time.UTC), time.Millisecond)
	if err != nil || got.ID != "9" {
		t.Errorf("WaitMigration = %+v, %v", got, err)
	}
}

func TestSetServiceStatus(t *testing.T) {
	c := newCloud(t)
	c.mux.HandleFunc("GET "+computePrefix+"/os-services", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("host") == "compute-1" {
			reply(w, 200, service1Body)
			return
		}
		reply(w, 200, `{"services": []}`)
	})
	put := "PUT " + computePrefix + "/os-services/" + svc1
	c.handle(put, 200, `{"service": {"id": "`+svc1+`", "status": "disabled"}}`)
	cl := c.client()

	if err := cl.SetServiceStatus(context.Background(), "compute-1", true, "dvms:maintenance"); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, c.body(put), `{"status": "disabled", "disabled_reason": "dvms:maintenance"}`)
	if err := cl.SetServiceStatus(context.Background(), "compute-1", false, "ignored"); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, c.body(put), `{"status": "enabled"}`)
	err := cl.SetServiceStatus(context.Background(), "nowhere", true, "x")
	if !errors.Is(err, nova.ErrNotFound) || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("unknown host: err = %v", err)
	}
}

func TestDiagnostics(t *testing.T) {
	c := newCloud(t)
	c.handle("GET "+computePrefix+"/servers/"+server1+"/diagnostics", 200, diagnosticsBody)
	raw, err := c.client().Diagnostics(context.Background(), server1)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, string(raw), diagnosticsBody)
}

// The diagnostics demand source runs on this client.
var _ diagnostics.API = (*openstack.Client)(nil)

// A server joins its group at boot only: the group index is reused for
// servers older than it and listed again when a newer server appears.
func TestServersRelistsGroupsForNewServers(t *testing.T) {
	c := newCloud(t)
	created := time.Now().UTC().Format(time.RFC3339)
	c.handle("GET "+computePrefix+"/servers/detail", 200, `{"servers": [{"id": "`+server1+`", "name": "new", "status": "ACTIVE",
		"OS-EXT-SRV-ATTR:host": "compute-1", "flavor": {"vcpus": 1, "ram": 512}, "created": "`+created+`"}]}`)
	c.handle("GET "+computePrefix+"/os-server-groups", 200, `{"server_groups": []}`)
	cl := c.client()
	for range 2 {
		if _, err := cl.Servers(context.Background(), "compute-1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.count("GET " + computePrefix + "/os-server-groups"); n != 2 {
		t.Errorf("server groups listed %d times, want 2 (the server is newer than the index each time)", n)
	}
}

// The reviver's list asks Nova for both shelved states in one request
// (Nova takes several status values) and keeps a SHELVED server's host.
func TestShelvedServersAsksBothStates(t *testing.T) {
	c := newCloud(t)
	c.handle("GET "+computePrefix+"/servers/detail", 200, `{"servers": [
		{"id": "a", "status": "SHELVED", "OS-EXT-SRV-ATTR:host": "compute-1", "OS-EXT-STS:task_state": null, "metadata": {"dvms:shelved": "ev-1"}, "flavor": {"vcpus": 1, "ram": 512}},
		{"id": "b", "status": "SHELVED_OFFLOADED", "OS-EXT-SRV-ATTR:host": null, "OS-EXT-STS:task_state": null, "metadata": {}, "flavor": {"vcpus": 1, "ram": 512}},
		{"id": "c", "status": "ACTIVE", "OS-EXT-SRV-ATTR:host": "compute-2", "OS-EXT-STS:task_state": null, "metadata": {}, "flavor": {"vcpus": 1, "ram": 512}}]}`)
	ss, err := c.client().ShelvedServers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].ID != "a" || ss[0].Status != nova.StatusShelved || ss[0].Host != "compute-1" || ss[1].Status != nova.StatusShelvedOffloaded {
		t.Fatalf("ShelvedServers = %+v", ss)
	}
	r := c.all()[len(c.all())-1]
	if got := r.Query["status"]; !slices.Equal(got, []string{nova.StatusShelved, nova.StatusShelvedOffloaded}) || r.Query.Get("all_tenants") != "True" {
		t.Errorf("query %v: want both shelved states of all projects", r.Query)
	}
}

// Issue 10: the operators' controls come from the flavor's extra specs;
// a server's own metadata (its owner writes it) counts only when the
// client is told to trust it, and the flavor still wins.
func TestOperatorControlsFromFlavor(t *testing.T) {
	body := `{"server": {"id": "s1", "status": "ACTIVE", "OS-EXT-SRV-ATTR:host": "compute-1", "OS-EXT-STS:task_state": null,
		"flavor": {"original_name": "gold", "vcpus": 1, "ram": 512, "extra_specs": {"dvms:priority": "7", "hw:cpu_policy": "shared"}},
		"metadata": {"dvms:pin": "true", "dvms:priority": "99", "owner": "x", "dvms:maintenance_action": "notify"}}}`
	for _, tc := range []struct {
		trust                    bool
		pin, prio, hasPin, maint string
	}{
		{false, "", "7", "no", ""},
		{true, "true", "7", "yes", "notify"},
	} {
		c := newCloud(t)
		c.handle("GET "+computePrefix+"/servers/s1", 200, body)
		s, err := c.client(func(cfg *openstack.Config) { cfg.ServerMetadataControls = tc.trust }).Server(context.Background(), "s1")
		if err != nil {
			t.Fatal(err)
		}
		_, has := s.Metadata[nova.MetaPin]
		if s.Metadata[nova.MetaPin] != tc.pin || s.Metadata[nova.MetaPriority] != tc.prio || has != (tc.hasPin == "yes") || s.Metadata["owner"] != "x" ||
			s.Metadata[nova.MetaMaintenanceAction] != tc.maint {
			t.Errorf("trust metadata %v: metadata %v, want pin %q priority %q", tc.trust, s.Metadata, tc.pin, tc.prio)
		}
	}
}
