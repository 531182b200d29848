package sim

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ServerSpec is a simulated server's flavor.
type ServerSpec struct {
	Name  string
	VCPUs int
	RAMMB int
}

// Workload drives servers' demand over simulated time.
type Workload interface {
	// Update reports the demand changes up to t (time since the start)
	// through set(server index, cpu cores, ram MB).
	Update(t time.Duration, set func(i int, cpu, ramMB float64))
}

// NewWorkload parses a --workload value: random, saturated, flapping,
// planetlab:FILE or FILE (CSV time_s,server,cpu,ram_mb). cores is the
// cloud's total physical cores: "saturated" loads it to 97 % on average,
// whatever the servers per host, so free room is scarce (partitions must
// grow and merge) but the cloud as a whole is not beyond help.
//
// random and saturated redraw a server's demand every 30 s on average;
// "random:PERIOD" and "saturated:PERIOD" (a Go duration, e.g. random:1h)
// set that mean period: a long one keeps each server's measured demand
// through the run, so a host's demand when a server boots still holds
// when it is checked later (what Nova's placement-only order is blind to).
func NewWorkload(spec string, servers []ServerSpec, rng *rand.Rand, traceStep time.Duration, cores float64) (Workload, error) {
	kind, periodText, hasPeriod := strings.Cut(spec, ":")
	period := 30 * time.Second
	if kind == "flapping" {
		period = DefaultFlapPeriod
	}
	if hasPeriod && (kind == "random" || kind == "saturated" || kind == "flapping") {
		p, err := time.ParseDuration(periodText)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("workload %q: the period after %s: must be a positive duration (e.g. %s:10m)", spec, kind, kind)
		}
		period, spec = p, kind
	}
	switch {
	case spec == "random":
		return newRandom(servers, rng, 0.45, 0.25, period), nil
	case spec == "saturated":
		vcpus := 0
		for _, s := range servers {
			vcpus += s.VCPUs
		}
		mean := 0.8
		if vcpus > 0 && cores > 0 {
			mean = math.Min(1.0, 0.97*cores/float64(vcpus))
		}
		return newRandom(servers, rng, mean, 0.15, period), nil
	case spec == "flapping":
		return newFlapping(servers, rng, period), nil
	case strings.HasPrefix(spec, "planetlab:"):
		return newPlanetLab(strings.TrimPrefix(spec, "planetlab:"), servers, traceStep)
	case spec == "":
		return nil, fmt.Errorf("workload: empty")
	default:
		return newCSV(spec, servers)
	}
}

// random redraws each server's CPU demand (a fraction of its vCPUs from
// a clipped normal law) at exponentially spaced times, as DVMS/VMPlaceS
// did. RAM demand stays at 70 % of the flavor.
type random struct {
	servers  []ServerSpec
	rng      *rand.Rand
	mean, sd float64
	period   time.Duration
	next     []time.Duration
	started  bool
}

func newRandom(servers []ServerSpec, rng *rand.Rand, mean, sd float64, period time.Duration) *random {
	return &random{servers: servers, rng: rng, mean: mean, sd: sd, period: period, next: make([]time.Duration, len(servers))}
}

func (w *random) draw(i int) float64 {
	f := math.Min(1, math.Max(0, w.rng.NormFloat64()*w.sd+w.mean))
	return f * float64(w.servers[i].VCPUs)
}

func (w *random) Update(t time.Duration, set func(int, float64, float64)) {
	for i := range w.servers {
		if w.started && t < w.next[i] {
			continue
		}
		set(i, w.draw(i), 0.7*float64(w.servers[i].RAMMB))
		w.next[i] = t + time.Duration(w.rng.ExpFloat64()*float64(w.period))
	}
	w.started = true
}

// planetLab replays real per-VM CPU traces (../shared/traces/planetlab):
// server i plays row i mod rows; each 300 s sample lasts traceStep of
// simulated time so a short simulation crosses many samples.
type planetLab struct {
	servers []ServerSpec
	rows    [][]float64
	step    time.Duration
	last    int
}

func newPlanetLab(path string, servers []ServerSpec, step time.Duration) (*planetLab, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("planetlab trace: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReader(f))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil || len(header) < 2 || header[0] != "vm" {
		return nil, fmt.Errorf("planetlab trace %s: header vm,t0,... expected", path)
	}
	var rows [][]float64
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("planetlab trace %s line %d: %w", path, line, err)
		}
		vals := make([]float64, 0, len(rec)-1)
		for _, s := range rec[1:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 || v > 100 {
				return nil, fmt.Errorf("planetlab trace %s line %d: utilization %q not in 0..100", path, line, s)
			}
			vals = append(vals, v)
		}
		if len(vals) == 0 {
			return nil, fmt.Errorf("planetlab trace %s line %d: no samples", path, line)
		}
		rows = append(rows, vals)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("planetlab trace %s: no VM", path)
	}
	if step <= 0 {
		step = 10 * time.Second
	}
	return &planetLab{servers: servers, rows: rows, step: step, last: -1}, nil
}

