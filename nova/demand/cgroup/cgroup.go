// Package cgroup is a nova.DemandSource for the local compute host that
// reads the cgroup accounting of libvirt's QEMU guests. It needs no
// setting on any layout a fleet runs; each call finds the guests under
// the cgroup mount (Config.Root) in every hierarchy it has:
//
//   - cgroup v2 (Root has cgroup.controllers), or the hybrid v2 mount
//     Root/unified: CPU from cpu.stat usage_usec, RAM from memory.current;
//   - cgroup v1 controllers: CPU from Root/cpuacct (or cpu,cpuacct)
//     cpuacct.usage, RAM from Root/memory memory.usage_in_bytes;
//
// and in each of them the guests of both libvirt cgroup back-ends:
//
//   - systemd (machined): machine.slice/machine-qemu\x2d<N>\x2d<domain>.scope,
//     the name escaped by systemd (\x2d is "-"); newer libvirt puts QEMU
//     in a libvirt/ child of the scope, which the scope's totals include;
//   - cgroupfs (a libvirtd without systemd): machine/qemu-<N>-<domain>.libvirt-qemu.
//
// A guest's CPU comes from the first hierarchy that has its counter (v2,
// then the hybrid mount, then cpuacct: a plain libvirtd on a hybrid host
// leaves the guest out of cpuacct), its RAM likewise (v2, then v1
// memory, then the hybrid mount).
//
// RAM is the working set, as the kubelet computes it: usage minus the
// inactive file cache (memory.stat inactive_file on v2,
// total_inactive_file on v1), which the kernel reclaims before it
// touches a guest's memory. A guest's RAM is anonymous memory, so this
// is what it really holds; the page cache of the images QEMU read is not.
//
// A guest is mapped to its Nova server by the domain name libvirt gave
// it: Nova names the domain after the instance's instance_name
// (OS-EXT-SRV-ATTR:instance_name, instance-%08x by default, from nova's
// instance_name_template), which the agent's monitor hands the source
// with every listing of the host's servers it reads anyway (ObserveServers:
// no extra Nova request, no file access). libvirt shortens and filters
// the name in the cgroup (qemu-<N>-<name>, 64 characters at most, host
// name characters only); the mapping does the same. Then, for guests
// the listing does not name: the configured Mapping, and the domain XML
// in /run/libvirt/qemu and /etc/libvirt/qemu (the domain's UUID is the
// server's), where the agent may read it (root-only on most hosts:
// unreadable is not an error). Guests that map to no server are not
// Nova's and are ignored.
//
// CPU is a rate: the first call that sees a guest records its baseline
// and leaves the server out of the map (unknown demand); later calls
// return usage delta / wall-clock delta in cores. A guest that vanishes
// while it is read (the guest stopped or left) is skipped; any other read
// failure fails the call.
//
// Blind: when the last listing says the host runs servers and the source
// finds none of them, Demand fails with ErrBlind (saying where it looked
// and what it found) rather than measure zero; Coverage says so too, for
// the agent's log, metrics and `dvms status`.
package cgroup

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// ErrBlind: Nova lists running servers on the host and the source finds
// none of them in the cgroup tree (or cannot name any guest it finds).
var ErrBlind = errors.New("demand/cgroup: blind")

// Config of the cgroup source.
type Config struct {
	// Root is the cgroup mount. Default /sys/fs/cgroup. The layout under
	// it (v2, hybrid or v1; systemd or not) is found on each call.
	Root string
	// Slices are the directories, relative to each hierarchy, that hold
	// the guests. Default machine.slice (systemd) and machine (libvirt's
	// cgroupfs back-end).
	Slices []string
	// DomainDirs are the directories of libvirt domain XML files, live
	// state first. Default /run/libvirt/qemu, /etc/libvirt/qemu. Missing
	// or unreadable directories are skipped.
	DomainDirs []string
	// Mapping maps libvirt domain names (e.g. instance-0000002a) to
	// server UUIDs, before any XML is read. Optional.
	Mapping map[string]string
	// Host, when not "", is the only host this source answers for (it
	// measures the machine it runs on).
	Host string
}

