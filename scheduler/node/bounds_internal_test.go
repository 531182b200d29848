package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler"
)

func boundsPart(id, leader string) *scheduler.Partition {
	return &scheduler.Partition{ID: id, Version: 1, Initiator: leader, Leader: leader, Nodes: []string{leader}, State: scheduler.Growing,
		Events: []scheduler.Event{{ID: "ev-" + id, Kind: scheduler.Overload, Host: leader}}}
}

// A sender past its rate is dropped and counted; another sender, and
// the same one once its bucket refills, are not.
func TestBoundsRatePerSender(t *testing.T) {
	b := newBounds(BoundsConfig{Rate: 10, Burst: 5}, "self", zerolog.Nop())
	now := time.Unix(0, 0)
	hb := scheduler.Message{Type: scheduler.MsgHeartbeat, From: "evil", PartID: "p", Version: 1}
	admitted := 0
	for range 20 {
		if b.admit(now, "evil", hb) {
			admitted++
		}
	}
	if admitted != 5 || b.rateDrops.Load() != 15 {
		t.Fatalf("admitted %d, dropped %d of 20 at once: want the burst (5) and 15 dropped", admitted, b.rateDrops.Load())
	}
	if !b.admit(now, "good", hb) {
		t.Error("another sender was dropped: the rate is per sender")
	}
	if !b.admit(now.Add(200*time.Millisecond), "evil", hb) {
		t.Error("the sender is still dropped after its bucket refilled")
	}
}

// A key leading more than MaxLeads partitions within the window is
// refused: its further requests are dropped, a partition this agent is
// in and it leads is handed to the agent to leave, and the refusal ends
// after the window (the key goes back in the ring unless membership
// says it is down).
func TestBoundsCountAndRefusal(t *testing.T) {
	b := newBounds(BoundsConfig{MaxLeads: 3, LeadWindow: time.Minute, LeadTimeout: 10 * time.Second}, "self", zerolog.Nop())
	now := time.Unix(0, 0)
	grow := func(id string) bool {
		return b.admit(now, "evil", scheduler.Message{Type: scheduler.MsgGrow, From: "evil", PartID: id, Version: 1, Part: boundsPart(id, "evil")})
	}
	for i := range 3 {
		if !grow(fmt.Sprintf("p%d", i)) {
			t.Fatalf("lead %d of 3 dropped", i+1)
		}
	}
	if !grow("p0") {
		t.Error("a partition already counted was counted again")
	}
	if grow("p3") || b.refusedDrops.Load() != 1 {
		t.Fatalf("the 4th partition was admitted (refused drops %d)", b.refusedDrops.Load())
	}
	if grow("p0") {
		t.Error("a refused key's partition was admitted")
	}
	b.observe(now, boundsPart("p0", "evil"))
	rs := b.check(now)
	if len(rs) == 0 || rs[0].key != "evil" || rs[0].back {
		t.Fatalf("refusals %+v: want evil refused", rs)
	}
	b.observe(now, nil)
	if rs := b.check(now.Add(30 * time.Second)); len(rs) != 0 {
		t.Fatalf("refusals %+v while evil is refused and this agent is free", rs)
	}
	rs = b.check(now.Add(2 * time.Minute))
	if len(rs) != 1 || !rs[0].back {
		t.Fatalf("refusals %+v after the window: want evil back", rs)
	}
}

