package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/dvms-project/dvms/scheduler"
)

// The grant ledger on disk: an agent restarted while a plan's moves off
// its host still run in Nova would otherwise forget what it granted,
// raise its event again and grant a second plan while the first plan's
// migrations run. With Config.StateDir set, the ledger's grants of the
// partitions that live here are kept in StateDir/grants-HOST.json,
// written (write, fsync, rename) before a grant is answered: a grant not
// on disk is not given. On start, the grants found there are adopted
// like those of a leader the agent gave up on (adopt.go): the agent
// raises no event and joins no partition until Nova says each move
// ended, and records each with its true outcome. A file with no grant
// costs nothing at start: no hold, no Nova request.

// grantsFileV is the file's format version.
const grantsFileV = 1

// grantsOnDisk is the file.
type grantsOnDisk struct {
	V      int           `json:"v"`
	Host   string        `json:"host"`
	Grants []grantOnDisk `json:"grants"`
}

type grantOnDisk struct {
	ID        string           `json:"id"`
	Partition string           `json:"partition"`
	Event     scheduler.Event  `json:"event"`
	Action    scheduler.Action `json:"action"`
	At        time.Time        `json:"at"`
}

// GrantsFile is the file in dir where host's agent keeps its grants.
func GrantsFile(dir, host string) string {
	return filepath.Join(dir, "grants-"+host+".json")
}

// saveLocked writes the ledger's live grants to its file (none: no
// file). Called with l.mu held.
func (l *ledger) saveLocked() error {
	if l.file == "" {
		return nil
	}
	out := grantsOnDisk{V: grantsFileV, Host: l.host, Grants: []grantOnDisk{}}
	for _, m := range []map[string][]granted{l.ended, l.grants} {
		parts := make([]string, 0, len(m))
		for p := range m {
			parts = append(parts, p)
		}
		slices.Sort(parts)
		for _, p := range parts {
			for _, g := range m[p] {
				out.Grants = append(out.Grants, grantOnDisk{ID: g.id, Partition: p, Event: g.ev, Action: g.a, At: g.at})
			}
		}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode grants: %w", err)
	}
	tmp := l.file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("write grants: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, l.file)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write grants %s: %w", l.file, err)
	}
	return nil
}

// restore reads the ledger's file (none: nothing) and takes its grants
// back as ended: their partitions are closed here (no grant for them
// any more) and the grants stay on disk until forget.
func (l *ledger) restore(now time.Time) (grantList, error) {
	if l.file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(l.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read grants: %w", err)
	}
	var in grantsOnDisk
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("grants file %s is not valid (remove it once Nova shows no migration off %s running): %w", l.file, l.host, err)
	}
	if in.V != grantsFileV || in.Host != l.host {
		return nil, fmt.Errorf("grants file %s is version %d of host %q, want version %d of %q (remove it once Nova shows no migration off %s running)",
			l.file, in.V, in.Host, grantsFileV, l.host, l.host)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var gs grantList
	for _, g := range in.Grants {
		if l.ended == nil {
			l.ended, l.closed = map[string][]granted{}, map[string]time.Time{}
		}
		ng := granted{id: g.ID, part: g.Partition, ev: g.Event, a: g.Action, at: g.At}
		l.ended[g.Partition] = append(l.ended[g.Partition], ng)
		l.closed[g.Partition] = now
		gs = append(gs, ng)
	}
	return gs, nil
}

// forget drops the ended grants of parts (adopted, or their leader
// ended them), on disk too.
func (l *ledger) forget(parts []string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range parts {
		n += len(l.ended[p])
		delete(l.ended, p)
	}
	if n == 0 {
		return nil
	}
	return l.saveLocked()
}

// grantList is grants read back from disk.
type grantList []granted

// parts are their partitions.
func (gs grantList) parts() []string {
	var ps []string
	for _, g := range gs {
		if !slices.Contains(ps, g.part) {
			ps = append(ps, g.part)
		}
	}
	return ps
}

// restoreGrants takes back the grants this host's agent gave before it
// (re)started (StateDir), to adopt them before anything else.
func (r *Runner) restoreGrants() (grantList, error) {
	if r.fence.file == "" {
		return nil, nil
	}
	if err := os.MkdirAll(r.cfg.StateDir, 0o750); err != nil {
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	gs, err := r.fence.restore(r.d.Clock.Now())
	if err != nil {
		return nil, err
	}
	if len(gs) > 0 {
		r.log.Warn().Int("granted", len(gs)).Str("file", r.fence.file).
			Msg("started with moves granted before the restart: held until Nova says how they ended")
	}
	return gs, nil
}
