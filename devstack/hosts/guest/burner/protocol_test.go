package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// roundTrip serves g on one end of a pipe, writes input to the other and
// returns the first n reply lines (and the raw bytes before each, which must
// be the 0xFF delimiter or nothing).
func roundTrip(t *testing.T, h handler, input string, n int) []string {
	t.Helper()
	host, guestEnd := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- serve(guestEnd, h) }()
	t.Cleanup(func() {
		host.Close()
		if err := <-done; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("serve: %v", err)
		}
	})
	host.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { io.WriteString(host, input) }()
	r := bufio.NewReader(host)
	var lines []string
	for len(lines) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reply %d: %v (got %q)", len(lines)+1, err, lines)
		}
		lines = append(lines, strings.TrimSuffix(line, "\n"))
	}
	return lines
}

func fixedGuest(up float64) *guest {
	return &guest{uptime: func() (float64, error) { return up, nil }}
}

func TestProtocolLibvirtHandshake(t *testing.T) {
	// What libvirt sends before a qemu-agent-command: guest-sync with a
	// random id (and guest-ping on newer versions), one object a line.
	in := `{"execute":"guest-sync","arguments":{"id":1234567890123}}` + "\n" +
		`{"execute":"guest-ping"}` + "\n" +
		`{"execute":"dvms-status"}` + "\n"
	got := roundTrip(t, fixedGuest(12.5), in, 3)
	if got[0] != `{"return":1234567890123}` {
		t.Errorf("guest-sync answered %s", got[0])
	}
	if got[1] != `{"return":{}}` {
		t.Errorf("guest-ping answered %s", got[1])
	}
	var st struct{ Return status }
	if err := json.Unmarshal([]byte(got[2]), &st); err != nil || st.Return.UptimeS != 12.5 || st.Return.Version != version {
		t.Errorf("dvms-status answered %s (%v)", got[2], err)
	}
}

func TestProtocolFraming(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"no newlines, objects back to back",
			`{"execute":"guest-ping"}{"execute":"guest-sync","arguments":{"id":7}}`,
			[]string{`{"return":{}}`, `{"return":7}`}},
		{"0xFF resets a half-sent object",
			`{"execute":"guest-pi` + "\xff" + `{"execute":"guest-sync","arguments":{"id":8}}`,
			[]string{`{"return":8}`}},
		{"braces inside strings do not end the object",
			`{"execute":"guest-sync","arguments":{"id":"a}\"b"}}`,
			[]string{`{"return":"a}\"b"}`}},
		{"the id of the request comes back",
			`{"execute":"guest-ping","id":"x1"}`,
			[]string{`{"return":{},"id":"x1"}`}},
		{"unknown command",
			`{"execute":"guest-shutdown"}`,
			[]string{`{"error":{"class":"CommandNotFound","desc":"burner: command not found: \"guest-shutdown\" (have ` +
				strings.Join(commandNames, ", ") + `)"}}`}},
		{"not a command, then a good one",
			`{"exec":"x"} {"execute":"guest-ping"}`,
			[]string{`{"error":{"class":"GenericError","desc":"expected {\"execute\": NAME, \"arguments\": {...}}"}}`, `{"return":{}}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := roundTrip(t, fixedGuest(1), c.in, len(c.want))
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Errorf("reply %d = %s, want %s", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestProtocolSyncDelimited(t *testing.T) {
	host, guestEnd := net.Pipe()
	defer host.Close()
	go serve(guestEnd, fixedGuest(1))
	host.SetDeadline(time.Now().Add(10 * time.Second))
	go io.WriteString(host, `{"execute":"guest-sync-delimited","arguments":{"id":42}}`)
	got, err := bufio.NewReader(host).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := "\xff{\"return\":42}\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestProtocolOversizeRequest(t *testing.T) {
	in := `{"execute":"` + strings.Repeat("x", maxRequest) + `"}` + `{"execute":"guest-ping"}`
	got := roundTrip(t, fixedGuest(1), in, 2)
	if !strings.Contains(got[0], "request longer than") {
		t.Errorf("oversize request answered %s", got[0])
	}
	// The rest of the oversize object is skipped up to the next '{'.
	if got[1] != `{"return":{}}` {
		t.Errorf("after an oversize request: %s", got[1])
	}
}

func TestReadObjectsStopsOnReaderError(t *testing.T) {
	var n int
	err := readObjects(strings.NewReader(`{"a":1}{"b":`), func([]byte, error) error { n++; return nil })
	if !errors.Is(err, io.EOF) || n != 1 {
		t.Errorf("readObjects = %v after %d objects, want EOF after 1", err, n)
	}
	stop := errors.New("stop")
	err = readObjects(bytes.NewReader([]byte(`{}{}`)), func([]byte, error) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("readObjects = %v, want the emit error", err)
	}
}
