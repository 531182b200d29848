package schedapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/scheduler/extsched"
	"github.com/dvms-project/dvms/scheduler/extsched/extschedtest"
)

const token = "0123456789abcdef0123456789abcdef"

func tokenFile(t *testing.T, text string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// service returns a service with two idle 8-core hosts a and b known;
// tokenPath "" = no authentication.
func service(t *testing.T, cfg Config) *Service {
	t.Helper()
	s, err := New(extsched.DefaultConfig(), cfg, time.Now, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"a", "b"} {
		data, _ := extsched.Summary{Host: h, At: time.Now(), SampledAt: time.Now(), CPUs: 8, RAMMB: 16384}.Encode()
		s.Receive("dvms.t.summary."+h, data)
	}
	if got := s.Health(); got.Fresh != 2 {
		t.Fatalf("view %+v, want 2 fresh hosts", got)
	}
	return s
}

func post(t *testing.T, url, auth string, body []byte) (int, []string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+extsched.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r extsched.Response
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, r.Hosts
}

// Red team: 12 POSTs without the token (none, a wrong one, the token in
// another header) change no reservation, so Nova's first choice stays;
// the weigher's own call (the token) still gets its answer and reserves.
func TestUnauthenticatedPostsReserveNothing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TokenFile = tokenFile(t, token+"\n", 0o640)
	s := service(t, cfg)
	srv := httptestServer(t, s)
	forged := []string{"", "Bearer wrong-token-wrong-token!!", "Basic " + token, "Bearer " + token + "x"}
	for i := range 12 {
		code, hosts := post(t, srv, forged[i%len(forged)], extschedtest.NovaRequest(2, 2048, "a", "b"))
		if code != http.StatusUnauthorized || hosts != nil {
			t.Fatalf("forged call %d: %d %v, want 401 and no answer", i, code, hosts)
		}
	}
	if v, r := s.Pending("a"); v != 0 || r != 0 {
		t.Fatalf("forged calls reserved %.0f vCPUs / %.0f MB on a", v, r)
	}
	if h := s.Health(); h.Unauthorized != 12 || h.Reserved != 0 || h.Authentication != 1 {
		t.Errorf("health %+v, want 12 unauthorized, 0 reservations", h)
	}
	code, hosts := post(t, srv, "Bearer "+token, extschedtest.NovaRequest(2, 2048, "a", "b"))
	if code != 200 || len(hosts) != 2 || hosts[0] != "a" {
		t.Fatalf("the weigher's call: %d %v, want a first (Nova's first choice)", code, hosts)
	}
	if v, _ := s.Pending("a"); v != 2 {
		t.Errorf("the authenticated boot reserved %.0f vCPUs on a, want 2", v)
	}
}

// Without a token file nobody is trusted: answers are given, nothing is
// reserved, so 12 anonymous calls cannot flip the first choice either.
func TestWithoutTokenNothingReserves(t *testing.T) {
	s := service(t, DefaultConfig())
	srv := httptestServer(t, s)
	for range 12 {
		if code, hosts := post(t, srv, "", extschedtest.NovaRequest(2, 2048, "a", "b")); code != 200 || hosts[0] != "a" {
			t.Fatalf("anonymous call: %d %v, want 200 with a first", code, hosts)
		}
	}
	if v, _ := s.Pending("a"); v != 0 {
		t.Errorf("anonymous calls reserved %.0f vCPUs", v)
	}
}

func TestLoadToken(t *testing.T) {
	if _, err := LoadToken(tokenFile(t, token, 0o644)); err == nil || !strings.Contains(err.Error(), "o-rwx") {
		t.Errorf("a world-readable token file: %v", err)
	}
	if _, err := LoadToken(tokenFile(t, "short\n", 0o600)); err == nil {
		t.Error("a short token accepted")
	}
	if got, err := LoadToken(tokenFile(t, "  "+token+"  \nsecond line\n", 0o600)); err != nil || got != token {
		t.Errorf("LoadToken = %q, %v", got, err)
	}
	if _, err := New(extsched.DefaultConfig(), Config{TokenFile: filepath.Join(t.TempDir(), "none")}, time.Now, zerolog.Nop()); err == nil {
		t.Error("a missing token file accepted")
	}
}

// httptestServer serves s.Server() (its timeouts) on 127.0.0.1.
func httptestServer(t *testing.T, s *Service) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return "http://" + ln.Addr().String()
}

// Red team: 200 connections that send a request's header and never its
// whole body are all closed within the body timeout (plus scheduling
// slack on a busy machine); meanwhile and after, a legitimate caller from
// another address is answered, and the attacker's address hits its limit.
func TestSlowBodyConnectionsDropped(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TokenFile = tokenFile(t, token, 0o600)
	cfg.BodyTimeout = 2 * time.Second
	s := service(t, cfg)
	base := httptestServer(t, s)
	addr := strings.TrimPrefix(base, "http://")
	const n = 200
	const slack = 5 * time.Second
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"hosts\": [",
		extsched.Path, token)
	start := time.Now()
	var wg sync.WaitGroup
	closedAfter := make([]time.Duration, n)
	errs := make(chan error, n)
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(cfg.BodyTimeout + slack))
			// Whatever the server answers, it must then close.
			_, err := io.Copy(io.Discard, bufio.NewReader(c))
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				errs <- fmt.Errorf("connection %d still open after %s", i, cfg.BodyTimeout+slack)
				return
			}
			closedAfter[i] = time.Since(start)
		}()
	}
	// A legitimate caller from another address is answered meanwhile.
	legit := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	req, _ := http.NewRequest(http.MethodPost, base+extsched.Path, bytes.NewReader(extschedtest.NovaRequest(1, 512, "a", "b")))
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := legit.Do(req); err != nil {
		t.Logf("127.0.0.2 not usable here (%v): the legitimate call after the attack stands alone", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("a legitimate call during the attack: %d", resp.StatusCode)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var longest time.Duration
	for _, d := range closedAfter {
		longest = max(longest, d)
	}
	t.Logf("%d slow-body connections all closed within %s (body timeout %s)", n, longest.Round(time.Millisecond), cfg.BodyTimeout)
	if h := s.Health(); h.Limited < n-cfg.MaxPerClient || h.Reserved > 1 {
		t.Errorf("health %+v: want at least %d requests over the per-client limit, no reservation but the legitimate one", h, n-cfg.MaxPerClient)
	}
	if code, hosts := post(t, base, "Bearer "+token, extschedtest.NovaRequest(1, 512, "a", "b")); code != 200 || len(hosts) != 2 {
		t.Errorf("a legitimate call after the attack: %d %v", code, hosts)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.BodyTimeout, c.MaxPerClient = 0, 0
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "body_timeout") || !strings.Contains(err.Error(), "max_requests_per_client") {
		t.Errorf("Validate = %v", err)
	}
}
