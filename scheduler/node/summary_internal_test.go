package node

import (
	"testing"
	"time"

	"github.com/dvms-project/dvms/scheduler/extsched"
)

func TestSummaryDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := DefaultSummaryConfig()
	at := func(d time.Duration, f ...func(*extsched.Summary)) extsched.Summary {
		s := extsched.Summary{Host: "h", CPUs: 8, RAMMB: 1024, At: t0.Add(d), SampledAt: t0.Add(d - time.Second)}
		for _, g := range f {
			g(&s)
		}
		return s
	}
	last := at(0)
	for _, tc := range []struct {
		name string
		sent bool
		s    extsched.Summary
		want bool
	}{
		{"first", false, at(time.Second), true},
		{"nothing new within the interval", true, at(10 * time.Second), false},
		{"interval over", true, at(cfg.Interval), true},
		{"changed", true, at(time.Second, func(s *extsched.Summary) { s.Draining = true }), true},
		{"sample older than the interval", true, at(cfg.Interval, func(s *extsched.Summary) { s.SampledAt = t0.Add(-time.Second) }), false},
		{"first, sample too old", false, at(time.Hour, func(s *extsched.Summary) { s.SampledAt = t0 }), false},
	} {
		if got := summaryDue(cfg, tc.sent, last, tc.s); got != tc.want {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.want)
		}
	}
}
