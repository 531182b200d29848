package openstack

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// Placement resource classes dvms reads.
const (
	classVCPU = "VCPU"
	classRAM  = "MEMORY_MB"
)

type serviceJSON struct {
	ID             string  `json:"id"`
	Binary         string  `json:"binary"`
	Host           string  `json:"host"`
	Zone           string  `json:"zone"`
	Status         string  `json:"status"`
	State          string  `json:"state"`
	DisabledReason *string `json:"disabled_reason"`
	ForcedDown     bool    `json:"forced_down"`
	UpdatedAt      string  `json:"updated_at"`
}

func (s serviceJSON) service() nova.Service {
	out := nova.Service{
		ID: s.ID, Host: s.Host, Status: s.Status, State: s.State,
		ForcedDown: s.ForcedDown, UpdatedAt: parseTime(s.UpdatedAt),
	}
	if s.DisabledReason != nil {
		out.DisabledReason = *s.DisabledReason
	}
	return out
}

type providerJSON struct {
	UUID string `json:"uuid"`
	Name string `json:"name"`
}

type inventoryJSON struct {
	Total           int     `json:"total"`
	Reserved        int     `json:"reserved"`
	AllocationRatio float64 `json:"allocation_ratio"`
}

// computeServices lists nova-compute services, of host when not "".
func (c *Client) computeServices(ctx context.Context, host string) ([]serviceJSON, error) {
	var out struct {
		Services []serviceJSON `json:"services"`
	}
	u := c.compute.ServiceURL("os-services") + query("binary", "nova-compute", "host", host)
	if _, err := c.get(ctx, c.compute, u, &out); err != nil {
		return nil, err
	}
	// Older clouds ignore unknown filters: filter again.
	out.Services = slices.DeleteFunc(out.Services, func(s serviceJSON) bool {
		return s.Binary != "nova-compute" || (host != "" && s.Host != host)
	})
	return out.Services, nil
}

// providers lists placement resource providers, named name when not "".
func (c *Client) providers(ctx context.Context, name string) ([]providerJSON, error) {
	var out struct {
		Providers []providerJSON `json:"resource_providers"`
	}
	u := c.placement.ServiceURL("resource_providers") + query("name", name)
	if _, err := c.get(ctx, c.placement, u, &out); err != nil {
		return nil, err
	}
	return out.Providers, nil
}

// providerOf finds the compute node provider of host: named host, or
// host.<domain> (libvirt names compute nodes by FQDN).
func providerOf(host string, rps []providerJSON) (providerJSON, bool) {
	for _, rp := range rps {
		if rp.Name == host {
			return rp, true
		}
	}
	for _, rp := range rps {
		if strings.HasPrefix(rp.Name, host+".") {
			return rp, true
		}
	}
	return providerJSON{}, false
}

// fillCapacity reads the inventories and usages of provider rp into h.
func (c *Client) fillCapacity(ctx context.Context, h *nova.Host, rp providerJSON) error {
	base := c.placement.ServiceURL("resource_providers", url.PathEscape(rp.UUID))
	inv, ok := c.cachedInventory(rp.UUID)
	if !ok {
		var got struct {
			Inventories map[string]inventoryJSON `json:"inventories"`
		}
		if _, err := c.get(ctx, c.placement, base+"/inventories", &got); err != nil {
			return fmt.Errorf("inventories of %s (provider %s): %w", h.Name, rp.UUID, err)
		}
		inv = got.Inventories
		c.rpMu.Lock()
		c.inv[rp.UUID] = cachedInventory{inv: inv, at: time.Now()}
		c.rpMu.Unlock()
	}
	var use struct {
		Usages map[string]int `json:"usages"`
	}
	if _, err := c.get(ctx, c.placement, base+"/usages", &use); err != nil {
		if errors.Is(err, nova.ErrNotFound) {
			c.rpMu.Lock()
			delete(c.inv, rp.UUID) // the provider is gone
			c.rpMu.Unlock()
		}
		return fmt.Errorf("usages of %s (provider %s): %w", h.Name, rp.UUID, err)
	}
	v, m := inv[classVCPU], inv[classRAM]
	h.VCPUs, h.ReservedVCPUs, h.CPUAllocRatio = v.Total, v.Reserved, v.AllocationRatio
	h.RAMMB, h.ReservedRAMMB, h.RAMAllocRatio = m.Total, m.Reserved, m.AllocationRatio
	h.VCPUsUsed, h.RAMMBUsed = use.Usages[classVCPU], use.Usages[classRAM]
	return nil
}

// cachedInventory is a provider's inventories as read at at.
type cachedInventory struct {
	inv map[string]inventoryJSON
	at  time.Time
}

