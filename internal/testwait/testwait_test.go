package testwait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	state, ok := For(time.Minute, func() (bool, string) { n++; return n == 3, fmt.Sprint(n) })
	if !ok || state != "3" || n != 3 {
		t.Fatalf("ok %v, state %q after %d calls, want true, \"3\", 3", ok, state, n)
	}
}

func TestForGivesUpWithTheLastState(t *testing.T) {
	n := 0
	state, ok := For(5*Poll, func() (bool, string) { n++; return false, fmt.Sprintf("call %d", n) })
	if ok || state != fmt.Sprintf("call %d", n) || n < 2 {
		t.Fatalf("ok %v, state %q after %d calls: want false and the last call's state", ok, state, n)
	}
}

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}

func TestUntilFailsWithWhatItSaw(t *testing.T) {
	r := &recorder{TB: t}
	Until(r, 2*Poll, "members", func() (bool, string) { return false, "2 of 3" })
	if !strings.Contains(r.msg, "members: not within") || !strings.Contains(r.msg, "last seen: 2 of 3") {
		t.Fatalf("message %q", r.msg)
	}
}
