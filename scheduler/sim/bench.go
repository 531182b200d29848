package sim

// The bench (`dvms bench`): the same simulation with dvms, the
// centralized baseline and the oracle floor, at one or more scales, and
// its tables and figure.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// BenchRow is one run of a bench.
type BenchRow struct {
	Hosts   int     `json:"hosts"`
	Servers int     `json:"servers"`
	Mode    string  `json:"mode"`
	Report  *Report `json:"report"`
	// OverloadVsOracle is the run's overload host-seconds over the
	// oracle's at the same scale (0 when the oracle did not run or had
	// none).
	OverloadVsOracle float64 `json:"overload_vs_oracle"`
}

// Bench runs cfg in each mode at each scale (host count; servers per
// host as cfg's), and returns one row per run and the reports.
func Bench(ctx context.Context, cfg Config, modes []string, scales []int) ([]BenchRow, []*Report, error) {
	perHost := float64(cfg.Servers) / float64(cfg.Hosts)
	var rows []BenchRow
	var reps []*Report
	for _, n := range scales {
		oracle := -1
		for _, mode := range modes {
			run := cfg
			run.Mode, run.Hosts, run.Servers = mode, n, int(perHost*float64(n)+0.5)
			rep, err := Run(ctx, run)
			if err != nil {
				return nil, nil, fmt.Errorf("bench %s at %d hosts: %w", mode, n, err)
			}
			if mode == "oracle" {
				oracle = len(rows)
			}
			rows = append(rows, BenchRow{Hosts: n, Servers: run.Servers, Mode: mode, Report: rep})
			reps = append(reps, rep)
		}
		if oracle >= 0 {
			base := rows[oracle].Report.OverloadSeconds
			for i := range rows {
				if rows[i].Hosts == n && base > 0 {
					rows[i].OverloadVsOracle = round2(rows[i].Report.OverloadSeconds / base)
				}
			}
		}
	}
	return rows, reps, nil
}

// latency is detection to plan: wall milliseconds on the wall clock,
// simulated ones on the virtual clock (where no wall time passes between
// the two but the solver's).
func (r BenchRow) latency() Percentiles {
	if r.Report.Clock == ClockVirtual {
		return r.Report.ProtocolMS
	}
	return r.Report.SolveMS
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// BenchMarkdown is the bench as a Markdown table, one row per run.
func BenchMarkdown(rows []BenchRow) string {
	var b strings.Builder
	b.WriteString("| hosts | servers | mode | valid | events | solved | detection→plan p50 / p99 (ms; simulated with --clock virtual) | messages / event | mean partition | overload (host-s) | × oracle | migrations | Nova req / host-min | violations | wall (s) |\n")
	b.WriteString("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		p := r.Report
		vs := "–"
		if r.OverloadVsOracle > 0 {
			vs = fmt.Sprintf("%.2f", r.OverloadVsOracle)
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %t | %d | %d | %.1f / %.1f | %.1f | %.1f | %.0f | %s | %d | %.2f | %d | %.1f |\n",
			r.Hosts, r.Servers, r.Mode, p.Valid, p.Events.Total, p.Events.Solved, r.latency().P50, r.latency().P99,
			p.Messages.PerEvent, p.Partitions.MeanSize, p.OverloadSeconds, vs, p.Migrations.Total, p.Nova.PerHostMinute,
			p.Safety.Violations, p.WallS)
	}
	return b.String()
}

// WriteBench writes bench.json, bench.md and bench.svg into dir.
func WriteBench(dir string, rows []BenchRow, md string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench --out: %w", err)
	}
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return fmt.Errorf("bench json: %w", err)
	}
	var errs []error
	for name, data := range map[string][]byte{"bench.json": append(js, '\n'), "bench.md": []byte(md), "bench.svg": []byte(BenchSVG(rows))} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("bench --out: %w", err))
		}
	}
	return errors.Join(errs...)
}

// BenchSVG draws a bench's figures against scale, one line per mode, in
// four panels: detection to plan p50, messages per event, overload
// relative to the oracle, mean partition size. Plain SVG, no dependency.
func BenchSVG(rows []BenchRow) string {
	panels := []struct {
		title string
		get   func(BenchRow) float64
	}{
		{"detection→plan p50 (ms)", func(r BenchRow) float64 { return r.latency().P50 }},
		{"messages per event", func(r BenchRow) float64 { return r.Report.Messages.PerEvent }},
		{"overload × oracle's", func(r BenchRow) float64 { return r.OverloadVsOracle }},
		{"mean partition size", func(r BenchRow) float64 { return r.Report.Partitions.MeanSize }},
	}
	colors := map[string]string{"dvms": "#1f77b4", "central": "#d62728", "oracle": "#2ca02c"}
	var modes []string
	var scales []int
	for _, r := range rows {
		if !slices.Contains(modes, r.Mode) {
			modes = append(modes, r.Mode)
		}
		if !slices.Contains(scales, r.Hosts) {
			scales = append(scales, r.Hosts)
		}
	}
	slices.Sort(scales)
	const pw, ph, gap, left, top = 380, 220, 60, 60, 50
	W, H := left+2*(pw+gap), top+2*(ph+gap)+30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">dvms bench: figures against hosts (log scale), one line per mode</text>`+"\n", left)
	// x: log10 of hosts across the scales run (one scale: centred).
	lo, hi := math.Log10(float64(scales[0])), math.Log10(float64(scales[len(scales)-1]))
	for k, p := range panels {
		x0, y0 := float64(left+(k%2)*(pw+gap)), float64(top+(k/2)*(ph+gap))
		x := func(h int) float64 {
			if hi == lo {
				return x0 + pw/2
			}
			return x0 + (math.Log10(float64(h))-lo)/(hi-lo)*pw
		}
		maxY := 0.0
		for _, r := range rows {
			maxY = math.Max(maxY, p.get(r))
		}
		if maxY == 0 {
			maxY = 1
		}
		y := func(v float64) float64 { return y0 + ph - v/maxY*ph }
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="13">%s</text>`+"\n", x0, y0-8, p.title)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", x0, y0, pw, ph)
		for i := 0; i <= 4; i++ {
			v := maxY * float64(i) / 4
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%.3g</text>`+"\n", x0-4, y(v)+4, v)
		}
		for _, h := range scales {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%d</text>`+"\n", x(h), y0+ph+16, h)
		}
		for _, m := range modes {
			var pts []string
			for _, r := range rows {
				if r.Mode == m && (p.get(r) > 0 || k != 2) {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Hosts), y(p.get(r))))
				}
			}
			c := colors[m]
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(pts, " "))
			for _, pt := range pts {
				xy := strings.Split(pt, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], c)
			}
		}
	}
	for i, m := range modes {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			left+i*120, H-16, colors[m], left+20+i*120, H-11, m)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
