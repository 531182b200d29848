package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"testing"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/scheduler/control"
	"github.com/dvms-project/dvms/scheduler/status"
)

// The simulator's agents are whole agents, built by agentd.New as `dvms
// agent` builds its own: over the simulation's NATS they answer `dvms
// status` with their journal, take an operator's pause (the region is
// unsigned, as an insecure_unsigned one) and honour it: no event is
// raised while paused.
func TestSimulatedAgentsAnswerStatusAndHonourPause(t *testing.T) {
	c := DefaultConfig()
	c.Hosts, c.Servers, c.Seed = 6, 60, 3
	c.Workload = "saturated"
	c.Duration, c.TimeScale = 10*time.Minute, 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failure error
	var pausedFor time.Duration
	c.OnAgents = func(ctx context.Context, url string) {
		defer cancel() // the run ends with the check
		failure = askSimulatedAgents(ctx, url, c, &pausedFor)
	}
	_, err := Run(ctx, c)
	if failure != nil {
		t.Fatal(failure)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if pausedFor == 0 {
		t.Fatal("the check did not run to its end")
	}
}

func askSimulatedAgents(ctx context.Context, url string, c Config, pausedFor *time.Duration) error {
	bc := bus.DefaultConfig()
	bc.URL, bc.Name = url, "test-cli"
	tr, err := bus.ConnectNATS(ctx, bc)
	if err != nil {
		return err
	}
	defer func() { _ = tr.Close() }()
	// The simulator's membership is ideal (the agents hear of no member
	// over the bus): the test names every host, so that the gathering
	// waits for each one's answer.
	var hosts []string
	for i := range c.Hosts {
		hosts = append(hosts, fmt.Sprintf("compute-%05d", i+1))
	}
	ask := func() ([]status.Report, error) {
		got, err := status.GatherAnswers(ctx, tr, 5*time.Second, bus.StatusSubject(c.Runtime.Region), func(inbox string) []byte {
			req, _ := json.Marshal(status.Request{V: 1, Reply: inbox})
			return req
		}, func(data []byte) (r status.Report, host string, members []string, ok bool) {
			if json.Unmarshal(data, &r) != nil || r.V != 1 || r.Host == "" {
				return r, "", nil, false
			}
			return r, r.Host, hosts, true
		})
		var reps []status.Report
		for _, h := range hosts {
			if r, ok := got[h]; ok {
				reps = append(reps, r)
			}
		}
		return reps, err
	}
	// Every agent answers, and their journals fill as the saturated
	// workload raises events.
	var reps []status.Report
	for {
		reps, err = ask()
		events := 0
		for _, r := range reps {
			events += len(r.Events)
		}
		if len(reps) == c.Hosts && events > 0 {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d agents answered with %d events before the run ended (%v)", len(reps), c.Hosts, events, err)
		}
	}
	for _, r := range reps {
		if r.Version != "simulate" || r.Incarnation == "" || r.Control.Paused {
			return fmt.Errorf("report of %s: %+v", r.Host, r)
		}
	}

	// dvms pause, unsigned, dated by the region's clock (simulated time:
	// agents refuse a command from their future).
	var agentsNow time.Time
	for _, r := range reps {
		if r.Now.After(agentsNow) {
			agentsNow = r.Now
		}
	}
	cmd := control.Command{V: 1, ID: "pause-1", At: agentsNow, Op: control.OpPause}
	acks, err := status.SendControl(ctx, tr, 5*time.Second, c.Runtime.Region, cmd, nil, hosts)
	if err != nil {
		return err
	}
	for h, a := range acks {
		if !a.Accepted || !a.Control.Paused {
			return fmt.Errorf("%s: pause not taken: %+v", h, a)
		}
	}
	if len(acks) != c.Hosts {
		return fmt.Errorf("%d of %d agents took the pause", len(acks), c.Hosts)
	}
	// Paused: raised stays what it was once the events raised before
	// the pause are counted, while simulated time goes on for more than
	// two monitor intervals' debounce windows.
	var pausedAt time.Time
	for _, r := range reps {
		if r.Now.After(pausedAt) {
			pausedAt = r.Now
		}
	}
	for {
		reps, err = ask()
		if err != nil {
			return err
		}
		var now time.Time
		for _, r := range reps {
			if r.Now.After(now) {
				now = r.Now
			}
			if !r.Control.Paused {
				return fmt.Errorf("%s does not say paused", r.Host)
			}
			for _, e := range r.Events {
				// Raised is the detection time: a window of samples
				// started before the pause may end in one just after.
				if e.Raised.After(pausedAt.Add(c.Runtime.Monitor * 2)) {
					return fmt.Errorf("%s raised %s at %s, paused at %s", r.Host, e.ID, e.Raised, pausedAt)
				}
			}
		}
		if d := now.Sub(pausedAt); d > 20*c.Runtime.Monitor {
			*pausedFor = d
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the run ended %s after the pause", now.Sub(pausedAt))
		}
		if slices.ContainsFunc(reps, func(r status.Report) bool { return r.State == "stopping" }) {
			return errors.New("an agent stops")
		}
	}
}
