package nova

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Implementations translate their transport errors to
// these at the package boundary and wrap them with context (%w).
var (
	// ErrNotFound: the server, host, service or migration does not exist (HTTP 404).
	ErrNotFound = errors.New("nova: not found")
	// ErrConflict: the request conflicts with the resource state, typically a
	// server with a task state or in the wrong status (HTTP 409).
	ErrConflict = errors.New("nova: conflict")
	// ErrUnavailable: a transient failure (HTTP 5xx, connection error,
	// timeout). The caller may retry with backoff; the outcome of a
	// non-idempotent action that failed this way is unknown: re-read first.
	ErrUnavailable = errors.New("nova: unavailable")
	// ErrBadRequest: Nova refused the request as invalid (HTTP 400), e.g. a
	// destination host that does not exist or is the source.
	ErrBadRequest = errors.New("nova: bad request")
	// ErrTimeout: a followed migration did not end in time.
	ErrTimeout = errors.New("nova: migration timed out")
	// ErrNotMeasured: a DemandSource does not measure the host it was
	// asked about (a cgroup source measures only the machine it runs on).
	// It is not a failure of the source: callers take that host's demand
	// from elsewhere (a partition snapshot).
	ErrNotMeasured = errors.New("nova: host not measured by this source")
)

// Service states, as the os-services API reports them.
const (
	ServiceEnabled  = "enabled"
	ServiceDisabled = "disabled"
	ServiceUp       = "up"
	ServiceDown     = "down"
)

// Server statuses used by dvms (Nova has more; others are passed through).
const (
	StatusActive           = "ACTIVE"
	StatusMigrating        = "MIGRATING"
	StatusShelved          = "SHELVED"
	StatusShelvedOffloaded = "SHELVED_OFFLOADED"
	StatusError            = "ERROR"
)

// Migration statuses, as os-migrations reports them. Terminal ones are
// completed, error, failed and cancelled.
const (
	MigrationAccepted      = "accepted"
	MigrationQueued        = "queued"
	MigrationPreparing     = "preparing"
	MigrationRunning       = "running"
	MigrationPostMigrating = "post-migrating"
	MigrationCompleted     = "completed"
	MigrationError         = "error"
	MigrationFailed        = "failed"
	MigrationCancelled     = "cancelled"
)

// Server group policies.
const (
	PolicyAffinity         = "affinity"
	PolicyAntiAffinity     = "anti-affinity"
	PolicySoftAffinity     = "soft-affinity"
	PolicySoftAntiAffinity = "soft-anti-affinity"
)

// Metadata keys dvms reads on servers. MetaPriority and MetaPin are the
// operators' controls: a client resolves them into Server.Metadata from
// the flavor's extra specs (nova/openstack; only an operator can set
// those) and from the server's own metadata only when told to trust it
// (its owner can write it). nova/fake takes Metadata as it is.
const (
	// MetaPriority: integer, higher is more important; the lowest priority
	// servers are shelved first when preemption is enabled. Default 0.
	MetaPriority = "dvms:priority"
	// MetaPin: "true" means dvms never moves this server.
	MetaPin = "dvms:pin"
	// MetaShelved marks a server dvms shelved (preemption); its value is
	// the dvms event id. Only servers with it are unshelved by dvms: a
	// server an operator shelved stays shelved.
	MetaShelved = "dvms:shelved"
)

// Service is the nova-compute service of a host.
type Service struct {
	ID             string // os-services id (a UUID from microversion 2.53)
	Host           string
	Status         string // enabled | disabled
	State          string // up | down
	DisabledReason string
	ForcedDown     bool
	UpdatedAt      time.Time
}

// Disabled reports whether the operator disabled the service.
func (s Service) Disabled() bool { return s.Status == ServiceDisabled }

