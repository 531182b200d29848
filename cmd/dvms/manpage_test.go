package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// dvms man is generated from the command line: every command is in it,
// with the build's version in the title.
func TestManPageListsEveryCommand(t *testing.T) {
	old := version
	version = "1.2.3-test"
	t.Cleanup(func() { version = old })
	var out, errOut bytes.Buffer
	if code := run([]string{"dvms", "man"}, &out, &errOut); code != 0 {
		t.Fatalf("dvms man: exit %d: %s", code, errOut.String())
	}
	page := out.String()
	if !strings.Contains(page, `.TH dvms 1 "" "dvms 1.2.3-test"`) {
		t.Errorf("title line without the version:\n%.200s", page)
	}
	for _, c := range commands {
		if !c.Hidden && !strings.Contains(page, "\n.SH "+c.Name+"\n") {
			t.Errorf("the man page has no section for %q", c.Name)
		}
	}
	if code := run([]string{"dvms", "man", "extra"}, &out, &errOut); code != exitUsage {
		t.Errorf("dvms man extra: exit %d, want %d", code, exitUsage)
	}
}

// The bash script asks the binary: --generate-bash-completion must list
// the commands (EnableBashCompletion), and the script must be bash's.
func TestCompletion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"dvms", "completion", "bash"}, &out, &errOut); code != 0 {
		t.Fatalf("dvms completion bash: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "complete -o bashdefault -o default -F _dvms_bash_autocomplete dvms\n") {
		t.Errorf("bash script:\n%s", out.String())
	}
	out.Reset()
	// urfave/cli reads the words typed so far from os.Args.
	args := []string{"dvms", "--generate-bash-completion"}
	oldArgs := os.Args
	os.Args = args
	t.Cleanup(func() { os.Args = oldArgs })
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("dvms --generate-bash-completion: exit %d: %s", code, errOut.String())
	}
	words := strings.Fields(out.String())
	for _, want := range []string{"agent", "status", "drain", "man", "completion"} {
		if !strings.Contains(" "+strings.Join(words, " ")+" ", " "+want+" ") {
			t.Errorf("completion words %v lack %q", words, want)
		}
	}
	out.Reset()
	if code := run([]string{"dvms", "completion", "fish"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "complete -c dvms") {
		t.Errorf("dvms completion fish: exit %d:\n%.300s", code, out.String())
	}
	for _, args := range [][]string{{"dvms", "completion"}, {"dvms", "completion", "zsh"}} {
		if code := run(args, &out, &errOut); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}
