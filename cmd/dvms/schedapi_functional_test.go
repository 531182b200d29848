//go:build functional

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dvms-project/dvms/internal/promcheck"
)

// TestFunctionalSchedulerAPI checks dvms as Nova's external scheduler
// (issue 15) on the functional cloud: nova-scheduler loads
// dvms_nova.weigher.DvmsWeigher (devstack/functional/up.sh configures it,
// imported from this checkout) and asks the `dvms scheduler-api` this
// test starts, which hears one `dvms agent` per host over NATS. Every host
// carries one dvms.tiny server, so placement rates them alike; the file
// demand source makes two of them busy (7.5 of 8 cores measured).
//
//   - WithDvms: 16 servers booted by one plain `openstack server create`
//     land on none of the busy hosts; every boot was weighed by dvms.
//   - DuringDrain: a host is disabled for maintenance (the agents drain
//     it) and 16 servers are booted while its moves run: none lands on the
//     drained host nor on a host dvms avoided for moves in flight, and
//     those are the drain's destinations in Nova's migration list.
//   - FailOpen (scheduler-api stopped): 16 boots all succeed, the weigher
//     logs why for each, and Nova's own order puts some on the busy
//     hosts. The weigher then gives every host the same weight, which
//     Nova's normalization turns into 0 for all: Nova's order exactly, as
//     without the weigher (the comparison asked for).
func TestFunctionalSchedulerAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	w, bin := newWorld(t, ctx)
	fc, hosts := w.fc, w.hosts
	url, err := weigherURL(filepath.Join(fc.dir, "etc", "nova.conf"))
	if err != nil {
		notRun(t, fmt.Sprintf("nova-scheduler is not configured with the dvms weigher (devstack/functional/up.sh): %v", err))
	}

	per := map[string]int{}
	for _, h := range hosts {
		per[h] = 1
	}
	w.bootServers(per)
	busy := []string{hosts[1], hosts[4]}
	cpu := map[string]float64{}
	for h, ss := range w.placement() {
		for _, s := range ss {
			cpu[s.ID] = 0.2
			if slices.Contains(busy, h) {
				cpu[s.ID] = 7.5
			}
		}
	}
	w.writeDemand(cpu)
	t.Logf("busy hosts (7.5 of 8 cores measured, 1 of 8 vCPUs in placement like every host): %v", busy)

	env := w.fleetEnv("DVMS_MONITOR_SUMMARY_INTERVAL=5")
	f := startFleet(t, fc, bin, hosts, "sched", env...)
	w.waitMembers(f)
	api := startSchedulerAPI(t, fc, bin, url, env...)
	if !w.eventuallyEvery("scheduler-api has fresh summaries of every host", 2*time.Minute, time.Second, func() bool {
		h, err := api.health(ctx)
		return err == nil && h.Fresh >= len(hosts)
	}) {
		t.Fatalf("scheduler-api lacks fresh summaries after 2 min; logs %s and %s", api.log, f.logDir)
	}
	// What Prometheus scrapes of it: promtool-clean (promtool installed;
	// required with DVMS_REQUIRE_PROMTOOL=1), ready, every host fresh.
	_, fams := promcheck.Scrape(t, "http://"+api.addr+"/metrics")
	gauge := func(name string) float64 {
		if ms := fams[name].GetMetric(); len(ms) > 0 {
			return ms[0].GetGauge().GetValue()
		}
		return -1
	}
	if fresh, ready := gauge("dvms_schedapi_hosts_fresh"), gauge("dvms_schedapi_ready"); fresh < float64(len(hosts)) || ready != 1 {
		t.Errorf("scheduler-api /metrics: %v fresh hosts, ready %v; want %d and 1", fresh, ready, len(hosts))
	}

	t.Run("WithDvms", func(t *testing.T) {
		w.t = t
		on := w.bootNamed("dvmsft-sched-with", 16)
		n := countOn(on, busy)
		if n != 0 {
			t.Errorf("%d of 16 servers landed on the busy hosts %v with the dvms weigher: %v", n, busy, on)
		}
		ds := api.decisions(t, on)
		for id := range on {
			d, ok := ds[id]
			if !ok {
				t.Errorf("server %s was not weighed by scheduler-api (no decision in %s): is the weigher loaded?", id, api.log)
				continue
			}
			for _, b := range busy {
				if d.tier(b) != "tight" {
					t.Errorf("decision for %s ranks busy %s %q, want tight: %v", id, b, d.tier(b), d.Reasons)
				}
			}
		}
		t.Logf("WEIGHER: 16 boots with dvms: %s; busy %v: %d", spread(on), busy, n)
	})
	w.t = t

	t.Run("DuringDrain", func(t *testing.T) {
		w.t = t
		w.duringDrain(f, api, busy)
	})
	w.t = t

	t.Run("FailOpen", func(t *testing.T) {
		w.t = t
		w.deleteNamed("^dvmsft-sched-")
		w.enableAll()
		api.stop(t)
		mark := fileSize(filepath.Join(fc.dir, "logs", "nova-scheduler.log"))
		on := w.bootNamed("dvmsft-sched-open", 16)
		falls := fallbacks(t, filepath.Join(fc.dir, "logs", "nova-scheduler.log"), mark)
		if len(falls) < 16 {
			t.Errorf("the weigher logged %d fallbacks for 16 boots with scheduler-api stopped, want one per boot", len(falls))
		}
		if len(falls) > 0 {
			t.Logf("weigher: %s", falls[0])
		}
		n := countOn(on, busy)
		if n == 0 {
			t.Errorf("Nova's own order put none of 16 servers on the busy hosts %v (%s): the comparison shows nothing", busy, spread(on))
		}
		t.Logf("WEIGHER: 16 boots with scheduler-api stopped (Nova's order): all ACTIVE, %s; busy %v: %d; %d fallbacks logged",
			spread(on), busy, n, len(falls))
	})
	w.t = t
}

