//go:build functional

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
	"github.com/dvms-project/dvms/nova/fakeapi"
)

// TestFunctionalSites runs issue 12's multi-site test bed
// (devstack/testbed/up.sh): 4 sites as network namespaces, one Debian
// nats-server per site joined as a super-cluster whose gateways cross a
// 20 ms (one way) WAN, 4 `dvms agent` processes per site, and nova/fake
// served over HTTP (nova/fakeapi) on the management network, which every
// agent reaches through the real gophercloud client.
//
// Three phases, each with the same kind of events (one host per site
// overloaded at once, every site able to solve its own event): heartbeat
// membership with next_node = vivaldi, then ring, then SWIM membership
// with vivaldi; in the vivaldi phases site 4 is then cut off from the WAN
// and a host on each side of the cut overloaded. It checks that vivaldi
// crosses no site (and at least 72 % fewer than ring when ring crosses
// any), that the cut-off site solves its own event inside itself while
// another site solves its own, and that no server is lost or left
// migrating. Figures are logged as "SITES ...".
func TestFunctionalSites(t *testing.T) {
	if os.Geteuid() != 0 {
		notRun(t, "the multi-site test bed needs root (network namespaces, veth pairs, bridges)")
	}
	for _, c := range []string{"ip", "bridge", "nats-server", "curl", "openssl", "go"} {
		if _, err := exec.LookPath(c); err != nil {
			notRun(t, fmt.Sprintf("the multi-site test bed needs %s: %v", c, err))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin := dvmsBinary(t, ctx)
	tb := upTestbed(t, ctx, bin)
	sc := newSiteCloud(t, ctx, tb)

	phase := func(membership, mode string) *fleet {
		tb.setOption(t, "membership", membership)
		tb.setOption(t, "next_node", mode)
		name := membership + "-" + mode
		f := startSiteFleet(t, tb, bin, name)
		if !holdsWithin(ctx, 2*time.Minute, f.allMembersUp) {
			t.Fatalf("%s: not every agent saw every other up within 2 min (logs %s)", name, f.logDir)
		}
		if mode == "vivaldi" && !holdsWithin(ctx, 2*time.Minute, func() bool { return f.countLogged("coordinate settled") == len(tb.hosts) }) {
			t.Fatalf("%s: %d of %d agents' Vivaldi coordinates settled within 2 min", name, f.countLogged("coordinate settled"), len(tb.hosts))
		}
		return f
	}
	rounds := func(name string) roundResult {
		var r roundResult
		for range 2 {
			var hosts []string
			for s := 1; s <= tb.sites; s++ {
				hosts = append(hosts, sc.busiest(s))
			}
			r.add(sc.overload(t, ctx, name, hosts))
		}
		t.Logf("SITES %s: %d events solved of %d, %d migrations, %d inter-site; time to solve p50 %s max %s",
			name, r.solved, r.events, r.migrations, r.interSite, r.p50(), r.max())
		if r.solved != r.events {
			t.Errorf("%s: %d of %d events solved", name, r.solved, r.events)
		}
		return r
	}
	// Site 4 cut off from the WAN: its agents lose the other sites (and
	// those lose it), and events on both sides of the cut are solved
	// inside their sites.
	cutOff := func(f *fleet, name string) {
		cut := tb.sites
		tb.script(t, ctx, "cut.sh", fmt.Sprint(cut), "on")
		defer tb.script(t, ctx, "cut.sh", fmt.Sprint(cut), "off")
		cutAt := time.Now()
		if !holdsWithin(ctx, time.Minute, func() bool { _, rest := f.deadSeen(cutAt, cut); return rest }) {
			t.Fatalf("%s cut: the other sites did not see site %d's agents dead within a minute (logs %s)", name, cut, f.logDir)
		}
		t.Logf("SITES %s cut: every agent of the other sites saw site %d's dead %s after the cut", name, cut, time.Since(cutAt).Round(100*time.Millisecond))
		r := sc.overload(t, ctx, name+" cut", []string{sc.busiest(cut), sc.busiest(1)})
		// Inside the cut-off site, detection is not needed to solve its
		// own events (vivaldi asks the site's own agents first): how far
		// it got is reported, not required.
		if inside, _ := f.deadSeen(cutAt, cut); inside {
			t.Logf("SITES %s cut: site %d's agents saw every agent outside dead within %s of the cut", name, cut, time.Since(cutAt).Round(100*time.Millisecond))
		} else {
			t.Logf("SITES %s cut: %s after the cut, site %d's agents have not all seen every agent outside dead yet", name, time.Since(cutAt).Round(100*time.Millisecond), cut)
		}
		t.Logf("SITES %s cut: %d events solved of %d (site %d's and site 1's), %d migrations, %d inter-site; time to solve p50 %s max %s",
			name, r.solved, r.events, cut, r.migrations, r.interSite, r.p50(), r.max())
		if r.solved != r.events {
			t.Errorf("%s cut: %d of %d events solved", name, r.solved, r.events)
		}
		if r.interSite != 0 {
			t.Errorf("%s cut: %d inter-site migrations across a cut WAN", name, r.interSite)
		}
	}

	f := phase("heartbeat", "vivaldi")
	viv := rounds("vivaldi")
	cutOff(f, "vivaldi")
	f.stop(t)
	f = phase("heartbeat", "ring")
	ring := rounds("ring")
	f.stop(t)
	if viv.interSite != 0 {
		t.Errorf("vivaldi: %d inter-site migrations although every event's site could solve it alone", viv.interSite)
	}
	if ring.interSite == 0 {
		t.Logf("SITES ring crossed no site in this run: the comparison shows no reduction")
	} else if float64(viv.interSite) > 0.28*float64(ring.interSite) {
		t.Errorf("vivaldi %d inter-site migrations vs ring %d: less than 72 %% fewer", viv.interSite, ring.interSite)
	}
	// The same with SWIM membership (memberlist between the agents'
	// wan0 addresses, the region key) instead of NATS heartbeats.
	f = phase("swim", "vivaldi")
	sw := rounds("swim vivaldi")
	if sw.interSite != 0 {
		t.Errorf("swim vivaldi: %d inter-site migrations although every event's site could solve it alone", sw.interSite)
	}
	cutOff(f, "swim vivaldi")
	f.stop(t)
	sc.checkNoneLost(t, ctx)
}

// testbed is what up.sh made.
type testbed struct {
	dir, scripts string
	sites, per   int
	hosts        []string
	novaAddr     string
	password     string
}

func upTestbed(t *testing.T, ctx context.Context, bin string) *testbed {
	t.Helper()
	dir := os.Getenv("DVMS_TESTBED_DIR")
	if dir == "" {
		dir = "/tmp/dvms-testbed-functional"
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tb := &testbed{dir: dir, scripts: filepath.Join(wd, "..", "..", "devstack", "testbed")}
	// A test bed left by a killed run goes first.
	tb.script(t, ctx, "down.sh")
	t.Cleanup(func() { tb.script(t, context.Background(), "down.sh") })
	tb.script(t, ctx, "up.sh", "4", "4")
	env, err := os.ReadFile(filepath.Join(dir, "testbed.env"))
	if err != nil {
		t.Fatalf("test bed facts: %v", err)
	}
	for _, line := range strings.Split(string(env), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		v = strings.Trim(v, `"`)
		switch k {
		case "DVMS_TESTBED_SITES":
			_, err = fmt.Sscan(v, &tb.sites)
		case "DVMS_TESTBED_PER_SITE":
			_, err = fmt.Sscan(v, &tb.per)
		case "DVMS_TESTBED_NOVA_ADDR":
			tb.novaAddr = v
		case "DVMS_TESTBED_NOVA_PASSWORD":
			tb.password = v
		case "DVMS_TESTBED_HOSTS":
			tb.hosts = strings.Fields(v)
		}
		if err != nil {
			t.Fatalf("testbed.env %s: %v", k, err)
		}
	}
	if tb.sites < 2 || len(tb.hosts) != tb.sites*tb.per || tb.novaAddr == "" || tb.password == "" {
		t.Fatalf("testbed.env incomplete: %+v", tb)
	}
	return tb
}

// script runs one of devstack/testbed's scripts; its output goes to the
// test log, and a failure stops the test with it.
func (tb *testbed) script(t *testing.T, ctx context.Context, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(tb.scripts, name)}, args...)...)
	cmd.Env = append(os.Environ(), "DVMS_TESTBED_DIR="+tb.dir)
	if bin := os.Getenv("DVMS_BIN"); bin != "" {
		cmd.Env = append(cmd.Env, "DVMS_BIN="+bin)
	}
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
}

