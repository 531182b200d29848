package scheduler

import (
	"slices"
	"testing"
)

// hostAt is a host of n servers of 2 GiB flavors, each reporting share
// of it.
func hostAt(name string, n int, share float64) Host {
	h := Host{Name: name}
	for range n {
		h.Servers = append(h.Servers, Server{RAMMB: 2048, RAM: share * 2048})
	}
	return h
}

// The planner's view of a destination's word: a host reporting a small
// share of its flavors' RAM against its partition's upper quartile is
// implausible; an empty host, a host within the floor, and every host of
// a partition with no peers to compare are not.
func TestImplausibleHosts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts []Host
		want  []string
	}{
		{"a liar among honest hosts", []Host{hostAt("a", 3, 0.7), hostAt("b", 5, 0.6), hostAt("liar", 4, 0.035), hostAt("c", 2, 0.8)}, []string{"liar"}},
		{"a liar and one peer", []Host{hostAt("a", 3, 0.7), hostAt("liar", 4, 0.035)}, []string{"liar"}},
		{"two liars of five", []Host{hostAt("a", 3, 0.7), hostAt("l1", 4, 0.035), hostAt("b", 5, 0.5), hostAt("l2", 4, 0.03), hostAt("c", 2, 0.9)}, []string{"l1", "l2"}},
		{"liars as many as the honest hosts", []Host{hostAt("a", 3, 0.7), hostAt("l1", 4, 0.035), hostAt("l2", 4, 0.03), hostAt("b", 5, 0.6), hostAt("l3", 2, 0.04)}, []string{"l1", "l2", "l3"}},
		{"honest spread", []Host{hostAt("a", 3, 0.3), hostAt("b", 5, 0.9), hostAt("c", 2, 0.6)}, nil},
		{"an empty host is not implausible", []Host{hostAt("a", 3, 0.7), hostAt("empty", 0, 0), hostAt("b", 2, 0.7)}, nil},
		{"no peers: no verdict", []Host{hostAt("liar", 4, 0.035), hostAt("empty", 0, 0)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ImplausibleHosts(tc.hosts); !slices.Equal(got, tc.want) {
				t.Fatalf("implausible %v, want %v", got, tc.want)
			}
		})
	}
}
