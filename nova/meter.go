package nova

import (
	"math/bits"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Services a Meter tells apart.
const (
	ServiceCompute   = "compute"
	ServicePlacement = "placement"
	ServiceIdentity  = "identity" // keystone: tokens
	ServiceOther     = "other"    // a URL under no known endpoint
)

// Error classes of a metered request, from its HTTP status (or the lack
// of one). ClassOK is every 1xx-3xx answer.
const (
	ClassOK           = "ok"
	ClassBadRequest   = "bad_request"  // 400
	ClassUnauthorized = "unauthorized" // 401, 403
	ClassNotFound     = "not_found"    // 404
	ClassConflict     = "conflict"     // 409
	ClassClientError  = "client_error" // any other 4xx
	ClassServerError  = "server_error" // 5xx and 429
	ClassTransport    = "transport"    // no answer: connection error, timeout
)

// ClassOf returns the error class of an HTTP status; status 0 means no
// answer.
func ClassOf(status int) string {
	switch {
	case status == 0:
		return ClassTransport
	case status < 400:
		return ClassOK
	case status == http.StatusBadRequest:
		return ClassBadRequest
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return ClassUnauthorized
	case status == http.StatusNotFound:
		return ClassNotFound
	case status == http.StatusConflict:
		return ClassConflict
	case status == http.StatusTooManyRequests, status >= 500:
		return ClassServerError
	}
	return ClassClientError
}

// Template names a kind of request: service, method and path with ids
// replaced by {id} and query keys kept, sorted, without values:
// "GET compute /servers/detail?all_tenants&host&limit".
type Template struct {
	Service string
	Method  string
	Path    string
}

// String formats t as "METHOD service /path?keys".
func (t Template) String() string { return t.Method + " " + t.Service + " " + t.Path }

// PathTemplate returns the template path of a request path (relative to
// its service's endpoint) and raw query: segments that are UUIDs (with or
// without dashes) or decimal integers become {id}; query keys are kept
// sorted and deduplicated, values dropped.
func PathTemplate(path, rawQuery string) string {
	var b strings.Builder
	b.Grow(len(path) + len(rawQuery))
	for seg := range strings.SplitSeq(strings.Trim(path, "/"), "/") {
		b.WriteByte('/')
		if isID(seg) {
			b.WriteString("{id}")
		} else {
			b.WriteString(seg)
		}
	}
	if rawQuery != "" {
		var keys []string
		for kv := range strings.SplitSeq(rawQuery, "&") {
			k, _, _ := strings.Cut(kv, "=")
			if k != "" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		if len(keys) > 0 {
			b.WriteByte('?')
			b.WriteString(strings.Join(keys, "&"))
		}
	}
	return b.String()
}

// isID reports whether a path segment is a UUID (8-4-4-4-12 hex, or 32
// hex digits) or a decimal integer.
func isID(s string) bool {
	if s == "" {
		return false
	}
	if _, err := strconv.ParseUint(s, 10, 64); err == nil {
		return true
	}
	switch len(s) {
	case 36:
		for i := 0; i < len(s); i++ {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if s[i] != '-' {
					return false
				}
			} else if !isHex(s[i]) {
				return false
			}
		}
		return true
	case 32:
		for i := 0; i < len(s); i++ {
			if !isHex(s[i]) {
				return false
			}
		}
		return true
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Request is one metered request.
type Request struct {
	// Caller attributes the request (an agent's host in a simulation);
	// "" when the meter's owner has a single caller.
	Caller   string
	Template Template
	Latency  time.Duration
	Class    string // one of the Class constants
}

// Meter counts requests to Nova, placement and keystone by caller and
// template, with their error class and latency. It does no I/O and is
// safe for concurrent use; Record costs two map lookups under one mutex.
// The zero value is not usable: use NewMeter.
type Meter struct {
	mu      sync.Mutex
	total   int64
	errors  int64
	latency histogram
	tmpl    map[Template]*tmplStats
	callers map[string]*callerStats
	last    string // class of the last request recorded
}

type tmplStats struct {
	count, errors int64
	latency       histogram
}

type callerStats struct {
	total int64
	by    map[Template]int64
}

// NewMeter returns an empty meter.
func NewMeter() *Meter {
	return &Meter{tmpl: map[Template]*tmplStats{}, callers: map[string]*callerStats{}}
}

// Record counts one request.
func (m *Meter) Record(r Request) {
	b := bucketOf(r.Latency)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total++
	m.last = r.Class
	m.latency.add(b, r.Latency)
	ts := m.tmpl[r.Template]
	if ts == nil {
		ts = &tmplStats{}
		m.tmpl[r.Template] = ts
	}
	ts.count++
	ts.latency.add(b, r.Latency)
	if r.Class != ClassOK && r.Class != "" {
		m.errors++
		ts.errors++
	}
	cs := m.callers[r.Caller]
	if cs == nil {
		cs = &callerStats{by: map[Template]int64{}}
		m.callers[r.Caller] = cs
	}
	cs.total++
	cs.by[r.Template]++
}

// LastClass is the class of the last request recorded ("" before the
// first): whether the services answered at last contact (an agent's
// readiness reads it; ClassTransport and ClassServerError are outages).
func (m *Meter) LastClass() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Reset forgets everything recorded.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total, m.errors, m.latency, m.last = 0, 0, histogram{}, ""
	m.tmpl = map[Template]*tmplStats{}
	m.callers = map[string]*callerStats{}
}

// CallerTotal is how many requests caller made.
func (m *Meter) CallerTotal(caller string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cs := m.callers[caller]; cs != nil {
		return cs.total
	}
	return 0
}

// CallerCount is how many requests of template t caller made.
func (m *Meter) CallerCount(caller string, t Template) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cs := m.callers[caller]; cs != nil {
		return cs.by[t]
	}
	return 0
}

// CallerCounts returns the request count of each template caller used.
func (m *Meter) CallerCounts(caller string) map[Template]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.callers[caller]
	if cs == nil {
		return map[Template]int64{}
	}
	out := make(map[Template]int64, len(cs.by))
	for t, n := range cs.by {
		out[t] = n
	}
	return out
}