// DefaultConfig returns the configuration of a standard libvirt host.
func DefaultConfig() Config {
	return Config{
		Root:       "/sys/fs/cgroup",
		Slices:     []string{"machine.slice", "machine"},
		DomainDirs: []string{"/run/libvirt/qemu", "/etc/libvirt/qemu"},
	}
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Root == "" {
		errs = append(errs, errors.New("demand/cgroup: root is empty"))
	}
	if len(c.Slices) == 0 {
		errs = append(errs, errors.New("demand/cgroup: no slices"))
	}
	for _, s := range c.Slices {
		if s == "" || filepath.IsAbs(s) || strings.Contains(s, "..") {
			errs = append(errs, fmt.Errorf("demand/cgroup: slice %q must be a path relative to the root", s))
		}
	}
	for name, id := range c.Mapping {
		if name == "" || id == "" {
			errs = append(errs, fmt.Errorf("demand/cgroup: mapping %q -> %q has an empty side", name, id))
		}
	}
	return errors.Join(errs...)
}

// Coverage is what the source found at its last call: the agent logs it
// when it changes, exports it as metrics and shows it in `dvms status`.
type Coverage struct {
	// Listed: servers the last listing says run on the host (-1 before
	// the first listing).
	Listed int `json:"listed"`
	// Measured: of those, the ones found in the cgroup tree.
	Measured int `json:"measured"`
	// Guests: QEMU guest cgroups found (Nova's or not).
	Guests int `json:"guests"`
	// Blind: Listed > 0 and Measured == 0.
	Blind bool `json:"blind"`
	// Layout names where the guests were found, e.g. "v2 machine.slice"
	// or "cpu unified/machine, memory v1 memory/machine".
	Layout string `json:"layout,omitempty"`
	// Detail says why servers are not measured (empty when all are).
	Detail string `json:"detail,omitempty"`
}

// Source is the cgroup demand source; safe for concurrent use.
type Source struct {
	cfg Config
	now func() time.Time

	domainReads atomic.Int64 // directory listings of DomainDirs (tests)

	mu      sync.Mutex
	prev    map[string]sample // by guest (machine name and counter file)
	listing map[string]string // instance_name -> server UUID, from the last listing
	running map[string]bool   // server UUIDs the last listing says run here
	listed  bool              // a listing was observed
	cov     Coverage
}

type sample struct {
	usageNs uint64
	at      time.Time
	cpu     float64 // the rate measured up to at
	known   bool    // cpu is measured (not a baseline)
}

// minWindow: a call within this of the previous measurement answers the
// previous rate and keeps the baseline. Several callers share one source
// (the monitor every second, the executor's re-checks and the agents
// asking over the bus); two calls a few microseconds apart would
// otherwise measure a rate over nothing (0, or unknown) and spoil the
// next caller's window too.
const minWindow = 500 * time.Millisecond

var (
	_ nova.DemandSource    = (*Source)(nil)
	_ nova.ServersObserver = (*Source)(nil)
)

// New returns a cgroup source using the wall clock.
func New(cfg Config) (*Source, error) { return NewWithClock(cfg, time.Now) }

// NewWithClock returns a cgroup source reading time from now (tests).
func NewWithClock(cfg Config, now func() time.Time) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, now: now, prev: map[string]sample{}, cov: Coverage{Listed: -1}}, nil
}

// ObserveServers implements nova.ServersObserver: the servers Nova lists
// on host, with their instance names.
func (s *Source) ObserveServers(host string, servers []nova.Server) {
	if s.cfg.Host != "" && host != s.cfg.Host {
		return
	}
	listing := make(map[string]string, len(servers))
	running := map[string]bool{}
	for _, sv := range servers {
		if sv.InstanceName != "" {
			listing[sv.InstanceName] = sv.ID
		}
		if runs(sv) {
			running[sv.ID] = true
		}
	}
	s.mu.Lock()
	s.listing, s.running, s.listed = listing, running, true
	s.mu.Unlock()
}

