package agentd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/dvms-project/dvms/internal/testbus"
	"github.com/dvms-project/dvms/internal/testwait"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/scheduler/extsched"
	"github.com/dvms-project/dvms/scheduler/extsched/schedapi"
)

// A real Prometheus (Debian's prometheus package) scrapes a fresh agent
// and a scheduler-api: both targets are up, the dashboard's variables
// find the region and the host, and every query of every panel, with the
// variables as Grafana substitutes them, is valid PromQL whose every
// metric selector matches series.
func TestPrometheusScrapesAgentAndSchedulerAPI(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("DVMS_REQUIRE_PROMTOOL") == "1" {
			t.Fatal("DVMS_REQUIRE_PROMTOOL=1 but prometheus is not installed (apt-get install prometheus)")
		}
		t.Skip("prometheus not installed")
	}
	nurl := testbus.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := testAgent(t, ctx, nurl, "r1", func(o *Options, cloud *fake.Cloud) {
		o.MetricsListen, o.Meter = "127.0.0.1:0", cloud.Meter()
	})
	actx, stop := context.WithCancel(ctx)
	defer func() { stop(); _ = a.Wait() }()
	a.Start(actx)

	scfg := schedapi.DefaultConfig()
	scfg.Region = "r1"
	api, err := schedapi.New(extsched.DefaultConfig(), scfg, time.Now, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, sstop := context.WithCancel(ctx)
	sdone := make(chan error, 1)
	go func() { sdone <- api.Serve(sctx, ln) }()
	defer func() { sstop(); <-sdone }()

	dir := t.TempDir()
	promAddr := freeAddr(t)
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"+
		"  - job_name: dvms-agent\n    static_configs:\n      - targets: [%q]\n"+
		"  - job_name: dvms-scheduler-api\n    static_configs:\n      - targets: [%q]\n", a.MetricsAddr(), ln.Addr().String())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	pctx, pstop := context.WithCancel(ctx)
	cmd := exec.CommandContext(pctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		pstop()
		_ = cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", log)
		}
	}()

	base := "http://" + promAddr
	query := func(q string) (result []json.RawMessage, err error) {
		var r struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return nil, err
		}
		if r.Status != "success" {
			return nil, fmt.Errorf("%s: %s", q, r.Error)
		}
		return r.Data.Result, nil
	}
	// Three scrapes of each target, so that rate() over them has points.
	testwait.Until(t, 60*time.Second, "Prometheus scraped both targets three times", func() (bool, string) {
		res, err := query(`count_over_time(up[1m]) >= 3 and up == 1`)
		return err == nil && len(res) == 2, fmt.Sprintf("%d targets up (%v)", len(res), err)
	})

	for v, want := range map[string]string{"region": "r1", "host": "c1"} {
		resp, err := http.Get(base + "/api/v1/label/" + v + "/values?match[]=" + url.QueryEscape(`{__name__=~"dvms_build_info|dvms_schedapi_ready"}`))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Data []string `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		_ = resp.Body.Close()
		if err != nil || len(r.Data) == 0 || r.Data[0] != want {
			t.Errorf("$%s: values %v (%v), want %s", v, r.Data, err, want)
		}
	}

	d := readDashboard(t)
	vars := strings.NewReplacer(`"$region"`, `"r1"`, `"$host"`, `".*"`, `"$scheduler_api"`, `".*"`)
	selector := regexp.MustCompile(`\b(?:dvms|go|process)_[a-z0-9_]+\{[^}]*\}`)
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q := vars.Replace(tg.Expr)
			if _, err := query(q); err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
			}
			for _, sel := range selector.FindAllString(q, -1) {
				n++
				if res, err := query(sel); err != nil || len(res) == 0 {
					t.Errorf("panel %q: %s matches no series (%v)", p.Title, sel, err)
				}
			}
		}
	}
	t.Logf("%d dashboard selectors checked against a real Prometheus", n)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
