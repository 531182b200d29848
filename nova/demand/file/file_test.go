package file_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/demand/file"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDemand(t *testing.T) {
	want := map[string]nova.Demand{"s1": {CPU: 1.5, RAMMB: 512}, "s2": {CPU: 0, RAMMB: 2048}}
	for _, tc := range []struct{ name, file, body, format string }{
		{"json", "d.json", `{"s1": {"cpu": 1.5, "ram_mb": 512}, "s2": {"cpu": 0, "ram_mb": 2048}}`, ""},
		{"csv with header", "d.csv", "server,cpu,ram_mb\ns1,1.5,512\ns2, 0, 2048\n", ""},
		{"csv without header", "d.csv", "# a comment\ns1,1.5,512\ns2,0,2048\n", ""},
		{"sniffed json", "demand", ` {"s1": {"cpu": 1.5, "ram_mb": 512}, "s2": {"cpu": 0, "ram_mb": 2048}}`, ""},
		{"forced csv", "d.txt", "s1,1.5,512\ns2,0,2048", "csv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, t.TempDir(), tc.file, tc.body)
			s, err := file.New(file.Config{Path: p, Format: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Demand(context.Background(), "compute-1")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) || got["s1"] != want["s1"] || got["s2"] != want["s2"] {
				t.Errorf("demand %v, want %v", got, want)
			}
		})
	}
}

func TestReReadAndHostTemplate(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "compute-1.csv", "s1,1,100\n")
	s, err := file.New(file.DefaultConfig(filepath.Join(dir, "{host}.csv")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := s.Demand(ctx, "compute-1"); err != nil || d["s1"].CPU != 1 {
		t.Fatalf("first read %v, %v", d, err)
	}
	write(t, dir, "compute-1.csv", "s1,3,100\n")
	if d, err := s.Demand(ctx, "compute-1"); err != nil || d["s1"].CPU != 3 {
		t.Errorf("file not re-read: %v, %v", d, err)
	}
	if _, err := s.Demand(ctx, "compute-2"); err == nil {
		t.Errorf("missing file for compute-2: no error")
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, file, body, want string }{
		{"bad json", "d.json", `{"s1": {"cpu": 1`, "unexpected EOF"},
		{"missing ram", "d.json", `{"s1": {"cpu": 1}}`, "want both"},
		{"unknown field", "d.json", `{"s1": {"cpu": 1, "ram_mb": 2, "disk": 3}}`, "unknown field"},
		{"negative", "d.json", `{"s1": {"cpu": -1, "ram_mb": 2}}`, "out of range"},
		{"bad number", "d.csv", "s1,1,100\ns2,x,100\n", "line 2"},
		{"wrong field count", "d.csv", "s1,1\n", "wrong number of fields"},
		{"duplicate", "d.csv", "s1,1,1\ns1,2,2\n", "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := file.New(file.DefaultConfig(write(t, t.TempDir(), tc.file, tc.body)))
			d, err := s.Demand(context.Background(), "h")
			if err == nil || !strings.Contains(err.Error(), tc.want) || d != nil {
				t.Errorf("Demand = %v, %v; want an error about %q and no map", d, err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	err := file.Config{Format: "xml"}.Validate()
	if err == nil || !strings.Contains(err.Error(), "path is empty") || !strings.Contains(err.Error(), `format "xml"`) {
		t.Errorf("Validate() = %v, want both problems", err)
	}
}
