package fit

import (
	"math"
	"testing"
)

func TestCheck(t *testing.T) {
	lim := HostLimit(4, 8192, 0.75, 1.0, 8, 8192) // demand: 3 cores, 8192 MB
	base := Use{CPU: 2, RAM: 4096, VCPUs: 4, RAMMB: 4096}
	for _, tc := range []struct {
		name string
		add  Use
		lim  Limit
		want Problem
	}{
		{"fits", Use{CPU: 0.5, RAM: 1024, VCPUs: 2, RAMMB: 1024}, lim, None},
		{"exactly at every limit", Use{CPU: 1, RAM: 4096, VCPUs: 4, RAMMB: 4096}, lim, None},
		{"rounding within epsilon", Use{CPU: 1 + Eps/2}, lim, None},
		{"cpu demand over threshold", Use{CPU: 1.01}, lim, DemandCPU},
		{"ram demand over", Use{RAM: 4097}, lim, DemandRAM},
		{"placement vcpus over although idle", Use{VCPUs: 5}, lim, AllocVCPUs},
		{"placement ram over", Use{RAMMB: 4097}, lim, AllocRAMMB},
		{"demand reported before allocation", Use{CPU: 2, VCPUs: 5}, lim, DemandCPU},
		{"headroom scales demand only", Use{CPU: 0.5, VCPUs: 4}, lim.Scaled(0.8), DemandCPU},
		{"zero allocatable takes nothing", Use{VCPUs: 1}, Limit{CPU: 9, RAM: 1e6, VCPUs: 4, RAMMB: 1e6}, AllocVCPUs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Check(base, tc.add, tc.lim); got != tc.want {
				t.Fatalf("Check = %v, want %v", got, tc.want)
			}
			if Fits(base, tc.add, tc.lim) != (tc.want == None) {
				t.Fatalf("Fits disagrees with Check")
			}
		})
	}
}

func TestOverloadedOvercommitted(t *testing.T) {
	lim := HostLimit(2, 1000, 1, 1, 4, 1000)
	for _, tc := range []struct {
		name       string
		use        Use
		over, comm bool
	}{
		{"idle", Use{}, false, false},
		{"demand over", Use{CPU: 2.5}, true, false},
		{"allocation over", Use{VCPUs: 4.5}, false, true},
		{"ram both", Use{RAM: 1001, RAMMB: 1001}, true, true},
		{"infinite allocatable", Use{VCPUs: 1e9}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lim
			if tc.name == "infinite allocatable" {
				l.VCPUs = math.Inf(1)
			}
			if got := Overloaded(tc.use, l); got != tc.over {
				t.Fatalf("Overloaded = %v", got)
			}
			if got := Overcommitted(tc.use, l); got != tc.comm {
				t.Fatalf("Overcommitted = %v", got)
			}
		})
	}
}
