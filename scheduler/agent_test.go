package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Scenario tests for the protocol rules of DESIGN §5. Each drives agents
// by hand: messages in, Ready out.

var t0 = time.Unix(1_700_000_000, 0).UTC()

var ring5 = []string{"h1", "h2", "h3", "h4", "h5"}

func newAgent(t *testing.T, id string) *Agent {
	t.Helper()
	a, err := NewAgent(DefaultConfig(id), ring5)
	if err != nil {
		t.Fatal(err)
	}
	a.now = t0
	return a
}

func hostWith(name string, cpu float64) Host {
	return Host{Name: name, CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192,
		Servers: []Server{{ID: name + "-s", VCPUs: 2, RAMMB: 1024, CPU: cpu, RAM: 512}}}
}

// overload makes a raise its OVERLOAD event (K of N samples).
func overload(t *testing.T, a *Agent) Ready {
	t.Helper()
	for i := 0; i < a.cfg.K; i++ {
		a.Observe(t0, hostWith(a.ID(), 6))
	}
	rd := a.Ready()
	if a.Partition() == nil {
		t.Fatalf("%s raised no event", a.ID())
	}
	return rd
}

func sent(rd Ready, typ MsgType) []Envelope {
	var out []Envelope
	for _, e := range rd.Messages {
		if e.Msg.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func only(t *testing.T, rd Ready, typ MsgType) Envelope {
	t.Helper()
	m := sent(rd, typ)
	if len(m) != 1 {
		t.Fatalf("want one %s, got %d in %+v", typ, len(m), rd.Messages)
	}
	return m[0]
}

func records(rd Ready, k RecordKind) []Record {
	var out []Record
	for _, r := range rd.Records {
		if r.Kind == k {
			out = append(out, r)
		}
	}
	return out
}

// §4: K of N samples before an event fires.
func TestDebounceKOfN(t *testing.T) {
	a := newAgent(t, "h1")
	a.Observe(t0, hostWith("h1", 6))
	a.Observe(t0, hostWith("h1", 1))
	a.Observe(t0, hostWith("h1", 6))
	if a.Partition() != nil {
		t.Fatal("event after 2 of 3 overloaded samples")
	}
	a.Observe(t0, hostWith("h1", 6))
	if a.Partition() == nil {
		t.Fatal("no event after 3 of 4 overloaded samples")
	}
	if got := records(a.Ready(), RecEventRaised); len(got) != 1 || got[0].Event.Kind != Overload {
		t.Fatalf("records %+v", got)
	}
}

// §5.2.1: a free node with an event sends its partition to its ring successor.
func TestGrowGoesToSuccessor(t *testing.T) {
	a := newAgent(t, "h3")
	g := only(t, overload(t, a), MsgGrow)
	if g.To != "h4" || g.Msg.Part.Initiator != "h3" || g.Msg.Part.Version != 1 {
		t.Fatalf("grow %+v", g)
	}
}

// §5.2.2: a free node joins, becomes leader, bumps the version, tells the
// members, and solves once every snapshot is in.
func TestJoinMovesLeadership(t *testing.T) {
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	g := only(t, overload(t, h1), MsgGrow)
	h2.Step(g.Msg)
	rd := h2.Ready()
	p := h2.Partition()
	if p.Leader != "h2" || p.Initiator != "h1" || p.Version != 2 || !slices.Equal(p.Nodes, []string{"h1", "h2"}) {
		t.Fatalf("partition after join %+v", p)
	}
	up := only(t, rd, MsgUpdate)
	h1.Step(up.Msg)
	snap := only(t, h1.Ready(), MsgSnapshot)
	if snap.To != "h2" || snap.Msg.Version != 2 {
		t.Fatalf("snapshot %+v", snap)
	}
	h2.Step(snap.Msg)
	rd = h2.Ready()
	if len(rd.Solve) != 1 || len(rd.Solve[0].Problem.Hosts) != 2 {
		t.Fatalf("solve requests %+v", rd.Solve)
	}
}

// §5.2.4: a busy node forwards to the first node outside its own
// partition, in one hop.
func TestFirstOutSkipsBusyPartition(t *testing.T) {
	h2 := newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	// h3 starts Q and h2 joins it: Q = {h3, h2}.
	h3 := newAgent(t, "h3")
	q := only(t, overload(t, h3), MsgGrow).Msg
	q.Part.Nodes = []string{"h3"}
	h2.Step(q)
	h2.Ready()
	// h1's partition P reaches h2: it must skip h3 (in Q) and go to h4.
	h1 := newAgent(t, "h1")
	p := only(t, overload(t, h1), MsgGrow)
	if p.To != "h2" {
		t.Fatalf("P went to %s", p.To)
	}
	h2.Step(p.Msg)
	fw := only(t, h2.Ready(), MsgGrow)
	if fw.To != "h4" || fw.Msg.Part.ID != p.Msg.Part.ID || fw.Msg.Hops != 1 {
		t.Fatalf("forward %+v", fw)
	}
}

// §5.2.5: back to its own partition after a full tour → Blocked and
// registered; a second time → a last look on fresh snapshots, and with no
// solution there dissolved, event unsolvable, retried later.
func TestFullTourBlocksThenDissolves(t *testing.T) {
	h1 := newAgent(t, "h1")
	g := only(t, overload(t, h1), MsgGrow)
	h1.Step(g.Msg) // came back: everyone else was busy
	rd := h1.Ready()
	p := h1.Partition()
	if p.State != Blocked || p.Version != 2 || p.Tours != 1 {
		t.Fatalf("after one tour %+v", p)
	}
	if len(rd.Arbiter) != 1 || rd.Arbiter[0].Op != ArbRegister {
		t.Fatalf("arbiter requests %+v", rd.Arbiter)
	}
	g2 := only(t, rd, MsgGrow)
	if g2.Msg.Part.State != Blocked {
		t.Fatal("second tour request not marked blocked")
	}
	h1.Step(g2.Msg)
	noSolutionOnLastLook(t, h1)
	rd = h1.Ready()
	if h1.Partition() != nil {
		t.Fatal("still in a partition after the second tour")
	}
	ended := records(rd, RecEventEnded)
	if len(ended) != 1 || ended[0].Outcome != Unsolvable {
		t.Fatalf("event end %+v", ended)
	}
	if len(rd.Arbiter) != 1 || rd.Arbiter[0].Op != ArbDissolve {
		t.Fatalf("dissolution not registered: %+v", rd.Arbiter)
	}
	// Backoff: the still-overloaded host does not raise again at once.
	overloadSamples(h1, 5)
	if h1.Partition() != nil {
		t.Fatal("event retried without backoff")
	}
	h1.Tick(t0.Add(h1.cfg.RetryBackoff + time.Second))
	overloadSamples(h1, 3)
	if h1.Partition() == nil {
		t.Fatal("event not retried after backoff")
	}
}

func overloadSamples(a *Agent, n int) {
	for i := 0; i < n; i++ {
		a.Observe(a.now, hostWith(a.ID(), 6))
	}
}

// §5.6: a member that hears nothing from its leader for
// partition_timeout dissolves the partition. The member is its
// initiator, and no plan ran: its event goes on in a fresh partition
// (goOn), not ended.
func TestPartitionTimeout(t *testing.T) {
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	h2.Step(only(t, overload(t, h1), MsgGrow).Msg)
	up := only(t, h2.Ready(), MsgUpdate).Msg
	h1.Step(up)
	h1.Ready()
	h1.Tick(t0.Add(3 * time.Second))
	if p := h1.Partition(); p == nil || p.ID != up.PartID {
		t.Fatal("dissolved before the timeout")
	}
	h1.Tick(t0.Add(3600 * time.Millisecond))
	rd := h1.Ready()
	if p := h1.Partition(); p != nil && p.ID == up.PartID {
		t.Fatal("not dissolved after the timeout")
	}
	d := only(t, rd, MsgDissolve)
	if d.To != "h2" {
		t.Fatalf("dissolve sent to %s", d.To)
	}
	if r := records(rd, RecDissolved); len(r) != 1 || r[0].Class != EndTimeout {
		t.Fatalf("dissolved %+v, want partition_timeout", r)
	}
	if e := records(rd, RecEventEnded); len(e) != 0 {
		t.Fatalf("event end %+v: the initiator's untried event goes on", e)
	}
	if p := h1.Partition(); p != nil {
		t.Fatalf("a fresh partition %+v in the tick that ended the last: the runtime has not seen its end", p)
	}
	h1.Tick(t0.Add(4100 * time.Millisecond))
	if p := h1.Partition(); p == nil || p.Events[0].ID != up.Part.Events[0].ID || p.Leader != "h1" {
		t.Fatalf("the event did not go on in a fresh partition of h1's: %+v", p)
	}
}

// §5.6: a member that sends no snapshot is removed; the partition goes on.
func TestSilentMemberRemoved(t *testing.T) {
	h1, h2, h3 := newAgent(t, "h1"), newAgent(t, "h2"), newAgent(t, "h3")
	h2.Observe(t0, hostWith("h2", 3))
	h3.Observe(t0, hostWith("h3", 3))
	h2.Step(only(t, overload(t, h1), MsgGrow).Msg)
	up := sent(h2.Ready(), MsgUpdate)
	h1.Step(up[0].Msg)
	// h2 cannot solve (h1+h2 too full): it forwards to h3.
	h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	rd := h2.Ready()
	h2.SolveDone(rd.Solve[0].PartID, rd.Solve[0].Version, Solution{Reason: "none"}, Plan{}, nil)
	h3.Step(only(t, h2.Ready(), MsgGrow).Msg)
	for _, u := range sent(h3.Ready(), MsgUpdate) {
		if u.To == "h1" {
			h1.Step(u.Msg)
		}
	}
	// h2 crashed: it never answers h3's update. h1 does.
	h3.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	h3.Ready()
	h3.Tick(t0.Add(2 * time.Second))
	rd = h3.Ready()
	p := h3.Partition()
	if p.has("h2") || !p.has("h1") || p.Version != 4 {
		t.Fatalf("after snapshot timeout %+v", p)
	}
	if len(sent(rd, MsgUpdate)) == 0 {
		t.Fatal("members not told of the removal")
	}
}

// §5.6: a crashed initiator dissolves the partition (the event was its).
func TestInitiatorCrashDissolves(t *testing.T) {
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	h2.Step(only(t, overload(t, h1), MsgGrow).Msg)
	h2.Ready()
	h2.MemberDown("h1")
	rd := h2.Ready()
	if h2.Partition() != nil {
		t.Fatal("partition survived its initiator")
	}
	if d := records(rd, RecDissolved); len(d) != 1 || d[0].Class != EndMemberLost || !strings.Contains(d[0].Reason, "initiator") {
		t.Fatalf("records %+v", rd.Records)
	}
}

// §5.1: receivers ignore versions older than what they hold.
func TestStaleVersionIgnored(t *testing.T) {
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	g := only(t, overload(t, h1), MsgGrow)
	h2.Step(g.Msg)
	up := only(t, h2.Ready(), MsgUpdate)
	h1.Step(up.Msg)
	h1.Ready()
	old := up.Msg
	old.Part = old.Part.clone()
	old.Part.Version, old.Version = 1, 1
	old.Part.Leader = "h5"
	h1.Step(old)
	rd := h1.Ready()
	if h1.Partition().Leader != "h2" || h1.Partition().Version != 2 {
		t.Fatalf("stale update applied: %+v", h1.Partition())
	}
	if len(records(rd, RecDropped)) != 1 {
		t.Fatalf("stale update not reported: %+v", rd.Records)
	}
	// A stale grow of the same partition is dropped too.
	h2.Step(g.Msg)
	if len(records(h2.Ready(), RecDropped)) != 1 {
		t.Fatal("stale grow not dropped")
	}
}

// §5.4: two Blocked partitions meet: the one with the smaller initiator
// absorbs the other, through the arbiter.
func TestMergeOrder(t *testing.T) {
	for _, tc := range []struct {
		name          string
		visitor, host string // initiators of the travelling and the visited partition
		wantTo        string // leader that proposes the merge
	}{
		{"visitor larger: visited absorbs it", "h4", "h2", "h2"},
		{"visitor smaller: it absorbs the visited", "h1", "h3", "h1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vis, home := newAgent(t, tc.visitor), newAgent(t, tc.host)
			gv := only(t, overload(t, vis), MsgGrow)
			vis.Step(gv.Msg) // visitor Blocked
			gv = only(t, vis.Ready(), MsgGrow)
			gh := only(t, overload(t, home), MsgGrow)
			home.Step(gh.Msg) // home Blocked
			home.Ready()
			home.Step(gv.Msg)
			rd := home.Ready()
			// The offer goes to the absorbing leader; when the visited
			// partition is the one absorbed, its leader is told too.
			var offer Envelope
			offers := sent(rd, MsgMergeOffer)
			for _, o := range offers {
				if o.To == tc.wantTo && o.Msg.PartID == map[string]*Agent{tc.visitor: vis, tc.host: home}[tc.wantTo].Partition().ID {
					offer = o
				}
			}
			if offer.To == "" {
				t.Fatalf("no offer to %s in %+v", tc.wantTo, offers)
			}
			if wantN := map[bool]int{true: 2, false: 1}[tc.wantTo == tc.visitor]; len(offers) != wantN {
				t.Fatalf("%d offers, want %d", len(offers), wantN)
			}
			if len(sent(rd, MsgGrow)) != 1 {
				t.Fatal("request not forwarded on")
			}
			proposer := map[string]*Agent{tc.visitor: vis, tc.host: home}[tc.wantTo]
			proposer.Step(offer.Msg)
			rd = proposer.Ready()
			if len(rd.Arbiter) != 1 || rd.Arbiter[0].Op != ArbMerge {
				t.Fatalf("no merge proposal: %+v", rd.Arbiter)
			}
			req := rd.Arbiter[0]
			if !(req.Absorb.Initiator > req.Part.Initiator) {
				t.Fatalf("proposal breaks the initiator order: absorb %s into %s", req.Absorb.Initiator, req.Part.Initiator)
			}
			proposer.ArbiterDone(req, ArbiterResult{Committed: true, Version: req.Part.Version + 1, Nodes: append(slices.Clone(req.Part.Nodes), req.Absorb.Nodes...)})
			rd = proposer.Ready()
			p := proposer.Partition()
			if p.State != Growing || len(p.Nodes) != 2 || len(p.Events) != 2 {
				t.Fatalf("after merge %+v", p)
			}
			abs := only(t, rd, MsgAbsorbed)
			other := map[string]*Agent{tc.visitor: vis, tc.host: home}
			delete(other, tc.wantTo)
			for _, o := range other {
				o.Step(abs.Msg)
				if got := o.Partition(); got == nil || got.ID != p.ID {
					t.Fatalf("absorbed node in %+v", got)
				}
			}
		})
	}
}

// A refused merge leaves the partition as it was, and it goes on: its
// request, still travelling, finishes its tour and tours again, and the
// next offer is proposed.
func TestMergeRefused(t *testing.T) {
	h1, req, tour := blockedWithOffer(t)
	before := h1.Partition()
	h1.ArbiterDone(req, ArbiterResult{Reason: "partition p-x at version 3, not 2"})
	rd := h1.Ready()
	p := h1.Partition()
	if len(records(rd, RecMergeRefused)) != 1 || p == nil || p.Version != before.Version || len(p.Nodes) != 1 || p.State != Blocked {
		t.Fatalf("refusal: %+v %+v", rd.Records, p)
	}
	tour.Met = true
	h1.Step(tour)
	rd = h1.Ready()
	if p := h1.Partition(); p == nil || p.Tours != 2 || len(sent(rd, MsgGrow)) != 1 {
		t.Fatalf("partition did not go on after the refusal: %+v, sent %+v", p, rd.Messages)
	}
	other := &Partition{ID: "p-y", Version: 5, Initiator: "h5", Leader: "h5", Nodes: []string{"h5"}, State: Blocked}
	h1.Step(Message{Type: MsgMergeOffer, From: "h5", PartID: p.ID, Version: h1.Partition().Version, Other: other})
	if rd := h1.Ready(); len(rd.Arbiter) != 1 || rd.Arbiter[0].Op != ArbMerge {
		t.Fatalf("next offer not proposed: %+v", rd.Arbiter)
	}
}

// A retiring agent (SIGTERM) raises no event, joins no partition and
// dissolves a partition it leads unless its plan is running.
func TestRetire(t *testing.T) {
	h1, h2, h3 := newAgent(t, "h1"), newAgent(t, "h2"), newAgent(t, "h3")
	h2.Observe(t0, hostWith("h2", 1))
	if busy := h2.Retire(t0); busy {
		t.Fatal("a free agent is not busy")
	}
	g := only(t, overload(t, h1), MsgGrow)
	h2.Step(g.Msg)
	rd := h2.Ready()
	if h2.Partition() != nil {
		t.Fatal("a retired agent joined a partition")
	}
	if fw := only(t, rd, MsgGrow); fw.To != "h3" {
		t.Fatalf("request forwarded to %s, want h3", fw.To)
	}
	for range 5 {
		h2.Observe(t0, hostWith("h2", 6))
	}
	if h2.Partition() != nil || len(records(h2.Ready(), RecEventRaised)) != 0 {
		t.Fatal("a retired agent raised an event")
	}

	// h3 joins h1's partition and leads it; retiring dissolves it.
	h3.Observe(t0, hostWith("h3", 1))
	h3.Step(g.Msg)
	h3.Ready()
	if p := h3.Partition(); p == nil || p.Leader != "h3" {
		t.Fatalf("h3 did not take the lead: %+v", p)
	}
	if busy := h3.Retire(t0); busy {
		t.Fatal("a leader collecting snapshots is not busy")
	}
	rd = h3.Ready()
	if h3.Partition() != nil || len(sent(rd, MsgDissolve)) == 0 {
		t.Fatalf("retiring leader did not dissolve: %+v", rd.Messages)
	}
	if d := records(rd, RecDissolved); len(d) != 1 || d[0].Class != EndStopping {
		t.Fatalf("dissolved records %+v", d)
	}
}

// A member of a partition whose nodes are spread over the ring (after a
// merge) passes the partition's request on until it has gone past the
// leader: it must not end the tour early.
func TestMemberContinuesTourUntilLeader(t *testing.T) {
	h4 := newAgent(t, "h4")
	p := &Partition{ID: "p-x", Version: 3, Initiator: "h1", Leader: "h1", Nodes: []string{"h1", "h4"}, State: Blocked, Tours: 1}
	h4.part = p.clone()
	// From h2 (busy elsewhere) the request lands on h4: h5 is still ahead
	// before the leader h1.
	h4.Step(Message{Type: MsgGrow, From: "h2", PartID: p.ID, Version: p.Version, Part: p.clone()})
	if fw := only(t, h4.Ready(), MsgGrow); fw.To != "h5" {
		t.Fatalf("member sent the request to %s, want it to go on to h5", fw.To)
	}
	// From h5 the next node outside is h2 (after h1): the tour is done.
	h5 := newAgent(t, "h5")
	p.Nodes = []string{"h1", "h3", "h5"}
	h5.part = p.clone()
	h5.Step(Message{Type: MsgGrow, From: "h4", PartID: p.ID, Version: p.Version, Part: p.clone()})
	if back := only(t, h5.Ready(), MsgGrow); back.To != "h1" {
		t.Fatalf("request sent to %s, want it back at the leader h1", back.To)
	}
}

// A blocked partition whose second tour met another blocked partition
// (a merge was offered) tours again instead of giving up, up to maxTours.
func TestMetRequestToursAgain(t *testing.T) {
	h1 := newAgent(t, "h1")
	g := only(t, overload(t, h1), MsgGrow)
	h1.Step(g.Msg) // first tour: blocked
	g = only(t, h1.Ready(), MsgGrow)
	for tour := 2; tour < maxTours; tour++ {
		g.Msg.Met = true
		h1.Step(g.Msg)
		rd := h1.Ready()
		if p := h1.Partition(); p == nil || p.State != Blocked || p.Tours != tour {
			t.Fatalf("tour %d: partition %+v, want still blocked", tour, p)
		}
		g = only(t, rd, MsgGrow)
	}
	g.Msg.Met = true
	h1.Step(g.Msg)
	noSolutionOnLastLook(t, h1)
	if h1.Partition() != nil || len(records(h1.Ready(), RecEventEnded)) != 1 {
		t.Fatalf("still touring after %d tours", maxTours)
	}
}

// noSolutionOnLastLook answers the last look of a's partition, whose
// tours are over, with no solution.
func noSolutionOnLastLook(t *testing.T, a *Agent) {
	t.Helper()
	p := a.Partition()
	if p == nil || a.lead == nil || a.lead.phase != phSolving {
		t.Fatalf("tours over: no last look (partition %+v)", p)
	}
	a.SolveDone(p.ID, p.Version, Solution{Reason: "none"}, Plan{}, nil)
}

// Issue 11, point 6: a partition's last snapshots are as old as its
// tours, and under saturation demand drifts meanwhile: it solves once
// more on fresh snapshots before it gives up. Here a member's demand
// drops while the request tours; the last look finds the room and the
// plan runs instead of the event being given up with a solution in the
// partition's own nodes (what dvms simulate counted as
// unsolvable_with_union_solution with no other partition Blocked).
func TestLastLookBeforeGivingUp(t *testing.T) {
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	host := func(name string, cpus ...float64) Host {
		h := Host{Name: name, CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192}
		for k, c := range cpus {
			h.Servers = append(h.Servers, Server{ID: fmt.Sprintf("%s-s%d", name, k), VCPUs: 2, RAMMB: 1024, CPU: c, RAM: 512})
		}
		return h
	}
	for range h1.cfg.K {
		h1.Observe(t0, host("h1", 2.5, 2.5)) // 5 cores of 4
	}
	h2.Observe(t0, host("h2", 3.9)) // no room for 2.5 cores
	h2.Step(only(t, h1.Ready(), MsgGrow).Msg)
	exchange := func() Ready { // h2's updates to h1, h1's snapshots back
		t.Helper()
		rd := h2.Ready()
		for _, u := range sent(rd, MsgUpdate) {
			h1.Step(u.Msg)
			for _, sn := range sent(h1.Ready(), MsgSnapshot) {
				h2.Step(sn.Msg)
			}
		}
		return rd
	}
	solve := func() {
		t.Helper()
		rd := h2.Ready()
		if len(rd.Solve) != 1 {
			t.Fatalf("solve requests %+v", rd.Solve)
		}
		req := rd.Solve[0]
		sol, plan, err := SolveAndPlan(req.Problem, req.Limits, DefaultSolveOptions())
		h2.SolveDone(req.PartID, req.Version, sol, plan, err)
	}
	exchange()
	solve() // no room: the request goes on
	tour := only(t, h2.Ready(), MsgGrow).Msg
	h2.Step(tour) // back home (every other node busy): Blocked
	tour = only(t, exchange(), MsgGrow).Msg
	h2.Observe(t0, host("h2", 0.5)) // demand drops while it tours
	h2.Step(tour)                   // back home again
	exchange()
	if h2.Partition() == nil {
		t.Fatal("given up after two tours without a last look")
	}
	solve()
	p := h2.Partition()
	if p == nil || p.State != Finishing {
		t.Fatalf("the last look did not plan: partition %+v", p)
	}
	if ex := h2.Ready().Execute; len(ex) != 1 || ex[0].Plan.Len() != 1 {
		t.Fatalf("execute requests %+v", ex)
	}
}

// Preemption is the last resort: a growing partition solves without it;
// once blocked (it cannot grow) it solves again with it.
func TestPreemptOnlyWhenBlocked(t *testing.T) {
	cfg := DefaultConfig("h1")
	cfg.Preempt = true
	h1, err := NewAgent(cfg, ring5)
	if err != nil {
		t.Fatal(err)
	}
	h1.now = t0
	h2 := newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	g := only(t, overload(t, h1), MsgGrow)
	// h2 joins and solves: preemption not allowed yet.
	h2.cfg.Preempt = true
	h2.Step(g.Msg)
	h1.Step(only(t, h2.Ready(), MsgUpdate).Msg)
	h2.Step(only(t, h1.Ready(), MsgSnapshot).Msg)
	rd := h2.Ready()
	if len(rd.Solve) != 1 || rd.Solve[0].Problem.Preempt {
		t.Fatalf("growing partition: solve requests %+v, want one without preemption", rd.Solve)
	}
	// Alone, h1's request comes back: blocked, it solves with preemption.
	h3 := newAgent(t, "h3")
	cfg3 := DefaultConfig("h3")
	cfg3.Preempt = true
	h3.cfg = cfg3
	h3.Observe(t0, hostWith("h3", 6))
	for range cfg3.K {
		h3.Observe(t0, hostWith("h3", 6))
	}
	g3 := only(t, h3.Ready(), MsgGrow)
	h3.Step(g3.Msg) // every other node busy: the request came back
	rd = h3.Ready()
	if p := h3.Partition(); p == nil || p.State != Blocked {
		t.Fatalf("partition %+v, want blocked", p)
	}
	if len(rd.Solve) != 1 || !rd.Solve[0].Problem.Preempt {
		t.Fatalf("blocked partition: solve requests %+v, want one with preemption", rd.Solve)
	}
}

// A member answers a blocked partition's update with its snapshot: the
// leader re-collects to solve with preemption.
func TestBlockedUpdateGetsSnapshots(t *testing.T) {
	h2 := newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	p := &Partition{ID: "p-y", Version: 2, Initiator: "h1", Leader: "h3", Nodes: []string{"h1", "h2", "h3"}, State: Growing}
	h2.part = p.clone()
	p.Version, p.State = 3, Blocked
	h2.Step(Message{Type: MsgUpdate, From: "h3", PartID: p.ID, Version: p.Version, Part: p.clone()})
	if s := only(t, h2.Ready(), MsgSnapshot); s.To != "h3" || s.Msg.Version != 3 {
		t.Fatalf("snapshot %+v, want one to h3 at version 3", s)
	}
}

// blockedWithOffer returns h1 Blocked after one tour with a merge of a
// larger initiator's partition proposed to the arbiter, and the request
// of its second tour, still travelling.
func blockedWithOffer(t *testing.T) (h1 *Agent, merge ArbiterRequest, tour Message) {
	t.Helper()
	h1 = newAgent(t, "h1")
	g := only(t, overload(t, h1), MsgGrow)
	h1.Step(g.Msg) // first tour: blocked
	tour = only(t, h1.Ready(), MsgGrow).Msg
	other := &Partition{ID: "p-x", Version: 2, Initiator: "h4", Leader: "h4", Nodes: []string{"h4"}, State: Blocked}
	h1.Step(Message{Type: MsgMergeOffer, From: "h4", PartID: h1.Partition().ID, Version: h1.Partition().Version, Other: other})
	rd := h1.Ready()
	if len(rd.Arbiter) != 1 || rd.Arbiter[0].Op != ArbMerge {
		t.Fatalf("no merge proposed: %+v", rd.Arbiter)
	}
	return h1, rd.Arbiter[0], tour
}

// Issue 11, point 1: the leader's own request comes back while a merge is
// pending; the merge is refused: the tour it completed is finished then
// (here it met another Blocked partition, so it tours again), instead of
// waiting for ProgressTimeout to call the request lost.
func TestTourFinishedAfterRefusedMerge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		unknown bool // the merge's outcome is unknown: the re-read decides
	}{{"refused", false}, {"unknown outcome, re-read shows no merge", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h1, merge, tour := blockedWithOffer(t)
			tour.Met = true
			h1.Step(tour) // back home while the merge is pending
			if rd := h1.Ready(); len(sent(rd, MsgGrow)) != 0 {
				t.Fatalf("tour finished while the merge is pending: %+v", rd.Messages)
			}
			if tc.unknown {
				h1.ArbiterDone(merge, ArbiterResult{Unknown: true})
				rd := h1.Ready()
				if len(rd.Arbiter) != 1 || rd.Arbiter[0].Op != ArbRead {
					t.Fatalf("unknown outcome not re-read: %+v", rd.Arbiter)
				}
				h1.ArbiterDone(rd.Arbiter[0], ArbiterResult{Committed: true, Version: merge.Part.Version, Nodes: merge.Part.Nodes})
			} else {
				h1.ArbiterDone(merge, ArbiterResult{Reason: "partition p-x at version 3, not 2"})
			}
			rd := h1.Ready()
			p := h1.Partition()
			if p == nil || p.State != Blocked || p.Tours != 2 {
				t.Fatalf("after the refusal: partition %+v, want Blocked after 2 tours", p)
			}
			if g := only(t, rd, MsgGrow); g.Msg.Part.Tours != 2 {
				t.Fatalf("third tour request %+v", g.Msg.Part)
			}
			h1.Tick(t0.Add(h1.cfg.ProgressTimeout - time.Millisecond))
			if h1.Partition() == nil {
				t.Fatal("dissolved although its request is touring")
			}
		})
	}
}

