package openstack

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/dvms-project/dvms/nova"
)

// pageSize is the page size of server and server-group listings (Nova's
// default max_limit is 1000).
const pageSize = 1000

type serverJSON struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Status    string  `json:"status"`
	Host      *string `json:"OS-EXT-SRV-ATTR:host"`
	Instance  string  `json:"OS-EXT-SRV-ATTR:instance_name"`
	Zone      string  `json:"OS-EXT-AZ:availability_zone"`
	TaskState *string `json:"OS-EXT-STS:task_state"`
	Locked    bool    `json:"locked"` // 2.9+
	Flavor    struct {
		OriginalName string            `json:"original_name"`
		VCPUs        int               `json:"vcpus"`
		RAM          int               `json:"ram"`
		ExtraSpecs   map[string]string `json:"extra_specs"` // 2.47+, admin
	} `json:"flavor"`
	Metadata     map[string]string `json:"metadata"`
	ServerGroups []string          `json:"server_groups"` // 2.71, server show only
	Created      string            `json:"created"`
}

// server converts s. The operators' controls (nova.MetaPin,
// nova.MetaPriority, nova.MetaMaintenanceAction) come from the flavor's extra specs, which only an
// operator can set; from the server's metadata, which its owner can
// write, only when trustMetadata, and the flavor's still win.
func (s serverJSON) server(trustMetadata bool) nova.Server {
	out := nova.Server{
		ID: s.ID, Name: s.Name, InstanceName: s.Instance, Status: s.Status, Zone: s.Zone, Locked: s.Locked,
		Flavor: s.Flavor.OriginalName, VCPUs: s.Flavor.VCPUs, RAMMB: s.Flavor.RAM,
		Metadata: s.Metadata,
	}
	for _, k := range []string{nova.MetaPin, nova.MetaPriority, nova.MetaMaintenanceAction} {
		v, fromFlavor := s.Flavor.ExtraSpecs[k]
		_, inMeta := out.Metadata[k]
		if !fromFlavor && (trustMetadata || !inMeta) {
			continue
		}
		out.Metadata = maps.Clone(out.Metadata)
		if out.Metadata == nil {
			out.Metadata = map[string]string{}
		}
		if fromFlavor {
			out.Metadata[k] = v
		} else {
			delete(out.Metadata, k)
		}
	}
	if s.Host != nil {
		out.Host = *s.Host
	}
	if s.TaskState != nil {
		out.TaskState = *s.TaskState
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	return out
}

// Servers implements nova.Client: GET /servers/detail?all_tenants&host
// (admin), page by page. Server groups come from a membership index
// cached for Config.GroupCacheTTL, so a group change may show that late.
func (c *Client) Servers(ctx context.Context, host string) ([]nova.Server, error) {
	var out []nova.Server
	var newest time.Time // creation of the newest server listed
	marker := ""
	for {
		var page struct {
			Servers []serverJSON `json:"servers"`
			Links   []struct {
				Rel string `json:"rel"`
			} `json:"servers_links"`
		}
		u := c.compute.ServiceURL("servers", "detail") + query(
			"all_tenants", "True", "host", host, "limit", strconv.Itoa(pageSize), "marker", marker)
		if _, err := c.get(ctx, c.compute, u, &page); err != nil {
			return nil, fmt.Errorf("servers on %s: %w", host, err)
		}
		for _, s := range page.Servers {
			// Guard against a cloud ignoring the host filter.
			if s.Host != nil && *s.Host == host {
				out = append(out, s.server(c.cfg.ServerMetadataControls))
				if t := parseTime(s.Created); t.After(newest) {
					newest = t
				}
			}
		}
		// Nova links the next page when it capped this one (at the
		// smaller of limit and its max_limit).
		if len(page.Servers) == 0 || !slices.ContainsFunc(page.Links, func(l struct {
			Rel string `json:"rel"`
		}) bool {
			return l.Rel == "next"
		}) {
			break
		}
		marker = page.Servers[len(page.Servers)-1].ID
	}
	if len(out) == 0 {
		return out, nil
	}
	idx, err := c.groupIndex(ctx, newest)
	if err != nil {
		return nil, fmt.Errorf("servers on %s: %w", host, err)
	}
	for i := range out {
		if g, ok := idx.byMember[out[i].ID]; ok {
			out[i].Group = &g
		}
	}
	return out, nil
}

// Server implements nova.Client: GET /servers/{id}, with its server group
// (2.71 names it) and the group's policy.
func (c *Client) Server(ctx context.Context, id string) (nova.Server, error) {
	var out struct {
		Server serverJSON `json:"server"`
	}
	if _, err := c.get(ctx, c.compute, c.compute.ServiceURL("servers", url.PathEscape(id)), &out); err != nil {
		return nova.Server{}, fmt.Errorf("server %s: %w", id, err)
	}
	s := out.Server.server(c.cfg.ServerMetadataControls)
	if len(out.Server.ServerGroups) > 0 {
		g, err := c.group(ctx, out.Server.ServerGroups[0])
		if err != nil {
			return nova.Server{}, fmt.Errorf("server group of %s: %w", id, err)
		}
		s.Group = &g
	}
	return s, nil
}

// ---- server groups ----

type groupJSON struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Policy   string   `json:"policy"`   // 2.64
	Policies []string `json:"policies"` // before 2.64
	Members  []string `json:"members"`
}

