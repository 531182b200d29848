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
	at                          time.Time
}

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
			out = append(out, apiRequest{service: svc, method: m[4], path: m[5], user: user, status: status, at: at})
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
