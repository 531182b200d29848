package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// benchSVG draws a bench's figures against scale, one line per mode, in
// four panels: detection to plan p50, messages per event, overload
// relative to the oracle, mean partition size. Plain SVG, no dependency.
func benchSVG(rows []benchRow) string {
	panels := []struct {
		title string
		get   func(benchRow) float64
	}{
		{"detection→plan p50 (ms)", func(r benchRow) float64 { return r.latency().P50 }},
		{"messages per event", func(r benchRow) float64 { return r.Report.Messages.PerEvent }},
		{"overload × oracle's", func(r benchRow) float64 { return r.OverloadVsOracle }},
		{"mean partition size", func(r benchRow) float64 { return r.Report.Partitions.MeanSize }},
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