// setOption rewrites one option (a line "name = value") of every
// agent's config.
func (tb *testbed) setOption(t *testing.T, name, value string) {
	t.Helper()
	for _, h := range tb.hosts {
		p := filepath.Join(tb.dir, "etc", h+".conf")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		found := false
		for i, l := range lines {
			if strings.HasPrefix(l, name+" = ") {
				lines[i], found = name+" = "+value, true
			}
		}
		if !found {
			t.Fatalf("%s has no %s line", p, name)
		}
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func siteOf(host string) int {
	var s, k int
	if _, err := fmt.Sscanf(host, "s%d-c%d", &s, &k); err != nil {
		return 0
	}
	return s
}

// startSiteFleet starts every agent in its site's namespace; logs go to
// the test bed's logs/agent-HOST-NAME.log.
func startSiteFleet(t *testing.T, tb *testbed, bin, name string) *fleet {
	t.Helper()
	f := newFleet(filepath.Join(tb.dir, "logs"))
	for _, h := range tb.hosts {
		logPath := filepath.Join(f.logDir, "agent-"+h+"-"+name+".log")
		lf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		// ip netns exec execs the agent: SIGTERM reaches it.
		cmd := exec.Command("ip", "netns", "exec", fmt.Sprintf("dvtb-s%d", siteOf(h)), bin, "agent",
			"--host", h, "--config", filepath.Join(tb.dir, "etc", h+".conf"))
		cmd.Env = append(os.Environ(), "DVMS_METRICS_LISTEN=")
		f.launch(t, h, cmd, lf, logPath)
	}
	t.Cleanup(func() { f.stop(t) })
	return f
}

// countLogged is how many agents logged msg at least once.
func (f *fleet) countLogged(msg string) int {
	n := 0
	for _, p := range f.logs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), `"message":"`+msg+`"`) {
			n++
		}
	}
	return n
}