// runs says whether Nova's server has a running QEMU on its host.
func runs(sv nova.Server) bool {
	switch sv.Status {
	case nova.StatusActive, nova.StatusMigrating, "PAUSED", "RESCUE", "VERIFY_RESIZE", "REBOOT", "HARD_REBOOT", "PASSWORD":
		return true
	}
	return false
}

// Coverage is what the last call found.
func (s *Source) Coverage() Coverage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cov
}

// Demand measures the servers of the local host.
func (s *Source) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	if s.cfg.Host != "" && host != s.cfg.Host {
		return nil, fmt.Errorf("demand/cgroup: measures %s only, asked for %s: %w", s.cfg.Host, host, nova.ErrNotMeasured)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(s.cfg.Root); err != nil {
		return nil, fmt.Errorf("demand/cgroup: %w", err)
	}
	l := s.detect()
	guests, err := l.guests(s.cfg.Slices)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	listing, running, listed := s.listing, s.running, s.listed
	s.mu.Unlock()

	// Name each guest: the listing, the configured mapping, then the
	// domain XML for those still unnamed (read only when needed).
	var doms *domainIndex
	var xmlNote string
	for _, g := range guests {
		g.uuid = s.cfg.Mapping[g.name]
		if g.uuid == "" {
			g.uuid = byInstanceName(listing, g.id, g.name)
		}
		if g.uuid == "" {
			if doms == nil {
				doms, xmlNote = s.domains()
			}
			if g.uuid = doms.byID[g.id]; g.uuid == "" {
				g.uuid = doms.byName[g.name]
			}
		}
	}

	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]nova.Demand{}
	seen := map[string]bool{}
	found := map[string]bool{}
	var unread []string
	for _, g := range guests {
		if g.uuid == "" {
			continue
		}
		if g.cpu == nil || g.mem == nil {
			unread = append(unread, g.machine)
			continue
		}
		usage, ramBytes, err := g.read()
		if errors.Is(err, fs.ErrNotExist) {
			continue // the guest went away while we read
		}
		if err != nil {
			return nil, fmt.Errorf("demand/cgroup: guest %s: %w", g.machine, err)
		}
		found[g.uuid] = true
		key := g.machine + "|" + g.cpu.dir
		seen[key] = true
		ram := float64(ramBytes) / (1 << 20)
		p, ok := s.prev[key]
		elapsed := now.Sub(p.at)
		if ok && usage >= p.usageNs && elapsed < minWindow {
			if p.known { // too soon for a new rate: the last one
				out[g.uuid] = nova.Demand{CPU: p.cpu, RAMMB: ram}
			}
			continue
		}
		cur := sample{usageNs: usage, at: now}
		if ok && usage >= p.usageNs && elapsed > 0 {
			cur.cpu, cur.known = float64(usage-p.usageNs)/float64(elapsed.Nanoseconds()), true
			out[g.uuid] = nova.Demand{CPU: cur.cpu, RAMMB: ram}
		}
		s.prev[key] = cur // else a baseline (or counter reset): CPU unknown this time
	}
	for k := range s.prev {
		if !seen[k] {
			delete(s.prev, k)
		}
	}
	s.cov = coverage(l, guests, listed, running, found, unread, xmlNote)
	if s.cov.Blind {
		return nil, fmt.Errorf("%w: %s", ErrBlind, s.cov.Detail)
	}
	return out, nil
}

