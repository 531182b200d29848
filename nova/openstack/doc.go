// Package openstack is the nova.Client for a real OpenStack cloud, built on
// gophercloud v2: compute (nova-api) for servers, actions, migrations and
// services, and placement for host capacity and usage.
//
// # Microversion
//
// Every compute request carries `OpenStack-API-Version: compute 2.91`
// (ComputeMicroversion). 2.91 is the lowest microversion that has all this
// package needs, so the widest range of clouds (Zed, which serves 2.1–2.93,
// and later) accept it:
//   - 2.25: live migration with "block_migration": "auto";
//   - 2.47: servers embed their flavor (vcpus, ram), no flavor look-up;
//   - 2.48: the standard server diagnostics format (nova/demand);
//   - 2.53: os-services identified by UUID (PUT /os-services/{uuid});
//   - 2.64: server groups report one "policy";
//   - 2.71: a server shows its "server_groups";
//   - 2.91: unshelve to a named host ({"unshelve": {"host": H}}).
//
// Placement is read without a microversion (1.0 has resource providers by
// name, inventories and usages).
//
// # Capacity and usage come from placement
//
// os-hypervisors is not used: its usage comes from a periodic task (stale
// by up to update_resources_interval) and from 2.88 on it has no vcpus or
// memory fields at all. Placement allocations change at once, including
// the double allocation held on source and destination during a move. A
// host's resource provider is the one named like the host (the compute
// node's hypervisor_hostname), or, failing that, named host + "." + domain.
//
// # Errors, retries and request ids
//
// HTTP and transport errors are translated to the nova sentinels at this
// boundary: 404 ErrNotFound, 409 ErrConflict, 400 ErrBadRequest, 5xx, 429,
// connection errors and timeouts ErrUnavailable. Reads (GET) are retried
// with bounded exponential backoff on ErrUnavailable. Actions (POST, PUT)
// are never retried here: when one fails with ErrUnavailable Nova may or
// may not have accepted it, so the caller re-reads the server (task state,
// migrations) before deciding to ask again.
//
// A request made with a context from nova.WithRequestID sends that id as
// X-OpenStack-Request-ID (Nova logs it as the global request id); the
// Receipt of an action also records the local id Nova answered with
// (X-OpenStack-Request-Id, the request_id of `openstack server event
// list`).
//
// Tokens are renewed by gophercloud (AllowReauth) when they expire.
//
// This package imports nova and gophercloud; it knows nothing of DVMS and
// must not import scheduler, bus or consensus.
package openstack
