// Package file is a nova.DemandSource read from a file on every call:
//
//	JSON: {"<server-id>": {"cpu": 1.5, "ram_mb": 512}, ...}
//	CSV:  server,cpu,ram_mb   (the header line is optional)
//
// cpu is in cores, ram_mb in MB. The path may contain "{host}", replaced
// by the host asked for, so one template serves every host. A missing,
// unreadable or malformed file is an error: nothing is guessed.
package file

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dvms-project/dvms/nova"
)

// Formats.
const (
	FormatAuto = "" // by extension (.json, .csv), else by the first byte
	FormatJSON = "json"
	FormatCSV  = "csv"
)

// Config of the file source.
type Config struct {
	// Path of the demand file; "{host}" is replaced by the host name.
	// Required.
	Path string
	// Format is "json", "csv" or "" (auto). Default "".
	Format string
}

// DefaultConfig returns a config reading path in the format its
// extension says.
func DefaultConfig(path string) Config { return Config{Path: path} }

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("demand/file: path is empty"))
	}
	switch c.Format {
	case FormatAuto, FormatJSON, FormatCSV:
	default:
		errs = append(errs, fmt.Errorf("demand/file: format %q: want json, csv or empty", c.Format))
	}
	return errors.Join(errs...)
}

// Source is the file demand source. It keeps no state and is safe for
// concurrent use.
type Source struct{ cfg Config }

var _ nova.DemandSource = (*Source)(nil)

// New returns a file source.
func New(cfg Config) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg}, nil
}

// Demand reads the file for host.
func (s *Source) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := strings.ReplaceAll(s.cfg.Path, "{host}", host)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("demand/file: %w", err)
	}
	format := s.cfg.Format
	if format == FormatAuto {
		switch strings.ToLower(filepath.Ext(path)) {
		case ".json":
			format = FormatJSON
		case ".csv":
			format = FormatCSV
		default:
			if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
				format = FormatJSON
			} else {
				format = FormatCSV
			}
		}
	}
	var out map[string]nova.Demand
	if format == FormatJSON {
		out, err = parseJSON(data)
	} else {
		out, err = parseCSV(data)
	}
	if err != nil {
		return nil, fmt.Errorf("demand/file: %s: %w", path, err)
	}
	return out, nil
}

func parseJSON(data []byte) (map[string]nova.Demand, error) {
	var raw map[string]struct {
		CPU   *float64 `json:"cpu"`
		RAMMB *float64 `json:"ram_mb"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	out := make(map[string]nova.Demand, len(raw))
	for id, d := range raw {
		if d.CPU == nil || d.RAMMB == nil {
			return nil, fmt.Errorf("server %q: want both cpu and ram_mb", id)
		}
		if err := check(id, *d.CPU, *d.RAMMB); err != nil {
			return nil, err
		}
		out[id] = nova.Demand{CPU: *d.CPU, RAMMB: *d.RAMMB}
	}
	return out, nil
}

func parseCSV(data []byte) (map[string]nova.Demand, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = 3
	r.TrimLeadingSpace = true
	r.Comment = '#'
	out := map[string]nova.Demand{}
	for line := 1; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if line == 1 && strings.EqualFold(strings.TrimSpace(rec[0]), "server") {
			continue
		}
		id := strings.TrimSpace(rec[0])
		cpu, err1 := strconv.ParseFloat(strings.TrimSpace(rec[1]), 64)
		ram, err2 := strconv.ParseFloat(strings.TrimSpace(rec[2]), 64)
		if err := errors.Join(err1, err2); err != nil {
			ln, _ := r.FieldPos(0)
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		if _, dup := out[id]; dup {
			ln, _ := r.FieldPos(0)
			return nil, fmt.Errorf("line %d: server %q listed twice", ln, id)
		}
		if err := check(id, cpu, ram); err != nil {
			return nil, err
		}
		out[id] = nova.Demand{CPU: cpu, RAMMB: ram}
	}
}

func check(id string, cpu, ram float64) error {
	if id == "" {
		return errors.New("empty server id")
	}
	for _, v := range []float64{cpu, ram} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("server %q: demand cpu %v ram_mb %v out of range", id, cpu, ram)
		}
	}
	return nil
}
