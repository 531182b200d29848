package fakeapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dvms-project/dvms/nova"
	"github.com/dvms-project/dvms/nova/fake"
)

// Path prefixes of the three services.
const (
	identityPrefix  = "/identity"
	computePrefix   = "/compute/v2.1"
	placementPrefix = "/placement"
)

// Microversions served.
const (
	computeVersion    = "2.91"
	computeMinVersion = "2.1"
	placementVersion  = "1.0"
)

// maxLimit is Nova's default max_limit: the largest page of a listing.
const maxLimit = 1000

// maxBody bounds a request body.
const maxBody = 1 << 20

// Options configure the served cloud.
type Options struct {
	// Region is the region of the catalog's endpoints. Default
	// "RegionOne".
	Region string
	// Username and ProjectName are the one user and project keystone
	// knows. Defaults "admin" and "admin".
	Username    string
	ProjectName string
	// Password, when not "", is the only password accepted; "" accepts
	// any password for Username.
	Password string
	// BaseURL is the scheme and authority the catalog's endpoints start
	// with (e.g. "http://10.0.0.1:8774"). "" uses the Host of each token
	// request, so that clients in other network namespaces get endpoints
	// they can reach.
	BaseURL string
	// TokenTTL is how long a token is valid, by the wall clock (tokens
	// are a transport matter, not part of the simulation). Default 1 h.
	TokenTTL time.Duration
}

func (o Options) withDefaults() Options {
	if o.Region == "" {
		o.Region = "RegionOne"
	}
	if o.Username == "" {
		o.Username = "admin"
	}
	if o.ProjectName == "" {
		o.ProjectName = "admin"
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = time.Hour
	}
	o.BaseURL = strings.TrimSuffix(o.BaseURL, "/")
	return o
}

// Server serves a *fake.Cloud over HTTP. It is an http.Handler, safe for
// concurrent use.
type Server struct {
	cloud *fake.Cloud
	api   *fake.View // reads and actions: charged nothing, no injected fault
	opts  Options
	mux   *http.ServeMux

	userID, projectID string

	mu     sync.Mutex
	tokens map[string]time.Time // token -> expiry
}

var _ http.Handler = (*Server)(nil)

// New returns the HTTP API of c.
func New(c *fake.Cloud, opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{
		cloud: c, api: c.Uncharged(), opts: opts, mux: http.NewServeMux(),
		userID:    nameID("user", opts.Username),
		projectID: nameID("project", opts.ProjectName),
		tokens:    map[string]time.Time{},
	}
	s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// handler is a route's function; a non-nil error is answered by the
// route's service error format.
type handler func(w http.ResponseWriter, r *http.Request) error

func (s *Server) routes() {
	// Keystone.
	s.mux.HandleFunc("GET "+identityPrefix+"/{$}", s.identityVersions)
	s.mux.HandleFunc("GET "+identityPrefix, s.identityVersions)
	s.mux.HandleFunc("GET "+identityPrefix+"/v3/{$}", s.identityVersion)
	s.mux.HandleFunc("GET "+identityPrefix+"/v3", s.identityVersion)
	s.mux.HandleFunc("POST "+identityPrefix+"/v3/auth/tokens", s.issueToken)

	// Compute. Version documents are unauthenticated, as in Nova.
	s.mux.HandleFunc("GET /compute/{$}", s.computeVersions)
	s.mux.HandleFunc("GET /compute", s.computeVersions)
	s.mux.HandleFunc("GET "+computePrefix+"/{$}", s.computeVersion)
	s.mux.HandleFunc("GET "+computePrefix, s.computeVersion)
	for pattern, h := range map[string]handler{
		"GET /os-services":                           s.listServices,
		"PUT /os-services/{id}":                      s.updateService,
		"GET /servers/detail":                        s.listServers,
		"GET /servers/{id}":                          s.showServer,
		"POST /servers/{id}/action":                  s.serverAction,
		"GET /servers/{id}/diagnostics":              s.diagnostics,
		"GET /servers/{id}/os-instance-actions":      s.instanceActions,
		"PUT /servers/{id}/metadata/{key}":           s.setMetadata,
		"DELETE /servers/{id}/metadata/{key}":        s.deleteMetadata,
		"GET /os-migrations":                         s.listMigrations,
		"GET /servers/{id}/migrations":               s.serverMigrations,
		"POST /servers/{id}/migrations/{mid}/action": s.migrationAction,
		"DELETE /servers/{id}/migrations/{mid}":      s.abortMigration,
		"GET /os-server-groups":                      s.listGroups,
		"GET /os-server-groups/{id}":                 s.showGroup,
	} {
		method, path, _ := strings.Cut(pattern, " ")
		s.mux.Handle(method+" "+computePrefix+path, s.compute(h))
	}

	// Placement.
	s.mux.HandleFunc("GET "+placementPrefix+"/{$}", s.placementVersions)
	s.mux.HandleFunc("GET "+placementPrefix, s.placementVersions)
	for pattern, h := range map[string]handler{
		"GET /resource_providers":                    s.listProviders,
		"GET /resource_providers/{uuid}":             s.showProvider,
		"GET /resource_providers/{uuid}/inventories": s.inventories,
		"GET /resource_providers/{uuid}/usages":      s.usages,
	} {
		method, path, _ := strings.Cut(pattern, " ")
		s.mux.Handle(method+" "+placementPrefix+path, s.placement(h))
	}

	s.mux.HandleFunc("/", s.notFound)
}

// notFound answers a path no route serves, in the format of the service
// its prefix names.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	err := httpError(http.StatusNotFound, "The resource could not be found: %s %s", r.Method, r.URL.Path)
	switch {
	case strings.HasPrefix(r.URL.Path, placementPrefix+"/"):
		writePlacementError(w, err)
	case strings.HasPrefix(r.URL.Path, identityPrefix+"/"):
		writeIdentityError(w, err)
	default:
		writeComputeError(w, newRequestID(), err)
	}
}

