package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dvms-project/dvms/scheduler/sim"
)

// dvms bench at two scales and three modes writes its JSON, table and
// chart: one row per run, the oracle's overload ratio 1 at each scale.
func TestBenchScalesAndModes(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"dvms", "bench", "--hosts", "10", "--servers", "80", "--duration", "10s", "--time-scale", "10",
		"--arbiter", "local", "--scales", "6,10", "--modes", "dvms,oracle,central", "--out", dir}, &out, &errOut)
	if code != 0 && !strings.Contains(errOut.String(), "not valid") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rows []sim.BenchRow
	data, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 2 scales x 3 modes", len(rows))
	}
	for _, r := range rows {
		if r.Servers != r.Hosts*8 || r.Report == nil || r.Report.Hosts != r.Hosts || r.Report.Mode != r.Mode {
			t.Fatalf("row %+v", r)
		}
		if r.Mode == "oracle" && r.Report.OverloadSeconds > 0 && r.OverloadVsOracle != 1 {
			t.Fatalf("the oracle's own ratio is %v", r.OverloadVsOracle)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(md), "\n"); got != 2+6 || !strings.Contains(out.String(), string(md)) {
		t.Fatalf("table of %d lines (want a header, a rule and 6 rows), printed: %v\n%s", got, strings.Contains(out.String(), string(md)), md)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "bench.svg"))
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(svg))
	lines := 0
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 4*3 {
		t.Fatalf("%d lines in the chart, want 4 panels x 3 modes", lines)
	}
}

func TestBenchRefusesUnknownMode(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"dvms", "bench", "--modes", "dvms,magic"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "magic") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if code := run([]string{"dvms", "bench", "--scales", "10,x"}, &out, &errOut); code != exitUsage {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if code := run([]string{"dvms", "simulate", "--servers", "10", "--vcpu-overcommit", "2"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "give one") {
		t.Fatalf("--servers with --vcpu-overcommit: exit %d: %s", code, errOut.String())
	}
}
