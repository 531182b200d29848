package fakeapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/dvms-project/dvms/nova"
)

// Placement resource classes served.
const (
	classVCPU = "VCPU"
	classRAM  = "MEMORY_MB"
)

// placement wraps a placement route: microversion 1.0, token check and
// placement's error bodies.
func (s *Server) placement(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, v := range r.Header.Values("OpenStack-API-Version") {
			for part := range strings.SplitSeq(v, ",") {
				svc, ver, ok := strings.Cut(strings.TrimSpace(part), " ")
				ver = strings.TrimSpace(ver)
				if ok && strings.EqualFold(svc, "placement") && ver != placementVersion && !strings.EqualFold(ver, "latest") {
					writePlacementError(w, httpError(http.StatusNotAcceptable,
						"Unacceptable version header: %s (the fake serves placement %s only)", ver, placementVersion))
					return
				}
			}
		}
		if !s.authorized(r) {
			writePlacementError(w, errUnauthorized)
			return
		}
		w.Header().Set("Openstack-Api-Version", "placement "+placementVersion)
		w.Header().Set("Vary", "OpenStack-API-Version")
		if err := h(w, r); err != nil {
			writePlacementError(w, err)
		}
	})
}

// placementVersions answers GET /placement/ (unauthenticated, as in
// placement): gophercloud reads it when it makes the service client.
func (s *Server) placementVersions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"versions": []any{map[string]any{
		"id": "v1.0", "status": "CURRENT", "min_version": placementVersion, "max_version": placementVersion,
		"links": []any{map[string]any{"rel": "self", "href": ""}},
	}}})
}

// providerUUID is the resource provider UUID of a host: derived from
// its name (the fake has no placement ids), so stable across restarts.
func providerUUID(host string) string { return nameUUID("resource_provider", host) }

// providerJSON is a compute node's resource provider, named like its
// host. Generations are not modelled, so not served.
func (s *Server) providerJSON(r *http.Request, h nova.Host) map[string]any {
	u := providerUUID(h.Name)
	self := s.baseURL(r) + placementPrefix + "/resource_providers/" + u
	return map[string]any{"uuid": u, "name": h.Name, "links": []any{
		map[string]any{"rel": "self", "href": self},
		map[string]any{"rel": "inventories", "href": self + "/inventories"},
		map[string]any{"rel": "usages", "href": self + "/usages"},
	}}
}

// listProviders answers GET /resource_providers[?name=][&uuid=].
func (s *Server) listProviders(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := allowQuery(q, "name", "uuid"); err != nil {
		return err
	}
	hosts, err := s.api.Hosts(r.Context())
	if err != nil {
		return fmt.Errorf("list resource providers: %w", err)
	}
	out := []any{}
	for _, h := range hosts {
		if (q.Get("name") == "" || q.Get("name") == h.Name) && (q.Get("uuid") == "" || q.Get("uuid") == providerUUID(h.Name)) {
			out = append(out, s.providerJSON(r, h))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"resource_providers": out})
	return nil
}

// hostByProvider finds the host whose provider is uuid.
func (s *Server) hostByProvider(ctx context.Context, uuid string) (nova.Host, error) {
	hosts, err := s.api.Hosts(ctx)
	if err != nil {
		return nova.Host{}, fmt.Errorf("resource provider %s: %w", uuid, err)
	}
	for _, h := range hosts {
		if providerUUID(h.Name) == uuid {
			return h, nil
		}
	}
	return nova.Host{}, httpError(http.StatusNotFound, "No resource provider with uuid %s found", uuid)
}

// showProvider answers GET /resource_providers/{uuid}.
func (s *Server) showProvider(w http.ResponseWriter, r *http.Request) error {
	h, err := s.hostByProvider(r.Context(), r.PathValue("uuid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.providerJSON(r, h))
	return nil
}

func ratio(r float64) float64 {
	if r == 0 {
		return 1
	}
	return r
}

// inventories answers GET /resource_providers/{uuid}/inventories: VCPU
// and MEMORY_MB from the host's capacity.
func (s *Server) inventories(w http.ResponseWriter, r *http.Request) error {
	h, err := s.hostByProvider(r.Context(), r.PathValue("uuid"))
	if err != nil {
		return err
	}
	inv := func(total, reserved int, alloc float64) map[string]any {
		return map[string]any{"total": total, "reserved": reserved, "min_unit": 1, "max_unit": max(total, 1),
			"step_size": 1, "allocation_ratio": ratio(alloc)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"inventories": map[string]any{
		classVCPU: inv(h.VCPUs, h.ReservedVCPUs, h.CPUAllocRatio),
		classRAM:  inv(h.RAMMB, h.ReservedRAMMB, h.RAMAllocRatio),
	}})
	return nil
}

// usages answers GET /resource_providers/{uuid}/usages: the host's
// allocations (moves in flight counted on both ends, as placement does).
func (s *Server) usages(w http.ResponseWriter, r *http.Request) error {
	h, err := s.hostByProvider(r.Context(), r.PathValue("uuid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"usages": map[string]any{classVCPU: h.VCPUsUsed, classRAM: h.RAMMBUsed}})
	return nil
}