// Host is a compute host with its capacity and the usage placement
// accounts for it. Capacities follow placement: what the scheduler
// accepts is (Total - Reserved) * AllocationRatio.
type Host struct {
	Name string
	Zone string // availability zone, "" when unknown
	// Physical capacity (placement inventory totals).
	VCPUs int
	RAMMB int
	// Placement inventory details.
	ReservedVCPUs int
	ReservedRAMMB int
	CPUAllocRatio float64
	RAMAllocRatio float64
	// Current placement usage (allocations of servers on the host,
	// including servers migrating to or from it).
	VCPUsUsed int
	RAMMBUsed int
	Service   Service
}

// AllocatableVCPUs is the VCPU amount placement accepts on the host.
func (h Host) AllocatableVCPUs() float64 {
	r := h.CPUAllocRatio
	if r == 0 {
		r = 1
	}
	return float64(h.VCPUs-h.ReservedVCPUs) * r
}

// AllocatableRAMMB is the MEMORY_MB amount placement accepts on the host.
func (h Host) AllocatableRAMMB() float64 {
	r := h.RAMAllocRatio
	if r == 0 {
		r = 1
	}
	return float64(h.RAMMB-h.ReservedRAMMB) * r
}

// ServerGroup is the server group a server belongs to, if any.
type ServerGroup struct {
	ID     string
	Name   string
	Policy string
}

// Server is a Nova server as dvms needs it.
type Server struct {
	ID   string
	Name string
	// InstanceName is OS-EXT-SRV-ATTR:instance_name (admin): the name
	// of the server's libvirt domain on its host, from Nova's
	// instance_name_template (instance-%08x by default). A demand source
	// measuring the host's guests maps them to servers by it.
	InstanceName string
	Host         string // compute host (OS-EXT-SRV-ATTR:host); "" when offloaded
	Zone         string
	Status       string
	TaskState    string // OS-EXT-STS:task_state, "" when none
	// Locked: its owner or an operator locked it (`openstack server
	// lock`): dvms never moves, shelves or unshelves it (Nova lets an
	// admin context, which dvms' role is, act on a locked server).
	Locked   bool
	Flavor   string
	VCPUs    int
	RAMMB    int
	Group    *ServerGroup
	Metadata map[string]string
}

