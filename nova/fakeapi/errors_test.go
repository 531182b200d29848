package fakeapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fakeapi"
)

// TestErrorsMapBackToSentinels checks that what the fake refuses comes
// back through HTTP and the real client as the same nova sentinel the
// fake returns in process.
func TestErrorsMapBackToSentinels(t *testing.T) {
	ctx := context.Background()
	const unknown = "00000000-0000-4000-8000-00000000dead"
	for _, tc := range []struct {
		name string
		// setup prepares the cloud (servers s1 on compute-1 exists).
		setup func(t *testing.T, b *bed)
		call  func(c nova.Client) error
		want  error
	}{
		{"unknown server", nil, func(c nova.Client) error { _, err := c.Server(ctx, unknown); return err }, nova.ErrNotFound},
		{"migrate unknown server", nil, func(c nova.Client) error { _, err := c.LiveMigrate(ctx, unknown, "compute-2"); return err }, nova.ErrNotFound},
		{"migrations of unknown server", nil, func(c nova.Client) error { _, err := c.Migrations(ctx, unknown); return err }, nova.ErrNotFound},
		{"metadata of unknown server", nil, func(c nova.Client) error { return c.SetServerMetadata(ctx, unknown, "k", "v") }, nova.ErrNotFound},
		{"unknown host", nil, func(c nova.Client) error { _, err := c.Host(ctx, "nowhere"); return err }, nova.ErrNotFound},
		{"disable unknown host", nil, func(c nova.Client) error { return c.SetServiceStatus(ctx, "nowhere", true, "x") }, nova.ErrNotFound},
		{"migrate to unknown host", nil, func(c nova.Client) error { _, err := c.LiveMigrate(ctx, "s1", "nowhere"); return err }, nova.ErrBadRequest},
		{"migrate to its own host", nil, func(c nova.Client) error { _, err := c.LiveMigrate(ctx, "s1", "compute-1"); return err }, nova.ErrBadRequest},
		{"unshelve to unknown host", func(t *testing.T, b *bed) { shelveOffload(t, b, "s1") },
			func(c nova.Client) error { _, err := c.Unshelve(ctx, "s1", "nowhere"); return err }, nova.ErrBadRequest},
		{"migrate while migrating", func(t *testing.T, b *bed) { must(t)(b.cloud.LiveMigrate(ctx, "s1", "compute-2")) },
			func(c nova.Client) error { _, err := c.LiveMigrate(ctx, "s1", "compute-3"); return err }, nova.ErrConflict},
		{"shelve while migrating", func(t *testing.T, b *bed) { must(t)(b.cloud.LiveMigrate(ctx, "s1", "compute-2")) },
			func(c nova.Client) error { _, err := c.Shelve(ctx, "s1"); return err }, nova.ErrConflict},
		{"offload an active server", nil, func(c nova.Client) error { _, err := c.ShelveOffload(ctx, "s1"); return err }, nova.ErrConflict},
		{"unshelve a shelved server to a host", func(t *testing.T, b *bed) { must(t)(b.cloud.Shelve(ctx, "s1")) },
			func(c nova.Client) error { _, err := c.Unshelve(ctx, "s1", "compute-2"); return err }, nova.ErrConflict},
		{"metadata of an offloaded server", func(t *testing.T, b *bed) { shelveOffload(t, b, "s1") },
			func(c nova.Client) error { return c.SetServerMetadata(ctx, "s1", "k", "v") }, nova.ErrConflict},
		{"delete metadata of an offloaded server", func(t *testing.T, b *bed) { shelveOffload(t, b, "s1") },
			func(c nova.Client) error { return c.SetServerMetadata(ctx, "s1", "k", "") }, nova.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, fakeapi.Options{})
			if err := b.cloud.AddServer(nova.Server{ID: "s1", Name: "s1", Host: "compute-1", VCPUs: 1, RAMMB: 512}); err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				tc.setup(t, b)
			}
			err := tc.call(b.client(t))
			if !errors.Is(err, tc.want) {
				t.Errorf("over HTTP: err = %v, want %v", err, tc.want)
			}
			// The fake in process says the same (reads only: an action
			// would change the state).
			if strings.HasPrefix(tc.name, "unknown") {
				if err := tc.call(b.cloud); !errors.Is(err, tc.want) {
					t.Errorf("in process: err = %v, want %v", err, tc.want)
				}
			}
		})
	}
}

// TestMigrationToUnusableHostEndsInError: as Nova (2.34+) does, a live
// migration to a disabled or full host is accepted (202) and its
// migration ends in error (NoValidHost); the server stays where it was.
func TestMigrationToUnusableHostEndsInError(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, b *bed)
	}{
		{"disabled", func(t *testing.T, b *bed) { noErr(t, b.cloud.SetServiceStatus(ctx, "compute-2", true, "test")) }},
		{"full", func(t *testing.T, b *bed) {
			noErr(t, b.cloud.AddServer(nova.Server{ID: "big", Name: "big", Host: "compute-2", VCPUs: 8, RAMMB: 1024}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, fakeapi.Options{})
			noErr(t, b.cloud.AddServer(nova.Server{ID: "s1", Name: "s1", Host: "compute-1", VCPUs: 1, RAMMB: 512}))
			tc.setup(t, b)
			c := b.client(t)
			if _, err := c.LiveMigrate(ctx, "s1", "compute-2"); err != nil {
				t.Fatalf("LiveMigrate: %v, want accepted", err)
			}
			f := &fixture{b: b}
			var last nova.Migration
			ok := f.WaitFor(5*time.Minute, func() bool {
				ms, err := c.Migrations(ctx, "s1")
				if err != nil || len(ms) == 0 {
					return false
				}
				last = ms[0]
				return last.Terminal()
			})
			if !ok || last.Status != nova.MigrationError || last.Dest != "compute-2" {
				t.Fatalf("migration %+v, want error towards compute-2", last)
			}
			s, err := c.Server(ctx, "s1")
			if err != nil || s.Host != "compute-1" || s.Status != nova.StatusActive || s.TaskState != "" {
				t.Errorf("server %+v, %v; want ACTIVE on compute-1", s, err)
			}
		})
	}
}

