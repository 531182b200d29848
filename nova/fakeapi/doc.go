// Package fakeapi serves a simulated cloud (a *fake.Cloud of nova/fake)
// over HTTP as a subset of the real OpenStack APIs, so that the real
// client of nova/openstack talks to it unchanged: the multi-site test
// bed runs `dvms agent` processes in network namespaces against one fake
// Nova this way, and contract_test.go runs nova/novatest's contract
// suite through the real client and this server, proving that the client
// and the HTTP fake agree.
//
// Every answer comes from the fake.Cloud at the time of the request:
// nothing is canned. The server reads and acts through the cloud's
// Uncharged view: HTTP requests are not charged on the cloud's Meter
// (the client's own Meter counts them) and no fault is injected.
//
// Served, under one base URL (Options.BaseURL, or the Host the client
// used):
//
// Keystone v3 (/identity):
//   - GET /identity, /identity/v3: version documents;
//   - POST /identity/v3/auth/tokens: password authentication of
//     Options.Username scoped to Options.ProjectName (any password unless
//     Options.Password is set), 201 with X-Subject-Token and a catalog
//     naming compute (/compute/v2.1), placement (/placement) and identity,
//     public and internal, in Options.Region. Anything else is 401.
//
// Compute, microversion 2.91 only (/compute/v2.1; a request without a
// microversion is served 2.91, another microversion is 406):
//   - GET /os-services?binary&host, PUT /os-services/{uuid} (status,
//     disabled_reason, forced_down);
//   - GET /servers/detail?all_tenants&host&status&limit&marker (paged by
//     server ID, next link on a full page), GET /servers/{id};
//   - POST /servers/{id}/action: os-migrateLive, shelve, shelveOffload,
//     unshelve (null or with host), 202 with X-Openstack-Request-Id;
//   - GET /os-migrations?instance_uuid&status&migration_type&source_compute;
//   - GET /servers/{id}/migrations (in progress, 2.23 memory figures),
//     POST /servers/{id}/migrations/{mid}/action {"force_complete": null},
//     DELETE /servers/{id}/migrations/{mid} (abort);
//   - GET /os-server-groups?all_projects&limit&offset, GET
//     /os-server-groups/{id} (groups are seen through their members);
//   - PUT and DELETE /servers/{id}/metadata/{key};
//   - GET /servers/{id}/diagnostics (2.48 format, from the demand set
//     with fake.Cloud.SetDemand);
//   - GET /servers/{id}/os-instance-actions.
//
// Placement 1.0 (/placement): GET /placement/ (versions),
// /resource_providers?name&uuid, /resource_providers/{uuid}, its
// /inventories (VCPU, MEMORY_MB) and /usages. A host's provider is named
// like the host, its UUID derived from the name. Generations are not
// modelled and not served.
//
// Errors are Nova's and placement's bodies with the status
// nova/openstack maps back to the same sentinel: nova.ErrNotFound 404
// (itemNotFound), nova.ErrConflict 409 (conflictingRequest),
// nova.ErrBadRequest 400 (badRequest), nova.ErrUnavailable 503. A body
// that is not JSON, or has members Nova's schema forbids, is 400; a
// query parameter not served is 400; an unknown path is 404; a missing or
// unknown X-Auth-Token is 401.
//
// Timestamps (a server's created, a service's updated_at, a migration's
// created_at and updated_at) are the fake's clock. nova/openstack
// compares a server's created with its own wall clock to tell whether
// its server-group index may miss the server: with a fake clock far from
// the wall clock (a ManualClock in the past, a ScaledClock faster than
// real time), a client may show a new server's group only after its
// Config.GroupCacheTTL. Start the fake's clock at the wall clock's now,
// at factor 1, or give the agents a short GroupCacheTTL.
//
// Where Nova and the fake in process differ, the HTTP API answers as
// Nova: servers/detail?host= of an unknown host lists nothing (the
// fake's Servers says nova.ErrNotFound), os-migrations of an unknown
// server lists nothing, and deleting an absent metadata key is 404.
//
// Known differences from Nova: the fake has one project, so all_tenants
// and all_projects change nothing; zones are the fake's ("" when a host
// has none, where Nova says "nova"); listings are ordered by ID, not by
// creation; an empty metadata value cannot be stored (400); unshelve to
// an availability zone is not served (400).
package fakeapi