// duringDrain disables the non-busy host with the most servers for
// maintenance and boots 16 servers while the agents drain it.
func (w *world) duringDrain(f *fleet, api *schedAPIRun, busy []string) {
	t := w.t
	all := w.listed("^dvmsft-")
	count := map[string]int{}
	for _, h := range all {
		count[h]++
	}
	drained := ""
	for _, h := range w.hosts {
		if !slices.Contains(busy, h) && (drained == "" || count[h] > count[drained]) {
			drained = h
		}
	}
	var leaving []string
	for id, h := range all {
		if h == drained {
			leaving = append(leaving, id)
		}
	}
	if len(leaving) < 2 {
		t.Fatalf("%s has %d servers, want 2 or more to drain: %v", drained, len(leaving), count)
	}
	w.osc("compute", "service", "set", "--disable", "--disable-reason", "maintenance", drained, "nova-compute")
	t.Logf("disabled %s for maintenance (%d servers)", drained, len(leaving))
	if !w.eventuallyEvery("first live migration off "+drained, 2*time.Minute, time.Second, func() bool {
		return slices.ContainsFunc(f.actions(), func(a agentAction) bool {
			return a.From == drained && a.Action == "live-migrate" && slices.Contains(leaving, a.Server)
		})
	}) {
		t.Fatalf("no live migration off %s within 2 min; agent logs in %s", drained, f.logDir)
	}
	on := w.bootNamed("dvmsft-sched-drain", 16)
	if !w.eventuallyEvery(drained+" empty", 5*time.Minute, time.Second, func() bool {
		ss, err := w.fc.cl.Servers(w.ctx, drained)
		return err == nil && len(ss) == 0
	}) {
		t.Fatalf("%s not drained within 5 min; agent logs in %s", drained, f.logDir)
	}
	if n := countOn(on, []string{drained}); n != 0 {
		t.Errorf("%d servers booted onto %s while it was drained", n, drained)
	}
	dests := map[string]bool{}
	for _, m := range w.migrationsFrom(drained) {
		if slices.Contains(leaving, m.Server) {
			dests[m.Dest] = true
		}
	}
	ds := api.decisions(t, on)
	avoidedSome := 0
	for id, h := range on {
		d, ok := ds[id]
		if !ok {
			t.Errorf("server %s was not weighed by scheduler-api", id)
			continue
		}
		avoided := d.avoided()
		if len(avoided) > 0 && len(avoided) < len(d.Hosts) && slices.Contains(avoided, h) {
			t.Errorf("server %s booted onto %s, which dvms avoided: %v", id, h, d.Reasons)
		}
		for _, a := range avoided {
			if r := d.reason(a); strings.Contains(r, "moves in flight") {
				avoidedSome++
				if a != drained && !dests[a] {
					t.Errorf("decision for %s avoided %s for moves in flight (%s), but Nova lists no migration from %s to it (destinations %v)",
						id, a, r, drained, dests)
				}
			}
		}
	}
	if avoidedSome == 0 {
		t.Fatalf("no boot was weighed while the drain's moves were in flight (destinations %v): the check proved nothing; scheduler-api log %s",
			dests, api.log)
	}
	t.Logf("WEIGHER: %d boots during the drain of %s (destinations %v): %s; on %s: 0; hosts avoided for moves in flight %d times, never chosen",
		len(on), drained, keys(dests), spread(on), drained, avoidedSome)
	w.osc("compute", "service", "set", "--enable", drained, "nova-compute")
}

