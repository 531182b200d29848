//go:build functional

package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova/openstack"
)

// agentCloud is the agents' cloud in the functional clouds.yaml: keystone
// user agentUser with the role dvms only, in a project of its own
// (devstack/functional/up.sh; Nova's policy is written by
// dvms_nova.policy, placement's is etc/dvms/policy/placement.yaml).
const agentCloud = "dvms-agent"

// TestFunctionalLeastPrivilege (issue 10): the agents run without admin.
// It runs after the agents' tests (files sort "zz_" last) and checks,
// from nova-api's and placement's own request logs of the whole run,
// that the agents' user made requests, among them server actions (the
// plans' live migrations, shelves and unshelves: the drain, overload,
// preemption and fault tests passed with these credentials), and that
// the cloud refused none of them; then that the same credentials are
// refused what the role does not grant.
func TestFunctionalLeastPrivilege(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fc := functionalCloud(t, ctx)

	logs := newAPILogs(fc.dir)
	out, err := fc.osc(t, ctx, "user", "list", "-f", "json")
	if err != nil {
		t.Fatal(err)
	}
	var users []struct{ ID, Name string }
	if err := json.Unmarshal([]byte(out), &users); err != nil {
		t.Fatalf("user list: %v", err)
	}
	for _, u := range users {
		logs.users[u.ID] = u.Name
	}
	start := apiMark{off: map[string]int64{}}
	for svc := range logs.files {
		start.off[svc] = 0
	}
	var own, actions int
	kinds := map[string]int{}
	refused := map[string]int{}
	for _, q := range logs.between(t, start, logs.mark(t)) {
		if q.user != agentUser {
			continue
		}
		own++
		kinds[q.template()]++
		if q.status == 401 || q.status == 403 {
			refused[q.template()]++
		}
		if q.method == "POST" && strings.HasSuffix(q.path, "/action") {
			actions++
		}
	}
	if own == 0 {
		t.Fatalf("no request of user %q in the cloud's request logs: the agents did not log in as %s (up.sh writes [nova] os_cloud = %s)", agentUser, agentCloud, agentCloud)
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, strings.TrimSpace(k)+" ×"+strconv.Itoa(n))
	}
	slices.Sort(ks)
	t.Logf("user %s made %d requests in this run, %d of them server actions:\n  %s", agentUser, own, actions, strings.Join(ks, "\n  "))
	if actions == 0 {
		t.Errorf("user %s made no server action: the plans of the agents' tests ran under another identity", agentUser)
	}
	for k, n := range refused {
		t.Errorf("the cloud refused %d requests of the agents' user: %s (dvms_nova.policy GRANTED or etc/dvms/policy/placement.yaml misses a rule)", n, k)
	}

	// What the role does not grant, asked with the agents' credentials.
	cfg := openstack.DefaultConfig(agentCloud)
	cfg.CloudsFile = fc.file
	cl, err := openstack.New(ctx, cfg)
	if err != nil {
		t.Fatalf("log in as %s: %v", agentCloud, err)
	}
	if _, err := cl.Host(ctx, "compute-1"); err != nil {
		t.Errorf("the agents' user cannot read compute-1 (granted): %v", err)
	}
	// A server of the admin project: the agents' user reads it (another
	// project's server: the admin context the role gets) but may not
	// delete it.
	id, err := fc.osc(t, ctx, "server", "create", "--flavor", "dvms.tiny", "--image", "dvms-tiny", "--nic", "none",
		"-f", "value", "-c", "id", "dvms-leastpriv-test")
	if err != nil {
		t.Fatalf("create a server as admin: %v", err)
	}
	id = strings.TrimSpace(id)
	t.Cleanup(func() {
		if _, err := fc.osc(t, context.Background(), "server", "delete", "--wait", id); err != nil {
			t.Errorf("delete %s as admin: %v", id, err)
		}
	})
	if s, err := cl.Server(ctx, id); err != nil || s.ID != id {
		t.Errorf("the agents' user cannot read the admin project's server %s (granted): %+v, %v", id, s, err)
	}
	if out, err := fc.osc(t, ctx, "--os-cloud", agentCloud, "server", "delete", id); err == nil {
		t.Errorf("the agents' user deleted the admin project's server %s: %s", id, out)
	} else if !strings.Contains(err.Error(), "403") && !strings.Contains(strings.ToLower(err.Error()), "policy") {
		t.Errorf("deleting a server as the agents' user failed, but not as forbidden: %v", err)
	} else {
		t.Logf("refused as expected: delete another project's server")
	}
	if err := cl.SetServiceStatus(ctx, "compute-1", true, "dvms least-privilege test"); err == nil {
		t.Errorf("the agents' user disabled compute-1's nova-compute: os-services:update must be the operator's")
		if err := fc.cl.SetServiceStatus(ctx, "compute-1", false, ""); err != nil {
			t.Errorf("re-enable compute-1: %v", err)
		}
	} else {
		t.Logf("refused as expected: disable a compute service: %v", err)
	}
	for _, args := range [][]string{
		{"hypervisor", "list"},
		{"flavor", "create", "--vcpus", "1", "--ram", "64", "--disk", "1", "dvms-leastpriv-test"},
		{"aggregate", "list"},
		{"resource", "provider", "create", "dvms-leastpriv-test"},
	} {
		cmd := append([]string{"--os-cloud", agentCloud}, args...)
		if out, err := fc.osc(t, ctx, cmd...); err == nil {
			t.Errorf("the agents' user was allowed `openstack %s`: %s", strings.Join(args, " "), out)
		} else if !strings.Contains(err.Error(), "403") && !strings.Contains(strings.ToLower(err.Error()), "policy") {
			t.Errorf("`openstack %s` as the agents' user failed, but not as forbidden: %v", strings.Join(args, " "), err)
		} else {
			t.Logf("refused as expected: openstack %s", strings.Join(args, " "))
		}
	}
}
