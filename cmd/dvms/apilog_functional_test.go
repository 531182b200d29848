//go:build functional

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The functional cloud's own request logs are the meter of what dvms
// costs Nova: nova-api writes one `nova.osapi_compute.wsgi.server` line
// per request, placement one `placement.requestlog` line (both in
// $DVMS_FUNC_DIR/logs, written by devstack/functional/up.sh). A window is
// a pair of byte offsets into both files, so counting needs no clock; the
// lines' own timestamps (local time, milliseconds) date single requests.

// apiLogs are the request logs of nova-api and placement.
type apiLogs struct {
	files map[string]string // service -> log path
	users map[string]string // keystone user id -> name, for attribution
}

// apiMark is a point in both logs.
type apiMark struct {
	at  time.Time
	off map[string]int64
}

// apiRequest is one logged request.
type apiRequest struct {
	service, method, path, user string
	status                      int
	at                          time.Time     // when the answer was logged
	took                        time.Duration // nova-api's "time:" (placement does not log it)
}

// received is when the service got the request, as far as its log says.
func (r apiRequest) received() time.Time { return r.at.Add(-r.took) }

// template is the request with ids and query values replaced, so that
// the same call from different agents or for different servers counts as
// one kind.
func (r apiRequest) template() string {
	path, query, _ := strings.Cut(r.path, "?")
	path = uuidRE.ReplaceAllString(path, "{id}")
	path = hexIDRE.ReplaceAllString(path, "{id}")
	path = numRE.ReplaceAllString(path, "/{n}")
	if query != "" {
		var keys []string
		for _, kv := range strings.Split(query, "&") {
			k, _, _ := strings.Cut(kv, "=")
			keys = append(keys, k+"=*")
		}
		path += "?" + strings.Join(keys, "&")
	}
	return r.service + " " + r.method + " " + path
}

var (
	uuidRE  = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	hexIDRE = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	numRE   = regexp.MustCompile(`/[0-9]+\b`)
	// 2026-11-23 16:44:09.597 26697 INFO nova.osapi_compute.wsgi.server [ctx] 127.0.0.1 "GET /v2.1/... HTTP/1.1" status: 200 ...
	// 2026-11-23 16:44:09.736 26305 INFO placement.requestlog [ctx] 127.0.0.1 "GET /resource_providers/..." status: 200 ...
	reqLineRE = regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) \d+ \w+ (nova\.osapi_compute\.wsgi\.server|placement\.requestlog) \[([^\]]*)\] \S+ "(\w+) (\S+)[^"]*" status: (\d+)`)
	userRE    = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
	tookRE    = regexp.MustCompile(`" status: \d+ len: \d+ time: ([0-9.]+)`)
)

const logTime = "2006-01-02 15:04:05.000"

func newAPILogs(dir string) apiLogs {
	return apiLogs{files: map[string]string{
		"nova-api":  filepath.Join(dir, "logs", "nova-api.log"),
		"placement": filepath.Join(dir, "logs", "placement.log"),
	}, users: map[string]string{}}
}

func (l apiLogs) mark(t *testing.T) apiMark {
	t.Helper()
	m := apiMark{at: time.Now(), off: map[string]int64{}}
	for svc, p := range l.files {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("request log of %s: %v (the functional cloud writes it; see devstack/functional/up.sh)", svc, err)
		}
		m.off[svc] = st.Size()
	}
	return m
}

// between returns the requests logged between two marks. A line written
// across the end mark belongs to the next window.
func (l apiLogs) between(t *testing.T, from, to apiMark) []apiRequest {
	t.Helper()
	var out []apiRequest
	for svc, p := range l.files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, to.off[svc]-from.off[svc])
		_, err = f.ReadAt(buf, from.off[svc])
		f.Close()
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
			buf = buf[:i+1]
		}
		sc := bufio.NewScanner(bytes.NewReader(buf))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			m := reqLineRE.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			at, err := time.ParseInLocation(logTime, m[1][:len(logTime)], time.Local)
			if err != nil {
				t.Fatalf("time of %q: %v", sc.Text(), err)
			}
			var status int
			fmt.Sscan(m[6], &status)
			user := "-"
			if u := userRE.FindString(m[3]); u != "" {
				user = u
				if n := l.users[u]; n != "" {
					user = n
				}
			}
			var took time.Duration
			if tm := tookRE.FindStringSubmatch(sc.Text()); tm != nil {
				if f, err := strconv.ParseFloat(tm[1], 64); err == nil {
					took = time.Duration(f * float64(time.Second))
				}
			}
			out = append(out, apiRequest{service: svc, method: m[4], path: m[5], user: user, status: status, at: at, took: took})
		}
	}
	slices.SortStableFunc(out, func(a, b apiRequest) int { return a.at.Compare(b.at) })
	return out
}

// apiRate is what a window cost, per minute.
type apiRate struct {
	window    time.Duration
	total     float64            // requests per minute, nova-api + placement
	byService map[string]float64 // per minute
	byKind    map[string]float64 // "user  service METHOD template" -> per minute
}

func rateOf(reqs []apiRequest, window time.Duration) apiRate {
	r := apiRate{window: window, byService: map[string]float64{}, byKind: map[string]float64{}}
	per := 1 / window.Minutes()
	for _, q := range reqs {
		r.total += per
		r.byService[q.service] += per
		r.byKind[fmt.Sprintf("%-10s %s", q.user, q.template())] += per
	}
	return r
}