// TemplateStats is what a snapshot says of one template.
type TemplateStats struct {
	Template Template
	Count    int64
	Errors   int64
	P50, P99 time.Duration
}

// MeterSnapshot is a copy of a meter's counters.
type MeterSnapshot struct {
	Total, Errors int64
	// Latency percentiles over every request, as bucket upper bounds
	// (within 19 %, never above Max).
	P50, P99, Max time.Duration
	// Templates by count, largest first (ties by name).
	Templates []TemplateStats
	// Callers: requests per caller.
	Callers map[string]int64
}

// Counts returns the request count of each template.
func (s MeterSnapshot) Counts() map[Template]int64 {
	out := make(map[Template]int64, len(s.Templates))
	for _, t := range s.Templates {
		out[t.Template] = t.Count
	}
	return out
}

// Snapshot copies the counters.
func (m *Meter) Snapshot() MeterSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := MeterSnapshot{Total: m.total, Errors: m.errors, P50: m.latency.quantile(0.50), P99: m.latency.quantile(0.99),
		Max: m.latency.max, Callers: make(map[string]int64, len(m.callers))}
	for t, ts := range m.tmpl {
		s.Templates = append(s.Templates, TemplateStats{Template: t, Count: ts.count, Errors: ts.errors,
			P50: ts.latency.quantile(0.50), P99: ts.latency.quantile(0.99)})
	}
	slices.SortFunc(s.Templates, func(a, b TemplateStats) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Template.String(), b.Template.String())
	})
	for c, cs := range m.callers {
		s.Callers[c] = cs.total
	}
	return s
}

// LatencyMark is the latency histogram of every request recorded up to
// one moment (Mark), for LatencySince.
type LatencyMark struct{ h histogram }

// Mark returns the latency histogram so far.
func (m *Meter) Mark() LatencyMark {
	m.mu.Lock()
	defer m.mu.Unlock()
	return LatencyMark{h: m.latency}
}

