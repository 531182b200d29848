package scheduler

import (
	"fmt"
	"slices"
	"testing"
)

// Agents on one shared ring: a membership change of one is its own (the
// shared list is copied first), the others keep the list as it was.
func TestSharedRingCopiedOnChange(t *testing.T) {
	r := NewRing([]string{"h3", "h1", "h2", "h1"})
	if r.Len() != 3 {
		t.Fatalf("ring of %d, want 3 (sorted, without duplicates)", r.Len())
	}
	var as []*Agent
	for _, id := range []string{"h1", "h2", "h4"} { // h4 is not in r
		a, err := NewAgentOnRing(DefaultConfig(id), r)
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, a)
	}
	as[0].MemberDown("h3")
	as[1].MemberUp("h0")
	want := [][]string{{"h1", "h2"}, {"h0", "h1", "h2", "h3"}, {"h1", "h2", "h3", "h4"}}
	for i, a := range as {
		if got := a.Members(); !slices.Equal(got, want[i]) {
			t.Errorf("%s: ring %v, want %v", a.ID(), got, want[i])
		}
	}
	if !slices.Equal(r.ids, []string{"h1", "h2", "h3"}) {
		t.Fatalf("the shared ring changed: %v", r.ids)
	}
}

// An idle agent's sample allocates only its copy of the host's servers:
// at 100,000 agents a sample a second each, a map per sample (the K-of-N
// count, the set of servers present) was garbage by the gigabyte.
func TestIdleSampleAllocations(t *testing.T) {
	a := newAgent(t, "h1")
	h := hostWith("h1", 0.5)
	for i := range 12 { // servers per host as in dvms simulate's runs
		h.Servers = append(h.Servers, Server{ID: fmt.Sprint("h1-", i), VCPUs: 1, RAMMB: 512, CPU: 0.1, RAM: 256})
	}
	a.Observe(t0, h)
	if n := testing.AllocsPerRun(100, func() { a.Observe(t0, h) }); n > 1 {
		t.Fatalf("an idle sample allocates %.0f times, want at most 1", n)
	}
}