// Issue 11, point 3: the arbiter refuses a Blocked partition's
// registration because it was absorbed meanwhile (the MsgAbsorbed to its
// leader was lost). The leader stops leading it at once, without
// dissolving its members (they belong to the absorbing partition), and
// never takes it up again.
func TestRegisterRefusedAsAbsorbed(t *testing.T) {
	h1, _, tour := blockedWithOffer(t)
	p := h1.Partition()
	h1.ArbiterDone(ArbiterRequest{Op: ArbRegister, Part: *p}, ArbiterResult{Reason: "partition already absorbed into p-q", Absorbed: true, Into: "p-q"})
	rd := h1.Ready()
	if h1.Partition() != nil {
		t.Fatalf("still leads the absorbed partition: %+v", h1.Partition())
	}
	if len(sent(rd, MsgDissolve)) != 0 || len(rd.Arbiter) != 0 {
		t.Fatalf("absorbed partition dissolved as if it were its own: %+v %+v", rd.Messages, rd.Arbiter)
	}
	// Long after the 'recently ended' memory and the arbiter's tombstone,
	// the old request comes back: the agent does not take it up again.
	h1.Tick(t0.Add(5 * h1.cfg.Lease))
	h1.Ready()
	h1.Step(tour)
	if q := h1.Partition(); q != nil {
		t.Fatalf("took up an absorbed partition again: %+v", q)
	}
}

