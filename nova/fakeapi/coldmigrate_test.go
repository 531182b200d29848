package fakeapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fakeapi"
)

// nova/openstack's cold migration against the fake API: migrate to a
// host, VERIFY_RESIZE there, confirm (Nova's 204), ACTIVE there; the
// instance actions list migrate and confirmResize.
func TestColdMigrationOverHTTP(t *testing.T) {
	b := newBed(t, fakeapi.Options{})
	ctx := context.Background()
	if err := b.cloud.AddServer(nova.Server{ID: "s1", Name: "s1", Host: "compute-1", VCPUs: 1, RAMMB: 512}); err != nil {
		t.Fatal(err)
	}
	cl := b.client(t)
	if _, err := cl.Migrate(ctx, "s1", "compute-2"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour)
	if s, err := cl.Server(ctx, "s1"); err != nil || s.Status != nova.StatusVerifyResize || s.Host != "compute-2" {
		t.Fatalf("after the copy: %+v %v, want VERIFY_RESIZE on compute-2", s, err)
	}
	if _, err := cl.ConfirmResize(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	if s, err := cl.Server(ctx, "s1"); err != nil || s.Status != nova.StatusActive || s.Host != "compute-2" {
		t.Fatalf("confirmed: %+v %v, want ACTIVE on compute-2", s, err)
	}
	as, err := cl.ServerActions(ctx, "s1")
	if err != nil || len(as) != 2 || as[0].Action != "confirmResize" || as[1].Action != "migrate" {
		t.Fatalf("instance actions %+v %v", as, err)
	}
	if _, err := cl.RevertResize(ctx, "s1"); err == nil {
		t.Fatal("revert of an ACTIVE server accepted")
	}
}