// ---- errors ----

// apiError is an error with the HTTP status it is answered with.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func httpError(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// statusOf maps an error to its HTTP status: the nova sentinels as
// nova/openstack's classify reads them back.
func statusOf(err error) int {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status
	case errors.Is(err, nova.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, nova.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, nova.ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, nova.ErrUnavailable), errors.Is(err, nova.ErrTimeout):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// computeTags are the keys of Nova's error bodies, by status (nova's
// api/openstack/wsgi.py Fault).
var computeTags = map[int]string{
	400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound",
	405: "badMethod", 409: "conflictingRequest", 413: "overLimit", 415: "badMediaType",
	429: "overLimit", 501: "notImplemented", 503: "serviceUnavailable",
}

// writeComputeError answers err as Nova does:
// {"itemNotFound": {"code": 404, "message": "..."}}.
func writeComputeError(w http.ResponseWriter, reqID string, err error) {
	status := statusOf(err)
	tag, ok := computeTags[status]
	if !ok {
		tag = "computeFault"
	}
	setRequestID(w, reqID)
	writeJSON(w, status, map[string]any{tag: map[string]any{"code": status, "message": err.Error()}})
}

// writePlacementError answers err as placement does:
// {"errors": [{"status": 404, "title": "Not Found", "detail": "..."}]}.
func writePlacementError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	id := newRequestID()
	w.Header().Set("Openstack-Request-Id", id)
	writeJSON(w, status, map[string]any{"errors": []map[string]any{{
		"status": status, "title": http.StatusText(status), "detail": err.Error(), "request_id": id,
	}}})
}

// writeIdentityError answers err as keystone does:
// {"error": {"code": 401, "title": "Unauthorized", "message": "..."}}.
func writeIdentityError(w http.ResponseWriter, err error) {
	status := statusOf(err)
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": status, "title": http.StatusText(status), "message": err.Error(),
	}})
}

// ---- JSON ----

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = fmt.Appendf(nil, `{"computeFault": {"code": 500, "message": %q}}`, "encode answer: "+err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// decodeBody reads a JSON request body into v, refusing what is not one
// JSON document (400 with what was wrong) and, when strict, members v
// does not have (Nova's schemas forbid additional properties).
func decodeBody(r *http.Request, v any, strict bool) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return httpError(http.StatusBadRequest, "read request body: %v", err)
	}
	if len(raw) > maxBody {
		return httpError(http.StatusRequestEntityTooLarge, "request body over %d bytes", maxBody)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return httpError(http.StatusBadRequest, "Malformed request body: empty, a JSON document is required")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return httpError(http.StatusBadRequest, "Malformed request body: %v", err)
	}
	if dec.More() {
		return httpError(http.StatusBadRequest, "Malformed request body: more than one JSON document")
	}
	return nil
}

// ---- ids ----

// newUUID returns a random version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b[:])
}

func formatUUID(b []byte) string {
	h := hex.EncodeToString(b[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// nameUUID is a name-based (version 5 style) UUID: the same kind and
// name always give the same UUID. Resource providers and migration
// UUIDs, which the fake does not have, are derived this way.
func nameUUID(kind, name string) string {
	sum := sha1.Sum([]byte("dvms-fakeapi\x00" + kind + "\x00" + name))
	sum[6] = sum[6]&0x0f | 0x50
	sum[8] = sum[8]&0x3f | 0x80
	return formatUUID(sum[:16])
}

// nameID is a keystone-style id (32 hex digits) derived from a name.
func nameID(kind, name string) string { return strings.ReplaceAll(nameUUID(kind, name), "-", "") }

func newRequestID() string { return "req-" + newUUID() }

var requestIDPattern = regexp.MustCompile(`^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// uuidPattern accepts the UUIDs Nova accepts as ids (hyphenated form).
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func setRequestID(w http.ResponseWriter, id string) {
	w.Header().Set("X-Openstack-Request-Id", id)
	w.Header().Set("X-Compute-Request-Id", id)
}

// ---- tokens ----

func (s *Server) newToken() (string, time.Time) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	now := time.Now()
	exp := now.Add(s.opts.TokenTTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, e := range s.tokens {
		if !now.Before(e) {
			delete(s.tokens, t)
		}
	}
	s.tokens[tok] = exp
	return tok, exp
}

func (s *Server) validToken(tok string) bool {
	if tok == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && time.Now().Before(exp)
}

var errUnauthorized = httpError(http.StatusUnauthorized, "The request you have made requires authentication.")

// baseURL is the scheme and authority the catalog names.
func (s *Server) baseURL(r *http.Request) string {
	if s.opts.BaseURL != "" {
		return s.opts.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
