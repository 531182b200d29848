package node

import (
	"testing"

	"github.com/dvms-project/dvms/scheduler"
)

// The planner's view: a distrusted host is no destination, the others
// and the caller's slice are left as they were.
func TestNoDestination(t *testing.T) {
	hosts := []scheduler.Host{{Name: "h1"}, {Name: "h2"}, {Name: "h3", Disabled: true}}
	got := noDestination(hosts, []string{"h2", "h3"})
	if got[0].Disabled || !got[1].Disabled || !got[2].Disabled {
		t.Fatalf("got %+v, want h2 and h3 disabled only", got)
	}
	if hosts[1].Disabled {
		t.Fatal("the caller's hosts were changed")
	}
	if same := noDestination(hosts, nil); &same[0] != &hosts[0] {
		t.Fatal("copied with nothing distrusted")
	}
}