// coverage sums up a call.
func coverage(l layout, guests []*guest, listed bool, running, found map[string]bool, unread []string, xmlNote string) Coverage {
	c := Coverage{Listed: -1, Guests: len(guests), Layout: l.describe(guests)}
	if !listed {
		return c
	}
	c.Listed = len(running)
	var missing []string
	for id := range running {
		if found[id] {
			c.Measured++
		} else {
			missing = append(missing, id)
		}
	}
	c.Blind = c.Listed > 0 && c.Measured == 0
	if len(missing) == 0 {
		return c
	}
	slices.Sort(missing)
	var b strings.Builder
	fmt.Fprintf(&b, "%d of the %d servers nova lists running on this host not found in the cgroup tree (%s)", len(missing), c.Listed, abbrev(missing))
	switch {
	case len(guests) == 0:
		fmt.Fprintf(&b, "; no QEMU guest cgroup under %s in %s (can this process read the cgroup tree?)",
			strings.Join(l.slicesSeen, ", "), l.where())
	default:
		var names []string
		for _, g := range guests {
			if g.uuid == "" {
				names = append(names, g.machine)
			}
		}
		if len(names) > 0 {
			fmt.Fprintf(&b, "; guests named after no listed server: %s", abbrev(names))
		}
	}
	if len(unread) > 0 {
		fmt.Fprintf(&b, "; guests without CPU or memory accounting in %s: %s", l.where(), abbrev(unread))
	}
	if xmlNote != "" {
		b.WriteString("; " + xmlNote)
	}
	c.Detail = b.String()
	return c
}

func abbrev(xs []string) string {
	if len(xs) > 4 {
		return strings.Join(xs[:4], ", ") + fmt.Sprintf(" and %d more", len(xs)-4)
	}
	return strings.Join(xs, ", ")
}

// byInstanceName is the server of the guest libvirt named qemu-<id>-<name>.
func byInstanceName(listing map[string]string, id, name string) string {
	if u := listing[name]; u != "" {
		return u // the common case: nothing filtered nor shortened
	}
	machine := "qemu-" + id + "-" + name
	for inst, u := range listing {
		if MachineName(id, inst) == machine {
			return u
		}
	}
	return ""
}

// hostnameChars are the characters libvirt keeps of a domain name in its
// machine name.
const hostnameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"

// MachineName is the name libvirt gives the cgroup of domain name with
// id (virDomainDriverGenerateMachineName, libvirt 7 and later): "qemu-<id>-"
// then the name's host name characters, a run of dots and dashes kept as
// its first, none leading, 64 characters at most, none trailing.
func MachineName(id, name string) string {
	var b strings.Builder
	b.WriteString("qemu-" + id + "-")
	skip := true
	for i := 0; i < len(name) && b.Len() < 64; i++ {
		c := name[i]
		if c == '.' || c == '-' {
			if !skip {
				b.WriteByte(c)
				skip = true
			}
			continue
		}
		if strings.IndexByte(hostnameChars, c) < 0 {
			continue
		}
		b.WriteByte(c)
		skip = false
	}
	return strings.TrimRight(b.String(), "-.")
}

// ---- layout ----

// kind of a hierarchy's accounting files.
type kind int

const (
	v2       kind = iota // cpu.stat usage_usec; memory.current, memory.stat inactive_file
	v1cpu                // cpuacct.usage (ns)
	v1memory             // memory.usage_in_bytes, memory.stat total_inactive_file
)

// hierarchy is one cgroup mount under Root.
type hierarchy struct {
	dir  string // absolute
	name string // for messages: "v2", "unified", "cpuacct", "memory"
	kind kind
}

// layout is the hierarchies found under Root, in the order a guest's
// CPU and RAM are looked for.
type layout struct {
	root       string
	cpu, mem   []hierarchy
	slicesSeen []string // slices that exist in some hierarchy
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// detect finds the hierarchies under Root.
func (s *Source) detect() layout {
	r := s.cfg.Root
	l := layout{root: r}
	if exists(filepath.Join(r, "cgroup.controllers")) {
		h := hierarchy{dir: r, name: "v2", kind: v2}
		l.cpu, l.mem = append(l.cpu, h), append(l.mem, h)
	}
	var unified *hierarchy
	if u := filepath.Join(r, "unified"); exists(filepath.Join(u, "cgroup.controllers")) {
		unified = &hierarchy{dir: u, name: "unified", kind: v2}
		l.cpu = append(l.cpu, *unified)
	}
	for _, n := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
		if d := filepath.Join(r, n); exists(filepath.Join(d, "cpuacct.usage")) {
			l.cpu = append(l.cpu, hierarchy{dir: d, name: n, kind: v1cpu})
			break // cpu and cpuacct are often links to cpu,cpuacct
		}
	}
	if d := filepath.Join(r, "memory"); exists(filepath.Join(d, "memory.usage_in_bytes")) {
		l.mem = append(l.mem, hierarchy{dir: d, name: "memory", kind: v1memory})
	}
	if unified != nil {
		l.mem = append(l.mem, *unified)
	}
	return l
}

