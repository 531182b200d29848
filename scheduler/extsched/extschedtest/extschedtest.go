// Package extschedtest holds test fixtures of the external scheduler.
package extschedtest

import "encoding/json"

// NovaRequest is what Nova's weigher posts: a RequestSpec primitive, the
// candidates in Nova's order and Nova's weights.
func NovaRequest(vcpus, ramMB int, hosts ...string) []byte {
	var hs []map[string]string
	weights := map[string]float64{}
	for i, h := range hosts {
		hs = append(hs, map[string]string{"host": h, "hypervisor_hostname": h})
		weights[h] = float64(len(hosts) - i)
	}
	body, _ := json.Marshal(map[string]any{
		"spec": map[string]any{"nova_object.name": "RequestSpec", "nova_object.namespace": "nova", "nova_object.version": "1.14",
			"nova_object.data": map[string]any{"instance_uuid": "11111111-2222-3333-4444-555555555555", "num_instances": 1,
				"flavor":         map[string]any{"nova_object.name": "Flavor", "nova_object.data": map[string]any{"name": "m1.test", "vcpus": vcpus, "memory_mb": ramMB}},
				"instance_group": nil, "scheduler_hints": map[string]any{}}},
		"rebuild": false, "resize": false, "live": false, "vmware": false,
		"hosts": hs, "weights": weights,
	})
	return body
}
