package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dvms-project/dvms/internal/conf"
	"github.com/dvms-project/dvms/internal/daemon"
)

// samplePath is where the committed sample lives, from cmd/dvms.
const samplePath = "../../etc/dvms/dvms.conf.sample"

// The committed sample is what `dvms config sample` writes today.
func TestSampleIsGenerated(t *testing.T) {
	checkGenerated(t, samplePath, writeSample, "go run ./cmd/dvms config sample --output etc/dvms/dvms.conf.sample")
}

// checkGenerated fails when the committed file at path differs from what
// gen writes from the option table, naming the commands that rewrite it.
func checkGenerated(t *testing.T, path string, gen func(io.Writer), cmd string) {
	t.Helper()
	var b bytes.Buffer
	gen(&b)
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), committed) {
		t.Fatalf("%s is stale: run go generate ./cmd/dvms (or: %s)", path, cmd)
	}
}

// The committed configuration reference is what `dvms config reference`
// writes today: the docs and the sample come from the one table.
func TestReferenceIsGenerated(t *testing.T) {
	checkGenerated(t, referencePath, writeReference, "go run ./cmd/dvms config reference --output doc/source/configuration/reference.rst")
}

// Every option of the table has its entry in the reference, with its
// default and environment variable, and the help is reST-safe.
func TestReferenceListsEveryOption(t *testing.T) {
	var b bytes.Buffer
	writeReference(&b)
	text := b.String()
	for i := range daemon.Options {
		o := &daemon.Options[i]
		entry := "\n``" + o.Name() + "``\n   :Type: "
		idx := strings.Index(text, "\n["+o.Section()+"]\n")
		if idx < 0 || !strings.Contains(text[idx:], entry) {
			t.Errorf("[%s] %s: no entry in the reference", o.Section(), o.Name())
			continue
		}
		if !strings.Contains(text, ":Environment: ``"+o.EnvName()+"``") {
			t.Errorf("[%s] %s: environment variable %s missing", o.Section(), o.Name(), o.EnvName())
		}
	}
}

// fakeEnv is an environment of the KEY=VALUE pairs kv.
var fakeEnv = conf.MapEnv

// load loads text as the configuration file ("" = no file) in the
// environment kv.
func load(t *testing.T, text string, kv ...string) (daemon.Config, error) {
	t.Helper()
	src := daemon.Source{Env: fakeEnv(kv...)}
	if text != "" {
		src.File = filepath.Join(t.TempDir(), "dvms.conf")
		if err := os.WriteFile(src.File, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return daemon.Load(src, "compute-1")
}
