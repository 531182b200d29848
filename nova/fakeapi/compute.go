package fakeapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dvms-project/dvms/nova"
)

// Nova's timestamp formats: servers (ISO 8601 with zone) and the
// os-services / os-migrations / instance-actions records (naive UTC
// with microseconds).
const (
	serverTime = "2006-01-02T15:04:05Z"
	recordTime = "2006-01-02T15:04:05.000000"
)

// compute wraps a compute route: microversion negotiation, token check,
// request ids, the caller's global request id in the context, and
// Nova's error bodies.
func (s *Server) compute(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqID := newRequestID()
		if err := checkComputeVersion(r); err != nil {
			writeComputeError(w, reqID, err)
			return
		}
		if !s.authorized(r) {
			writeComputeError(w, reqID, errUnauthorized)
			return
		}
		w.Header().Set("Openstack-Api-Version", "compute "+computeVersion)
		w.Header().Set("X-Openstack-Nova-Api-Version", computeVersion)
		w.Header().Set("Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version")
		setRequestID(w, reqID)
		ctx := r.Context()
		if g := r.Header.Get("X-OpenStack-Request-ID"); requestIDPattern.MatchString(g) {
			ctx = nova.WithRequestID(ctx, g)
		}
		if err := h(w, r.WithContext(ctx)); err != nil {
			writeComputeError(w, reqID, err)
		}
	})
}

// checkComputeVersion accepts a request for microversion 2.91 (or
// "latest", which is 2.91 here); one without a microversion is served
// 2.91 as well. Any other is 406, as Nova answers a version it does not
// serve.
func checkComputeVersion(r *http.Request) error {
	var asked []string
	for _, v := range r.Header.Values("OpenStack-API-Version") {
		for part := range strings.SplitSeq(v, ",") {
			if svc, ver, ok := strings.Cut(strings.TrimSpace(part), " "); ok && strings.EqualFold(svc, "compute") {
				asked = append(asked, strings.TrimSpace(ver))
			}
		}
	}
	if v := r.Header.Get("X-OpenStack-Nova-API-Version"); v != "" && len(asked) == 0 {
		asked = append(asked, strings.TrimSpace(v))
	}
	for _, v := range asked {
		if v != computeVersion && !strings.EqualFold(v, "latest") {
			return httpError(http.StatusNotAcceptable, "Version %s is not supported by the API. Minimum is %s and maximum is %s (the fake serves %s only).",
				v, computeMinVersion, computeVersion, computeVersion)
		}
	}
	return nil
}

// allowQuery refuses query parameters a route does not serve (Nova's
// query schemas forbid additional properties from 2.75).
func allowQuery(q url.Values, allowed ...string) error {
	var bad []string
	for k := range q {
		if !slices.Contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return httpError(http.StatusBadRequest, "Invalid input for query parameters %s: not served by the fake (it serves %s)",
			strings.Join(bad, ", "), strings.Join(allowed, ", "))
	}
	return nil
}

// intParam reads a non-negative integer query parameter, def when absent.
func intParam(q url.Values, name string, def int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, httpError(http.StatusBadRequest, "Invalid input for query parameter %s: %q is not a non-negative integer", name, v)
	}
	return n, nil
}

// ---- versions ----

func (s *Server) computeV21(r *http.Request) map[string]any {
	return map[string]any{
		"id": "v2.1", "status": "CURRENT", "version": computeVersion, "min_version": computeMinVersion,
		"updated": "2013-07-23T11:33:21Z",
		"links":   []any{map[string]any{"rel": "self", "href": s.baseURL(r) + computePrefix + "/"}},
	}
}

func (s *Server) computeVersions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"versions": []any{s.computeV21(r)}})
}

func (s *Server) computeVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"version": s.computeV21(r)})
}

// ---- os-services ----

func serviceJSON(h nova.Host) map[string]any {
	sv := h.Service
	var reason any
	if sv.DisabledReason != "" {
		reason = sv.DisabledReason
	}
	var updated any
	if !sv.UpdatedAt.IsZero() {
		updated = sv.UpdatedAt.UTC().Format(recordTime)
	}
	return map[string]any{
		"id": sv.ID, "binary": "nova-compute", "host": h.Name, "zone": h.Zone,
		"status": sv.Status, "state": sv.State, "disabled_reason": reason,
		"forced_down": sv.ForcedDown, "updated_at": updated,
	}
}