// Issue 11, point 3: a member absorbed into another partition never
// joins its old partition again, even once the arbiter forgot it.
func TestAbsorbedPartitionNeverJoinedAgain(t *testing.T) {
	h3 := newAgent(t, "h3")
	h3.Observe(t0, hostWith("h3", 1))
	old := &Partition{ID: "p-old", Version: 4, Initiator: "h4", Leader: "h3", Nodes: []string{"h4", "h3"}, State: Blocked, Tours: 1}
	h3.setPart(old.clone())
	into := &Partition{ID: "p-new", Version: 7, Initiator: "h1", Leader: "h1", Nodes: []string{"h1", "h4", "h3"}, State: Growing}
	h3.Step(Message{Type: MsgAbsorbed, From: "h1", PartID: into.ID, Version: into.Version, Part: into.clone(), Other: old.clone()})
	h3.Step(Message{Type: MsgDissolve, From: "h1", PartID: into.ID, Version: into.Version, Outcome: Solved})
	h3.Ready()
	if h3.Partition() != nil {
		t.Fatal("not free after the dissolution")
	}
	h3.Tick(t0.Add(4*h3.cfg.Lease + 4*h3.cfg.PartitionTimeout))
	h3.Ready()
	h3.Step(Message{Type: MsgGrow, From: "h2", PartID: old.ID, Version: old.Version, Part: old.clone()})
	if p := h3.Partition(); p != nil {
		t.Fatalf("joined the absorbed partition again: %+v", p)
	}
}

