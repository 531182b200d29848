// Package doc holds the project's documentation (doc/source, Sphinx
// layout) and the checks that keep it a manual rather than a lab notebook:
// README.rst stays short, and neither it nor the docs nor the release
// notes cite commit hashes, issue numbers or dates of measurements. What
// changed between versions goes in releasenotes/notes; the history of the
// code is in git.
package doc

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeMaxLines is the most README.rst may hold: what dvms is, one
// picture, the two commands, the deployment in five steps, links.
const readmeMaxLines = 200

// root is the repository's top, from this package's directory.
const root = ".."

// history matches what belongs to git, not to the manual: issue numbers,
// commit hashes named as such, dates of runs.
var history = regexp.MustCompile(`(?i)\bissues? #?[0-9]+|\(#[0-9]+\)|\bcommits? [0-9a-f]{7,40}\b|\bat [0-9a-f]{7,40}\b|\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\b`)

// hexWord is a bare word of 7 to 40 hex digits: a commit hash when it has
// both digits and letters (a number has no letters, a word no digits).
// Words glued to '-', '.', '/' or '_' (request ids, file names) are not
// taken for hashes.
var hexWord = regexp.MustCompile(`(^|[\s(\[,;:'"` + "`" + `])([0-9a-fA-F]{7,40})([\s)\],;:'"` + "`" + `]|\.(\s|$)|$)`)

var hasDigit, hasHexLetter = regexp.MustCompile(`[0-9]`), regexp.MustCompile(`[a-fA-F]`)

// notHashes are hex-looking words that are names.
var notHashes = map[string]bool{"ed25519": true}

// historyProblems returns "path:line: what" for every line of text that
// cites history.
func historyProblems(path, text string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := history.FindString(line); m != "" {
			out = append(out, fmt.Sprintf("%s:%d: %q cites history (issue number, commit or date): %s", path, n, m, strings.TrimSpace(line)))
			continue
		}
		for _, m := range hexWord.FindAllStringSubmatch(line, -1) {
			if w := m[2]; hasDigit.MatchString(w) && hasHexLetter.MatchString(w) && !notHashes[strings.ToLower(w)] {
				out = append(out, fmt.Sprintf("%s:%d: %q looks like a commit hash: %s", path, n, w, strings.TrimSpace(line)))
				break
			}
		}
	}
	return out
}

// docFiles are README.rst, the text files under doc/ (the built HTML
// excepted) and the release notes, relative to the repository's top.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.rst"}
	for _, dir := range []string{"doc", "releasenotes"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "build" || d.Name() == "_build") {
				return filepath.SkipDir
			}
			switch filepath.Ext(p) {
			case ".rst", ".py", ".yaml", ".txt":
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("listing %s: %v", dir, err)
		}
	}
	return files
}

// README.rst is for a newcomer: at most 200 lines.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.rst"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(b), "\n")
	if !strings.HasSuffix(string(b), "\n") {
		lines++
	}
	if lines > readmeMaxLines {
		t.Errorf("README.rst:%d: README.rst has %d lines, at most %d: move the rest to doc/source", readmeMaxLines+1, lines, readmeMaxLines)
	}
}

// No commit hashes, issue numbers or dated runs in the README, the docs
// or the release notes.
func TestDocsCiteNoHistory(t *testing.T) {
	files := docFiles(t)
	if len(files) < 10 {
		t.Fatalf("found only %d documentation files (%v): is doc/source there?", len(files), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range historyProblems(f, string(b)) {
			t.Error(p)
		}
	}
}

// The checks catch what they are meant to, and leave request ids, file
// names and figures alone.
func TestHistoryPatterns(t *testing.T) {
	for _, c := range []struct {
		line string
		bad  bool
	}{
		{"measured on main at 77d3e60 with relief", true},
		{"see commit 5306cb1 for the fix", true},
		{"the fix (ae286df) made it 0", true},
		{"issue 14's figures", true},
		{"Issues 9 and 10", true},
		{"fixed in (#12)", true},
		{"seeds 1 to 3, 2026-11-26", true},
		{"1,000 hosts, 10,000 servers, 19 min 47 s", false},
		{"req-884a24a4-... req-fb180daf-...", false},
		{"ev-compute-1-toyuwp089bc3d1-1 overload", false},
		{"30,000,000 of 30,000,000 samples, 1000000 servers", false},
		{"a deadbeef word and a decade", false},
		{"signed with its ed25519 key", false},
		{"the tissue 3 cells", false},
	} {
		got := len(historyProblems("x", c.line)) > 0
		if got != c.bad {
			t.Errorf("%q: flagged %v, want %v", c.line, got, c.bad)
		}
	}
}

// reno tells release notes apart by the hex id that ends each file name
// (<slug>-<id>.yaml): two notes with one id are read as one note renamed,
// and one of them is silently lost from the release notes.
func TestReleaseNotesHaveUniqueIDs(t *testing.T) {
	names, err := filepath.Glob(filepath.Join(root, "releasenotes", "notes", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no release notes under releasenotes/notes")
	}
	name := regexp.MustCompile(`^[a-z0-9-]+-([0-9a-f]{8,})\.yaml$`)
	seen := map[string]string{}
	for _, p := range names {
		base := filepath.Base(p)
		m := name.FindStringSubmatch(base)
		if m == nil {
			t.Errorf("%s: a release note is named <slug>-<hex id>.yaml (reno new SLUG writes one)", base)
			continue
		}
		if other, ok := seen[m[1]]; ok {
			t.Errorf("%s and %s share the id %s: reno keeps only one of them", other, base, m[1])
		}
		seen[m[1]] = base
	}
}