func (g groupJSON) group() nova.ServerGroup {
	p := g.Policy
	if p == "" && len(g.Policies) > 0 {
		p = g.Policies[0]
	}
	return nova.ServerGroup{ID: g.ID, Name: g.Name, Policy: p}
}

type groupIndex struct {
	at       time.Time
	byID     map[string]nova.ServerGroup
	byMember map[string]nova.ServerGroup
}

// groupSkew is the margin between Nova's clock and ours when comparing a
// server's creation with the index's age.
const groupSkew = time.Minute

// groupIndex returns the server groups of every project, reusing the
// previous listing for Config.GroupCacheTTL unless a server created since
// (newest, by Nova's clock, with a margin for skew) may be missing from
// it: a server joins its group at boot and never later, so an older index
// knows every older server. One caller lists at a time.
func (c *Client) groupIndex(ctx context.Context, newest time.Time) (groupIndex, error) {
	c.groupsMu.Lock()
	defer c.groupsMu.Unlock()
	if c.groups.byID != nil && c.cfg.GroupCacheTTL > 0 && time.Since(c.groups.at) < c.cfg.GroupCacheTTL &&
		newest.Before(c.groups.at.Add(-groupSkew)) {
		return c.groups, nil
	}
	idx := groupIndex{at: time.Now(), byID: map[string]nova.ServerGroup{}, byMember: map[string]nova.ServerGroup{}}
	// Server groups have no next links: page until an empty page (the
	// cloud's max_limit may be below pageSize).
	for offset := 0; ; {
		var page struct {
			Groups []groupJSON `json:"server_groups"`
		}
		u := c.compute.ServiceURL("os-server-groups") + query(
			"all_projects", "True", "limit", strconv.Itoa(pageSize), "offset", strconv.Itoa(offset))
		if _, err := c.get(ctx, c.compute, u, &page); err != nil {
			return groupIndex{}, fmt.Errorf("list server groups: %w", err)
		}
		if len(page.Groups) == 0 {
			break
		}
		if _, seen := idx.byID[page.Groups[0].ID]; seen && offset > 0 {
			// A cloud ignoring offset would page forever.
			return groupIndex{}, fmt.Errorf("list server groups: offset %d repeats group %s", offset, page.Groups[0].ID)
		}
		for _, g := range page.Groups {
			sg := g.group()
			idx.byID[g.ID] = sg
			for _, m := range g.Members {
				idx.byMember[m] = sg
			}
		}
		offset += len(page.Groups)
	}
	c.groups = idx
	return idx, nil
}