// Issue 11, point 3: a removed member is told, and frees itself at once
// instead of staying bound for PartitionTimeout.
func TestRemovedMemberFreedAtOnce(t *testing.T) {
	h2, h3 := newAgent(t, "h2"), newAgent(t, "h3")
	p := &Partition{ID: "p-z", Version: 3, Initiator: "h1", Leader: "h2", Nodes: []string{"h1", "h2", "h3"}, State: Growing}
	h2.setPart(p.clone())
	h3.part = p.clone()
	h2.lead.phase = phWaiting
	h2.Step(Message{Type: MsgNack, From: "h3", PartID: p.ID, Version: p.Version, Reason: "conflicting leader"})
	rd := h2.Ready()
	if len(records(rd, RecMemberRemoved)) != 1 {
		t.Fatalf("records %+v", rd.Records)
	}
	var told bool
	for _, e := range sent(rd, MsgUpdate) {
		if e.To == "h3" {
			h3.Step(e.Msg)
			told = true
		}
	}
	if !told || h3.Partition() != nil {
		t.Fatalf("removed member not told (%v) or still bound: %+v", told, h3.Partition())
	}
}

// Issue 11, point 5: a host that just received a server (it is settling)
// raises no UNDERLOAD until the consolidation cooldown has passed, so it
// is not emptied back; the snapshot marks the server Settling.
func TestSettlingServersNotConsolidated(t *testing.T) {
	cfg := DefaultConfig("h1")
	cfg.Underload, cfg.ConsolidationCooldown = true, time.Minute
	a, err := NewAgent(cfg, ring5)
	if err != nil {
		t.Fatal(err)
	}
	idle := Host{Name: "h1", CPUs: 4, RAMMB: 8192, AllocVCPUs: 16, AllocRAMMB: 8192}
	a.Observe(t0, idle) // first sample: empty host
	h := idle
	h.Servers = []Server{{ID: "s", VCPUs: 1, RAMMB: 512, CPU: 0.2, RAM: 256}} // arrives
	now := t0
	for range 2 * cfg.N {
		now = now.Add(time.Second)
		a.Observe(now, h)
	}
	if a.Partition() != nil {
		t.Fatal("underload raised for a host whose server just arrived")
	}
	if !a.snapshot().Servers[0].Settling {
		t.Fatal("snapshot does not mark the arrived server settling")
	}
	for range cfg.N {
		now = now.Add(cfg.ConsolidationCooldown / 2)
		a.Observe(now, h)
	}
	if p := a.Partition(); p == nil || p.Events[0].Kind != Underload {
		t.Fatalf("no underload after the cooldown: %+v", p)
	}
}

