//go:build functional

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dvms-project/dvms/internal/daemon"
)

// operatorsView checks, after the drain (kind maintenance) or the
// overload of host, that what an operator sees through `dvms status -f
// json`, `dvms events -f json` and each agent's /metrics matches what Nova
// shows: every live migration `openstack server migration list` lists
// from host is an action done of an event of that kind of host, to the
// same destination, with the Nova request id the agents logged (which the
// drain's check found in `openstack server event list`); the agents'
// counters moved by at least as much.
func (w *world) operatorsView(f *fleet, bin, host, kind string) {
	t := w.t
	dvms := func(args ...string) []byte {
		t.Helper()
		out, err := w.dvms(bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// Nova's side: the completed live migrations off host of this run's
	// servers (the list keeps those of servers deleted since, and --host
	// lists the migrations into host too).
	current := map[string]bool{}
	for _, ss := range w.placement() {
		for _, s := range ss {
			current[s.ID] = true
		}
	}
	migrated := map[string]string{} // server -> destination
	for _, m := range w.migrationsFrom(host) {
		if m.Status == "completed" && m.Type == "live-migration" && m.Source == host && current[m.Server] {
			migrated[m.Server] = m.Dest
		}
	}
	if len(migrated) == 0 {
		t.Fatalf("no completed live migration from %s in Nova", host)
	}
	// Only moves off host: a server may have been live-migrated before
	// in the run (a drain moves servers onto the host overloaded next),
	// with another request id.
	logged := map[string]string{} // server -> Nova request id, from the agents' logs
	for _, a := range f.actions() {
		if a.Action == "live-migrate" && a.NovaRequestID != "" && a.From == host {
			logged[a.Server] = a.NovaRequestID
		}
	}

	// dvms status: every agent answers; the arbiter has a leader and a term.
	var st struct {
		Agents []struct {
			Host, State string
		} `json:"agents"`
		Arbiter []map[string]any `json:"arbiter"`
		Control []map[string]any `json:"control"`
	}
	if out := dvms("status"); json.Unmarshal(out, &st) != nil {
		t.Fatalf("status json:\n%s", out)
	}
	answered := 0
	for _, a := range st.Agents {
		if a.State != "no answer" {
			answered++
		}
	}
	if answered != len(w.hosts) {
		t.Errorf("dvms status: %d of %d agents answered: %+v", answered, len(w.hosts), st.Agents)
	}
	if len(st.Arbiter) == 0 || st.Arbiter[0]["Leader"] == "" || st.Arbiter[0]["Term"] == "" || st.Arbiter[0]["Term"] == nil {
		t.Errorf("dvms status: arbiter without a leader or a term: %v", st.Arbiter)
	}
	if len(st.Control) != 1 || st.Control[0]["Paused"] != false {
		t.Errorf("dvms status: the agents' controls differ or say paused: %v", st.Control)
	}

	// dvms events: the events of host, their actions as Nova shows them.
	// An agent notes an action once it polled its end (a second after
	// Nova): the views converge within a few seconds.
	var problems []string
	check := func() bool {
		problems = nil
		var evs []struct {
			Event, Kind, Host, Outcome string
			Actions                    []map[string]string
		}
		if out := dvms("events", "--host", host); json.Unmarshal(out, &evs) != nil {
			t.Fatalf("events json:\n%s", out)
		}
		seen := map[string]bool{}
		for _, e := range evs {
			if e.Kind != kind || e.Host != host {
				continue
			}
			for _, a := range e.Actions {
				if a["outcome"] != "done" || a["action"] != "live-migrate" {
					continue
				}
				s := a["server"]
				seen[s] = true
				if dest, ok := migrated[s]; ok && ("-> "+dest != a["to"] || a["nova_request_id"] != logged[s] || a["nova_request_id"] == "") {
					problems = append(problems, fmt.Sprintf("%s of event %s: to %q, Nova request id %q; Nova migrated it to %q, the agent logged %q",
						s, e.Event, a["to"], a["nova_request_id"], dest, logged[s]))
				}
			}
		}
		for s := range migrated {
			if !seen[s] {
				problems = append(problems, fmt.Sprintf("Nova live-migrated %s off %s, no %s event shows it done", s, host, kind))
			}
		}
		return len(problems) == 0
	}
	if !w.eventually("dvms events shows what Nova did", 30*time.Second, check) {
		for _, p := range problems {
			t.Errorf("dvms events: %s", p)
		}
	}

	// /metrics of every agent: the counters moved by as much.
	var done, ended, novaReqs float64
	for _, h := range w.hosts {
		m := scrapeAt(t, f.metricsAddr(w, h))
		done += sum(m, "dvms_actions_total", `kind="live-migrate"`, `outcome="done"`)
		ended += sum(m, "dvms_events_ended_total", `kind="`+kind+`"`)
		novaReqs += sum(m, "dvms_nova_requests_total")
	}
	if int(done) < len(migrated) || ended < 1 || novaReqs == 0 {
		t.Errorf("/metrics: %v live migrations done (Nova: %d), %v %s events ended, %v Nova requests", done, len(migrated), ended, kind, novaReqs)
	}
	t.Logf("OPERATORS' VIEW: %d migrations off %s in Nova = actions done of its %s events in dvms events; /metrics: %v done, %v %s events ended",
		len(migrated), host, kind, done, ended, kind)
}

// agentConfig is the agents' configuration ($DVMS_FUNC_DIR/etc/dvms.conf
// and the environment).
func (w *world) agentConfig() daemon.Config {
	w.t.Helper()
	cfg, err := daemon.Load(daemon.Source{File: filepath.Join(w.fc.dir, "etc", "dvms.conf"), Env: os.LookupEnv}, w.hosts[0])
	if err = withoutCloudError(err); err != nil {
		w.t.Fatalf("read the agents' configuration: %v", err)
	}
	return cfg
}

// dvms runs `dvms CMD --nats-url … --region … --timeout 5s -f json ARGS…`
// (CMD: the command's words, as cmdWords counts them; dvms plans approve
// and reject keep their own timeout)
// as an operator would, against the agents' NATS with the cloud's
// environment (the observer key, the server's certificate), and returns
// its standard output; the error says the command and its standard error.
func (w *world) dvms(bin string, args ...string) ([]byte, error) {
	ops := w.ops
	if ops == nil {
		cfg := w.agentConfig()
		ops = &opsEnv{natsURL: cfg.NATSURL, region: cfg.Runtime.Region, env: w.fc.env()}
	}
	n := cmdWords(args) // dvms plans approve: the flags after both words
	args = slices.Concat(args[:n], []string{"--nats-url", ops.natsURL, "--region", ops.region, "-f", "json"}, args[n:])
	if n == 1 { // approve and reject wait for the plan's re-check (their own default)
		args = slices.Insert(args, 1, "--timeout", "5s")
	}
	cmd := exec.CommandContext(w.ctx, bin, args...)
	cmd.Env = ops.env
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return out, fmt.Errorf("dvms %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out, nil
}

// opsEnv is where and how an operator's `dvms status/events` reach a
// fleet's agents: NATS URL, region, environment (observer key, CA).
type opsEnv struct {
	natsURL, region string
	env             []string
}

// metricsAddr is the address host's agent serves /metrics on, from its
// log (each agent listens on a port of its own: metrics_listen port 0).
func (f *fleet) metricsAddr(w *world, host string) string {
	w.t.Helper()
	file, err := os.Open(f.logs[host])
	if err != nil {
		w.t.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct{ Message, Listen string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Message == "serving /metrics and /healthz" {
			return l.Listen
		}
	}
	w.t.Fatalf("agent %s logged no /metrics address (%s)", host, f.logs[host])
	return ""
}
