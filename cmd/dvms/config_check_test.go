package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dvms-project/dvms/bus/auth"
	"github.com/dvms-project/dvms/internal/daemon"
)

// `dvms config check` refuses exactly the files `dvms agent` refuses at
// start (the same functions run), and accepts the others. Each refused
// file is also fed to `dvms agent`, which must exit 78 with the same
// problem before it connects to anything.
func TestConfigCheckRefusesWhatTheAgentRefuses(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if _, err := auth.GenerateKey(keys, "compute-1"); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-keys") // a keyring without compute-1
	if _, err := auth.GenerateKey(other, "compute-2"); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := "[nova]\nos_cloud = c\n"
	dropDir := filepath.Join(dir, "dvms.conf.d")
	if err := os.Mkdir(dropDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropDir, "50-trial.conf"), []byte("[DEFAULT]\ninsecure_unsigned = yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, text string
		extra      []string
		want       string // "" = accepted
	}{
		{"no keys_dir", base, nil, "keys_dir is not set"},
		{"keys", "[DEFAULT]\nkeys_dir = " + keys + "\n" + base, nil, ""},
		{"not this host's key", "[DEFAULT]\nkeys_dir = " + other + "\n" + base, nil, "keys_dir"},
		{"window overflows", "[DEFAULT]\nkeys_dir = " + keys + "\nmessage_window = 1e10\n" + base, nil, "message_window"},
		{"local arbiter", "[DEFAULT]\ninsecure_unsigned = on\n[consensus]\narbiter = local\n" + base, nil, "arbiter = local"},
		{"local arbiter embedded", "[DEFAULT]\ninsecure_unsigned = on\n[consensus]\narbiter = local\n" + base, []string{"--embedded-nats"}, ""},
		{"drop-in makes it a trial", base, []string{"--config-dir", dropDir}, ""},
		{"bad boolean", "[DEFAULT]\ninsecure_unsigned = maybe\n" + base, nil, "insecure_unsigned"},
	}
	for _, tc := range cases {
		f := write(strings.ReplaceAll(tc.name, " ", "-")+".conf", tc.text)
		args := append([]string{"dvms", "config", "check", "--host", "compute-1", "--config", f}, tc.extra...)
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		switch {
		case tc.want == "" && (code != 0 || !strings.Contains(out.String(), "configuration ok")):
			t.Errorf("%s: exit %d, want ok:\n%s%s", tc.name, code, out.String(), errb.String())
		case tc.want != "" && (code != daemon.ExitConfig || !strings.Contains(errb.String(), tc.want)):
			t.Errorf("%s: exit %d, want %d naming %q:\n%s", tc.name, code, daemon.ExitConfig, tc.want, errb.String())
		}
		if tc.want == "" {
			continue
		}
		// The agent refuses the same file, the same way.
		var aout, aerr bytes.Buffer
		acode := run(append([]string{"dvms", "agent", "--host", "compute-1", "--metrics-listen", "", "--config", f}, tc.extra...), &aout, &aerr)
		if acode != daemon.ExitConfig || !strings.Contains(aerr.String(), tc.want) {
			t.Errorf("%s: dvms agent exit %d, want %d naming %q:\n%s", tc.name, acode, daemon.ExitConfig, tc.want, aerr.String())
		}
	}
}

// --config-dir: the drop-in files override the main file in lexical
// order, and a problem in one of them names the file.
func TestConfigDirOverrides(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "dvms.conf")
	d := filepath.Join(dir, "dvms.conf.d")
	for p, text := range map[string]string{
		main:                          "[DEFAULT]\nregion = A\nsite = s1\n[nova]\nos_cloud = c\n",
		filepath.Join(d, "10-a.conf"): "[DEFAULT]\nregion = B\n",
		filepath.Join(d, "20-b.conf"): "[DEFAULT]\nregion = C\n[scheduler]\npreempt = yes\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := daemon.Load(daemon.Source{File: main, Dir: d, Env: fakeEnv()}, "compute-1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Runtime.Region != "C" || c.Site != "s1" || !c.Agent.Preempt {
		t.Errorf("region %q site %q preempt %v; want C (last drop-in), s1 (main file), true", c.Runtime.Region, c.Site, c.Agent.Preempt)
	}
	bad := filepath.Join(d, "30-bad.conf")
	if err := os.WriteFile(bad, []byte("[scheduler]\ncpu_overload = 3\ncolour = red\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = daemon.Load(daemon.Source{File: main, Dir: d, Env: fakeEnv()}, "compute-1")
	if err == nil || !strings.Contains(err.Error(), `[scheduler] cpu_overload (`+bad+`) = "3"`) || !strings.Contains(err.Error(), "colour: unknown option ("+bad+")") {
		t.Errorf("a bad drop-in: %v", err)
	}
}