// group returns one server group, from the index when it has it.
func (c *Client) group(ctx context.Context, id string) (nova.ServerGroup, error) {
	c.groupsMu.Lock()
	g, ok := c.groups.byID[id]
	fresh := c.cfg.GroupCacheTTL > 0 && time.Since(c.groups.at) < c.cfg.GroupCacheTTL
	c.groupsMu.Unlock()
	if ok && fresh {
		return g, nil
	}
	var out struct {
		Group groupJSON `json:"server_group"`
	}
	if _, err := c.get(ctx, c.compute, c.compute.ServiceURL("os-server-groups", url.PathEscape(id)), &out); err != nil {
		return nova.ServerGroup{}, fmt.Errorf("server group %s: %w", id, err)
	}
	return out.Group.group(), nil
}

// ---- actions ----

// LiveMigrate implements nova.Client. The body is built here because
// gophercloud's options cannot send "block_migration": "auto" (2.25+):
// {"os-migrateLive": {"host": dest or null, "block_migration": "auto"}}.
func (c *Client) LiveMigrate(ctx context.Context, serverID, dest string) (nova.Receipt, error) {
	var host any // JSON null: Nova's scheduler picks
	if dest != "" {
		host = dest
	}
	rc, err := c.action(ctx, serverID, map[string]any{
		"os-migrateLive": map[string]any{"host": host, "block_migration": "auto"},
	})
	if err != nil {
		to := dest
		if to == "" {
			to = "a host Nova picks"
		}
		return rc, fmt.Errorf("live-migrate %s to %s: %w", serverID, to, err)
	}
	return rc, nil
}

// Shelve implements nova.Client: {"shelve": null}.
func (c *Client) Shelve(ctx context.Context, serverID string) (nova.Receipt, error) {
	rc, err := c.action(ctx, serverID, map[string]any{"shelve": nil})
	if err != nil {
		return rc, fmt.Errorf("shelve %s: %w", serverID, err)
	}
	return rc, nil
}

// ShelveOffload implements nova.Client: {"shelveOffload": null}.
func (c *Client) ShelveOffload(ctx context.Context, serverID string) (nova.Receipt, error) {
	rc, err := c.action(ctx, serverID, map[string]any{"shelveOffload": nil})
	if err != nil {
		return rc, fmt.Errorf("shelve-offload %s: %w", serverID, err)
	}
	return rc, nil
}

// Unshelve implements nova.Client: {"unshelve": null}, or with 2.91
// {"unshelve": {"host": host}} (the server must be SHELVED_OFFLOADED).
func (c *Client) Unshelve(ctx context.Context, serverID, host string) (nova.Receipt, error) {
	var body any
	if host != "" {
		body = map[string]any{"host": host}
	}
	rc, err := c.action(ctx, serverID, map[string]any{"unshelve": body})
	if err != nil {
		if host == "" {
			return rc, fmt.Errorf("unshelve %s: %w", serverID, err)
		}
		return rc, fmt.Errorf("unshelve %s to %s: %w", serverID, host, err)
	}
	return rc, nil
}

// ---- migrations ----

type migrationJSON struct {
	ID           int64  `json:"id"`
	UUID         string `json:"uuid"`
	InstanceUUID string `json:"instance_uuid"`
	Source       string `json:"source_compute"`
	Dest         string `json:"dest_compute"`
	Type         string `json:"migration_type"`
	Status       string `json:"status"`
	CreatedAt    string `json:"created_at"`
	UpdatedAt    string `json:"updated_at"`
}

