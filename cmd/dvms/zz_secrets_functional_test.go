//go:build functional

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Issue 10: no secret of the functional cloud — the clouds.yaml password
// the agents authenticate with, any nkeys seed (agents', operators',
// observer's) — appears in any log line dvms wrote during the tier. The
// file is named to run last in the package, after the tests whose agents,
// scheduler-api and CLI calls wrote those logs.
func TestFunctionalNoSecretInLogs(t *testing.T) {
	dir := os.Getenv("DVMS_FUNC_DIR")
	if dir == "" {
		dir = "/tmp/dvms-functional"
	}
	var secrets []string
	if b, err := os.ReadFile(filepath.Join(dir, "clouds.yaml")); err == nil {
		for _, m := range regexp.MustCompile(`(?m)^\s*password:\s*(\S+)\s*$`).FindAllSubmatch(b, -1) {
			secrets = append(secrets, strings.Trim(string(m[1]), `"'`))
		}
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".key") {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("SU")) {
			secrets = append(secrets, string(bytes.TrimSpace(b)))
		}
		return nil
	})
	if len(secrets) == 0 {
		notRun(t, "no password in "+filepath.Join(dir, "clouds.yaml")+" and no nkeys seed under "+dir)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "dvms-*.log"))
	if len(logs) == 0 {
		notRun(t, "no dvms log under "+filepath.Join(dir, "logs")+" (this test checks what the others wrote)")
	}
	lines := 0
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(b, []byte("\n"))
		for _, s := range secrets {
			if len(s) >= 8 && bytes.Contains(b, []byte(s)) {
				t.Errorf("%s contains a secret (%d characters, starting %q)", l, len(s), s[:2])
			}
		}
	}
	t.Logf("NO SECRET IN LOGS: %d secrets (passwords, nkeys seeds) checked against %d lines of %d dvms logs", len(secrets), lines, len(logs))
}
