// Package promcheck is for tests of a Prometheus /metrics endpoint: it
// scrapes one, parses it with Prometheus's own text parser and, when
// promtool is installed (Debian: the prometheus package), checks it with
// `promtool check metrics`. With DVMS_REQUIRE_PROMTOOL=1 in the
// environment (CI), a missing promtool fails the test instead of
// skipping the check.
package promcheck

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape GETs url (a /metrics endpoint), parses the answer and checks
// it with promtool; it returns the body and the families by name.
func Scrape(t testing.TB, url string) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the Prometheus text parser refuses %s: %v\n%s", url, err, body)
	}
	Promtool(t, body)
	return body, fams
}

// Promtool runs `promtool check metrics` on an exposition; it reports
// whether it ran.
func Promtool(t testing.TB, body []byte) bool {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("DVMS_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("DVMS_REQUIRE_PROMTOOL=1 but promtool is not installed (apt-get install prometheus)")
		}
		t.Log("promtool not installed: promtool check metrics not run")
		return false
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	return true
}