func (w *planetLab) Update(t time.Duration, set func(int, float64, float64)) {
	k := int(t / w.step)
	if k == w.last {
		return
	}
	w.last = k
	for i, s := range w.servers {
		row := w.rows[i%len(w.rows)]
		u := row[k%len(row)]
		set(i, u/100*float64(s.VCPUs), 0.7*float64(s.RAMMB))
	}
}

// csvTrace applies rows "time_s,server,cpu,ram_mb" when their time comes;
// server is a server name or index, cpu in cores, ram_mb 0 = unchanged.
type csvTrace struct {
	rows []csvRow
	next int
}

type csvRow struct {
	at       time.Duration
	server   int
	cpu, ram float64
}

func newCSV(path string, servers []ServerSpec) (*csvTrace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload file: %w", err)
	}
	defer f.Close()
	byName := make(map[string]int, len(servers))
	for i, s := range servers {
		byName[s.Name] = i
	}
	r := csv.NewReader(bufio.NewReader(f))
	r.Comment = '#'
	var rows []csvRow
	for line := 1; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		if line == 1 && rec[0] == "time_s" {
			continue
		}
		if len(rec) != 4 {
			return nil, fmt.Errorf("%s line %d: want time_s,server,cpu,ram_mb", path, line)
		}
		at, err1 := strconv.ParseFloat(rec[0], 64)
		cpu, err2 := strconv.ParseFloat(rec[2], 64)
		ram, err3 := strconv.ParseFloat(rec[3], 64)
		if err1 != nil || err2 != nil || err3 != nil || at < 0 || cpu < 0 || ram < 0 {
			return nil, fmt.Errorf("%s line %d: bad number in %v", path, line, rec)
		}
		idx, ok := byName[rec[1]]
		if !ok {
			n, err := strconv.Atoi(rec[1])
			if err != nil || n < 0 || n >= len(servers) {
				return nil, fmt.Errorf("%s line %d: unknown server %q", path, line, rec[1])
			}
			idx = n
		}
		rows = append(rows, csvRow{at: time.Duration(at * float64(time.Second)), server: idx, cpu: cpu, ram: ram})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].at < rows[j].at })
	return &csvTrace{rows: rows}, nil
}

func (w *csvTrace) Update(t time.Duration, set func(int, float64, float64)) {
	for w.next < len(w.rows) && w.rows[w.next].at <= t {
		r := w.rows[w.next]
		set(r.server, r.cpu, r.ram)
		w.next++
	}
}

// DefaultFlapPeriod is flapping's period when the spec gives none.
const DefaultFlapPeriod = 10 * time.Minute

// The flapping workload's figures: FlapShare of the servers swing
// between FlapLow and FlapHigh of their vCPUs; the others keep a demand
// drawn once (mean SteadyMean, deviation SteadySD, clipped to [0, 1]).
const (
	FlapShare  = 0.25
	FlapLow    = 0.1
	FlapHigh   = 1.0
	SteadyMean = 0.5
	SteadySD   = 0.15
)

// flapping is demand that swings: FlapShare of the servers alternate
// between FlapLow and FlapHigh of their vCPUs, each half period, each
// with its own phase (drawn once); the rest keep a steady demand. A host
// crosses its overload threshold when its flapping servers happen to be
// high together and falls back half a period later: relief that moves a
// server for it may move it again, or back, when the phases turn.
type flapping struct {
	servers []ServerSpec
	half    time.Duration
	flaps   []bool
	high    []bool
	next    []time.Duration // the next flip of a flapping server
	steady  []float64       // fraction of vCPUs of a steady server
	started bool
}

func newFlapping(servers []ServerSpec, rng *rand.Rand, period time.Duration) *flapping {
	w := &flapping{servers: servers, half: max(period/2, time.Second), flaps: make([]bool, len(servers)), high: make([]bool, len(servers)),
		next: make([]time.Duration, len(servers)), steady: make([]float64, len(servers))}
	for i := range servers {
		if rng.Float64() < FlapShare {
			w.flaps[i] = true
			// Phase: somewhere in the period; high first for half of them.
			w.high[i] = rng.Intn(2) == 0
			w.next[i] = time.Duration(rng.Int63n(int64(w.half)))
			continue
		}
		w.steady[i] = math.Min(1, math.Max(0, rng.NormFloat64()*SteadySD+SteadyMean))
	}
	return w
}

func (w *flapping) level(i int) float64 {
	switch {
	case !w.flaps[i]:
		return w.steady[i]
	case w.high[i]:
		return FlapHigh
	}
	return FlapLow
}

func (w *flapping) Update(t time.Duration, set func(int, float64, float64)) {
	for i, s := range w.servers {
		changed := !w.started
		for w.flaps[i] && t >= w.next[i] {
			w.high[i], w.next[i], changed = !w.high[i], w.next[i]+w.half, true
		}
		if changed {
			set(i, w.level(i)*float64(s.VCPUs), 0.7*float64(s.RAMMB))
		}
	}
	w.started = true
}
