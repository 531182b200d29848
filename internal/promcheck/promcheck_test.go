package promcheck

import (
	"os/exec"
	"testing"
)

// promtool refuses what the agent used to export (a gauge with a
// quantile label) and takes a histogram.
func TestPromtool(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("promtool not installed")
	}
	good := "# HELP x_seconds Latency.\n# TYPE x_seconds histogram\nx_seconds_bucket{le=\"1\"} 1\nx_seconds_bucket{le=\"+Inf\"} 1\nx_seconds_sum 0.5\nx_seconds_count 1\n"
	if ft := (&fakeT{TB: t}); !Promtool(ft, []byte(good)) || ft.failed {
		t.Errorf("promtool refused a histogram")
	}
	bad := "# HELP x_seconds Latency.\n# TYPE x_seconds gauge\nx_seconds{quantile=\"0.99\"} 1\n"
	ft := &fakeT{TB: t}
	Promtool(ft, []byte(bad))
	if !ft.failed {
		t.Errorf("promtool took a gauge with a quantile label")
	}
}

// fakeT records a failure instead of failing the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Helper()               {}
