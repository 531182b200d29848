package netaddr

import (
	"strings"
	"testing"
)

func TestParseHostPort(t *testing.T) {
	for _, c := range []struct {
		in   string
		host string
		port int
		ok   bool
	}{
		{"10.0.0.1:7946", "10.0.0.1", 7946, true},
		{"[::1]:0", "::1", 0, true},
		{":80", "", 80, true},
		{"no-port", "", 0, false},
		{"h:http", "", 0, false},
		{"h:65536", "", 0, false},
		{"h:-1", "", 0, false},
	} {
		h, p, err := ParseHostPort(c.in)
		if (err == nil) != c.ok || h != c.host || p != c.port {
			t.Errorf("ParseHostPort(%q) = %q, %d, %v", c.in, h, p, err)
		}
		if err != nil && !strings.Contains(err.Error(), c.in) {
			t.Errorf("error %q does not name %q", err, c.in)
		}
	}
}
