package daemon

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The grants' directory: [DEFAULT] state_dir, else systemd's
// $STATE_DIRECTORY (its first entry), else none, said in the log.
func TestStateDir(t *testing.T) {
	for _, tc := range []struct{ set, env, want, log string }{
		{set: "/srv/dvms", env: "/var/lib/dvms", want: "/srv/dvms"},
		{env: "/var/lib/dvms:/var/lib/other", want: "/var/lib/dvms"},
		{want: "", log: "no state_dir"},
	} {
		t.Setenv("STATE_DIRECTORY", tc.env)
		var buf strings.Builder
		got := stateDir(tc.set, zerolog.New(&buf))
		if got != tc.want || (tc.log == "") != (buf.Len() == 0) || !strings.Contains(buf.String(), tc.log) {
			t.Errorf("state_dir %q, $STATE_DIRECTORY %q: %q, log %q; want %q, log %q", tc.set, tc.env, got, buf.String(), tc.want, tc.log)
		}
	}
}