// Issue 11, point 6: a request from before a merge (the merge skips a
// version for it) made this free agent lead a fork of the partition.
// When the partition's real request (a newer version) arrives, the fork's
// leader lets its fork go and joins the real partition, instead of
// swallowing the request (its leader would call it lost). A member of the
// real partition nacks the fork's stale update, so the fork ends at once.
func TestForkGivesWayToRealRequest(t *testing.T) {
	h3 := newAgent(t, "h3")
	h3.Observe(t0, hostWith("h3", 1))
	ev := Event{ID: "e1", Kind: Overload, Host: "h1"}
	old := &Partition{ID: "p-m", Version: 2, Initiator: "h1", Leader: "h1", Nodes: []string{"h1"}, State: Blocked, Tours: 1, Events: []Event{ev}}
	h3.Step(Message{Type: MsgGrow, From: "h2", PartID: old.ID, Version: old.Version, Part: old.clone()})
	fork := only(t, h3.Ready(), MsgUpdate)
	if p := h3.Partition(); p == nil || p.Leader != "h3" || p.Version != 3 {
		t.Fatalf("fork %+v", p)
	}
	// h1 merged meanwhile: it is at version 4 and nacks the fork's update.
	h1 := newAgent(t, "h1")
	real := &Partition{ID: "p-m", Version: 4, Initiator: "h1", Leader: "h1", Nodes: []string{"h1", "h5"}, State: Growing, Events: []Event{ev, {ID: "e5", Kind: Overload, Host: "h5"}}}
	h1.setPart(real.clone())
	h1.Step(fork.Msg)
	if nack := only(t, h1.Ready(), MsgNack); nack.To != "h3" {
		t.Fatalf("nack to %s, want the fork's leader h3", nack.To)
	}
	// The real request reaches h3 before the nack: h3 takes it.
	h3.Step(Message{Type: MsgGrow, From: "h2", PartID: real.ID, Version: real.Version, Part: real.clone()})
	h3.Ready()
	p := h3.Partition()
	if p == nil || p.Version != 5 || !p.has("h5") || p.Leader != "h3" {
		t.Fatalf("after the real request: %+v, want to lead the real partition at version 5", p)
	}
}