// Migrations implements nova.Client: GET /os-migrations?instance_uuid=,
// newest first. The ID is the migration's integer id (what `openstack
// server migration list` shows and /servers/{id}/migrations/{mid} takes).
// A server without migrations is checked to exist (nova.ErrNotFound).
func (c *Client) Migrations(ctx context.Context, serverID string) ([]nova.Migration, error) {
	var out struct {
		Migrations []migrationJSON `json:"migrations"`
	}
	u := c.compute.ServiceURL("os-migrations") + query("instance_uuid", serverID)
	if _, err := c.get(ctx, c.compute, u, &out); err != nil {
		return nil, fmt.Errorf("migrations of %s: %w", serverID, err)
	}
	ms := make([]nova.Migration, 0, len(out.Migrations))
	ids := make(map[string]int64, len(out.Migrations))
	for _, m := range out.Migrations {
		if m.InstanceUUID != "" && m.InstanceUUID != serverID {
			continue
		}
		id := strconv.FormatInt(m.ID, 10)
		ids[id] = m.ID
		ms = append(ms, nova.Migration{
			ID: id, ServerID: serverID, Source: m.Source, Dest: m.Dest,
			Type: m.Type, Status: m.Status,
			CreatedAt: parseTime(m.CreatedAt), UpdatedAt: parseTime(m.UpdatedAt),
		})
	}
	slices.SortStableFunc(ms, func(a, b nova.Migration) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(ids[b.ID], ids[a.ID])
	})
	if len(ms) == 0 {
		if _, err := c.Server(ctx, serverID); err != nil {
			return nil, fmt.Errorf("migrations of %s: %w", serverID, err)
		}
	}
	return ms, nil
}

// Diagnostics returns the diagnostics document of a server as Nova
// answers it (GET /servers/{id}/diagnostics, admin, the 2.48 standard
// format); nova/demand parses it.
func (c *Client) Diagnostics(ctx context.Context, serverID string) ([]byte, error) {
	var raw json.RawMessage
	if _, err := c.get(ctx, c.compute, c.compute.ServiceURL("servers", url.PathEscape(serverID), "diagnostics"), &raw); err != nil {
		return nil, fmt.Errorf("diagnostics of %s: %w", serverID, err)
	}
	if len(raw) == 0 {
		return nil, errors.New("diagnostics of " + serverID + ": empty answer")
	}
	return raw, nil
}