// where lists the hierarchies for messages.
func (l layout) where() string {
	var ns []string
	for _, h := range append(slices.Clone(l.cpu), l.mem...) {
		if !slices.Contains(ns, h.dir) {
			ns = append(ns, h.dir)
		}
	}
	if len(ns) == 0 {
		return l.root + " (no cgroup v2 nor v1 cpuacct/memory hierarchy found there)"
	}
	return strings.Join(ns, ", ")
}

// describe names where the guests' CPU and RAM were read.
func (l layout) describe(guests []*guest) string {
	for _, g := range guests {
		if g.cpu == nil || g.mem == nil {
			continue
		}
		if g.cpu.dir == g.mem.dir {
			return g.cpu.name + " " + g.slice
		}
		return "cpu " + g.cpu.name + "/" + g.slice + ", memory " + g.mem.name + "/" + g.slice
	}
	return ""
}

// guest is one QEMU guest cgroup.
type guest struct {
	machine  string // libvirt's machine name, qemu-<id>-<name>
	id, name string
	slice    string
	rel      string     // its directory relative to a hierarchy
	cpu, mem *hierarchy // where its counters are (nil: nowhere)
	uuid     string
}

var (
	// systemd's scope of a machine, escaped.
	scopeRE = regexp.MustCompile(`^machine-(.+)\.scope$`)
	// libvirt's cgroupfs back-end (the partition escape may prefix "_").
	cgroupfsRE = regexp.MustCompile(`^_?(.+)\.libvirt-qemu$`)
	machineRE  = regexp.MustCompile(`^qemu-([0-9]+)-(.+)$`)
)

// guests lists the QEMU guest cgroups under the slices of every
// hierarchy, each once, with where its counters are.
func (l *layout) guests(sliceNames []string) ([]*guest, error) {
	all := append(slices.Clone(l.cpu), l.mem...)
	byRel := map[string]*guest{}
	var out []*guest
	for _, h := range all {
		for _, sl := range sliceNames {
			entries, err := os.ReadDir(filepath.Join(h.dir, sl))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("demand/cgroup: %w", err)
			}
			if !slices.Contains(l.slicesSeen, sl) {
				l.slicesSeen = append(l.slicesSeen, sl)
			}
			for _, e := range entries {
				if !e.IsDir() {
					continue
				}
				rel := filepath.Join(sl, e.Name())
				if byRel[rel] != nil {
					continue
				}
				var machine string
				if m := scopeRE.FindStringSubmatch(e.Name()); m != nil {
					machine = Unescape(m[1])
				} else if m := cgroupfsRE.FindStringSubmatch(e.Name()); m != nil {
					machine = m[1]
				}
				m := machineRE.FindStringSubmatch(machine)
				if m == nil {
					continue
				}
				g := &guest{machine: machine, id: m[1], name: m[2], slice: sl, rel: rel}
				byRel[rel] = g
				out = append(out, g)
			}
		}
	}
	if len(l.slicesSeen) == 0 {
		l.slicesSeen = sliceNames
	}
	for _, g := range out {
		for i := range l.cpu {
			if h := &l.cpu[i]; exists(filepath.Join(h.dir, g.rel, cpuFile(h.kind))) {
				g.cpu = h
				break
			}
		}
		for i := range l.mem {
			if h := &l.mem[i]; exists(filepath.Join(h.dir, g.rel, memFile(h.kind))) {
				g.mem = h
				break
			}
		}
	}
	return out, nil
}