// listServices answers GET /os-services[?binary=&host=]: the
// nova-compute service of every host (the fake has no other service).
func (s *Server) listServices(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := allowQuery(q, "binary", "host"); err != nil {
		return err
	}
	hosts, err := s.api.Hosts(r.Context())
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	out := []any{}
	if b := q.Get("binary"); b == "" || b == "nova-compute" {
		for _, h := range hosts {
			if name := q.Get("host"); name == "" || name == h.Name {
				out = append(out, serviceJSON(h))
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"services": out})
	return nil
}

// updateService answers PUT /os-services/{uuid} (2.53): status
// enabled / disabled with an optional disabled_reason, forced_down.
func (s *Server) updateService(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if !uuidPattern.MatchString(id) {
		return httpError(http.StatusBadRequest, "Invalid uuid %s", id)
	}
	var body struct {
		Status         *string `json:"status"`
		DisabledReason *string `json:"disabled_reason"`
		ForcedDown     *bool   `json:"forced_down"`
	}
	if err := decodeBody(r, &body, true); err != nil {
		return err
	}
	switch {
	case body.Status == nil && body.ForcedDown == nil:
		return httpError(http.StatusBadRequest, "At least one of 'status' or 'forced_down' must be specified in the request body.")
	case body.Status != nil && *body.Status != nova.ServiceEnabled && *body.Status != nova.ServiceDisabled:
		return httpError(http.StatusBadRequest, "Invalid input for field/attribute status. Value: %s. It must be enabled or disabled.", *body.Status)
	case body.DisabledReason != nil && (body.Status == nil || *body.Status != nova.ServiceDisabled):
		return httpError(http.StatusBadRequest, "Specifying 'disabled_reason' with status other than 'disabled' is invalid.")
	case body.DisabledReason != nil && (len(*body.DisabledReason) < 1 || len(*body.DisabledReason) > 255):
		return httpError(http.StatusBadRequest, "Invalid input for field/attribute disabled_reason: length must be 1 to 255.")
	}
	ctx := r.Context()
	h, err := s.hostByService(ctx, id)
	if err != nil {
		return err
	}
	if body.Status != nil {
		reason := ""
		if body.DisabledReason != nil {
			reason = *body.DisabledReason
		}
		if err := s.api.SetServiceStatus(ctx, h.Name, *body.Status == nova.ServiceDisabled, reason); err != nil {
			return fmt.Errorf("update service %s: %w", id, err)
		}
	}
	if body.ForcedDown != nil {
		if err := s.cloud.SetServiceForcedDown(h.Name, *body.ForcedDown); err != nil {
			return fmt.Errorf("update service %s: %w", id, err)
		}
	}
	if h, err = s.api.Host(ctx, h.Name); err != nil {
		return fmt.Errorf("update service %s: %w", id, err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"service": serviceJSON(h)})
	return nil
}

func (s *Server) hostByService(ctx context.Context, id string) (nova.Host, error) {
	hosts, err := s.api.Hosts(ctx)
	if err != nil {
		return nova.Host{}, fmt.Errorf("service %s: %w", id, err)
	}
	for _, h := range hosts {
		if h.Service.ID == id {
			return h, nil
		}
	}
	return nova.Host{}, httpError(http.StatusNotFound, "Service with id %s could not be found.", id)
}

// ---- servers ----

// vmState is the OS-EXT-STS:vm_state of a status.
func vmState(status string) string {
	switch status {
	case nova.StatusActive, nova.StatusMigrating:
		return "active"
	case nova.StatusShelved:
		return "shelved"
	case nova.StatusShelvedOffloaded:
		return "shelved_offloaded"
	}
	return strings.ToLower(status)
}

// powerState is the OS-EXT-STS:power_state of a status (1 running, 4
// shutdown).
func powerState(status string) int {
	switch status {
	case nova.StatusActive, nova.StatusMigrating:
		return 1
	}
	return 4
}

// serverJSON is a server as GET /servers/{id} (show) or /servers/detail
// shows it at 2.91. The fake's Metadata holds the operators' controls
// (dvms:pin, dvms:priority) already resolved: they are served in the
// flavor's extra_specs as well, so the real client resolves them to the
// same value whatever its ServerMetadataControls.
func (s *Server) serverJSON(r *http.Request, sv nova.Server, show bool) map[string]any {
	meta := map[string]string{}
	specs := map[string]string{}
	for k, v := range sv.Metadata {
		meta[k] = v
		if k == nova.MetaPin || k == nova.MetaPriority {
			specs[k] = v
		}
	}
	var host, task any
	hostID := ""
	if sv.Host != "" {
		host = sv.Host
		sum := sha256.Sum224([]byte(s.projectID + sv.Host))
		hostID = hex.EncodeToString(sum[:])
	}
	if sv.TaskState != "" {
		task = sv.TaskState
	}
	self := s.baseURL(r) + computePrefix + "/servers/" + url.PathEscape(sv.ID)
	out := map[string]any{
		"id": sv.ID, "name": sv.Name, "status": sv.Status,
		"tenant_id": s.projectID, "user_id": s.userID,
		"metadata": meta, "hostId": hostID, "locked": sv.Locked, "locked_reason": nil,
		"flavor": map[string]any{
			"original_name": sv.Flavor, "vcpus": sv.VCPUs, "ram": sv.RAMMB,
			"disk": 0, "ephemeral": 0, "swap": 0, "extra_specs": specs,
		},
		"OS-EXT-SRV-ATTR:host":                host,
		"OS-EXT-SRV-ATTR:hypervisor_hostname": host,
		"OS-EXT-SRV-ATTR:instance_name":       sv.InstanceName,
		"OS-EXT-AZ:availability_zone":         sv.Zone,
		"OS-EXT-STS:task_state":               task,
		"OS-EXT-STS:vm_state":                 vmState(sv.Status),
		"OS-EXT-STS:power_state":              powerState(sv.Status),
		"addresses":                           map[string]any{},
		"tags":                                []string{},
		"links": []any{
			map[string]any{"rel": "self", "href": self},
			map[string]any{"rel": "bookmark", "href": strings.Replace(self, computePrefix, "/compute", 1)},
		},
	}
	if t, ok := s.cloud.Created(sv.ID); ok {
		out["created"] = t.UTC().Format(serverTime)
	}
	if show {
		groups := []string{}
		if sv.Group != nil {
			groups = append(groups, sv.Group.ID)
		}
		out["server_groups"] = groups
	}
	return out
}

// allServers lists every server of the cloud by ID: those on a host
// (a migrating one on its source) and the offloaded ones.
func (s *Server) allServers(ctx context.Context) ([]nova.Server, error) {
	hosts, err := s.api.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []nova.Server
	for _, h := range hosts {
		ss, err := s.api.Servers(ctx, h.Name)
		if errors.Is(err, nova.ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		for _, sv := range ss {
			seen[sv.ID] = true
			out = append(out, sv)
		}
	}
	shelved, err := s.api.ShelvedServers(ctx)
	if err != nil {
		return nil, err
	}
	for _, sv := range shelved {
		if !seen[sv.ID] {
			out = append(out, sv)
		}
	}
	slices.SortFunc(out, func(a, b nova.Server) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// listServers answers GET /servers/detail with the filters host and
// status (several allowed), and paging by limit and marker (by server
// ID; Nova's max_limit 1000). all_tenants is accepted: the fake has one
// project. An unknown host lists nothing, as in Nova.
func (s *Server) listServers(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := allowQuery(q, "all_tenants", "host", "status", "limit", "marker"); err != nil {
		return err
	}
	limit, err := intParam(q, "limit", maxLimit)
	if err != nil {
		return err
	}
	limit = min(limit, maxLimit)
	ctx := r.Context()
	var list []nova.Server
	if host := q.Get("host"); host != "" {
		list, err = s.api.Servers(ctx, host)
		if errors.Is(err, nova.ErrNotFound) {
			list, err = nil, nil
		}
	} else {
		list, err = s.allServers(ctx)
	}
	if err != nil {
		return fmt.Errorf("list servers: %w", err)
	}
	if statuses := q["status"]; len(statuses) > 0 {
		list = slices.DeleteFunc(list, func(sv nova.Server) bool {
			return !slices.ContainsFunc(statuses, func(st string) bool { return strings.EqualFold(st, sv.Status) })
		})
	}
	if m := q.Get("marker"); m != "" {
		i := slices.IndexFunc(list, func(sv nova.Server) bool { return sv.ID == m })
		if i < 0 {
			return httpError(http.StatusBadRequest, "marker [%s] not found", m)
		}
		list = list[i+1:]
	}
	page := list[:min(limit, len(list))]
	servers := make([]any, 0, len(page))
	for _, sv := range page {
		servers = append(servers, s.serverJSON(r, sv, false))
	}
	out := map[string]any{"servers": servers}
	if len(page) > 0 && len(page) == limit {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("limit", strconv.Itoa(limit))
		next.Set("marker", page[len(page)-1].ID)
		out["servers_links"] = []any{map[string]any{"rel": "next",
			"href": s.baseURL(r) + computePrefix + "/servers/detail?" + next.Encode()}}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// showServer answers GET /servers/{id}.
func (s *Server) showServer(w http.ResponseWriter, r *http.Request) error {
	sv, err := s.api.Server(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"server": s.serverJSON(r, sv, true)})
	return nil
}

// ---- actions ----

// serverAction answers POST /servers/{id}/action for os-migrateLive,
// migrate, confirmResize (204), revertResize, shelve, shelveOffload and
// unshelve: 202 with the fake's local request
// id, or the fake's refusal.
func (s *Server) serverAction(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	var body map[string]json.RawMessage
	if err := decodeBody(r, &body, false); err != nil {
		return err
	}
	if len(body) != 1 {
		return httpError(http.StatusBadRequest, "Malformed request body: an action body has exactly one member, got %d", len(body))
	}
	ctx := r.Context()
	var (
		rc  nova.Receipt
		err error
	)
	for name, raw := range body {
		switch name {
		case "os-migrateLive":
			var a struct {
				Host           *string         `json:"host"`
				BlockMigration json.RawMessage `json:"block_migration"`
			}
			if err := decodeRaw(raw, &a); err != nil {
				return err
			}
			switch string(bytes.TrimSpace(a.BlockMigration)) {
			case "true", "false", `"auto"`:
			case "":
				return httpError(http.StatusBadRequest, "Invalid input for field/attribute os-migrateLive: 'block_migration' is a required property")
			default:
				return httpError(http.StatusBadRequest, "Invalid input for field/attribute block_migration: %s is not one of true, false, \"auto\"", a.BlockMigration)
			}
			dest := ""
			if a.Host != nil {
				if *a.Host == "" {
					return httpError(http.StatusBadRequest, "Invalid input for field/attribute host: '' is too short (null lets the scheduler pick)")
				}
				dest = *a.Host
			}
			rc, err = s.api.LiveMigrate(ctx, id, dest)
		case "shelve", "shelveOffload":
			if err := nullOrEmpty(name, raw); err != nil {
				return err
			}
			if name == "shelve" {
				rc, err = s.api.Shelve(ctx, id)
			} else {
				rc, err = s.api.ShelveOffload(ctx, id)
			}
		case "migrate":
			dest := ""
			if t := bytes.TrimSpace(raw); !bytes.Equal(t, []byte("null")) {
				var a struct {
					Host *string `json:"host"`
				}
				if err := decodeRaw(raw, &a); err != nil {
					return err
				}
				if a.Host != nil {
					dest = *a.Host
				}
			}
			rc, err = s.api.Migrate(ctx, id, dest)
		case "confirmResize", "revertResize":
			if err := nullOrEmpty(name, raw); err != nil {
				return err
			}
			if name == "revertResize" {
				rc, err = s.api.RevertResize(ctx, id)
				break
			}
			if rc, err = s.api.ConfirmResize(ctx, id); err == nil {
				setRequestID(w, rc.LocalRequestID)
				w.WriteHeader(http.StatusNoContent) // as Nova answers a confirmation
				return nil
			}
		case "unshelve":
			host := ""
			if t := bytes.TrimSpace(raw); !bytes.Equal(t, []byte("null")) {
				var a struct {
					Host *string `json:"host"`
					AZ   *string `json:"availability_zone"`
				}
				if err := decodeRaw(raw, &a); err != nil {
					return err
				}
				if a.AZ != nil {
					return httpError(http.StatusBadRequest, "unshelve: availability_zone is not served by the fake (name a host)")
				}
				if a.Host != nil {
					if *a.Host == "" {
						return httpError(http.StatusBadRequest, "Invalid input for field/attribute host: '' is too short")
					}
					host = *a.Host
				}
			}
			rc, err = s.api.Unshelve(ctx, id, host)
		default:
			return httpError(http.StatusBadRequest, "There is no such action: %s", name)
		}
	}
	if err != nil {
		return err
	}
	setRequestID(w, rc.LocalRequestID)
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// decodeRaw decodes one member of a request body strictly.
func decodeRaw(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return httpError(http.StatusBadRequest, "Malformed request body: %v", err)
	}
	return nil
}

// nullOrEmpty accepts an action argument of null or {}.
func nullOrEmpty(name string, raw json.RawMessage) error {
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil || len(v) > 0 {
		return httpError(http.StatusBadRequest, "Invalid input for field/attribute %s: it takes null or {}", name)
	}
	return nil
}

// ---- diagnostics, instance actions ----

// diagnostics answers GET /servers/{id}/diagnostics in the standard 2.48
// format, from the demand the fake holds for the server (SetDemand):
// one cpu_details entry per VCPU with the CPU demand spread evenly as
// utilisation (percent; no cumulative time), and memory_details.used
// its RAM demand. Reading it reads the host's demand in the fake (the
// observer counts the host's demand as seen). Only a running (ACTIVE or
// MIGRATING) server has diagnostics: otherwise 409.
func (s *Server) diagnostics(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id := r.PathValue("id")
	sv, err := s.api.Server(ctx, id)
	if err != nil {
		return err
	}
	if sv.Status != nova.StatusActive && sv.Status != nova.StatusMigrating {
		return httpError(http.StatusConflict, "Cannot 'get_diagnostics' instance %s while it is in vm_state %s", id, vmState(sv.Status))
	}
	demand, err := s.api.Demand(ctx, sv.Host)
	if err != nil {
		return fmt.Errorf("diagnostics of %s: %w", id, err)
	}
	d, ok := demand[id]
	if !ok {
		return httpError(http.StatusConflict, "diagnostics of %s: not on %s any more", id, sv.Host)
	}
	n := max(sv.VCPUs, 1)
	cpus := make([]any, n)
	for i := range cpus {
		cpus[i] = map[string]any{"id": i, "time": nil, "utilisation": d.CPU * 100 / float64(n)}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"state": "running", "driver": "fake", "hypervisor": "fake", "hypervisor_os": "fake",
		"uptime": nil, "config_drive": false, "num_cpus": n, "num_nics": 0, "num_disks": 0,
		"cpu_details":    cpus,
		"memory_details": map[string]any{"maximum": sv.RAMMB, "used": d.RAMMB},
		"nic_details":    []any{}, "disk_details": []any{},
	})
	return nil
}

// instanceActions answers GET /servers/{id}/os-instance-actions, newest
// first (`openstack server event list`).
func (s *Server) instanceActions(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	_, err := s.api.Server(r.Context(), id)
	acts := s.cloud.Actions(id)
	if err != nil && (!errors.Is(err, nova.ErrNotFound) || len(acts) == 0) {
		return err
	}
	out := make([]any, 0, len(acts))
	for i := len(acts) - 1; i >= 0; i-- {
		a := acts[i]
		var msg any
		if a.Message != "" {
			msg = a.Message
		}
		start := a.Start.UTC().Format(recordTime)
		out = append(out, map[string]any{
			"action": a.Name, "instance_uuid": id, "request_id": a.LocalRequestID, "message": msg,
			"project_id": s.projectID, "user_id": s.userID, "start_time": start, "updated_at": start,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"instanceActions": out})
	return nil
}

// ---- metadata ----

// setMetadata answers PUT /servers/{id}/metadata/{key} with
// {"meta": {key: value}}. The fake cannot hold an empty value (it means
// "delete" there): that is 400.
func (s *Server) setMetadata(w http.ResponseWriter, r *http.Request) error {
	id, key := r.PathValue("id"), r.PathValue("key")
	var body struct {
		Meta map[string]string `json:"meta"`
	}
	if err := decodeBody(r, &body, true); err != nil {
		return err
	}
	v, ok := body.Meta[key]
	switch {
	case len(body.Meta) != 1 || !ok:
		return httpError(http.StatusBadRequest, "Request body and URI mismatch")
	case len(key) > 255 || len(v) > 255:
		return httpError(http.StatusBadRequest, "Metadata key and value are limited to 255 characters")
	case v == "":
		return httpError(http.StatusBadRequest, "metadata %s: the fake cannot store an empty value", key)
	}
	if err := s.api.SetServerMetadata(r.Context(), id, key, v); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"meta": map[string]string{key: v}})
	return nil
}

// deleteMetadata answers DELETE /servers/{id}/metadata/{key}: 204, or
// 404 for an unknown server or key, 409 in a state Nova refuses.
func (s *Server) deleteMetadata(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id, key := r.PathValue("id"), r.PathValue("key")
	sv, err := s.api.Server(ctx, id)
	if err != nil {
		return err
	}
	_, had := sv.Metadata[key]
	if err := s.api.SetServerMetadata(ctx, id, key, ""); err != nil {
		return err
	}
	if !had {
		return httpError(http.StatusNotFound, "Metadata item %s was not found", key)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ---- migrations ----

// listMigrations answers GET /os-migrations (2.59+ fields), newest
// first, filtered by instance_uuid, status, migration_type and
// source_compute. An unknown instance has no migrations (200, empty).
func (s *Server) listMigrations(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := allowQuery(q, "instance_uuid", "status", "migration_type", "source_compute"); err != nil {
		return err
	}
	ctx := r.Context()
	var ids []string
	if id := q.Get("instance_uuid"); id != "" {
		ids = []string{id}
	} else {
		all, err := s.allServers(ctx)
		if err != nil {
			return fmt.Errorf("list migrations: %w", err)
		}
		for _, sv := range all {
			ids = append(ids, sv.ID)
		}
	}
	var ms []nova.Migration
	for _, id := range ids {
		got, err := s.api.Migrations(ctx, id)
		if errors.Is(err, nova.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list migrations: %w", err)
		}
		ms = append(ms, got...)
	}
	ms = slices.DeleteFunc(ms, func(m nova.Migration) bool {
		return (q.Get("status") != "" && !strings.EqualFold(q.Get("status"), m.Status)) ||
			(q.Get("migration_type") != "" && q.Get("migration_type") != m.Type) ||
			(q.Get("source_compute") != "" && q.Get("source_compute") != m.Source)
	})
	slices.SortStableFunc(ms, func(a, b nova.Migration) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		ai, _ := strconv.ParseInt(a.ID, 10, 64)
		bi, _ := strconv.ParseInt(b.ID, 10, 64)
		return cmp.Compare(bi, ai)
	})
	out := make([]any, 0, len(ms))
	for _, m := range ms {
		n, err := strconv.ParseInt(m.ID, 10, 64)
		if err != nil {
			return fmt.Errorf("migration %q of %s: the id is not an integer", m.ID, m.ServerID)
		}
		var dest any
		if m.Dest != "" {
			dest = m.Dest
		}
		out = append(out, map[string]any{
			"id": n, "uuid": nameUUID("migration", m.ServerID+"/"+m.ID), "instance_uuid": m.ServerID,
			"source_compute": m.Source, "source_node": m.Source, "dest_compute": dest, "dest_node": dest,
			"dest_host": nil, "source_region": s.opts.Region, "dest_region": s.opts.Region,
			"migration_type": m.Type, "status": m.Status,
			"created_at": m.CreatedAt.UTC().Format(recordTime), "updated_at": m.UpdatedAt.UTC().Format(recordTime),
			"project_id": s.projectID, "user_id": s.userID,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"migrations": out})
	return nil
}

// serverMigrations answers GET /servers/{id}/migrations (2.23+ memory
// figures, 2.59 uuid; disk figures 0, as for a migration sharing its
// instances path): the server's migrations in progress.
func (s *Server) serverMigrations(w http.ResponseWriter, r *http.Request) error {
	if err := allowQuery(r.URL.Query()); err != nil {
		return err
	}
	id := r.PathValue("id")
	ps, err := s.api.MigrationsInProgress(r.Context(), id)
	if err != nil {
		return err
	}
	out := make([]any, 0, len(ps))
	for _, p := range ps {
		n, err := strconv.ParseInt(p.ID, 10, 64)
		if err != nil {
			return fmt.Errorf("migration %q of %s: the id is not an integer", p.ID, id)
		}
		var total, done, left any // null until the driver reported any
		if p.HasMemory() {
			total, done, left = p.MemoryTotal, p.MemoryProcessed, p.MemoryRemaining
		}
		out = append(out, map[string]any{
			"id": n, "uuid": nameUUID("migration", id+"/"+p.ID), "server_uuid": id,
			"source_compute": p.Source, "source_node": p.Source, "dest_compute": p.Dest, "dest_node": p.Dest, "dest_host": nil,
			"status": p.Status, "memory_total_bytes": total, "memory_processed_bytes": done, "memory_remaining_bytes": left,
			"disk_total_bytes": 0, "disk_processed_bytes": 0, "disk_remaining_bytes": 0,
			"created_at": p.CreatedAt.UTC().Format(recordTime), "updated_at": p.UpdatedAt.UTC().Format(recordTime),
			"project_id": s.projectID, "user_id": s.userID,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"migrations": out})
	return nil
}

// migrationAction answers POST /servers/{id}/migrations/{mid}/action
// {"force_complete": null} (2.22): 202 without a body.
func (s *Server) migrationAction(w http.ResponseWriter, r *http.Request) error {
	var body map[string]json.RawMessage
	if err := decodeBody(r, &body, false); err != nil {
		return err
	}
	raw, ok := body["force_complete"]
	if len(body) != 1 || !ok {
		return httpError(http.StatusBadRequest, "Malformed request body: want {\"force_complete\": null}")
	}
	if err := nullOrEmpty("force_complete", raw); err != nil {
		return err
	}
	if err := s.api.ForceCompleteMigration(r.Context(), r.PathValue("id"), r.PathValue("mid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// abortMigration answers DELETE /servers/{id}/migrations/{mid} (2.24,
// 2.65 for queued and preparing ones): 202 without a body.
func (s *Server) abortMigration(w http.ResponseWriter, r *http.Request) error {
	if err := s.api.AbortMigration(r.Context(), r.PathValue("id"), r.PathValue("mid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// ---- server groups ----

type groupView struct {
	nova.ServerGroup
	members []string
}

// groups builds the server groups from their members, by ID. A group
// without members is not seen (the fake lists groups through servers).
func (s *Server) groups(ctx context.Context) ([]groupView, error) {
	all, err := s.allServers(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*groupView{}
	for _, sv := range all {
		if sv.Group == nil {
			continue
		}
		g, ok := byID[sv.Group.ID]
		if !ok {
			g = &groupView{ServerGroup: *sv.Group}
			byID[sv.Group.ID] = g
		}
		g.members = append(g.members, sv.ID)
	}
	out := make([]groupView, 0, len(byID))
	for _, g := range byID {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b groupView) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *Server) groupJSON(g groupView) map[string]any {
	return map[string]any{
		"id": g.ID, "name": g.Name, "policy": g.Policy, "rules": map[string]any{},
		"members": g.members, "project_id": s.projectID, "user_id": s.userID,
	}
}

// listGroups answers GET /os-server-groups with offset / limit paging
// (no links, as in Nova).
func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := allowQuery(q, "all_projects", "limit", "offset"); err != nil {
		return err
	}
	limit, err := intParam(q, "limit", maxLimit)
	if err != nil {
		return err
	}
	offset, err := intParam(q, "offset", 0)
	if err != nil {
		return err
	}
	gs, err := s.groups(r.Context())
	if err != nil {
		return fmt.Errorf("list server groups: %w", err)
	}
	gs = gs[min(offset, len(gs)):]
	gs = gs[:min(limit, maxLimit, len(gs))]
	out := make([]any, 0, len(gs))
	for _, g := range gs {
		out = append(out, s.groupJSON(g))
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_groups": out})
	return nil
}

// showGroup answers GET /os-server-groups/{id}.
func (s *Server) showGroup(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	gs, err := s.groups(r.Context())
	if err != nil {
		return fmt.Errorf("server group %s: %w", id, err)
	}
	i := slices.IndexFunc(gs, func(g groupView) bool { return g.ID == id })
	if i < 0 {
		return httpError(http.StatusNotFound, "Instance group %s could not be found.", id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_group": s.groupJSON(gs[i])})
	return nil
}
