package agentd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/consensus"
	"github.com/dvms-project/dvms/internal/testbus"
	"github.com/dvms-project/dvms/internal/testwait"
	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/node"
	"github.com/dvms-project/dvms/scheduler/status"
)

// Options without what an agent needs are refused, each lack named.
func TestOptionsValidate(t *testing.T) {
	err := Options{}.Validate()
	if err == nil || !strings.Contains(err.Error(), "no host") || !strings.Contains(err.Error(), "required") {
		t.Fatalf("empty options: %v", err)
	}
}

// One agent on a real NATS server and a fake cloud: it answers a status
// request, takes an (unsigned) pause and says so, is healthy while its
// runner runs and stops cleanly; the caller's hooks see the records
// after the journal did.
func TestAgentServesStatusAndControls(t *testing.T) {
	url := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := testAgent(t, ctx, url, "t", nil)
	actx, stop := context.WithCancel(ctx)
	a.Start(actx)
	if err := a.Healthy(); err != nil {
		t.Fatalf("started: %v", err)
	}
	cli := testbus.Connect(t, ctx, url, "cli")
	var (
		reps []status.Report
		err  error
	)
	testwait.Until(t, 20*time.Second, "the agent answers", func() (bool, string) {
		reps, err = status.Gather(ctx, cli, status.GatherConfig{Region: "t", Timeout: time.Second})
		return len(reps) == 1, fmt.Sprint(err)
	})
	if r := reps[0]; r.Host != "c1" || r.Version != "v-test" || r.State != "free" || r.Incarnation == "" || r.Arbiter == nil || r.Arbiter.Kind != "local" {
		t.Fatalf("report %+v", r)
	}

	cmd := control.Command{V: 1, ID: "p", At: time.Now(), Op: control.OpPause}
	acks, err := status.SendControl(ctx, cli, 10*time.Second, "t", cmd, nil, nil)
	if err != nil || !acks["c1"].Accepted || !a.Registers().Paused() {
		t.Fatalf("pause: %v %+v", err, acks)
	}
	reps, err = status.Gather(ctx, cli, status.GatherConfig{Region: "t", Timeout: 5 * time.Second})
	if err != nil || len(reps) != 1 || !reps[0].Control.Paused {
		t.Fatalf("after the pause: %v %+v", err, reps)
	}

	stop()
	if err := a.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := a.Healthy(); err == nil {
		t.Error("stopped, yet healthy")
	}
}

// testAgent is the agent of host c1 (8 cores) of a fake cloud, in
// region, on the NATS server at url; tweak (if not nil) edits its options.
func testAgent(t *testing.T, ctx context.Context, url, region string, tweak func(*Options, *fake.Cloud)) *Agent {
	t.Helper()
	tr := testbus.Connect(t, ctx, url, "agent")
	cloud := fake.New(fake.DefaultConfig(), node.Wall{})
	cloud.AddHost(nova.Host{Name: "c1", VCPUs: 8, RAMMB: 32768, CPUAllocRatio: 4, RAMAllocRatio: 1})
	rt := node.DefaultConfig()
	rt.Region = region
	o := Options{
		Runtime: rt, Agent: scheduler.DefaultConfig("c1"), Version: "v-test", Bus: tr,
		Nova: cloud, Demand: cloud, Arbiter: Shared{Arbiter: consensus.NewLocal(time.Now)}, Clock: node.Wall{},
		Log: zerolog.Nop(), Seed: 1,
	}
	if tweak != nil {
		tweak(&o, cloud)
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The caller's hooks come after the agent's own, and both are called.
func TestChainCallsBothInOrder(t *testing.T) {
	var got []string
	h := chain(node.Hooks{OnRecord: func(string, scheduler.Record) { got = append(got, "agent") }},
		node.Hooks{OnRecord: func(string, scheduler.Record) { got = append(got, "caller") }})
	h.OnRecord("c1", scheduler.Record{})
	if strings.Join(got, " ") != "agent caller" {
		t.Fatalf("called %v", got)
	}
	if h := chain(node.Hooks{OnSend: func(string, scheduler.Message) {}}, node.Hooks{}); h.OnSend == nil {
		t.Fatal("the agent's hook dropped when the caller has none")
	}
}
