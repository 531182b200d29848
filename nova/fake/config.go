package fake

import (
	"errors"
	"fmt"
	"time"
)

// Config tunes the simulated cloud. The zero value is not usable: start
// from DefaultConfig.
type Config struct {
	// Seed seeds the cloud's random sources: ids (UUIDs, local request
	// ids) and fault draws. The same seed and the same sequence of calls
	// give the same cloud. Default 0.
	Seed int64
	// BandwidthMBps is the live-migration bandwidth in MB/s: a move takes
	// MigrationOverhead + RAMMB / BandwidthMBps. Default 1000 (a 4 GiB
	// server takes about 4 s plus the overhead). Must be > 0.
	BandwidthMBps float64
	// MigrationOverhead is the fixed part of a live migration's duration
	// (scheduling, pre-checks, post-migration). Default 1 s. Must be >= 0.
	MigrationOverhead time.Duration
	// FaultRate is the probability, in [0, 1], that an API call fails
	// (HTTP 500, HTTP 409 on actions, or a timeout) and that a live
	// migration that passed scheduling ends in error. Default 0.
	FaultRate float64
	// OverloadCPU and OverloadRAM are the observer's limits, as fractions
	// of a host's physical capacity (VCPUs, RAMMB): at the start of a live
	// migration the destination's demand must stay within them, and
	// Overloaded reports hosts above them. Default 1.0 each. Must be > 0.
	OverloadCPU, OverloadRAM float64
	// APIRate is how many requests per second the region's API (nova-api
	// and placement together) serves, 0 for no limit. Requests beyond it
	// wait in one FIFO queue, each taking 1/APIRate of service, and the
	// call really waits that long in the clock's time when the clock is
	// a Waiter. Default 0.
	APIRate float64
	// APILatency is added to every request's latency (network and the
	// API's own work, not limited by APIRate). Default 0. Must be >= 0.
	APILatency time.Duration
	// GroupCacheTTL mirrors nova/openstack's Config.GroupCacheTTL (how
	// long a client reuses its server-group listing) to charge the same
	// requests. Default 30 min, as there; 0 lists every time.
	GroupCacheTTL time.Duration
	// InventoryCacheTTL mirrors nova/openstack's Config.InventoryCacheTTL
	// (how long a client reuses a provider's inventories). Default
	// 10 min, as there; 0 reads them every time.
	InventoryCacheTTL time.Duration
}

// DefaultConfig returns 1000 MB/s, 1 s overhead, no faults, overload
// limits at 100 % of physical capacity, an unlimited API without latency
// and a 10 s group cache.
func DefaultConfig() Config {
	return Config{BandwidthMBps: 1000, MigrationOverhead: time.Second, OverloadCPU: 1, OverloadRAM: 1,
		GroupCacheTTL: 30 * time.Minute, InventoryCacheTTL: 10 * time.Minute}
}

// Validate returns every problem of c, joined, or nil.
func (c Config) Validate() error {
	var errs []error
	if !(c.BandwidthMBps > 0) {
		errs = append(errs, fmt.Errorf("fake: BandwidthMBps must be > 0, got %v", c.BandwidthMBps))
	}
	if c.MigrationOverhead < 0 {
		errs = append(errs, fmt.Errorf("fake: MigrationOverhead must be >= 0, got %v", c.MigrationOverhead))
	}
	if !(c.FaultRate >= 0 && c.FaultRate <= 1) {
		errs = append(errs, fmt.Errorf("fake: FaultRate must be in [0, 1], got %v", c.FaultRate))
	}
	if !(c.OverloadCPU > 0) {
		errs = append(errs, fmt.Errorf("fake: OverloadCPU must be > 0, got %v", c.OverloadCPU))
	}
	if !(c.OverloadRAM > 0) {
		errs = append(errs, fmt.Errorf("fake: OverloadRAM must be > 0, got %v", c.OverloadRAM))
	}
	if !(c.APIRate >= 0) {
		errs = append(errs, fmt.Errorf("fake: APIRate must be >= 0, got %v", c.APIRate))
	}
	if c.APILatency < 0 {
		errs = append(errs, fmt.Errorf("fake: APILatency must be >= 0, got %v", c.APILatency))
	}
	if c.GroupCacheTTL < 0 || c.InventoryCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("fake: GroupCacheTTL and InventoryCacheTTL must be >= 0, got %v and %v", c.GroupCacheTTL, c.InventoryCacheTTL))
	}
	return errors.Join(errs...)
}

// withDefaults replaces each invalid field by its default.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if !(c.BandwidthMBps > 0) {
		c.BandwidthMBps = d.BandwidthMBps
	}
	if c.MigrationOverhead < 0 {
		c.MigrationOverhead = d.MigrationOverhead
	}
	if !(c.FaultRate >= 0) {
		c.FaultRate = 0
	}
	if c.FaultRate > 1 {
		c.FaultRate = 1
	}
	if !(c.OverloadCPU > 0) {
		c.OverloadCPU = d.OverloadCPU
	}
	if !(c.OverloadRAM > 0) {
		c.OverloadRAM = d.OverloadRAM
	}
	if !(c.APIRate >= 0) {
		c.APIRate = d.APIRate
	}
	if c.APILatency < 0 {
		c.APILatency = d.APILatency
	}
	if c.GroupCacheTTL < 0 {
		c.GroupCacheTTL = d.GroupCacheTTL
	}
	if c.InventoryCacheTTL < 0 {
		c.InventoryCacheTTL = d.InventoryCacheTTL
	}
	return c
}
