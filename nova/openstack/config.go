package openstack

import (
	"errors"
	"fmt"
	"time"
)

// ComputeMicroversion is the compute API microversion of every request
// (see the package documentation for why 2.91).
const ComputeMicroversion = "2.91"

// Config says which cloud to talk to and how.
type Config struct {
	// Cloud is the cloud's name in clouds.yaml (--os-cloud / OS_CLOUD).
	// Required.
	Cloud string
	// CloudsFile is the clouds.yaml to read. "" searches where the
	// openstack CLI does: $OS_CLIENT_CONFIG_FILE, ./clouds.yaml,
	// ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml.
	CloudsFile string
	// Region overrides the cloud's region_name when not "".
	Region string
	// RequestTimeout bounds one HTTP request (including reading its
	// answer). Default 30 s.
	RequestTimeout time.Duration
	// ReadAttempts is how many times a GET is tried when it fails with
	// nova.ErrUnavailable (1 = no retry). Default 4.
	ReadAttempts int
	// RetryBase is the first backoff between read attempts; it doubles
	// up to RetryMax. Defaults 250 ms and 4 s.
	RetryBase time.Duration
	RetryMax  time.Duration
	// GroupCacheTTL is how long the server-group membership index is
	// reused when listing servers (one GET /os-server-groups per TTL),
	// unless a listed server is newer than the index. Default 30 min; 0
	// disables the cache.
	GroupCacheTTL time.Duration
	// InventoryCacheTTL is how long a resource provider's inventories
	// (capacity, reserved, allocation ratios: they change when an
	// operator changes them) are reused; usages are read every time. A
	// host's read is then two requests, not three. Default 10 min; 0
	// disables the cache. A lowered allocation ratio is seen that late
	// by dvms, not by Nova: placement still refuses a migration that does
	// not fit.
	InventoryCacheTTL time.Duration
	// Concurrency bounds the placement requests Hosts makes in parallel
	// (two per host). Default 4.
	Concurrency int
	// ServerMetadataControls honours dvms:pin and dvms:priority set in
	// server metadata, which the server's owner (a tenant) can write.
	// Without it only the flavor's extra specs (operator-owned) count.
	ServerMetadataControls bool
}

// DefaultConfig returns the defaults for the cloud named cloud.
func DefaultConfig(cloud string) Config {
	return Config{
		Cloud:             cloud,
		RequestTimeout:    30 * time.Second,
		ReadAttempts:      4,
		RetryBase:         250 * time.Millisecond,
		RetryMax:          4 * time.Second,
		GroupCacheTTL:     30 * time.Minute,
		InventoryCacheTTL: 10 * time.Minute,
		Concurrency:       4,
	}
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Cloud == "" {
		errs = append(errs, errors.New("openstack: cloud name is empty (set --os-cloud or OS_CLOUD)"))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("openstack: request timeout %s must be positive", c.RequestTimeout))
	}
	if c.ReadAttempts < 1 || c.ReadAttempts > 20 {
		errs = append(errs, fmt.Errorf("openstack: read attempts %d must be in 1..20", c.ReadAttempts))
	}
	if c.RetryBase <= 0 || c.RetryMax < c.RetryBase {
		errs = append(errs, fmt.Errorf("openstack: retry backoff %s..%s must be positive and increasing", c.RetryBase, c.RetryMax))
	}
	if c.GroupCacheTTL < 0 || c.InventoryCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("openstack: group cache TTL %s and inventory cache TTL %s must not be negative", c.GroupCacheTTL, c.InventoryCacheTTL))
	}
	if c.Concurrency < 1 || c.Concurrency > 64 {
		errs = append(errs, fmt.Errorf("openstack: concurrency %d must be in 1..64", c.Concurrency))
	}
	return errors.Join(errs...)
}
