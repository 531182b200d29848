package fake_test

import (
	"testing"

	"github.com/dvms-project/dvms/nova"
)

// OverloadedHosts counts exactly the hosts Overloaded reports.
func TestOverloadedHosts(t *testing.T) {
	c, _ := newCloud(t)
	mustAdd(t, c, server("a", "compute-1", 4, 1024), server("b", "compute-2", 4, 1024), server("c", "compute-3", 4, 1024))
	for id, cpu := range map[string]float64{"a": 9, "b": 2, "c": 8.5} {
		if err := c.SetDemand(id, nova.Demand{CPU: cpu, RAMMB: 512}); err != nil {
			t.Fatal(err)
		}
	}
	want := 0
	for _, h := range []string{"compute-1", "compute-2", "compute-3"} {
		if c.Overloaded(h) {
			want++
		}
	}
	if got := c.OverloadedHosts(); got != want || want != 2 {
		t.Errorf("OverloadedHosts() = %d, Overloaded says %d, want 2", got, want)
	}
}
