package node

import (
	"math"
	"testing"

	"github.com/dvms-project/dvms/nova"
)

// A move of the plan that ended keeps counting on its destination for
// re-checks whose listing does not show it yet (read while it still
// ran); a move that did not happen gives its reservation back.
func TestFlightSettle(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  ActionResult
		kept bool
	}{
		{"done", ActionResult{Outcome: ActionDone}, true},
		{"outcome unknown", ActionResult{Outcome: ActionFailed, Class: ReasonTimeout}, true},
		{"refused", ActionResult{Outcome: ActionFailed, Class: ReasonFailed}, false},
		{"skipped", ActionResult{Outcome: ActionSkipped, Class: ReasonConflict}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flight{flying: map[string]map[string]*reservation{}, groups: map[string]map[string]int{}}
			a := &reservation{to: "dst", server: "a", l: load{cpu: 3, ram: 1024, vcpus: 4, ramMB: 2048}, group: "g", accepted: true}
			f.flying["dst"] = map[string]*reservation{"a": a}
			f.groups["dst"] = map[string]int{"g": 1}
			f.settle(a, tc.res)
			in, _ := f.arriving("dst", map[string]bool{"other": true}, nil) // a listing read before a arrived
			if got := in.cpu == 3 && in.vcpus == 4; got != tc.kept {
				t.Fatalf("arriving on a stale listing: %+v; want a counted %v", in, tc.kept)
			}
			if got := f.groups["dst"]["g"] == 1; got != tc.kept {
				t.Fatalf("group members moving to dst: %d; want a counted %v", f.groups["dst"]["g"], tc.kept)
			}
			if in, _ := f.arriving("dst", map[string]bool{"a": true}, nil); in.cpu != 0 {
				t.Fatalf("arriving on a listing that shows a: %+v; want nothing (it is measured there)", in)
			}
		})
	}
}

// A move on its way is counted at its source's demand as this re-check
// read it, not at the value reserved at its own re-check.
func TestFlightArrivingFresh(t *testing.T) {
	f := &flight{flying: map[string]map[string]*reservation{}, groups: map[string]map[string]int{}}
	f.flying["dst"] = map[string]*reservation{
		"a": {to: "dst", server: "a", l: load{cpu: 0.56, ram: 1024, vcpus: 1, ramMB: 2048}},
		"b": {to: "dst", server: "b", l: load{cpu: 1, ram: 512, vcpus: 1, ramMB: 2048}},
	}
	fresh := map[string]nova.Demand{"a": {CPU: 0.76, RAMMB: 1100}, "other": {CPU: 3}}
	in, _ := f.arriving("dst", nil, fresh)
	if math.Abs(in.cpu-1.76) > 1e-9 || math.Abs(in.ram-1612) > 1e-9 {
		t.Fatalf("arriving %+v; want cpu 1.76 (a as measured now, b as reserved), ram 1612", in)
	}
	if in, _ := f.arriving("dst", nil, nil); math.Abs(in.cpu-1.76) > 1e-9 {
		t.Fatalf("the reservation kept %v; want a's fresher 0.76 kept for later re-checks", in.cpu)
	}
}