// A key leading this agent's partition past LeadTimeout outside a plan
// is refused, one leading it in a plan only past LeadPlanTimeout; a
// change of leader starts a new stint; a silent leader is left to the
// partition timeout, not refused.
func TestBoundsLeadTime(t *testing.T) {
	b := newBounds(BoundsConfig{LeadTimeout: 10 * time.Second, LeadPlanTimeout: time.Minute, LeadWindow: time.Minute}, "self", zerolog.Nop())
	t0 := time.Unix(0, 0)
	check := func(at time.Duration, speaking string) []refusal {
		if speaking != "" {
			b.admit(t0.Add(at), speaking, scheduler.Message{Type: scheduler.MsgHeartbeat, From: speaking, PartID: "p", Version: 1})
		}
		return b.check(t0.Add(at))
	}
	p := boundsPart("p", "a")
	b.observe(t0, p)
	if rs := check(9*time.Second, "a"); len(rs) != 0 {
		t.Fatalf("refused within lead_timeout: %+v", rs)
	}
	if rs := check(16*time.Second, ""); len(rs) != 0 {
		t.Fatalf("a silent leader was refused: %+v", rs)
	}
	q := boundsPart("p", "b")
	b.observe(t0.Add(16*time.Second), q)
	if rs := check(22*time.Second, "b"); len(rs) != 0 {
		t.Fatalf("a new leader's stint was not restarted: %+v", rs)
	}
	q.State = scheduler.Finishing
	b.observe(t0.Add(23*time.Second), q)
	if rs := check(80*time.Second, "b"); len(rs) != 0 {
		t.Fatalf("refused while its plan runs within lead_plan_timeout: %+v", rs)
	}
	if rs := check(84*time.Second, "b"); len(rs) != 1 || rs[0].key != "b" {
		t.Fatalf("refusals %+v past lead_plan_timeout: want b", rs)
	}
	r := boundsPart("r", "c")
	b.observe(t0.Add(85*time.Second), r)
	if rs := check(96*time.Second, "c"); len(rs) != 1 || rs[0].key != "c" {
		t.Fatalf("refusals %+v past lead_timeout: want c", rs)
	}
}

// A key whose partitions this agent keeps leaving before one stint
// reaches LeadTimeout (torn down: their initiator refused it) is refused
// once its stints add up past it; a key that ends its partitions
// (dissolves them) or hands them over starts afresh each time.
func TestBoundsLeadTimeAcrossPartitions(t *testing.T) {
	cfg := BoundsConfig{LeadTimeout: 5 * time.Second, LeadWindow: time.Minute}
	t0 := time.Unix(0, 0)
	hold := func(b *bounds, key string, at time.Duration, id string, fair bool) []refusal {
		b.observe(t0.Add(at), boundsPart(id, key))
		b.admit(t0.Add(at+2*time.Second), key, scheduler.Message{Type: scheduler.MsgHeartbeat, From: key, PartID: id, Version: 1})
		rs := b.check(t0.Add(at + 2*time.Second))
		if fair {
			b.admit(t0.Add(at+2*time.Second), key, scheduler.Message{Type: scheduler.MsgDissolve, From: key, PartID: id, Version: 1})
		}
		b.observe(t0.Add(at+2*time.Second), nil)
		return rs
	}
	b := newBounds(cfg, "self", zerolog.Nop())
	if rs := hold(b, "evil", 0, "p1", false); len(rs) != 0 {
		t.Fatalf("refused after 2 s: %+v", rs)
	}
	if rs := hold(b, "evil", 3*time.Second, "p2", false); len(rs) != 0 {
		t.Fatalf("refused after 4 s in all: %+v", rs)
	}
	if rs := hold(b, "evil", 6*time.Second, "p3", false); len(rs) != 1 || rs[0].key != "evil" {
		t.Fatalf("refusals %+v after 6 s in partitions it lost: want evil refused", rs)
	}
	b = newBounds(cfg, "self", zerolog.Nop())
	for i := range 5 {
		if rs := hold(b, "fair", time.Duration(3*i)*time.Second, fmt.Sprintf("f%d", i), true); len(rs) != 0 {
			t.Fatalf("a key that dissolved each of its partitions was refused at the %d-th: %+v", i+1, rs)
		}
	}
}

