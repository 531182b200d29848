// Package cgroup is a nova.DemandSource for the local compute host that
// reads cgroup v2 accounting of libvirt's QEMU machine scopes:
//
//	<root>/machine.slice/machine-qemu\x2d<N>\x2d<domain>.scope/cpu.stat       usage_usec
//	<root>/machine.slice/machine-qemu\x2d<N>\x2d<domain>.scope/memory.current bytes
//
// A scope is mapped to its Nova server UUID (Nova gives the libvirt
// domain the instance's UUID) through, in order: the configured Mapping
// (domain name to UUID), the live domain XML in /run/libvirt/qemu (by
// domain id N, then name), and the persistent XML in /etc/libvirt/qemu
// (by name). Scopes that map to no server are not Nova's and are ignored.
//
// CPU is a rate: the first call that sees a scope records its baseline
// and leaves the server out of the map (unknown demand); later calls
// return usage_usec delta / wall-clock delta in cores. RAM is
// memory.current in MB. A scope that vanishes while it is read (the
// guest stopped or left) is skipped; any other read failure fails the
// call.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// Config of the cgroup source.
type Config struct {
	// Root is the cgroup v2 mount. Default /sys/fs/cgroup.
	Root string
	// Slice is the slice holding the machine scopes, relative to Root.
	// Default machine.slice.
	Slice string
	// DomainDirs are the directories of libvirt domain XML files, live
	// state first. Default /run/libvirt/qemu, /etc/libvirt/qemu. Missing
	// directories are skipped.
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
		Slice:      "machine.slice",
		DomainDirs: []string{"/run/libvirt/qemu", "/etc/libvirt/qemu"},
	}
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Root == "" {
		errs = append(errs, errors.New("demand/cgroup: root is empty"))
	}
	if c.Slice == "" || filepath.IsAbs(c.Slice) || strings.Contains(c.Slice, "..") {
		errs = append(errs, fmt.Errorf("demand/cgroup: slice %q must be a path relative to the root", c.Slice))
	}
	for name, id := range c.Mapping {
		if name == "" || id == "" {
			errs = append(errs, fmt.Errorf("demand/cgroup: mapping %q -> %q has an empty side", name, id))
		}
	}
	return errors.Join(errs...)
}

// Source is the cgroup demand source; safe for concurrent use.
type Source struct {
	cfg Config
	now func() time.Time

	mu   sync.Mutex
	prev map[string]sample // by scope directory name
}

type sample struct {
	usageUsec uint64
	at        time.Time
	cpu       float64 // the rate measured up to at
	known     bool    // cpu is measured (not a baseline)
}

// minWindow: a call within this of the previous measurement answers the
// previous rate and keeps the baseline. Several callers share one source
// (the monitor every second, the executor's re-checks and the agents
// asking over the bus); two calls a few microseconds apart would
// otherwise measure a rate over nothing (0, or unknown) and spoil the
// next caller's window too.
const minWindow = 500 * time.Millisecond

var _ nova.DemandSource = (*Source)(nil)

// New returns a cgroup source using the wall clock.
func New(cfg Config) (*Source, error) { return NewWithClock(cfg, time.Now) }

// NewWithClock returns a cgroup source reading time from now (tests).
func NewWithClock(cfg Config, now func() time.Time) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, now: now, prev: map[string]sample{}}, nil
}

// scopeRE matches libvirt machine scope names (systemd-escaped: "-" in
// the domain name is "\x2d").
var scopeRE = regexp.MustCompile(`^machine-qemu\\x2d([0-9]+)\\x2d(.+)\.scope$`)

// Demand measures the servers of the local host.
func (s *Source) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	if s.cfg.Host != "" && host != s.cfg.Host {
		return nil, fmt.Errorf("demand/cgroup: measures %s only, asked for %s: %w", s.cfg.Host, host, nova.ErrNotMeasured)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.cfg.Root, s.cfg.Slice)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("demand/cgroup: %w", err)
	}
	doms, err := s.domains()
	if err != nil {
		return nil, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]nova.Demand{}
	seen := map[string]bool{}
	for _, e := range entries {
		m := scopeRE.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		name := unescape(m[2])
		uuid := s.resolve(doms, m[1], name)
		if uuid == "" {
			continue
		}
		usage, ramBytes, err := readScope(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the guest went away while we read
		}
		if err != nil {
			return nil, fmt.Errorf("demand/cgroup: scope %s: %w", e.Name(), err)
		}
		seen[e.Name()] = true
		p, ok := s.prev[e.Name()]
		elapsed := now.Sub(p.at)
		if ok && usage >= p.usageUsec && elapsed < minWindow {
			if p.known { // too soon for a new rate: the last one
				out[uuid] = nova.Demand{CPU: p.cpu, RAMMB: float64(ramBytes) / (1 << 20)}
			}
			continue
		}
		cur := sample{usageUsec: usage, at: now}
		if ok && usage >= p.usageUsec && elapsed > 0 {
			cur.cpu, cur.known = float64(usage-p.usageUsec)/float64(elapsed.Microseconds()), true
			out[uuid] = nova.Demand{CPU: cur.cpu, RAMMB: float64(ramBytes) / (1 << 20)}
		}
		s.prev[e.Name()] = cur // else a baseline (or counter reset): CPU unknown this time
	}
	for k := range s.prev {
		if !seen[k] {
			delete(s.prev, k)
		}
	}
	return out, nil
}

func (s *Source) resolve(d domainIndex, id, name string) string {
	if u := s.cfg.Mapping[name]; u != "" {
		return u
	}
	if u := d.byID[id]; u != "" {
		return u
	}
	return d.byName[name]
}

// readScope reads usage_usec from cpu.stat and memory.current.
func readScope(dir string) (usageUsec, ramBytes uint64, err error) {
	stat, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, 0, err
	}
	found := false
	for _, line := range strings.Split(string(stat), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "usage_usec" {
			if usageUsec, err = strconv.ParseUint(f[1], 10, 64); err != nil {
				return 0, 0, fmt.Errorf("cpu.stat usage_usec: %w", err)
			}
			found = true
		}
	}
	if !found {
		return 0, 0, errors.New("cpu.stat has no usage_usec")
	}
	mem, err := os.ReadFile(filepath.Join(dir, "memory.current"))
	if err != nil {
		return 0, 0, err
	}
	if ramBytes, err = strconv.ParseUint(strings.TrimSpace(string(mem)), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("memory.current: %w", err)
	}
	return usageUsec, ramBytes, nil
}

// unescape undoes systemd's unit name escaping (\xHH).
func unescape(s string) string {
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
// directories win.
func (s *Source) domains() (domainIndex, error) {
	d := domainIndex{byID: map[string]string{}, byName: map[string]string{}}
	for _, dir := range s.cfg.DomainDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.xml"))
		if err != nil {
			return d, fmt.Errorf("demand/cgroup: %w", err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return d, fmt.Errorf("demand/cgroup: %w", err)
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
	return d, nil
}
