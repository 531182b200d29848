package sim

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkVirtual runs the virtual clock (runVirtual: the agents, the
// runtime's step functions, detsim's ground truth) at 1,000 and 10,000
// hosts of 10 servers each for one simulated minute. The wall time per
// host-second (ns/host-s) stays flat when the cost grows linearly with
// the cloud: compare the two sizes.
//
//	nice -n 10 go test -run '^$' -bench BenchmarkVirtual -benchtime 1x ./scheduler/sim/
func BenchmarkVirtual(b *testing.B) {
	for _, hosts := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			cfg := virtualConfig(7)
			cfg.Hosts, cfg.Servers, cfg.Duration = hosts, 10*hosts, time.Minute
			var r *Report
			for b.Loop() {
				var err error
				if r, err = Run(context.Background(), cfg); err != nil {
					b.Fatal(err)
				}
			}
			if !r.Valid || r.Safety.Violations != 0 || r.Safety.ServersLost != 0 {
				b.Fatalf("valid %v (%v), %d violations, %d lost", r.Valid, r.InvalidBecause, r.Safety.Violations, r.Safety.ServersLost)
			}
			hostSeconds := float64(hosts) * cfg.Duration.Seconds()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/hostSeconds, "ns/host-s")
			b.ReportMetric(float64(r.Events.Total), "events")
		})
	}
}