// A refused key does not frame the fair leaders it hijacked: its
// refusal forgives the time this agent spent in other keys' partitions
// (the stint it is in, and the stints lost before), and a partition the
// refused key claims (this agent leaves it) is not blamed on its leader.
// The bound still holds from then on.
func TestBoundsRefusalForgivesTheFramed(t *testing.T) {
	cfg := BoundsConfig{LeadTimeout: 5 * time.Second, LeadWindow: time.Minute}
	t0 := time.Unix(0, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	hb := func(b *bounds, d time.Duration, key, id string) {
		b.admit(at(d), key, scheduler.Message{Type: scheduler.MsgHeartbeat, From: key, PartID: id, Version: 1})
	}
	refuse := func(b *bounds, d time.Duration, key string) {
		b.mu.Lock()
		b.refuse(at(d), key, "held this agent")
		b.mu.Unlock()
	}

	// The stint it is in, and an earlier lost one (3 s unfair).
	b := newBounds(cfg, "self", zerolog.Nop())
	b.observe(at(0), boundsPart("p0", "fair"))
	hb(b, 3*time.Second, "fair", "p0")
	b.observe(at(3*time.Second), nil) // lost without a plan: 3 s unfair
	b.observe(at(3*time.Second), boundsPart("p", "fair"))
	hb(b, 4*time.Second, "fair", "p")
	refuse(b, 4*time.Second, "evil")
	_ = b.check(at(4 * time.Second))
	hb(b, 8*time.Second, "fair", "p")
	if rs := b.check(at(8 * time.Second)); len(rs) != 0 {
		t.Fatalf("the fair leader was refused for time a refused key held it: %+v", rs)
	}
	hb(b, 10*time.Second, "fair", "p")
	if rs := b.check(at(10 * time.Second)); len(rs) != 1 || rs[0].key != "fair" {
		t.Fatalf("refusals %+v 6 s after the forgiveness: want fair refused (the bound still holds)", rs)
	}

	// A partition the refused key claims.
	b = newBounds(cfg, "self", zerolog.Nop())
	refuse(b, 0, "evil")
	_ = b.check(at(0))
	q := boundsPart("q", "fair")
	b.observe(at(time.Second), q)
	hb(b, 5*time.Second, "fair", "q")
	taken := *q
	taken.Leader, taken.Version = "evil", 2
	if b.admit(at(5*time.Second), "evil", scheduler.Message{Type: scheduler.MsgUpdate, From: "evil", PartID: "q", Version: 2, Part: &taken}) {
		t.Fatal("the refused key's claim was admitted")
	}
	b.observe(at(5*time.Second), nil) // left: the key claimed it
	b.observe(at(5*time.Second), boundsPart("q2", "fair"))
	hb(b, 8*time.Second, "fair", "q2")
	if rs := b.check(at(8 * time.Second)); slices.ContainsFunc(rs, func(r refusal) bool { return r.key == "fair" }) {
		t.Fatalf("the fair leader was blamed for the partition the refused key claimed: %+v", rs)
	}
}

// A refused key that claims partitions: this agent leaves at most
// maxClaimLeaves of the others' partitions per refusal, but the
// partition of its own event every time (staying, its event would end
// member_lost: the key, or the members that followed it, remove an
// initiator that sends them no snapshot). Its own copy says whose
// partition it is, not the key's message.
func TestBoundsClaimOfTheInitiatorsPartition(t *testing.T) {
	b := newBounds(BoundsConfig{LeadTimeout: 5 * time.Second, LeadWindow: time.Minute}, "self", zerolog.Nop())
	t0 := time.Unix(0, 0)
	b.mu.Lock()
	b.refuse(t0, "evil", "held this agent")
	b.mu.Unlock()
	_ = b.check(t0)
	claim := func(d time.Duration, p *scheduler.Partition) []refusal {
		t.Helper()
		b.observe(t0.Add(d), p)
		taken := *p
		taken.Leader, taken.Version = "evil", p.Version+2
		taken.Initiator = "self" // the key's word: not believed
		if b.admit(t0.Add(d), "evil", scheduler.Message{Type: scheduler.MsgUpdate, From: "evil", PartID: p.ID, Version: taken.Version, Part: &taken}) {
			t.Fatal("the refused key's claim was admitted")
		}
		rs := b.check(t0.Add(d))
		b.observe(t0.Add(d), nil)
		return rs
	}
	taken := func(rs []refusal, id string) bool {
		return slices.ContainsFunc(rs, func(r refusal) bool { return r.key == "evil" && r.taken == id })
	}
	for i := range maxClaimLeaves + 2 {
		id := fmt.Sprintf("other%d", i)
		p := boundsPart(id, "fair")
		p.Nodes = append(p.Nodes, "self")
		if got, want := taken(claim(time.Duration(i)*time.Second, p), id), i < maxClaimLeaves; got != want {
			t.Fatalf("claim %d of another's partition: left %v, want %v (maxClaimLeaves %d)", i+1, got, want, maxClaimLeaves)
		}
	}
	for i := range 2 {
		id := fmt.Sprintf("mine%d", i)
		p := boundsPart(id, "self")
		p.Leader, p.Nodes = "fair", []string{"self", "fair"}
		if !taken(claim(time.Duration(10+i)*time.Second, p), id) {
			t.Fatalf("claim %d of this agent's own event's partition past maxClaimLeaves: not left", i+1)
		}
	}
}