func cpuFile(k kind) string {
	if k == v1cpu {
		return "cpuacct.usage"
	}
	return "cpu.stat"
}

func memFile(k kind) string {
	if k == v1memory {
		return "memory.usage_in_bytes"
	}
	return "memory.current"
}

// read reads the guest's CPU time (ns) and working set (bytes).
func (g *guest) read() (usageNs, ramBytes uint64, err error) {
	cdir, mdir := filepath.Join(g.cpu.dir, g.rel), filepath.Join(g.mem.dir, g.rel)
	if g.cpu.kind == v1cpu {
		usageNs, err = readUint(filepath.Join(cdir, "cpuacct.usage"))
	} else {
		var us uint64
		us, err = statField(filepath.Join(cdir, "cpu.stat"), "usage_usec")
		usageNs = us * 1000
	}
	if err != nil {
		return 0, 0, err
	}
	usage, inactive := "memory.current", "inactive_file"
	if g.mem.kind == v1memory {
		usage, inactive = "memory.usage_in_bytes", "total_inactive_file"
	}
	if ramBytes, err = readUint(filepath.Join(mdir, usage)); err != nil {
		return 0, 0, err
	}
	cache, err := statField(filepath.Join(mdir, "memory.stat"), inactive)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNoField) {
		return usageNs, ramBytes, nil // no memory.stat: the usage as it is
	}
	if err != nil {
		return 0, 0, err
	}
	if cache > ramBytes {
		cache = ramBytes
	}
	return usageNs, ramBytes - cache, nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return v, nil
}

var errNoField = errors.New("no such field")

// statField reads "name value" from a flat-keyed file (cpu.stat,
// memory.stat).
func statField(path, name string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %s: %w", filepath.Base(path), name, err)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("%s has no %s: %w", filepath.Base(path), name, errNoField)
}

// Unescape undoes systemd's unit name escaping (\xHH, as
// systemd-escape writes it; "-" in a domain name is "\x2d").
func Unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ---- domain XML (fallback) ----

type domainIndex struct {
	byID   map[string]string // live domain id -> UUID
	byName map[string]string // domain name -> UUID
}

type domainXML struct {
	ID   string `xml:"id,attr"`
	Name string `xml:"name"`
	UUID string `xml:"uuid"`
}

// domains reads the domain XML files: <domstatus><domain id=N> in the
// live state directory, <domain> in the persistent one. Earlier
// directories win. Directories or files this process may not read are
// skipped (note says which): the agent runs unprivileged, and libvirt
// keeps them root-only on most hosts.
func (s *Source) domains() (*domainIndex, string) {
	d := &domainIndex{byID: map[string]string{}, byName: map[string]string{}}
	var denied []string
	for _, dir := range s.cfg.DomainDirs {
		s.domainReads.Add(1)
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				denied = append(denied, dir)
			}
			continue
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".xml") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) && !slices.Contains(denied, dir) {
					denied = append(denied, dir)
				}
				continue
			}
			var root struct {
				XMLName xml.Name
				domainXML
				Domain *domainXML `xml:"domain"`
			}
			if err := xml.Unmarshal(data, &root); err != nil {
				continue // not a domain file (libvirt keeps others here)
			}
			dom := root.domainXML
			if root.XMLName.Local == "domstatus" && root.Domain != nil {
				dom = *root.Domain
			} else if root.XMLName.Local != "domain" {
				continue
			}
			dom.UUID = strings.TrimSpace(dom.UUID)
			if dom.UUID == "" {
				continue
			}
			if dom.ID != "" && d.byID[dom.ID] == "" {
				d.byID[dom.ID] = dom.UUID
			}
			if n := strings.TrimSpace(dom.Name); n != "" && d.byName[n] == "" {
				d.byName[n] = dom.UUID
			}
		}
	}
	if len(denied) > 0 {
		return d, "domain XML not readable here: " + strings.Join(denied, ", ")
	}
	return d, ""
}
