package scheduler

import "testing"

// A refused plan ends the event not_worth and it is raised again after
// retry_backoff, whatever the backoff had grown to: the refusal judged
// the overload's moment, and one that lasts is not left a minute.
func TestNotWorthRetriesAfterRetryBackoff(t *testing.T) {
	h1, d := leaderSolved(t, Solution{NotWorth: true, Reason: "not worth it: test"})
	base := h1.cfg.RetryBackoff
	h1.backoff = 8 * base // grown by earlier failures
	h1.Step(d)
	h1.Ready()
	if h1.Partition() != nil || h1.active != nil {
		t.Fatalf("h1 still in %+v with event %+v", h1.Partition(), h1.active)
	}
	if !h1.retryAt.Equal(h1.now.Add(base)) || h1.backoff != 8*base {
		t.Fatalf("next try at +%s, backoff %s; want +%s and %s kept", h1.retryAt.Sub(h1.now), h1.backoff, base, 8*base)
	}
}

// leaderSolved: h1 raises an overload, h2 leads its partition and its
// solve ends with sol; h1 and the message h2 broadcast (its dissolve when
// sol is refused), which h1 has not seen yet.
func leaderSolved(t *testing.T, sol Solution) (*Agent, Message) {
	t.Helper()
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	h2.Step(only(t, overload(t, h1), MsgGrow).Msg)
	h1.Step(only(t, h2.Ready(), MsgUpdate).Msg)
	h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	rd := h2.Ready()
	if len(rd.Solve) != 1 {
		t.Fatalf("solve requests %+v", rd.Solve)
	}
	req := rd.Solve[0]
	h2.SolveDone(req.PartID, req.Version, sol, Plan{}, nil)
	rd = h2.Ready()
	if len(sent(rd, MsgGrow)) != 0 || h2.Partition() != nil {
		t.Fatalf("grew or kept the partition: %+v", rd.Messages)
	}
	return h1, only(t, rd, MsgDissolve).Msg
}