// deadSeen tells whether every agent of site cut logged "member dead"
// (heartbeats) or "member dead or left" (SWIM) for every agent outside it
// after at (inside), and every agent outside for every agent inside
// (rest).
func (f *fleet) deadSeen(at time.Time, cut int) (inside, rest bool) {
	inside, rest = true, true
	for h, p := range f.logs {
		fh, err := os.Open(p)
		if err != nil {
			return false, false
		}
		dead := map[string]bool{}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l struct {
				Message string    `json:"message"`
				Member  string    `json:"member"`
				Time    time.Time `json:"time"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && (l.Message == "member dead" || l.Message == "member dead or left") && !l.Time.Before(at.Add(-time.Second)) {
				dead[l.Member] = true
			}
		}
		fh.Close()
		for o := range f.logs {
			if (siteOf(o) == cut) != (siteOf(h) == cut) && !dead[o] {
				if siteOf(h) == cut {
					inside = false
				} else {
					rest = false
				}
			}
		}
	}
	return inside, rest
}

func holdsWithin(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if cond() {
			return true
		}
		time.Sleep(250 * time.Millisecond)
	}
	return cond()
}

// siteCloud is nova/fake behind nova/fakeapi on the test bed's management
// address, with the demand files the agents' file source reads.
type siteCloud struct {
	c      *fake.Cloud
	tb     *testbed
	mu     sync.Mutex
	seen   map[string]bool // migration IDs already counted
	ids    []string
	wrote  error
	demand map[string]float64 // server -> cores
}

const (
	siteHostVCPUs   = 8
	siteServerVCPUs = 4
	siteServerRAM   = 1024
	siteBaseCPU     = 1.0 // 4 servers: half the host
	siteHotHost     = 9.0 // an overloaded host's servers: 9 of 8 cores
	siteServersHost = 4
)

func newSiteCloud(t *testing.T, ctx context.Context, tb *testbed) *siteCloud {
	t.Helper()
	cfg := fake.DefaultConfig()
	c := fake.New(cfg, fake.NewScaledClock(time.Now(), 1))
	sc := &siteCloud{c: c, tb: tb, seen: map[string]bool{}, demand: map[string]float64{}}
	for _, h := range tb.hosts {
		c.AddHost(nova.Host{Name: h, Zone: fmt.Sprintf("site%d", siteOf(h)), VCPUs: siteHostVCPUs, RAMMB: 16384,
			CPUAllocRatio: 4, RAMAllocRatio: 1})
		for i := 1; i <= siteServersHost; i++ {
			id := fmt.Sprintf("%08d-0000-4000-8000-%012d", len(sc.ids)+1, siteOf(h))
			if err := c.AddServer(nova.Server{ID: id, Name: fmt.Sprintf("%s-vm%d", h, i), Host: h, VCPUs: siteServerVCPUs,
				RAMMB: siteServerRAM, Flavor: "dvms.small"}); err != nil {
				t.Fatal(err)
			}
			sc.ids = append(sc.ids, id)
			sc.setDemand(t, id, siteBaseCPU)
		}
	}
	ln, err := net.Listen("tcp", tb.novaAddr)
	if err != nil {
		t.Fatalf("listen for the test bed's Nova on %s: %v", tb.novaAddr, err)
	}
	srv := &http.Server{Handler: fakeapi.New(c, fakeapi.Options{Username: "dvms", ProjectName: "dvms", Password: tb.password}),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	// Migrations end, and the demand files follow placement, every 200 ms.
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			c.Advance()
			err := sc.writeDemand(wctx)
			sc.mu.Lock()
			sc.wrote = err
			sc.mu.Unlock()
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	if !holdsWithin(ctx, 10*time.Second, func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return sc.wrote == nil && fileExists(filepath.Join(tb.dir, "demand", tb.hosts[0]+".json"))
	}) {
		t.Fatalf("demand files not written: %v", sc.wrote)
	}
	return sc
}

func (sc *siteCloud) setDemand(t *testing.T, id string, cpu float64) {
	t.Helper()
	if err := sc.c.SetDemand(id, nova.Demand{CPU: cpu, RAMMB: siteServerRAM}); err != nil {
		t.Fatal(err)
	}
}

// writeDemand writes each host's demand file (file source, JSON) from
// where its servers are now; a rename makes each write atomic.
func (sc *siteCloud) writeDemand(ctx context.Context) error {
	for _, h := range sc.tb.hosts {
		d, err := sc.c.Demand(ctx, h)
		if err != nil {
			return fmt.Errorf("demand of %s: %w", h, err)
		}
		out := map[string]map[string]float64{}
		for id, v := range d {
			out[id] = map[string]float64{"cpu": v.CPU, "ram_mb": v.RAMMB}
		}
		b, _ := json.Marshal(out)
		p := filepath.Join(sc.tb.dir, "demand", h+".json")
		if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			return err
		}
	}
	return nil
}

type roundResult struct {
	events, solved, migrations, interSite int
	times                                 []time.Duration
}

func (r *roundResult) add(o roundResult) {
	r.events += o.events
	r.solved += o.solved
	r.migrations += o.migrations
	r.interSite += o.interSite
	r.times = append(r.times, o.times...)
}

func (r roundResult) p50() time.Duration {
	if len(r.times) == 0 {
		return 0
	}
	ts := slices.Clone(r.times)
	slices.Sort(ts)
	return ts[len(ts)/2].Round(10 * time.Millisecond)
}

func (r roundResult) max() time.Duration {
	if len(r.times) == 0 {
		return 0
	}
	return slices.Max(r.times).Round(10 * time.Millisecond)
}

// overload makes every given host overloaded at once (its servers share
// siteHotHost cores), waits until none is overloaded and no migration runs, then
// puts every server back at siteBaseCPU. It counts the migrations that
// ended meanwhile, and those between sites.
func (sc *siteCloud) overload(t *testing.T, ctx context.Context, what string, hosts []string) roundResult {
	t.Helper()
	r := roundResult{events: len(hosts)}
	start := time.Now()
	for _, h := range hosts {
		on := sc.c.ServersOn(h)
		if len(on) < 3 {
			t.Fatalf("%s: %s holds %d servers: too few to overload it", what, h, len(on))
		}
		for _, s := range on {
			sc.setDemand(t, s.ID, siteHotHost/float64(len(on)))
		}
	}
	solvedAt := map[string]time.Duration{}
	holdsWithin(ctx, 3*time.Minute, func() bool {
		for _, h := range hosts {
			if _, ok := solvedAt[h]; !ok && !sc.c.Overloaded(h) {
				solvedAt[h] = time.Since(start)
			}
		}
		return len(solvedAt) == len(hosts) && !sc.migrating(ctx)
	})
	for _, h := range hosts {
		if d, ok := solvedAt[h]; ok && !sc.c.Overloaded(h) {
			r.solved++
			r.times = append(r.times, d)
		} else {
			t.Logf("%s: %s still overloaded after 3 min", what, h)
		}
	}
	for _, id := range sc.ids {
		ms, err := sc.c.Migrations(ctx, id)
		if err != nil {
			t.Fatalf("migrations of %s: %v", id, err)
		}
		for _, m := range ms {
			if !m.Terminal() || sc.seen[m.ID] {
				continue
			}
			sc.seen[m.ID] = true
			if m.Status != nova.MigrationCompleted {
				t.Logf("%s: migration %s of %s %s -> %s ended %s", what, m.ID, id, m.Source, m.Dest, m.Status)
				continue
			}
			r.migrations++
			if siteOf(m.Source) != siteOf(m.Dest) {
				r.interSite++
				t.Logf("%s: inter-site migration of %s: %s -> %s", what, id, m.Source, m.Dest)
			}
		}
	}
	for _, id := range sc.ids {
		sc.setDemand(t, id, siteBaseCPU)
	}
	return r
}

// busiest is site s's host with the most servers (the first by name
// among equals): the next to overload.
func (sc *siteCloud) busiest(s int) string {
	best, n := "", -1
	for _, h := range sc.tb.hosts {
		if siteOf(h) == s {
			if k := len(sc.c.ServersOn(h)); k > n {
				best, n = h, k
			}
		}
	}
	return best
}

func (sc *siteCloud) migrating(ctx context.Context) bool {
	for _, id := range sc.ids {
		s, err := sc.c.Server(ctx, id)
		if err != nil || s.TaskState != "" || s.Status != "ACTIVE" {
			return true
		}
	}
	return false
}

// checkNoneLost: every server is ACTIVE on a host of the test bed, with
// no task in progress.
func (sc *siteCloud) checkNoneLost(t *testing.T, ctx context.Context) {
	t.Helper()
	var bad []string
	for _, id := range sc.ids {
		s, err := sc.c.Server(ctx, id)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", id, err))
		} else if s.Status != "ACTIVE" || s.TaskState != "" || !slices.Contains(sc.tb.hosts, s.Host) {
			bad = append(bad, fmt.Sprintf("%s: %s/%s on %q", id, s.Status, s.TaskState, s.Host))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("servers lost or left half-moved: %s", strings.Join(bad, "; "))
	}
}