// cachedInventory returns the provider's inventories if read within
// Config.InventoryCacheTTL.
func (c *Client) cachedInventory(uuid string) (map[string]inventoryJSON, bool) {
	if c.cfg.InventoryCacheTTL <= 0 {
		return nil, false
	}
	c.rpMu.Lock()
	defer c.rpMu.Unlock()
	ci, ok := c.inv[uuid]
	if !ok || time.Since(ci.at) >= c.cfg.InventoryCacheTTL {
		return nil, false
	}
	return ci.inv, true
}

func hostOf(s serviceJSON) nova.Host {
	return nova.Host{Name: s.Host, Zone: s.Zone, Service: s.service()}
}

// Hosts implements nova.Client: every nova-compute service joined with
// its placement inventories and usages. A service without a resource
// provider (not yet discovered) is listed with zero capacity. Any failed
// read fails the whole call: no partial view.
func (c *Client) Hosts(ctx context.Context) ([]nova.Host, error) {
	svcs, err := c.computeServices(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list compute services: %w", err)
	}
	rps, err := c.providers(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list resource providers: %w", err)
	}
	hosts := make([]nova.Host, len(svcs))
	errs := make([]error, len(svcs))
	sem := make(chan struct{}, c.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, s := range svcs {
		hosts[i] = hostOf(s)
		rp, ok := providerOf(s.Host, rps)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = fmt.Errorf("host %s: %w: %w", s.Host, nova.ErrUnavailable, ctx.Err())
				return
			}
			defer func() { <-sem }()
			errs[i] = c.fillCapacity(ctx, &hosts[i], rp)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(hosts, func(a, b nova.Host) int { return strings.Compare(a.Name, b.Name) })
	return hosts, nil
}

// Services implements nova.Client: GET /os-services?binary=nova-compute.
func (c *Client) Services(ctx context.Context) ([]nova.Service, error) {
	svcs, err := c.computeServices(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list compute services: %w", err)
	}
	out := make([]nova.Service, len(svcs))
	for i, s := range svcs {
		out[i] = s.service()
	}
	return out, nil
}

// Host implements nova.Client: the service, then the inventories and
// usages of the host's resource provider (three requests; the provider is
// looked up once per host and remembered, and looked up again if
// placement no longer knows it). A host without a nova-compute service is
// nova.ErrNotFound.
func (c *Client) Host(ctx context.Context, name string) (nova.Host, error) {
	svcs, err := c.computeServices(ctx, name)
	if err != nil {
		return nova.Host{}, fmt.Errorf("host %s: %w", name, err)
	}
	if len(svcs) == 0 {
		return nova.Host{}, fmt.Errorf("host %s: no nova-compute service: %w", name, nova.ErrNotFound)
	}
	h := hostOf(svcs[0])
	c.rpMu.Lock()
	rp, known := c.rps[name]
	c.rpMu.Unlock()
	if known {
		err := c.fillCapacity(ctx, &h, rp)
		if err == nil || !errors.Is(err, nova.ErrNotFound) {
			return h, err
		}
		c.rpMu.Lock()
		delete(c.rps, name) // the provider was deleted (host re-created): look it up again
		c.rpMu.Unlock()
	}
	rps, err := c.providers(ctx, name)
	if err == nil && len(rps) == 0 {
		rps, err = c.providers(ctx, "") // FQDN-named provider
	}
	if err != nil {
		return nova.Host{}, fmt.Errorf("resource provider of %s: %w", name, err)
	}
	if rp, ok := providerOf(name, rps); ok {
		if err := c.fillCapacity(ctx, &h, rp); err != nil {
			return nova.Host{}, err
		}
		c.rpMu.Lock()
		c.rps[name] = rp
		c.rpMu.Unlock()
	}
	return h, nil
}

// SetServiceStatus implements nova.Client: it looks up the nova-compute
// service of host and PUTs its status (2.53, by UUID). Enabling clears
// the reason. Not retried (see the package documentation), though
// setting the same status twice is harmless.
func (c *Client) SetServiceStatus(ctx context.Context, host string, disabled bool, reason string) error {
	op := "enable"
	if disabled {
		op = "disable"
	}
	svcs, err := c.computeServices(ctx, host)
	if err != nil {
		return fmt.Errorf("%s service of %s: %w", op, host, err)
	}
	if len(svcs) == 0 {
		return fmt.Errorf("%s service of %s: no nova-compute service: %w", op, host, nova.ErrNotFound)
	}
	body := map[string]any{"status": nova.ServiceEnabled}
	if disabled {
		body["status"] = nova.ServiceDisabled
		if reason != "" {
			body["disabled_reason"] = reason
		}
	}
	_, err = c.do(ctx, request{
		sc: c.compute, method: "PUT",
		url:  c.compute.ServiceURL("os-services", url.PathEscape(svcs[0].ID)),
		body: body, ok: []int{200},
	})
	if err != nil {
		return fmt.Errorf("%s service of %s: %w", op, host, err)
	}
	return nil
}