// bootNamed boots n dvms.tiny servers with one plain `openstack server
// create` (Nova's scheduler places them), waits until all are ACTIVE (an
// ERROR fails the test) and returns server id -> host.
func (w *world) bootNamed(name string, n int) map[string]string {
	w.t.Helper()
	start := time.Now()
	w.osc("server", "create", "--flavor", "dvms.tiny", "--image", "dvms-tiny", "--nic", "none",
		"--min", fmt.Sprint(n), "--max", fmt.Sprint(n), name)
	var on map[string]string
	ok := w.eventually(fmt.Sprintf("%d servers %s ACTIVE", n, name), 5*time.Minute, func() bool {
		rows, err := w.serverRows("^" + regexp.QuoteMeta(name) + "-")
		if err != nil {
			return false
		}
		on = map[string]string{}
		for _, r := range rows {
			if r.Status == "ERROR" {
				w.t.Fatalf("server %s (%s) went to ERROR while booting", r.ID, r.Name)
			}
			if r.Status == "ACTIVE" && r.Host != "" {
				on[r.ID] = r.Host
			}
		}
		return len(on) == n && len(rows) == n
	})
	if !ok {
		w.t.Fatalf("%d servers %s not all ACTIVE after 5 min (%d are)", n, name, len(on))
	}
	w.t.Logf("booted %d servers %s in %s: %s", n, name, time.Since(start).Round(time.Second), spread(on))
	return on
}

type serverRow struct {
	ID     string `json:"ID"`
	Name   string `json:"Name"`
	Status string `json:"Status"`
	Host   string `json:"Host"`
}

func (w *world) serverRows(nameRE string) ([]serverRow, error) {
	out, err := w.fc.osc(w.t, w.ctx, "server", "list", "--all-projects", "--long", "--name", nameRE, "-f", "json",
		"-c", "ID", "-c", "Name", "-c", "Status", "-c", "Host")
	if err != nil {
		return nil, err
	}
	var rows []serverRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return nil, fmt.Errorf("server list: %w", err)
	}
	return rows, nil
}

// listed is server id -> host of the servers named by nameRE.
func (w *world) listed(nameRE string) map[string]string {
	w.t.Helper()
	rows, err := w.serverRows(nameRE)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.ID] = r.Host
	}
	return out
}

func countOn(on map[string]string, hosts []string) int {
	n := 0
	for _, h := range on {
		if slices.Contains(hosts, h) {
			n++
		}
	}
	return n
}

// spread is "host=count ..." in host order.
func spread(on map[string]string) string {
	c := map[string]int{}
	for _, h := range on {
		c[h]++
	}
	var parts []string
	for _, h := range keys(c) {
		parts = append(parts, fmt.Sprintf("%s=%d", h, c[h]))
	}
	return strings.Join(parts, " ")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// weigherURL is nova.conf's [dvms] url: where nova-scheduler's weigher
// asks, hence where the test's scheduler-api listens.
func weigherURL(novaConf string) (string, error) {
	data, err := os.ReadFile(novaConf)
	if err != nil {
		return "", err
	}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && section == "dvms" && strings.TrimSpace(k) == "url" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no [dvms] url in %s", novaConf)
}

// ---- the scheduler-api process ----

type schedAPIRun struct {
	cmd  *exec.Cmd
	wait chan error
	addr string // host:port
	log  string
	done bool
}

// startSchedulerAPI runs `dvms scheduler-api` on the address of url,
// logging to $DVMS_FUNC_DIR/logs/dvms-scheduler-api.log.
func startSchedulerAPI(t *testing.T, fc funcCloud, bin, url string, env ...string) *schedAPIRun {
	t.Helper()
	addr := strings.TrimPrefix(url, "http://")
	addr, _, _ = strings.Cut(addr, "/")
	r := &schedAPIRun{addr: addr, log: filepath.Join(fc.dir, "logs", "dvms-scheduler-api.log"), wait: make(chan error, 1)}
	lf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	r.cmd = exec.Command(bin, "scheduler-api", "--config", filepath.Join(fc.dir, "etc", "dvms.conf"), "--listen", addr)
	r.cmd.Env = fc.env(env...)
	r.cmd.Stdout, r.cmd.Stderr = lf, lf
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start scheduler-api: %v", err)
	}
	go func() { r.wait <- r.cmd.Wait() }()
	t.Cleanup(func() { r.stop(t) })
	t.Logf("started dvms scheduler-api on %s (log %s)", addr, r.log)
	return r
}