// Issue 11, point 6: once a plan ran on its partition, an agent's last
// sample of its host is stale (servers moved): it offers no snapshot and
// raises no event until the next sample.
func TestStaleHostAfterPlan(t *testing.T) {
	h2 := newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	p := &Partition{ID: "p-e", Version: 5, Initiator: "h1", Leader: "h1", Nodes: []string{"h1", "h2"}, State: Finishing, Events: []Event{{ID: "e", Kind: Overload, Host: "h1"}}}
	h2.part = p.clone()
	h2.Step(Message{Type: MsgDissolve, From: "h1", PartID: p.ID, Version: p.Version, Outcome: Solved})
	h2.Ready()
	if s := h2.snapshot(); !s.Disabled || len(s.Servers) != 0 {
		t.Fatalf("snapshot after the plan %+v, want unknown", s)
	}
	h2.Observe(t0.Add(time.Second), hostWith("h2", 1))
	if s := h2.snapshot(); s.Disabled || len(s.Servers) != 1 {
		t.Fatalf("snapshot after a fresh sample %+v", s)
	}
}

// Issue 11, point 6: a Blocked partition met by one that may absorb it
// (its leader got the offer notice) does not give up when its own request
// comes back without having met anyone: the merge may still commit. It
// tours again instead (bounded by maxTours).
func TestOfferedPartitionToursAgain(t *testing.T) {
	h4 := newAgent(t, "h4")
	g := only(t, overload(t, h4), MsgGrow)
	h4.Step(g.Msg) // first tour: blocked
	tour := only(t, h4.Ready(), MsgGrow).Msg
	smaller := &Partition{ID: "p-a", Version: 3, Initiator: "h1", Leader: "h2", Nodes: []string{"h1", "h2"}, State: Blocked, Events: []Event{{ID: "e1", Kind: Overload, Host: "h1"}}}
	h4.Step(Message{Type: MsgMergeOffer, From: "h5", PartID: h4.Partition().ID, Version: h4.Partition().Version, Other: smaller})
	if rd := h4.Ready(); len(rd.Arbiter) != 0 {
		t.Fatalf("the partition to be absorbed proposed a merge: %+v", rd.Arbiter)
	}
	h4.Step(tour) // back, Met false
	rd := h4.Ready()
	if p := h4.Partition(); p == nil || p.Tours != 2 || len(sent(rd, MsgGrow)) != 1 {
		t.Fatalf("gave up although a merge may absorb it: %+v", p)
	}
}

