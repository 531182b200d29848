package consensus

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/bus"
)

// Issue 10: on a signed bus an arbiter request or answer speaks only for
// its signer. Forged status messages (a ghost "older group" that made the
// voters stop) and answers naming another member are ignored.
func TestServiceTakesOnlyWhatItsSignerSays(t *testing.T) {
	s, err := NewService(ServiceConfig{Region: "r", ID: "h1"}, bus.NewHub(1).Transport("h1"), time.Now, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	status := func(from string) []byte {
		st := wireState{ID: from, Running: true, Member: true, IsLeader: true, Voters: []string{from}, Group: "0-" + from}
		data, _ := json.Marshal(wireReq{V: wireVersion, ID: "x-" + from, From: from, Reply: ReplySubject("r") + "." + from + ".t", Kind: kindStatus, State: &st})
		return data
	}
	seen := func(id string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.seen[id]
		return ok
	}
	s.onRequest(RequestSubject("r"), "h2", status("h3")) // h2's key, h3's name
	if seen("h3") {
		t.Fatal("a status signed by h2 in h3's name was taken")
	}
	answer, _ := json.Marshal(wireReply{V: wireVersion, ID: "y", From: "h4", State: &wireState{ID: "h4", Member: true, IsLeader: true}})
	s.onReply(s.replySubj, "h2", answer)
	if seen("h4") {
		t.Fatal("an answer signed by h2 in h4's name was taken")
	}
	// A signer's own status is taken only when membership shows it live
	// as a voter candidate (with a raft address): h6 is live but cannot
	// vote, h7 is not live at all.
	s.SetPeers([]Peer{{ID: "h3", RaftAddr: "127.0.0.1:7420"}, {ID: "h6"}})
	s.onRequest(RequestSubject("r"), "h6", status("h6"))
	s.onRequest(RequestSubject("r"), "h7", status("h7"))
	if seen("h6") || seen("h7") {
		t.Fatal("a status from a signed agent that is not a live voter candidate was taken")
	}
	// The candidate's own status, and an unsigned bus (""), are taken.
	s.onRequest(RequestSubject("r"), "h3", status("h3"))
	s.onRequest(RequestSubject("r"), "", status("h5"))
	if !seen("h3") || !seen("h5") {
		t.Fatal("a status from its own signer, or on an unsigned bus, was not taken (control)")
	}
}

// The arbiter's subjects are inside what NATS lets an agent use
// (bus.AgentPermissions writes them without importing this package).
func TestArbiterSubjectsArePermitted(t *testing.T) {
	s, err := NewService(ServiceConfig{Region: "r", ID: "h1"}, bus.NewHub(1).Transport("h1"), time.Now, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	p := bus.AgentPermissions("r", "h1")
	for _, subj := range []string{RequestSubject("r"), s.replySubj} {
		if !bus.Allows(p.Publish, subj) || !bus.Allows(p.Subscribe, subj) {
			t.Errorf("%s: not both published and subscribed under the agent's NATS permissions", subj)
		}
	}
}

// Issue 27: any ring member reads the arbiter's requests and can sign
// an answer in its own name. The client takes an answer only from the
// leader of the group it knows (here, a client outside the group: one of
// the voters membership selects), so h9's five forged "committed" merge
// decisions are all refused (the merge ends with an unknown outcome, as
// with no answer); the same answer signed by a selected voter is taken
// (the control).
func TestServiceTakesAnswersOnlyFromTheLeader(t *testing.T) {
	hub := bus.NewHub(1)
	s, err := NewService(ServiceConfig{Region: "r", ID: "h5", RequestTimeout: 400 * time.Millisecond}, hub.Transport("h5"), time.Now, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	s.SetPeers([]Peer{{ID: "h1", RaftAddr: "10.0.0.1:7420"}, {ID: "h2", RaftAddr: "10.0.0.2:7420"},
		{ID: "h3", RaftAddr: "10.0.0.3:7420"}, {ID: "h9", RaftAddr: "10.0.0.9:7420"}, {ID: "h5"}})
	reqs := make(chan wireReq, 64)
	if _, err := bus.SubscribeFrom(hub.Transport("spy"), RequestSubject("r"), func(_, _ string, data []byte) {
		if r, err := decodeReq(data, "r"); err == nil {
			reqs <- r
		}
	}); err != nil {
		t.Fatal(err)
	}
	var answered atomic.Int64
	// answer signs a committed decision as signer for every request s sends.
	answer := func(signer string) (Decision, error) {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					hub.DeliverAll(100)
				case r := <-reqs:
					data, _ := json.Marshal(wireReply{V: wireVersion, ID: r.ID, From: signer,
						Decision: &Decision{Committed: true, Version: 7, Nodes: []string{"h9"}}})
					s.onReply(r.Reply, signer, data)
					answered.Add(1)
				case <-stop:
					return
				}
			}
		}()
		return s.Merge(context.Background(), Ref{ID: "ghost-a", Version: 1}, Ref{ID: "ghost-b", Version: 1})
	}
	for i := range 5 {
		if d, err := answer("h9"); err == nil || d.Committed {
			t.Fatalf("forged merge %d: taken from h9, a ring member outside the group: %+v %v", i, d, err)
		} else if !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("forged merge %d: %v, want an unknown outcome", i, err)
		}
	}
	if answered.Load() < 5 {
		t.Fatalf("only %d requests were answered: the attack did not run", answered.Load())
	}
	if d, err := answer("h1"); err != nil || !d.Committed {
		t.Fatalf("an answer of a selected voter was not taken (control): %+v %v", d, err)
	}
}
