package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The tests never write the chart into the package's directory.
func init() { defaultChart = filepath.Join(os.TempDir(), "dvms-test-simulate.svg") }

// `dvms simulate` ends with the one-line verdict, writes its chart where
// it says without --report, and -f json (or the deprecated --json)
// keeps stdout JSON, the verdict on stderr.
func TestSimulateVerdictAndChart(t *testing.T) {
	chart := filepath.Join(t.TempDir(), "chart.svg")
	prev := defaultChart
	defaultChart = chart
	defer func() { defaultChart = prev }()
	small := []string{"dvms", "simulate", "--hosts", "12", "--servers", "120", "--duration", "20s", "--time-scale", "5", "--seed", "3"}
	var out, errOut bytes.Buffer
	code := run(small, &out, &errOut)
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	// A busy machine may starve the run (NOT VALID) or cost it an event:
	// the verdict says so, and the exit code follows it.
	m := verdictRE.FindStringSubmatch(last)
	if m == nil || m[2] == "" || (m[1] == "PASS") != (code == 0) {
		t.Fatalf("exit %d, last line %q, want the verdict with the oracle's overload, exit 0 only for PASS:\n%s%s", code, last, out.String(), errOut.String())
	}
	if m[1] != "PASS" {
		t.Logf("the run did not pass here (a busy machine?): %s", last)
	}
	if !strings.Contains(out.String(), "  chart       "+chart+"\n") {
		t.Errorf("the report does not name the chart %s:\n%s", chart, out.String())
	}
	svg, err := os.ReadFile(chart)
	if err != nil {
		t.Fatalf("no chart at the default path: %v", err)
	}
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Errorf("the chart is not XML: %v", err)
	}
	for _, want := range []string{"oracle's overloaded hosts", "overloaded hosts", xmlText(last)} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("the chart lacks %q", want)
		}
	}

	for _, format := range [][]string{{"-f", "json"}, {"--json"}} {
		out.Reset()
		errOut.Reset()
		// On the virtual clock (0.1 s, not 4 s of wall time): these runs
		// check where the report and the verdict go, which the clock
		// does not change.
		args := append(append([]string{}, small...), append(format, "--clock", "virtual", "--oracle=false", "--report", "")...)
		code := run(args, &out, &errOut)
		var rep struct {
			Mode   string `json:"mode"`
			Safety struct {
				Violations int `json:"violations"`
			} `json:"safety"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Mode != "dvms" {
			t.Errorf("%v: stdout is not the JSON report (%v):\n%s", format, err, out.String())
		}
		// The verdict, then the error of a run that did not pass.
		v := ""
		for _, l := range strings.Split(errOut.String(), "\n") {
			if strings.HasPrefix(l, "verdict: ") {
				v = l
			}
		}
		if m := verdictRE.FindStringSubmatch(v); m == nil || (m[1] == "PASS") != (code == 0) || strings.Contains(v, "oracle") {
			t.Errorf("%v --oracle=false: exit %d, stderr %q, want the verdict without the oracle", format, code, errOut.String())
		}
	}
	if code := run(append(append([]string{}, small...), "--json", "-f", "text"), &out, &errOut); code != exitUsage {
		t.Errorf("--json -f text: exit %d, want %d", code, exitUsage)
	}
}

// verdictRE is the verdict line; the oracle's figure is optional.
var verdictRE = regexp.MustCompile(`^verdict: (PASS|FAIL|NOT VALID)  events solved \d+/\d+ \(\d+\.\d %\)  overload \d+\.\d % of host-time( \(oracle \d+\.\d %\))?  violations \d+  lost \d+`)

func xmlText(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