// A member of a partition whose plan runs waits longer for its silent
// leader than PartitionTimeout: freed early, it could be a destination of
// another plan while this one still moves servers to it.
func TestFinishingMemberWaitsLonger(t *testing.T) {
	for _, tc := range []struct {
		state PartState
		after time.Duration
		freed bool
	}{
		{Growing, 3600 * time.Millisecond, true},
		{Finishing, 3600 * time.Millisecond, false},
		{Finishing, finishingPatience*3500*time.Millisecond + time.Second, true},
	} {
		t.Run(fmt.Sprintf("%s after %s", tc.state, tc.after), func(t *testing.T) {
			h2 := newAgent(t, "h2")
			h2.part = &Partition{ID: "p-f", Version: 4, Initiator: "h1", Leader: "h1", Nodes: []string{"h1", "h2"}, State: tc.state, Events: []Event{{ID: "e", Kind: Overload, Host: "h1"}}}
			h2.fromLeader = t0
			h2.Tick(t0.Add(tc.after))
			if freed := h2.Partition() == nil; freed != tc.freed {
				t.Fatalf("freed %v, want %v", freed, tc.freed)
			}
		})
	}
}

// The operator's controls: paused, an agent raises no event but joins a
// partition; excluded, it raises none and passes requests on; both
// lifted, it raises its event again.
func TestControl(t *testing.T) {
	h1, h2 := newAgent(t, "h1"), newAgent(t, "h2")
	h2.Observe(t0, hostWith("h2", 1))
	g := only(t, overload(t, h1), MsgGrow)

	h2.Control(false, true) // excluded
	h2.Step(g.Msg)
	rd := h2.Ready()
	if h2.Partition() != nil {
		t.Fatal("an excluded agent joined a partition")
	}
	if fw := only(t, rd, MsgGrow); fw.To != "h3" {
		t.Fatalf("request forwarded to %s, want h3", fw.To)
	}
	for range 5 {
		h2.Observe(t0, hostWith("h2", 6))
	}
	if h2.Partition() != nil || len(records(h2.Ready(), RecEventRaised)) != 0 {
		t.Fatal("an excluded agent raised an event")
	}

	h2.Control(true, false) // paused
	h2.Observe(t0, hostWith("h2", 6))
	if h2.Partition() != nil || len(records(h2.Ready(), RecEventRaised)) != 0 {
		t.Fatal("a paused agent raised an event")
	}
	h3 := newAgent(t, "h3")
	h3.Control(true, false)
	h3.Observe(t0, hostWith("h3", 1))
	h3.Step(g.Msg)
	if p := h3.Partition(); p == nil || p.Leader != "h3" {
		t.Fatalf("a paused agent did not join: %+v", p)
	}

	h2.Control(false, false)
	h2.Observe(t0, hostWith("h2", 6))
	if h2.Partition() == nil || len(records(h2.Ready(), RecEventRaised)) != 1 {
		t.Fatal("resumed and included, the agent did not raise its event")
	}
}