// LatencySince is how many requests were recorded since mark, and their
// p50 and p99 latency (bucket upper bounds, as Snapshot's, capped by the
// largest latency ever recorded).
func (m *Meter) LatencySince(mark LatencyMark) (n int64, p50, p99 time.Duration) {
	m.mu.Lock()
	h := m.latency
	m.mu.Unlock()
	h.n -= mark.h.n
	h.sum -= mark.h.sum
	for i := range h.b {
		h.b[i] -= mark.h.b[i]
	}
	return h.n, h.quantile(0.50), h.quantile(0.99)
}

// ---- latency histogram ----

// Buckets in microseconds: 0..3 exactly, then four per power of two (a
// bucket spans at most 25 % of its lower bound), up to 2^40 µs.
const (
	subBits  = 2
	nBuckets = 4 + (40-subBits)*(1<<subBits)
)

type histogram struct {
	n   int64
	max time.Duration
	sum time.Duration
	b   [nBuckets]int64
}

func bucketOf(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 1<<subBits {
		return int(us)
	}
	n := bits.Len64(us) // >= subBits+1
	i := (n-subBits)<<subBits + int((us>>(n-subBits-1))&(1<<subBits-1))
	return min(i, nBuckets-1)
}

// upper is the largest duration (µs resolution) of bucket i.
func upper(i int) time.Duration {
	if i < 1<<subBits {
		return time.Duration(i) * time.Microsecond
	}
	n := i>>subBits + subBits // bit length of the bucket's values
	sub := uint64(i & (1<<subBits - 1))
	lo := uint64(1)<<(n-1) | sub<<(n-subBits-1)
	width := uint64(1) << (n - subBits - 1)
	return time.Duration(lo+width-1) * time.Microsecond
}

func (h *histogram) add(b int, d time.Duration) {
	h.n++
	h.b[b]++
	h.max = max(h.max, d)
	h.sum += max(d, 0)
}

// quantile returns the upper bound of the bucket holding the q-th
// request, capped by the largest latency seen; 0 when empty.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n) + 0.999999)
	rank = max(1, min(rank, h.n))
	var seen int64
	for i, c := range h.b {
		seen += c
		if seen >= rank {
			return min(upper(i), h.max)
		}
	}
	return h.max
}

// LatencyBounds are the upper bounds of LatencyHistogram.Cumulative:
// powers of two microseconds, 1.024 ms to 67.1 s. They fall on the
// meter's own bucket boundaries, so the counts below them are exact.
var LatencyBounds = func() []time.Duration {
	var b []time.Duration
	for k := 10; k <= 26; k++ {
		b = append(b, time.Duration(1<<k)*time.Microsecond)
	}
	return b
}()

// LatencyHistogram is the latency of one template's requests in the
// shape Prometheus exports: count, sum and cumulative counts.
type LatencyHistogram struct {
	Template Template
	Count    int64
	Sum      time.Duration
	// Cumulative[i] is how many requests took less than LatencyBounds[i]
	// (at the meter's microsecond resolution).
	Cumulative []int64
}

// LatencyHistograms returns the latency histogram of every template,
// in no particular order.
func (m *Meter) LatencyHistograms() []LatencyHistogram {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]LatencyHistogram, 0, len(m.tmpl))
	for t, ts := range m.tmpl {
		out = append(out, LatencyHistogram{Template: t, Count: ts.latency.n, Sum: ts.latency.sum, Cumulative: ts.latency.cumulative()})
	}
	return out
}

// cumulative counts the requests below each of LatencyBounds: 2^k µs is
// the first value of bucket bucketOf(2^k µs), so the buckets before it
// hold exactly the requests faster than it.
func (h *histogram) cumulative() []int64 {
	out := make([]int64, len(LatencyBounds))
	var seen int64
	i := 0
	for j, bound := range LatencyBounds {
		for end := bucketOf(bound); i < end; i++ {
			seen += h.b[i]
		}
		out[j] = seen
	}
	return out
}
