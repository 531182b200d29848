package extsched

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Path is where the service answers, as cortex's external scheduler does.
const Path = "/scheduler/nova/external"

// Request is the body Nova's external-scheduler hook (and dvms_nova's
// weigher) POSTs: the RequestSpec as oslo.versionedobjects serializes it
// (obj_to_primitive), a few flags, the candidate hosts after Nova's
// filters, and the weights Nova's weighers gave them.
//
//	{"spec": {"nova_object.name": "RequestSpec", "nova_object.data": {
//	    "flavor": {"nova_object.data": {"vcpus": 2, "memory_mb": 2048, ...}},
//	    "instance_group": {"nova_object.data": {"policy": "anti-affinity", "hosts": ["compute-2"]}},
//	    "scheduler_hints": {"group": ["<uuid>"]}, "instance_uuid": "...", "num_instances": 1, ...}},
//	 "rebuild": false, "resize": false, "live": false, "vmware": false,
//	 "hosts": [{"host": "compute-1", "hypervisor_hostname": "compute-1"}, ...],
//	 "weights": {"compute-1": 1.5, ...}}
//
// A spec without the "nova_object.data" wrapping is accepted too.
type Request struct {
	Spec    json.RawMessage    `json:"spec"`
	Rebuild bool               `json:"rebuild"`
	Resize  bool               `json:"resize"`
	Live    bool               `json:"live"`
	VMware  bool               `json:"vmware"`
	Hosts   []RequestHost      `json:"hosts"`
	Weights map[string]float64 `json:"weights"`
}

// RequestHost is one candidate host.
type RequestHost struct {
	Host               string `json:"host"`
	ComputeHost        string `json:"compute_host,omitempty"` // older shape
	HypervisorHostname string `json:"hypervisor_hostname,omitempty"`
}

// Name is the compute host's name.
func (h RequestHost) Name() string {
	if h.Host != "" {
		return h.Host
	}
	return h.ComputeHost
}

// Response is the answer: the hosts in preferred order (a subset of the
// candidates). Nova's hook validates it strictly: nothing else is sent.
type Response struct {
	Hosts []string `json:"hosts"`
}

// Spec is what the weighing reads of the RequestSpec.
type Spec struct {
	InstanceUUID string
	ProjectID    string
	NumInstances int
	Flavor       string
	VCPUs        int
	RAMMB        int
	// GroupPolicy is the server group's policy ("" when none); GroupHosts
	// the hosts its members are on (Nova adds each host it picks during a
	// multi-instance request).
	GroupPolicy string
	GroupHosts  []string
}

// nova objects serialize as {"nova_object.data": {...}}.
func unwrap(raw json.RawMessage) json.RawMessage {
	var w struct {
		Data json.RawMessage `json:"nova_object.data"`
	}
	if json.Unmarshal(raw, &w) == nil && len(w.Data) > 0 {
		return w.Data
	}
	return raw
}

// ParseSpec reads the fields dvms uses from a serialized RequestSpec.
func ParseSpec(raw json.RawMessage) (Spec, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return Spec{}, errors.New("extsched: no spec")
	}
	var d struct {
		InstanceUUID  string          `json:"instance_uuid"`
		ProjectID     string          `json:"project_id"`
		NumInstances  int             `json:"num_instances"`
		Flavor        json.RawMessage `json:"flavor"`
		InstanceGroup json.RawMessage `json:"instance_group"`
	}
	if err := json.Unmarshal(unwrap(raw), &d); err != nil {
		return Spec{}, fmt.Errorf("extsched: spec: %w", err)
	}
	s := Spec{InstanceUUID: d.InstanceUUID, ProjectID: d.ProjectID, NumInstances: d.NumInstances}
	if len(d.Flavor) > 0 && string(d.Flavor) != "null" {
		var f struct {
			Name     string `json:"name"`
			VCPUs    int    `json:"vcpus"`
			MemoryMB int    `json:"memory_mb"`
		}
		if err := json.Unmarshal(unwrap(d.Flavor), &f); err != nil {
			return Spec{}, fmt.Errorf("extsched: spec flavor: %w", err)
		}
		s.Flavor, s.VCPUs, s.RAMMB = f.Name, f.VCPUs, f.MemoryMB
	}
	if len(d.InstanceGroup) > 0 && string(d.InstanceGroup) != "null" {
		var g struct {
			Policy   string   `json:"policy"`
			Policies []string `json:"policies"` // before Nova's 2.64 policy field
			Hosts    []string `json:"hosts"`
		}
		if err := json.Unmarshal(unwrap(d.InstanceGroup), &g); err != nil {
			return Spec{}, fmt.Errorf("extsched: spec instance_group: %w", err)
		}
		s.GroupPolicy, s.GroupHosts = g.Policy, g.Hosts
		if s.GroupPolicy == "" && len(g.Policies) > 0 {
			s.GroupPolicy = g.Policies[0]
		}
	}
	if s.VCPUs < 0 || s.RAMMB < 0 {
		return Spec{}, fmt.Errorf("extsched: spec flavor %q: negative size", s.Flavor)
	}
	return s, nil
}