// SetServerMetadata implements nova.Client: PUT (or, for value "",
// DELETE) /servers/{id}/metadata/{key}. Not retried on 5xx: the caller
// re-reads the server.
func (c *Client) SetServerMetadata(ctx context.Context, serverID, key, value string) error {
	u := c.compute.ServiceURL("servers", url.PathEscape(serverID), "metadata", url.PathEscape(key))
	r := request{sc: c.compute, method: http.MethodPut, url: u,
		body: map[string]any{"meta": map[string]string{key: value}}, ok: []int{http.StatusOK}}
	if value == "" {
		r = request{sc: c.compute, method: http.MethodDelete, url: u, ok: []int{http.StatusNoContent}}
	}
	_, err := c.do(ctx, r)
	if value == "" && errors.Is(err, nova.ErrNotFound) {
		// No such key is what was asked; a missing server says so too,
		// so tell them apart.
		if _, serr := c.Server(ctx, serverID); serr == nil {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("set metadata %s of %s: %w", key, serverID, err)
	}
	return nil
}

// ShelvedServers implements nova.Client: GET /servers/detail with
// all_tenants and status SHELVED_OFFLOADED, page by page.
func (c *Client) ShelvedServers(ctx context.Context) ([]nova.Server, error) {
	var out []nova.Server
	marker := ""
	for {
		var page struct {
			Servers []serverJSON `json:"servers"`
		}
		// Nova takes several status values at once (servers.py:
		// req.GET.getall('status')).
		q := url.Values{"all_tenants": {"True"}, "status": {nova.StatusShelved, nova.StatusShelvedOffloaded}, "limit": {strconv.Itoa(pageSize)}}
		if marker != "" {
			q.Set("marker", marker)
		}
		u := c.compute.ServiceURL("servers", "detail") + "?" + q.Encode()
		if _, err := c.get(ctx, c.compute, u, &page); err != nil {
			return nil, fmt.Errorf("shelved servers: %w", err)
		}
		for _, s := range page.Servers {
			if v := s.server(c.cfg.ServerMetadataControls); v.Status == nova.StatusShelvedOffloaded || v.Status == nova.StatusShelved {
				out = append(out, v)
			}
		}
		if len(page.Servers) < pageSize {
			break
		}
		marker = page.Servers[len(page.Servers)-1].ID
	}
	return out, nil
}

// ---- migrations in progress (server-migrations API) ----

type progressJSON struct {
	ID              int64  `json:"id"`
	Status          string `json:"status"`
	Source          string `json:"source_compute"`
	Dest            string `json:"dest_compute"`
	MemoryTotal     *int64 `json:"memory_total_bytes"`
	MemoryProcessed *int64 `json:"memory_processed_bytes"`
	MemoryRemaining *int64 `json:"memory_remaining_bytes"`
	CreatedAt       string `json:"created_at"`
	UpdatedAt       string `json:"updated_at"`
}

func orZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// MigrationsInProgress implements nova.Client: GET
// /servers/{id}/migrations (2.23+; Nova lists the live migrations of the
// server not ended, with the memory figures the driver reported, null
// until it reported any).
func (c *Client) MigrationsInProgress(ctx context.Context, serverID string) ([]nova.MigrationProgress, error) {
	var out struct {
		Migrations []progressJSON `json:"migrations"`
	}
	if _, err := c.get(ctx, c.compute, c.compute.ServiceURL("servers", url.PathEscape(serverID), "migrations"), &out); err != nil {
		return nil, fmt.Errorf("migrations in progress of %s: %w", serverID, err)
	}
	ps := make([]nova.MigrationProgress, 0, len(out.Migrations))
	for _, m := range out.Migrations {
		ps = append(ps, nova.MigrationProgress{
			ID: strconv.FormatInt(m.ID, 10), Status: m.Status, Source: m.Source, Dest: m.Dest,
			MemoryTotal: orZero(m.MemoryTotal), MemoryProcessed: orZero(m.MemoryProcessed), MemoryRemaining: orZero(m.MemoryRemaining),
			CreatedAt: parseTime(m.CreatedAt), UpdatedAt: parseTime(m.UpdatedAt),
		})
	}
	return ps, nil
}

// ForceCompleteMigration implements nova.Client: POST
// /servers/{id}/migrations/{mid}/action {"force_complete": null} (2.22),
// 202. Not retried: the caller re-reads the migration.
func (c *Client) ForceCompleteMigration(ctx context.Context, serverID, migrationID string) error {
	_, err := c.do(ctx, request{
		sc: c.compute, method: http.MethodPost,
		url:  c.compute.ServiceURL("servers", url.PathEscape(serverID), "migrations", url.PathEscape(migrationID), "action"),
		body: map[string]any{"force_complete": nil}, ok: []int{http.StatusAccepted},
	})
	if err != nil {
		return fmt.Errorf("force-complete migration %s of %s: %w", migrationID, serverID, err)
	}
	return nil
}

// AbortMigration implements nova.Client: DELETE
// /servers/{id}/migrations/{mid} (2.24), 202. Not retried: the caller
// re-reads the migration.
func (c *Client) AbortMigration(ctx context.Context, serverID, migrationID string) error {
	_, err := c.do(ctx, request{
		sc: c.compute, method: http.MethodDelete,
		url: c.compute.ServiceURL("servers", url.PathEscape(serverID), "migrations", url.PathEscape(migrationID)),
		ok:  []int{http.StatusAccepted},
	})
	if err != nil {
		return fmt.Errorf("abort migration %s of %s: %w", migrationID, serverID, err)
	}
	return nil
}
