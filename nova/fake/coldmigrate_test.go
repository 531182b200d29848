package fake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// A cold migration: RESIZE, then VERIFY_RESIZE on the destination with
// the source's allocation held, then ACTIVE there once confirmed (or
// back on its source once reverted); the instance actions list it.
func TestColdMigrateConfirmRevert(t *testing.T) {
	ctx := context.Background()
	for _, revert := range []bool{false, true} {
		c, clock := newCloud(t)
		mustAdd(t, c, server("s1", "compute-1", 2, 2048))
		if _, err := c.ConfirmResize(ctx, "s1"); !errors.Is(err, nova.ErrConflict) {
			t.Fatalf("confirm of an ACTIVE server: %v, want conflict", err)
		}
		if _, err := c.Migrate(ctx, "s1", "compute-1"); !errors.Is(err, nova.ErrBadRequest) {
			t.Fatalf("migrate to the source: %v, want bad request", err)
		}
		if _, err := c.Migrate(ctx, "s1", "compute-2"); err != nil {
			t.Fatal(err)
		}
		if s, _ := c.Server(ctx, "s1"); s.Status != "RESIZE" || s.TaskState == "" {
			t.Fatalf("migrating: %s/%q, want RESIZE with a task", s.Status, s.TaskState)
		}
		if _, err := c.Migrate(ctx, "s1", "compute-3"); !errors.Is(err, nova.ErrConflict) {
			t.Fatalf("second migrate while resizing: %v, want conflict", err)
		}
		clock.Advance(time.Hour)
		s, _ := c.Server(ctx, "s1")
		if s.Status != nova.StatusVerifyResize || s.Host != "compute-2" || s.TaskState != "" {
			t.Fatalf("after the copy: %s on %s (%q), want VERIFY_RESIZE on compute-2", s.Status, s.Host, s.TaskState)
		}
		if a := c.Audit(); len(a) > 0 {
			t.Fatalf("audit in VERIFY_RESIZE: %v", a)
		}
		if h, _ := c.Host(ctx, "compute-1"); h.VCPUsUsed != 2 {
			t.Fatalf("source allocation in VERIFY_RESIZE: %d VCPU, want 2 (held until confirmed)", h.VCPUsUsed)
		}
		if ms, _ := c.Migrations(ctx, "s1"); len(ms) != 1 || ms[0].Status != nova.MigrationFinished || ms[0].Terminal() || ms[0].Type != "migration" {
			t.Fatalf("migrations in VERIFY_RESIZE: %+v, want one non-terminal finished cold migration", ms)
		}
		want, host, used, status := "confirmResize", "compute-2", 0, nova.MigrationConfirmed
		if revert {
			want, host, used, status = "revertResize", "compute-1", 2, nova.MigrationReverted
			_, err := c.RevertResize(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
		} else {
			if _, err := c.ConfirmResize(ctx, "s1"); err != nil {
				t.Fatal(err)
			}
			if s, _ := c.Server(ctx, "s1"); s.Status != nova.StatusVerifyResize {
				t.Fatalf("confirming: %s, want VERIFY_RESIZE until the compute confirmed", s.Status)
			}
			if _, err := c.ConfirmResize(ctx, "s1"); !errors.Is(err, nova.ErrConflict) {
				t.Fatalf("second confirm: %v, want conflict", err)
			}
			clock.Advance(time.Minute)
		}
		s, _ = c.Server(ctx, "s1")
		if s.Status != nova.StatusActive || s.Host != host {
			t.Fatalf("%s: %s on %s, want ACTIVE on %s", want, s.Status, s.Host, host)
		}
		if h, _ := c.Host(ctx, "compute-1"); h.VCPUsUsed != used {
			t.Fatalf("%s: source allocation %d VCPU, want %d", want, h.VCPUsUsed, used)
		}
		if ms, _ := c.Migrations(ctx, "s1"); ms[0].Status != status || !ms[0].Terminal() {
			t.Fatalf("%s: migration %+v, want terminal %s", want, ms[0], status)
		}
		as, err := c.ServerActions(ctx, "s1")
		if err != nil || len(as) != 2 || as[0].Action != want || as[1].Action != "migrate" || as[0].RequestID == "" {
			t.Fatalf("instance actions: %+v %v, want %s then migrate, newest first", as, err, want)
		}
	}
}

// A server that cannot live-migrate fails at the pre-check and stays
// ACTIVE on its source; it still cold-migrates.
func TestNoLiveMigration(t *testing.T) {
	ctx := context.Background()
	c, clock := newCloud(t)
	mustAdd(t, c, server("s1", "compute-1", 2, 2048))
	if err := c.SetNoLiveMigration("s1", "PCI passthrough"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LiveMigrate(ctx, "s1", "compute-2"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	ms, _ := c.Migrations(ctx, "s1")
	if s, _ := c.Server(ctx, "s1"); len(ms) != 1 || ms[0].Status != nova.MigrationError || s.Host != "compute-1" || s.Status != nova.StatusActive {
		t.Fatalf("live migration of a server that cannot: %+v, server %s on %s", ms, s.Status, s.Host)
	}
	if as := c.Actions("s1"); !strings.Contains(as[0].Message, "pre-check") {
		t.Fatalf("action message %q, want the pre-check's", as[0].Message)
	}
	if _, err := c.Migrate(ctx, "s1", "compute-2"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if s, _ := c.Server(ctx, "s1"); s.Status != nova.StatusVerifyResize {
		t.Fatalf("cold migration: %s, want VERIFY_RESIZE", s.Status)
	}
	if _, err := c.ConfirmResize(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
}
