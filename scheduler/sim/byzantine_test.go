package sim

import (
	"context"
	"testing"
	"time"
)

// Adversaries with valid keys (--byzantine): they forge events, MAINTENANCE
// of honest hosts too, and take over partitions; host consent moves no
// server off an honest host for a forged event, nothing is lost, and no
// plan overloads an honest destination, and no honest host's word is
// judged implausible (an adversary under-reporting its demand may overload its own host: those
// are counted apart). The bounds themselves are tested in scheduler/node
// (bounds_internal_test.go, redteam_hold_test.go): a run this short holds
// too few partitions past lead_timeout to judge them.
func TestSimulateByzantine(t *testing.T) {
	c := small(5)
	c.Duration, c.TimeScale, c.Byzantine = 90*time.Second, 5, 0.1
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	b := r.Byzantine
	if b == nil || b.Hosts != 4 {
		t.Fatalf("byzantine report %+v, want 4 adversaries", b)
	}
	t.Logf("%+v; events %d solved of %d", *b, r.Events.Solved, r.Events.Total)
	if b.Forged == 0 || b.Maintenance == 0 || b.Takeovers == 0 || b.Heartbeats == 0 {
		t.Fatalf("the adversaries did not attack: %+v", b)
	}
	if b.MovedWithoutConsent != 0 {
		t.Errorf("%d servers moved off an honest host for a forged event", b.MovedWithoutConsent)
	}
	if b.FalseImplausible != 0 {
		// Every honest host's servers use 70 % of their flavors' RAM.
		t.Errorf("%d honest hosts judged implausible as a destination", b.FalseImplausible)
	}
	if r.Safety.ServersLost != 0 || r.Safety.Violations != b.OntoAdversary {
		t.Errorf("safety: %d violations, %d of them onto an adversary's host (%v), %d servers lost", r.Safety.Violations, b.OntoAdversary, r.Safety.Descriptions, r.Safety.ServersLost)
	}
}