// TestAuthentication: the one user and project, with the configured
// password; anything else is 401 and the client fails to connect.
func TestAuthentication(t *testing.T) {
	b := newBed(t, fakeapi.Options{Username: "dvms", Password: "right", ProjectName: "admin"})
	url := b.srv.URL + "/identity/v3"
	if _, err := b.connect(t, url, "dvms", "right"); err != nil {
		t.Fatalf("right password: %v", err)
	}
	for _, tc := range []struct{ user, password string }{{"dvms", "wrong"}, {"admin", "right"}} {
		_, err := b.connect(t, url, tc.user, tc.password)
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("user %s password %s: err = %v, want a 401", tc.user, tc.password, err)
		}
	}
	// Without Options.Password any password passes.
	open := newBed(t, fakeapi.Options{})
	if _, err := open.connect(t, open.srv.URL+"/identity/v3", "admin", "anything"); err != nil {
		t.Errorf("any password: %v", err)
	}
	// A versionless auth_url: gophercloud discovers v3.
	if _, err := open.connect(t, open.srv.URL+"/identity", "admin", "anything"); err != nil {
		t.Errorf("versionless auth_url: %v", err)
	}
}

func shelveOffload(t *testing.T, b *bed, id string) {
	t.Helper()
	must(t)(b.cloud.Shelve(context.Background(), id))
	must(t)(b.cloud.ShelveOffload(context.Background(), id))
}

// must fails the test if the action it is given failed.
func must(t *testing.T) func(nova.Receipt, error) {
	return func(_ nova.Receipt, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestExpiredTokenIsRenewed: compute answers an expired token 401 and
// the real client authenticates again (AllowReauth) and goes on.
func TestExpiredTokenIsRenewed(t *testing.T) {
	b := newBed(t, fakeapi.Options{TokenTTL: 500 * time.Millisecond})
	c := b.client(t)
	time.Sleep(700 * time.Millisecond)
	if _, err := c.Hosts(context.Background()); err != nil {
		t.Fatalf("Hosts after the token expired: %v", err)
	}
	tokens := int64(0)
	for tpl, n := range c.Meter().CallerCounts("") {
		if tpl.Method == http.MethodPost && strings.HasSuffix(tpl.Path, "/auth/tokens") {
			tokens += n
		}
	}
	if tokens < 2 {
		t.Errorf("%d token requests, want the first and a renewal", tokens)
	}
}

// TestBaseURLNamesTheCatalog: with Options.BaseURL the catalog names it,
// whatever address the token request came to.
func TestBaseURLNamesTheCatalog(t *testing.T) {
	b := newBed(t, fakeapi.Options{})
	var h http.Handler
	var viaBase atomic.Int64
	base := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		viaBase.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(base.Close)
	h = fakeapi.New(b.cloud, fakeapi.Options{BaseURL: base.URL + "/"})
	auth := httptest.NewServer(h)
	t.Cleanup(auth.Close)
	c, err := b.connect(t, auth.URL+"/identity/v3", "admin", "x")
	if err != nil {
		t.Fatal(err)
	}
	before := viaBase.Load()
	if _, err := c.Hosts(context.Background()); err != nil {
		t.Fatal(err)
	}
	if viaBase.Load() <= before {
		t.Errorf("Hosts sent nothing to the BaseURL server")
	}
}

// TestKeystoneDownIsUnavailable: a token expired while Keystone does not
// answer makes a read fail as nova.ErrUnavailable (gophercloud's
// re-authentication error does not unwrap), so callers retry and wait
// the outage out; once Keystone answers again the same client goes on.
func TestKeystoneDownIsUnavailable(t *testing.T) {
	b := newBed(t, fakeapi.Options{})
	var down atomic.Bool
	h := fakeapi.New(b.cloud, fakeapi.Options{BaseURL: b.srv.URL, TokenTTL: 200 * time.Millisecond})
	ks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close() // no answer
			}
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ks.Close)
	// Compute checks tokens against h's table: serve compute from h too.
	b.srv.Config.Handler = h
	c, err := b.connect(t, ks.URL+"/identity/v3", "admin", "x")
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err = c.Hosts(context.Background())
		if err != nil || time.Now().After(deadline) {
			break // the token expired: a 401, and re-authentication failed
		}
	}
	if !errors.Is(err, nova.ErrUnavailable) {
		t.Fatalf("Keystone down, token expired: err = %v, want nova.ErrUnavailable", err)
	}
	down.Store(false)
	if _, err := c.Hosts(context.Background()); err != nil {
		t.Fatalf("Keystone back: %v", err)
	}
}