// stop sends SIGTERM: the service must exit 0 within 30 s.
func (r *schedAPIRun) stop(t *testing.T) {
	if r.done {
		return
	}
	r.done = true
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.wait:
		if err != nil {
			t.Errorf("scheduler-api exited with %v after SIGTERM (log %s)", err, r.log)
		}
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		t.Errorf("scheduler-api did not stop within 30 s of SIGTERM (log %s)", r.log)
	}
	t.Logf("stopped dvms scheduler-api")
}

type schedHealth struct {
	Hosts int `json:"hosts"`
	Fresh int `json:"fresh"`
}

func (r *schedAPIRun) health(ctx context.Context) (schedHealth, error) {
	var h schedHealth
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+"/healthz", nil)
	if err != nil {
		return h, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("healthz: %s", resp.Status)
	}
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// decision is one "scheduling answer" record of scheduler-api's log.
type decision struct {
	Message   string   `json:"message"`
	Event     string   `json:"event"`
	RequestID string   `json:"request_id"`
	Server    string   `json:"server"`
	Hosts     []string `json:"hosts"`
	Reasons   []string `json:"reasons"`
	Reason    string   `json:"reason"`
}

// rankOf splits a reason "HOST: TIER[ (dropped)]: WHY" of host.
func (d decision) rankOf(host string) (tier, why string) {
	for _, r := range d.Reasons {
		h, rest, ok := strings.Cut(r, ": ")
		if !ok || h != host {
			continue
		}
		tier, why, _ = strings.Cut(rest, ": ")
		tier = strings.TrimSuffix(tier, " (dropped)")
		return tier, why
	}
	return "", ""
}

func (d decision) tier(host string) string   { t, _ := d.rankOf(host); return t }
func (d decision) reason(host string) string { _, r := d.rankOf(host); return r }

// avoided lists the candidates dvms avoided.
func (d decision) avoided() []string {
	var out []string
	for _, r := range d.Reasons {
		h, rest, _ := strings.Cut(r, ": ")
		if strings.HasPrefix(rest, "avoided") {
			out = append(out, h)
		}
	}
	return out
}

// decisions are scheduler-api's answers for the servers of on, by server
// (the last one if Nova asked twice).
func (r *schedAPIRun) decisions(t *testing.T, on map[string]string) map[string]decision {
	t.Helper()
	fh, err := os.Open(r.log)
	if err != nil {
		t.Fatalf("scheduler-api log: %v", err)
	}
	defer fh.Close()
	out := map[string]decision{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var d decision
		if json.Unmarshal(sc.Bytes(), &d) != nil || d.Event != "schedule" {
			continue
		}
		if _, ok := on[d.Server]; ok {
			out[d.Server] = d
		}
	}
	return out
}

// ---- nova-scheduler's log ----

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// fallbackRE matches the weigher's warning when it keeps Nova's order.
var fallbackRE = regexp.MustCompile(`dvms_nova\.weigher .*dvms: scheduler-api at \S+ not used \(.*\): Nova's order`)

// fallbacks are the weigher's fail-open warnings in nova-scheduler's log
// after offset from.
func fallbacks(t *testing.T, path string, from int64) []string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatalf("nova-scheduler log: %v", err)
	}
	defer fh.Close()
	if _, err := fh.Seek(from, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if fallbackRE.Match(sc.Bytes()) {
			out = append(out, sc.Text())
		}
	}
	return out
}