// DESIGN §8, found by `dvms simulate --clock virtual --workload
// saturated` (1,000 hosts, seeds 1-4: 1-2 servers moved by two plans at
// once): a fork of a partition (a free agent that took a request from
// before a merge) counts its own versions, so its dissolution or update
// can carry the version of the real partition, or a higher one. A member
// whose leader's plan runs must follow only that leader: otherwise it is
// freed, joins another partition, and its host is in two executing
// partitions.
func TestFinishingMemberIgnoresFork(t *testing.T) {
	ev := Event{ID: "e1", Kind: Overload, Host: "h1"}
	running := func() *Agent {
		h2 := newAgent(t, "h2")
		h2.part = &Partition{ID: "p-1", Version: 8, Initiator: "h1", Leader: "h3", Nodes: []string{"h1", "h2", "h3"}, State: Finishing, Events: []Event{ev}}
		h2.fromLeader = t0
		return h2
	}
	h2 := running()
	h2.Step(Message{Type: MsgDissolve, From: "h4", PartID: "p-1", Version: 8, Outcome: Aborted, Reason: "initiator h1 stale version: the partition went on"})
	if p := h2.Partition(); p == nil || p.Leader != "h3" {
		t.Fatalf("a fork's dissolution (same version) freed the member of a running plan: %+v", p)
	}
	for _, v := range []uint64{8, 9} {
		fork := &Partition{ID: "p-1", Version: v, Initiator: "h1", Leader: "h4", Nodes: []string{"h1", "h4"}, State: Growing, Events: []Event{ev}}
		h2 = running()
		h2.Step(Message{Type: MsgUpdate, From: "h4", PartID: "p-1", Version: v, Part: fork})
		if p := h2.Partition(); p == nil || p.Leader != "h3" || p.Version != 8 {
			t.Fatalf("a fork's update at version %d moved the member of a running plan: %+v", v, p)
		}
		if nack := only(t, h2.Ready(), MsgNack); nack.To != "h4" {
			t.Fatalf("nack to %s, want the fork's leader h4", nack.To)
		}
	}
	// The leader's own dissolution still ends it.
	h2 = running()
	h2.Step(Message{Type: MsgDissolve, From: "h3", PartID: "p-1", Version: 8, Outcome: Solved, Reason: "executed", Solved: []string{"e1"}})
	if p := h2.Partition(); p != nil {
		t.Fatalf("the leader's dissolution did not end the partition: %+v", p)
	}
}

// A member whose partition holds every other node of the region passes
// another partition's request back to that partition's leader (its tour
// is over: no node outside is free), not dropped: dropped, the leader
// would wait a whole request timeout for nothing.
func TestPassOnNoNodeOutsideGoesBackHome(t *testing.T) {
	h3 := newAgent(t, "h3")
	h3.part = &Partition{ID: "p-all", Version: 4, Initiator: "h1", Leader: "h5", Nodes: ring5, State: Growing}
	p := &Partition{ID: "p-x", Version: 2, Initiator: "h1", Leader: "h2", Nodes: []string{"h1", "h2"}, State: Growing}
	h3.Step(Message{Type: MsgGrow, From: "h2", PartID: p.ID, Version: p.Version, Part: p.clone()})
	if back := only(t, h3.Ready(), MsgGrow); back.To != "h2" {
		t.Fatalf("request sent to %s, want it back at its leader h2", back.To)
	}
}

// A request that went round too often goes back to its leader once (its
// tour is over), and its leader takes it as back home; past that it is
// dropped.
func TestTooManyHopsGoesBackHome(t *testing.T) {
	h3 := newAgent(t, "h3")
	h3.part = &Partition{ID: "p-y", Version: 4, Initiator: "h4", Leader: "h4", Nodes: []string{"h3", "h4"}, State: Growing}
	p := &Partition{ID: "p-x", Version: 2, Initiator: "h1", Leader: "h2", Nodes: []string{"h1", "h2"}, State: Growing}
	limit := 2*len(ring5) + 2
	h3.Step(Message{Type: MsgGrow, From: "h5", PartID: p.ID, Version: p.Version, Part: p.clone(), Hops: limit + 1})
	if back := only(t, h3.Ready(), MsgGrow); back.To != "h2" {
		t.Fatalf("request sent to %s, want it back at its leader h2", back.To)
	}
	h3.Step(Message{Type: MsgGrow, From: "h5", PartID: p.ID, Version: p.Version, Part: p.clone(), Hops: limit + 2})
	if g := sent(h3.Ready(), MsgGrow); len(g) != 0 {
		t.Fatalf("a request past the hops sent back home was sent on: %+v", g)
	}
}
