// Package prometheus is a nova.DemandSource reading two operator-written
// PromQL instant queries (GET <url>/api/v1/query?query=...): one giving
// each server's CPU use in cores, one its RAM in bytes, one series per
// server labelled with the server UUID (label UUIDLabel). "$host" in a
// query is replaced by the host asked for, as a PromQL string body.
// For example, with a libvirt exporter:
//
//	sum by (uuid) (rate(libvirt_domain_info_cpu_time_seconds_total{host="$host"}[1m]))
//	sum by (uuid) (libvirt_domain_memory_stats_used_bytes{host="$host"})
//
// A server is in the map only when both queries have it. A failed query,
// an answer that is not a vector, a duplicated server or a value that is
// not a finite non-negative number fails the call.
package prometheus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// Config of the Prometheus source.
type Config struct {
	// URL of the Prometheus server (http://prometheus:9090). Required.
	URL string
	// CPUQuery yields CPU cores per server. Required.
	CPUQuery string
	// RAMQuery yields RAM bytes per server. Required.
	RAMQuery string
	// UUIDLabel is the label holding the server UUID. Default "uuid".
	UUIDLabel string
	// Timeout bounds each query (also sent as Prometheus' timeout).
	// Default 10 s.
	Timeout time.Duration
}

// DefaultConfig returns the defaults; URL and queries are the
// operator's.
func DefaultConfig() Config { return Config{UUIDLabel: "uuid", Timeout: 10 * time.Second} }

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if u, err := url.Parse(c.URL); c.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("demand/prometheus: url %q: want http(s)://host[:port]", c.URL))
	}
	if strings.TrimSpace(c.CPUQuery) == "" {
		errs = append(errs, errors.New("demand/prometheus: CPU query is empty"))
	}
	if strings.TrimSpace(c.RAMQuery) == "" {
		errs = append(errs, errors.New("demand/prometheus: RAM query is empty"))
	}
	if c.UUIDLabel == "" {
		errs = append(errs, errors.New("demand/prometheus: uuid label is empty"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("demand/prometheus: timeout %s must be positive", c.Timeout))
	}
	return errors.Join(errs...)
}

// Source is the Prometheus demand source; safe for concurrent use.
type Source struct {
	cfg  Config
	http *http.Client
}

var _ nova.DemandSource = (*Source)(nil)

// New returns a source using http.DefaultTransport.
func New(cfg Config) (*Source, error) { return NewWithClient(cfg, &http.Client{}) }

// NewWithClient returns a source sending its queries with hc.
func NewWithClient(cfg Config, hc *http.Client) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, http: hc}, nil
}

// Demand runs both queries for host.
func (s *Source) Demand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	cpu, err := s.query(ctx, s.cfg.CPUQuery, host)
	if err != nil {
		return nil, fmt.Errorf("demand/prometheus: CPU query: %w", err)
	}
	ram, err := s.query(ctx, s.cfg.RAMQuery, host)
	if err != nil {
		return nil, fmt.Errorf("demand/prometheus: RAM query: %w", err)
	}
	out := make(map[string]nova.Demand, len(cpu))
	for id, c := range cpu {
		if r, ok := ram[id]; ok {
			out[id] = nova.Demand{CPU: c, RAMMB: r / (1 << 20)}
		}
	}
	return out, nil
}

// hostString escapes host for a PromQL double-quoted string.
func hostString(host string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(host)
}

type answer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// query runs one instant query and returns its value by server UUID.
func (s *Source) query(ctx context.Context, q, host string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	v := url.Values{}
	v.Set("query", strings.ReplaceAll(q, "$host", hostString(host)))
	v.Set("timeout", s.cfg.Timeout.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.URL, "/")+"/api/v1/query?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, err
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("HTTP %d: not a Prometheus answer: %w", resp.StatusCode, err)
	}
	if a.Status != "success" {
		return nil, fmt.Errorf("HTTP %d: %s: %s", resp.StatusCode, a.ErrorType, a.Error)
	}
	if a.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %q, want vector (one series per server)", a.Data.ResultType)
	}
	out := make(map[string]float64, len(a.Data.Result))
	for _, r := range a.Data.Result {
		id := r.Metric[s.cfg.UUIDLabel]
		if id == "" {
			return nil, fmt.Errorf("series %v has no %q label", r.Metric, s.cfg.UUIDLabel)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("server %s has several series: aggregate by %s", id, s.cfg.UUIDLabel)
		}
		str, _ := r.Value[1].(string)
		f, err := strconv.ParseFloat(str, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("server %s: value %v is not a non-negative number", id, r.Value[1])
		}
		out[id] = f
	}
	return out, nil
}
