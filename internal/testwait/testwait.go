// Package testwait waits in tests for a condition instead of sleeping for
// a guess. A test on a busy machine (two test runs on two cores) gets
// its generous deadline; on a quiet one it goes on as soon as the
// condition holds.
package testwait

import (
	"testing"
	"time"
)

// Poll is how often Until asks again.
const Poll = 20 * time.Millisecond

// Until calls cond every Poll until it reports ok, and fails the test
// (t.Fatalf) if within passes first, with what and the state cond last
// reported: the failure says what was seen, not only that time ran out.
func Until(t testing.TB, within time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	if last, ok := For(within, cond); !ok {
		t.Fatalf("%s: not within %s; last seen: %s", what, within, last)
	}
}

// For is Until without the test: it reports whether cond held within,
// and the state cond last reported.
func For(within time.Duration, cond func() (ok bool, state string)) (string, bool) {
	end := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok {
			return state, true
		}
		if time.Now().After(end) {
			return state, false
		}
		time.Sleep(Poll)
	}
}
