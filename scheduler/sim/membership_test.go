package sim

import (
	"context"
	"testing"
	"time"
)

// With --membership swim the runners hear of deaths only from memberlist
// over the lossy in-memory network: killed agents are detected, no live
// agent is reported down at 10 % loss, and the run stays safe.
func TestSimulateSwimMembership(t *testing.T) {
	c := small(8)
	c.Hosts, c.Servers = 16, 160
	c.Duration, c.TimeScale = 50*time.Second, 1 // memberlist runs in wall time
	c.KillAgents, c.Membership, c.MembershipDrop = 0.25, MembershipSwim, 0.10
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkSafe(t, r)
	m := r.Membership
	if m == nil {
		t.Fatal("no membership report")
	}
	t.Logf("membership: %+v; killed %d; events %+v", *m, r.Agents.Killed, r.Events)
	if r.Agents.Killed != 4 || m.Detections == 0 || m.DetectP50S <= 0 || m.MsgsPerAgentS <= 0 {
		t.Fatalf("SWIM not exercised: killed %d, %+v", r.Agents.Killed, *m)
	}
	if m.FalseDeaths != 0 {
		t.Errorf("%d live agents reported down at 10 %% loss", m.FalseDeaths)
	}
	if m.Missed > m.Detections/4 {
		t.Errorf("%d (observer, killed agent) pairs missed against %d detected", m.Missed, m.Detections)
	}
	if _, err := Run(context.Background(), Config{Membership: "gossip-by-pigeon"}); err == nil {
		t.Error("unknown membership accepted")
	}
}
