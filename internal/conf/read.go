package conf

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/ini.v1"
)

// Entry is one key of a configuration file.
type Entry struct {
	Section, Key, Value string
	// File the value was read from (a later file overrides an earlier one).
	File string
}

// Read reads the INI file (none when "") and then, when dir is not "",
// every *.conf file of dir in lexical order, as oslo.config reads
// --config-file and --config-dir (kolla and OpenStack-Ansible write
// overrides as such drop-in files): a later key overrides an earlier one.
// The entries come in reading order. A missing dir is an error: a
// deployment that names one expects its overrides to apply.
func Read(file, dir string) ([]Entry, error) {
	files := []string{}
	if file != "" {
		files = append(files, file)
	}
	if dir != "" {
		drop, err := DropIns(dir)
		if err != nil {
			return nil, err
		}
		files = append(files, drop...)
	}
	var out []Entry
	for _, name := range files {
		f, err := ini.LoadSources(ini.LoadOptions{}, name)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", name, err)
		}
		for _, s := range f.Sections() {
			keys := s.Keys()
			if len(keys) == 0 && s.Name() == ini.DefaultSection {
				continue // ini lists an empty [DEFAULT] for every file
			}
			if len(keys) == 0 {
				out = append(out, Entry{Section: s.Name(), File: name}) // an empty section is still checked
			}
			for _, k := range keys {
				out = append(out, Entry{Section: s.Name(), Key: k.Name(), Value: strings.TrimSpace(k.String()), File: name})
			}
		}
	}
	return out, nil
}

// DropIns lists dir's *.conf files in lexical order (hidden files and
// directories skipped).
func DropIns(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("config dir: %w", err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".conf") {
			continue
		}
		out = append(out, filepath.Join(dir, n))
	}
	slices.Sort(out)
	return out, nil
}

// MapEnv is an environment made of KEY=VALUE pairs, a lookup like
// os.LookupEnv: for loading a configuration in an environment other than
// the process's (tests, a unit's Environment= lines).
func MapEnv(kv ...string) func(string) (string, bool) {
	m := make(map[string]string, len(kv))
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}
