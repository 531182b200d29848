package testing

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/nova/openstack"
)

const unknownServer = "8a9b3c1d-0000-4000-8000-0000000000ff"

// twoHosts serves a small consistent region: compute-1 and compute-2,
// each with a resource provider named like it; server1 (in group1) and
// server2 on compute-1.
func twoHosts(t *testing.T) *cloud {
	c := newCloud(t)
	svc := func(id, host string) string {
		return `{"id": "` + id + `", "binary": "nova-compute", "host": "` + host + `", "zone": "nova", "status": "enabled", "state": "up", "disabled_reason": null}`
	}
	c.mux.HandleFunc("GET "+computePrefix+"/os-services", func(w http.ResponseWriter, r *http.Request) {
		var out []string
		for _, s := range [][2]string{{svc1, "compute-1"}, {svc2, "compute-2"}} {
			if h := r.URL.Query().Get("host"); h == "" || h == s[1] {
				out = append(out, svc(s[0], s[1]))
			}
		}
		reply(w, 200, `{"services": [`+strings.Join(out, ",")+`]}`)
	})
	c.handle("PUT "+computePrefix+"/os-services/"+svc1, 200, `{"service": {}}`)
	c.mux.HandleFunc("GET "+placementPrefix+"/resource_providers", func(w http.ResponseWriter, r *http.Request) {
		var out []string
		for _, p := range [][2]string{{rp1, "compute-1"}, {rp2, "compute-2"}} {
			if n := r.URL.Query().Get("name"); n == "" || n == p[1] {
				out = append(out, `{"uuid": "`+p[0]+`", "name": "`+p[1]+`"}`)
			}
		}
		reply(w, 200, `{"resource_providers": [`+strings.Join(out, ",")+`]}`)
	})
	for _, rp := range []string{rp1, rp2} {
		c.handle("GET "+placementPrefix+"/resource_providers/"+rp+"/inventories", 200, inventories1Body)
		c.handle("GET "+placementPrefix+"/resource_providers/"+rp+"/usages", 200, usages1Body)
	}
	c.mux.HandleFunc("GET "+computePrefix+"/servers/detail", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("host") == "compute-1" {
			reply(w, 200, serversBody)
			return
		}
		reply(w, 200, `{"servers": []}`)
	})
	c.mux.HandleFunc("GET "+computePrefix+"/os-server-groups", func(w http.ResponseWriter, r *http.Request) {
		if off := r.URL.Query().Get("offset"); off != "" && off != "0" {
			reply(w, 200, `{"server_groups": []}`)
			return
		}
		reply(w, 200, groupsBody)
	})
	c.handle("GET "+computePrefix+"/servers/"+server1, 200, server1Body)
	c.handle("GET "+computePrefix+"/servers/"+server2, 200, `{"server": {"id": "`+server2+`", "status": "ACTIVE", "server_groups": []}}`)
	c.handle("GET "+computePrefix+"/servers/"+unknownServer, 404, notFoundBody)
	c.handle("GET "+computePrefix+"/os-server-groups/"+group1, 200, group1Body)
	c.mux.HandleFunc("GET "+computePrefix+"/os-migrations", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("instance_uuid") == server1 {
			reply(w, 200, migrationsBody)
			return
		}
		reply(w, 200, `{"migrations": []}`)
	})
	for _, id := range []string{server1, server2} {
		c.handle("POST "+computePrefix+"/servers/"+id+"/action", 202, "")
	}
	c.handle("GET "+computePrefix+"/servers/"+server1+"/migrations", 200, `{"migrations": [{"id": 1, "status": "running", "source_compute": "compute-1", `+
		`"dest_compute": "compute-2", "memory_total_bytes": null, "memory_processed_bytes": null, "memory_remaining_bytes": null}]}`)
	c.handle("POST "+computePrefix+"/servers/"+server1+"/migrations/999/action", 400,
		`{"badRequest": {"code": 400, "message": "Migration 999 not found for instance"}}`)
	c.handle("DELETE "+computePrefix+"/servers/"+server1+"/migrations/999", 404,
		`{"itemNotFound": {"code": 404, "message": "Migration 999 not found for instance"}}`)
	c.handle("PUT "+computePrefix+"/servers/"+server2+"/metadata/dvms:priority", 200, `{"meta": {"dvms:priority": "5"}}`)
	c.handle("DELETE "+computePrefix+"/servers/"+server2+"/metadata/dvms:pin", 204, "")
	c.handle("DELETE "+computePrefix+"/servers/"+server2+"/metadata/dvms:shelved", 404, `{"itemNotFound": {"code": 404, "message": "Metadata item was not found"}}`)
	return c
}