// Migration is one os-migrations record.
type Migration struct {
	ID        string
	ServerID  string
	Source    string
	Dest      string
	Type      string // live-migration, migration, ...
	Status    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Terminal reports whether the migration ended (a cold migration
// "finished" waits for its confirmation: not ended).
func (m Migration) Terminal() bool {
	switch m.Status {
	case MigrationCompleted, MigrationError, MigrationFailed, MigrationCancelled, MigrationConfirmed, MigrationReverted:
		return true
	}
	return false
}

// Succeeded reports whether the migration completed.
func (m Migration) Succeeded() bool { return m.Status == MigrationCompleted }

// MigrationProgress is one migration of a server in progress, as GET
// /servers/{id}/migrations shows it (microversion 2.23+). The memory
// figures are what the compute driver last reported (libvirt: its job
// info); 0 when it reports none (the fake virt driver, the first
// seconds of a migration).
type MigrationProgress struct {
	ID     string
	Status string
	Source string
	Dest   string
	// MemoryTotal, MemoryProcessed and MemoryRemaining are bytes:
	// memory_total_bytes, memory_processed_bytes, memory_remaining_bytes.
	MemoryTotal     int64
	MemoryProcessed int64
	MemoryRemaining int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// HasMemory reports whether the driver reported memory figures.
func (p MigrationProgress) HasMemory() bool { return p.MemoryTotal > 0 }

// Receipt identifies an action Nova accepted: the global request id dvms
// sent (X-OpenStack-Request-ID, derived from the dvms event) and the local
// request id Nova answered with. The local id is what
// `openstack server event list` shows.
type Receipt struct {
	GlobalRequestID string
	LocalRequestID  string
}

// Client is what a dvms agent needs from Nova. Every method takes ctx
// first and is safe for concurrent use. Errors wrap the sentinels above.
// Actions are asynchronous in Nova: a nil error means Nova accepted the
// request (202), not that it finished; follow migrations with
// Migrations, and server status with GetServer.
type Client interface {
	// Hosts lists compute hosts with capacity, usage and service state.
	Hosts(ctx context.Context) ([]Host, error)
	// Host returns one compute host.
	Host(ctx context.Context, name string) (Host, error)
	// Services lists the nova-compute services of the region (one cheap
	// request: the region's maintenance watch polls it).
	Services(ctx context.Context) ([]Service, error)
	// Servers lists the servers on a compute host (all projects).
	Servers(ctx context.Context, host string) ([]Server, error)
	// Server returns one server.
	Server(ctx context.Context, id string) (Server, error)
	// LiveMigrate asks Nova to live-migrate a server to dest
	// (block_migration auto). dest "" lets Nova's scheduler choose.
	LiveMigrate(ctx context.Context, serverID, dest string) (Receipt, error)
	// Migrations lists the migrations of a server, newest first.
	Migrations(ctx context.Context, serverID string) ([]Migration, error)
	// MigrationsInProgress lists the live migrations of a server in
	// progress with their memory progress (GET /servers/{id}/migrations);
	// a migration that ended is no longer listed (follow its end with
	// Migrations).
	MigrationsInProgress(ctx context.Context, serverID string) ([]MigrationProgress, error)
	// ForceCompleteMigration asks Nova to force a running live migration
	// to complete (POST /servers/{id}/migrations/{mid}/action
	// {"force_complete": null}, 2.22): post-copy where the operator
	// permits it, else the guest is paused until the copy ends.
	// ErrConflict: the server is no longer migrating (the migration
	// ended meanwhile); ErrBadRequest: the migration is not running
	// (not yet, or post-migrating already).
	ForceCompleteMigration(ctx context.Context, serverID, migrationID string) error
	// AbortMigration asks Nova to abort a live migration (DELETE
	// /servers/{id}/migrations/{mid}, 2.24; queued and preparing ones
	// too from 2.65): it ends cancelled and the server stays on its
	// source. ErrConflict: the server is no longer migrating;
	// ErrBadRequest: too late to abort (post-migrating); ErrNotFound: no
	// such migration of the server.
	AbortMigration(ctx context.Context, serverID, migrationID string) error
	// Shelve shelves a server; ShelveOffload frees its host.
	Shelve(ctx context.Context, serverID string) (Receipt, error)
	ShelveOffload(ctx context.Context, serverID string) (Receipt, error)
	// Unshelve unshelves an offloaded server, on host if not "".
	Unshelve(ctx context.Context, serverID, host string) (Receipt, error)
	// SetServiceStatus disables (with reason) or enables the
	// nova-compute service of host.
	SetServiceStatus(ctx context.Context, host string, disabled bool, reason string) error
	// SetServerMetadata sets one metadata key of a server; value ""
	// deletes the key (absent already is no error).
	SetServerMetadata(ctx context.Context, serverID, key, value string) error
	// ShelvedServers lists the SHELVED and SHELVED_OFFLOADED servers of
	// all projects (a SHELVED one still has its host).
	ShelvedServers(ctx context.Context) ([]Server, error)
}

// Demand is what a server really uses, as a metrics source measures it.
type Demand struct {
	CPU   float64 // cores
	RAMMB float64
}

// DemandSource measures per-server demand on a host. A source that fails
// returns an error; callers raise no event from missing data.
type DemandSource interface {
	// Demand returns the demand of each server on host, keyed by server ID.
	// Servers missing from the map have unknown demand.
	Demand(ctx context.Context, host string) (map[string]Demand, error)
}

// ServersObserver is an optional interface of a DemandSource that maps
// what it measures to servers through Nova's listing of the host (the
// cgroup source: libvirt domains by instance name). The agent's monitor
// hands it every listing of its host's servers it reads anyway: no
// extra Nova request.
type ServersObserver interface {
	ObserveServers(host string, servers []Server)
}

type requestIDKey struct{}

// WithRequestID returns a context whose Nova requests carry id as
// X-OpenStack-Request-ID (it must look like "req-<uuid>").
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id set with WithRequestID, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