// logRates logs the rates of two windows side by side, noisiest growth
// first, so that a failure says who is noisy.
func logRates(t *testing.T, baseline, idle apiRate) {
	t.Helper()
	kinds := map[string]bool{}
	for k := range baseline.byKind {
		kinds[k] = true
	}
	for k := range idle.byKind {
		kinds[k] = true
	}
	sorted := make([]string, 0, len(kinds))
	for k := range kinds {
		sorted = append(sorted, k)
	}
	slices.SortFunc(sorted, func(a, b string) int {
		da, db := idle.byKind[a]-baseline.byKind[a], idle.byKind[b]-baseline.byKind[b]
		switch {
		case da > db:
			return -1
		case da < db:
			return 1
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "requests per minute   baseline(%s)  idle(%s)  idle-baseline   user       service METHOD path\n",
		baseline.window.Round(time.Second), idle.window.Round(time.Second))
	row := func(base, idle float64, what string) {
		d := idle - base
		if math.Abs(d) < 0.05 {
			d = 0 // windows a few ms longer than a minute: no "-0.0"
		}
		fmt.Fprintf(&b, "%34.1f %9.1f %14.1f   %s\n", base, idle, d, what)
	}
	for _, k := range sorted {
		row(baseline.byKind[k], idle.byKind[k], k)
	}
	for _, svc := range []string{"nova-api", "placement"} {
		row(baseline.byService[svc], idle.byService[svc], "(all)      "+svc)
	}
	row(baseline.total, idle.total, "(all)      nova-api + placement")
	t.Log(strings.TrimSuffix(b.String(), "\n"))
}

// TestFunctionalRequestLogs needs no cloud: it meters log lines as Zed's
// nova-api and placement write them (copied from the functional cloud),
// so that a change of format shows here rather than as a quiet cloud.
func TestFunctionalRequestLogs(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := newAPILogs(dir)
	l.users["db471f3a7e514916b0f90c6b5efe94d5"] = "admin"
	for _, p := range l.files {
		if err := os.WriteFile(p, []byte("startup noise\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	from := l.mark(t)
	appendTo := func(p, s string) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendTo(l.files["nova-api"], ""+
		"2026-11-23 16:44:09.597 26697 INFO nova.osapi_compute.wsgi.server [None req-fd4c8518-3d80-4e52-b028-b5a70728519d db471f3a7e514916b0f90c6b5efe94d5 c46c1a92e1f9490994274d25e0289cf7 - - default default] 127.0.0.1 \"DELETE /v2.1/servers/01ef348d-8d76-4cca-95e7-834695624848 HTTP/1.1\" status: 204 len: 407 time: 0.0514312\x1b[00m\n"+
		"2026-11-23 16:44:09.600 26697 WARNING oslo_messaging.rpc.client [None req-x - - - - - -] Using RPCClient manually\x1b[00m\n"+
		"2026-11-23 16:44:10.641 26697 INFO nova.osapi_compute.wsgi.server [None req-20f119aa-523a-4fe3-b1e5-34f035eb02ea db471f3a7e514916b0f90c6b5efe94d5 c46c1a92e1f9490994274d25e0289cf7 - - default default] 127.0.0.1 \"GET /v2.1/servers/detail?all_tenants=True&host=compute-3&limit=1000 HTTP/1.1\" status: 200 len: 2247 time: 6.5860933\x1b[00m\n")
	appendTo(l.files["placement"], ""+
		"2026-11-23 16:44:09.736 26305 INFO placement.requestlog [req-fd4c8518-3d80-4e52-b028-b5a70728519d req-1426d63c-ea1d-4f1b-a89c-174b75a50e2c 44df2497a9a14151b9b4bd9c2e18f462 3b0eb2686b9944468f446a78b5e17654 - - default default] 127.0.0.1 \"GET /resource_providers/97740ad6-8c22-4827-8b19-fe01aa7602ca/allocations\" status: 200 len: 152 microversion: 1.0\x1b[00m\n"+
		"[pid: 20505|app: 0|req: 1687/1687] 127.0.0.1 () {34 vars in 797 bytes} [Mon Nov 23 17:33:50 2026] GET /allocations/a47f => generated 257 bytes in 69 msecs (HTTP/1.1 200)\n"+
		"2026-11-23 16:40:00.026 26305 INFO placement.requestlog [None req-9edf1bbc-5904-453b-a5e1-50c6bced9394 - - - - - -] 127.0.0.1 \"GET /\" status: 200 len: 136 microversion: 1.0\x1b[00m\n"+
		"2026-11-23 16:44:11.000 26305 INFO placement.requestlog [None req-a - - - - - -] 127.0.0.1 \"GET /half-written")
	reqs := l.between(t, from, l.mark(t))
	var got []string
	for _, q := range reqs {
		got = append(got, fmt.Sprintf("%s %s %s %d %s", q.at.Format("15:04:05.000"), q.received().Format("15:04:05.000"), q.user, q.status, q.template()))
	}
	want := []string{
		"16:40:00.026 16:40:00.026 - 200 placement GET /",
		"16:44:09.597 16:44:09.545 admin 204 nova-api DELETE /v2.1/servers/{id}",
		"16:44:09.736 16:44:09.736 44df2497a9a14151b9b4bd9c2e18f462 200 placement GET /resource_providers/{id}/allocations",
		"16:44:10.641 16:44:04.054 admin 200 nova-api GET /v2.1/servers/detail?all_tenants=*&host=*&limit=*",
	}
	if !slices.Equal(got, want) {
		t.Errorf("metered\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	r := rateOf(reqs, 2*time.Minute)
	if r.total != 2 || r.byService["nova-api"] != 1 || r.byService["placement"] != 1 {
		t.Errorf("rate %+v, want 2/min (1 nova-api, 1 placement)", r)
	}
}