// sameRegion is twoHosts on nova/fake.
func sameRegion(t *testing.T, cfg fake.Config) *fake.Cloud {
	clock := fake.NewManualClock(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	fc := fake.New(cfg, clock)
	// The fixtures' servers carry no creation time: they are older than
	// any group index. The fake's are made an hour before the calls.
	defer clock.Advance(time.Hour)
	for _, h := range []string{"compute-1", "compute-2"} {
		fc.AddHost(nova.Host{Name: h, Zone: "nova", VCPUs: 8, RAMMB: 16384, CPUAllocRatio: 4, RAMAllocRatio: 1})
	}
	fc.AddGroup(nova.ServerGroup{ID: group1, Name: "web", Policy: nova.PolicyAntiAffinity})
	for _, s := range []nova.Server{
		{ID: server1, Name: "web-1", Host: "compute-1", VCPUs: 2, RAMMB: 1024, Group: &nova.ServerGroup{ID: group1}},
		{ID: server2, Name: "db-1", Host: "compute-1", VCPUs: 1, RAMMB: 512, Metadata: map[string]string{nova.MetaPin: "true"}},
	} {
		if err := fc.AddServer(s); err != nil {
			t.Fatal(err)
		}
	}
	return fc
}

// sequence is what an agent, its executor and the CLI call, once each,
// with the answers both clouds give alike.
func sequence(ctx context.Context, c nova.Client) []error {
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	try2 := func(_ any, err error) { errs = append(errs, err) }
	try2(c.Host(ctx, "compute-1")) // the provider looked up
	try2(c.Host(ctx, "compute-1")) // ... and remembered, its inventories too unless the TTL is 0
	try2(c.Hosts(ctx))
	try2(c.Services(ctx))
	try2(c.Servers(ctx, "compute-1")) // group index cold
	try2(c.Servers(ctx, "compute-1")) // warm unless the TTL is 0
	try2(c.Server(ctx, server1))      // in a group
	try2(c.Server(ctx, server2))
	try2(c.LiveMigrate(ctx, server1, "compute-2"))
	try2(c.Migrations(ctx, server1))
	try2(c.MigrationsInProgress(ctx, server1))
	try(c.ForceCompleteMigration(ctx, server1, "999")) // not its migration: 400
	try(c.AbortMigration(ctx, server1, "999"))         // ... 404
	try2(c.Migrations(ctx, server2))                   // none: the server is read
	try2(c.Shelve(ctx, server2))
	try2(c.ShelveOffload(ctx, server2))
	try2(c.Unshelve(ctx, server2, "compute-2"))
	try(c.SetServiceStatus(ctx, "compute-1", true, "dvms:maintenance"))
	try(c.SetServerMetadata(ctx, server2, nova.MetaPriority, "5"))
	try(c.SetServerMetadata(ctx, server2, nova.MetaPin, ""))
	try(c.SetServerMetadata(ctx, server2, nova.MetaShelved, "")) // absent: 404, then the server is read
	try2(c.ShelvedServers(ctx))
	try2(c.Server(ctx, unknownServer))
	try2(c.Migrations(ctx, unknownServer))
	try2(c.Host(ctx, "nowhere"))
	try(c.SetServiceStatus(ctx, "nowhere", true, "x"))
	return errs
}

// nova/fake charges, request for request, what nova/openstack sends for
// the same calls: a change of either (a new cache, one more read) fails
// here until nova/fake's cost table follows.
func TestFakeChargesWhatTheClientSends(t *testing.T) {
	for _, ttl := range []time.Duration{10 * time.Second, 0} {
		t.Run(fmt.Sprintf("caches-%s", ttl), func(t *testing.T) {
			ctx := context.Background()
			real := twoHosts(t).client(func(c *openstack.Config) { c.GroupCacheTTL, c.InventoryCacheTTL = ttl, ttl })
			real.Meter().Reset() // forget the authentication
			fcfg := fake.DefaultConfig()
			fcfg.GroupCacheTTL, fcfg.InventoryCacheTTL = ttl, ttl
			fc := sameRegion(t, fcfg)

			realErrs, fakeErrs := sequence(ctx, real), sequence(ctx, fc.Client("agent"))
			for i := range realErrs {
				if (realErrs[i] == nil) != (fakeErrs[i] == nil) {
					t.Fatalf("call %d: openstack %v, fake %v: the sequence must answer alike", i, realErrs[i], fakeErrs[i])
				}
			}
			rs, fs := real.Meter().Snapshot(), fc.Meter().Snapshot()
			type ce struct{ count, errors int64 }
			got := func(s nova.MeterSnapshot) map[string]ce {
				m := map[string]ce{}
				for _, ts := range s.Templates {
					if ts.Template.Service == nova.ServiceCompute || ts.Template.Service == nova.ServicePlacement {
						m[ts.Template.String()] = ce{ts.Count, ts.Errors}
					}
				}
				return m
			}
			rm, fm := got(rs), got(fs)
			for k, r := range rm {
				if fm[k] != r {
					t.Errorf("%s: nova/openstack sent %+v, nova/fake charged %+v", k, r, fm[k])
				}
			}
			for k, f := range fm {
				if _, ok := rm[k]; !ok {
					t.Errorf("%s: nova/fake charged %+v, nova/openstack sent none", k, f)
				}
			}
			if fs.Callers["agent"] != fs.Total || fs.Total < 30 {
				t.Errorf("fake charged %d requests, %d to the caller", fs.Total, fs.Callers["agent"])
			}
		})
	}
}
