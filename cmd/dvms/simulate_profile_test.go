package main

import (
	"os"
	"path/filepath"
	"testing"
)

// --cpuprofile writes a profile once stopped; no path, nothing.
func TestStartCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("no profile written: %v", err)
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "no", "such", "dir")); err == nil {
		t.Error("unwritable profile path accepted")
	}
	stop, err = startCPUProfile("")
	if err != nil || stop() != nil {
		t.Error("no path: want a no-op")
	}
}
