package openstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"

	"github.com/dvms-project/dvms/nova"
)

// Request id headers: the one dvms sends, and the ones Nova answers with.
const (
	headerGlobalRequestID  = "X-OpenStack-Request-ID"
	headerLocalRequestID   = "X-Openstack-Request-Id"
	headerComputeRequestID = "X-Compute-Request-Id"
)

// Client is the nova.Client of a real cloud. It is safe for concurrent
// use.
type Client struct {
	cfg       Config
	compute   *gophercloud.ServiceClient
	placement *gophercloud.ServiceClient

	groupsMu sync.Mutex
	groups   groupIndex

	rpMu sync.Mutex
	rps  map[string]providerJSON // resource provider of each host, by host name
	// inv: each provider's inventories as last read, by provider UUID
	// (Config.InventoryCacheTTL).
	inv map[string]cachedInventory

	meter *meteredTransport
}

var _ nova.Client = (*Client)(nil)

// New authenticates against the cloud cfg names (clouds.yaml) and returns
// a client pinned to ComputeMicroversion.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []clouds.ParseOption{clouds.WithCloudName(cfg.Cloud)}
	if cfg.CloudsFile != "" {
		opts = append(opts, clouds.WithLocations(cfg.CloudsFile))
	}
	if cfg.Region != "" {
		opts = append(opts, clouds.WithRegion(cfg.Region))
	}
	ao, eo, tlsConfig, err := clouds.Parse(opts...)
	if err != nil {
		return nil, fmt.Errorf("openstack: clouds.yaml cloud %q: %w", cfg.Cloud, err)
	}
	// Long-running agents outlive their token: let gophercloud fetch a
	// new one on 401 (impossible when the cloud only gives a token).
	ao.AllowReauth = ao.TokenID == ""
	// Every request, the authentication included, goes through the
	// meter (gophercloud's WithTLSConfig would replace the transport).
	var next http.RoundTripper = http.DefaultTransport
	if tlsConfig != nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = tlsConfig
		next = t
	}
	mt := newMeteredTransport(next)
	mt.endpoint(nova.ServiceIdentity, ao.IdentityEndpoint)
	provider, err := config.NewProviderClient(ctx, ao,
		config.WithHTTPClient(http.Client{Timeout: cfg.RequestTimeout, Transport: mt}))
	if err != nil {
		return nil, fmt.Errorf("openstack: authenticate to cloud %q: %w", cfg.Cloud, classify(ctx, err))
	}
	provider.UserAgent.Prepend("dvms")
	compute, err := gopenstack.NewComputeV2(provider, eo)
	if err != nil {
		return nil, fmt.Errorf("openstack: compute endpoint of cloud %q: %w", cfg.Cloud, err)
	}
	compute.Microversion = ComputeMicroversion
	placement, err := gopenstack.NewPlacementV1(provider, eo)
	if err != nil {
		return nil, fmt.Errorf("openstack: placement endpoint of cloud %q: %w", cfg.Cloud, err)
	}
	return NewFromServiceClients(cfg, compute, placement), nil
}

// NewFromServiceClients builds a client on service clients made elsewhere
// (their provider authenticated). It pins compute to ComputeMicroversion
// and meters their providers' HTTP transport from now on (see Meter).
// cfg's retry, cache and concurrency settings apply; its cloud settings
// are ignored.
func NewFromServiceClients(cfg Config, compute, placement *gophercloud.ServiceClient) *Client {
	compute.Microversion = ComputeMicroversion
	mt, pt := instrument(compute.ProviderClient), instrument(placement.ProviderClient)
	if pt != mt {
		pt.meter = mt.meter // two providers, one meter
	}
	for _, t := range []*meteredTransport{mt, pt} {
		t.endpoint(nova.ServiceCompute, compute.Endpoint)
		t.endpoint(nova.ServicePlacement, placement.Endpoint)
	}
	return &Client{cfg: cfg, compute: compute, placement: placement, rps: map[string]providerJSON{}, inv: map[string]cachedInventory{}, meter: mt}
}

// Meter counts every HTTP request the client's provider sends: compute,
// placement and keystone (tokens, re-authentication), retries included,
// by template (see nova.Meter), with their latency up to the response
// headers. Requests made before the service endpoints were known (version
// discovery while connecting) count under nova.ServiceOther.
func (c *Client) Meter() *nova.Meter { return c.meter.meter }

// ---- metering ----

// meteredTransport records every request on a nova.Meter, its service
// found by the longest endpoint prefix of its URL.
type meteredTransport struct {
	next  http.RoundTripper
	meter *nova.Meter

	mu    sync.RWMutex
	bases []endpointBase
}

type endpointBase struct {
	service string
	prefix  string // host + path, without trailing slash
}

func newMeteredTransport(next http.RoundTripper) *meteredTransport {
	return &meteredTransport{next: next, meter: nova.NewMeter()}
}

// instrument returns the metered transport of provider, installing one
// around its current transport if it has none.
func instrument(p *gophercloud.ProviderClient) *meteredTransport {
	if mt, ok := p.HTTPClient.Transport.(*meteredTransport); ok {
		return mt
	}
	next := p.HTTPClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	mt := newMeteredTransport(next)
	p.HTTPClient.Transport = mt
	return mt
}

// endpoint registers the base URL of a service (ignored if unparsable).
func (t *meteredTransport) endpoint(service, base string) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return
	}
	prefix := u.Host + strings.TrimSuffix(u.Path, "/")
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bases = slices.DeleteFunc(t.bases, func(b endpointBase) bool { return b.service == service })
	t.bases = append(t.bases, endpointBase{service: service, prefix: prefix})
	// Longest prefix first.
	slices.SortFunc(t.bases, func(a, b endpointBase) int { return len(b.prefix) - len(a.prefix) })
}

// template finds the service of u and its path relative to the service.
func (t *meteredTransport) template(method string, u *url.URL) nova.Template {
	full := u.Host + u.Path
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, b := range t.bases {
		if rest, ok := strings.CutPrefix(full, b.prefix); ok && (rest == "" || rest[0] == '/') {
			return nova.Template{Service: b.service, Method: method, Path: nova.PathTemplate(rest, u.RawQuery)}
		}
	}
	return nova.Template{Service: nova.ServiceOther, Method: method, Path: nova.PathTemplate(u.Path, u.RawQuery)}
}

// RoundTrip implements http.RoundTripper.
func (t *meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	t.meter.Record(nova.Request{Template: t.template(req.Method, req.URL), Latency: time.Since(start), Class: nova.ClassOf(status)})
	return resp, err
}

// ---- requests ----

// request is one HTTP exchange with Nova or placement.
type request struct {
	sc     *gophercloud.ServiceClient
	method string
	url    string
	body   any   // JSON request body, nil for none
	out    any   // JSON response target, nil to discard
	ok     []int // accepted status codes
}

// do runs one request without retry. It returns the response headers,
// also when Nova answered with an error.
func (c *Client) do(ctx context.Context, r request) (http.Header, error) {
	headers := map[string]string{}
	if id := nova.RequestID(ctx); id != "" {
		headers[headerGlobalRequestID] = id
	}
	resp, err := r.sc.Request(ctx, r.method, r.url, &gophercloud.RequestOpts{
		JSONBody:     r.body,
		JSONResponse: r.out,
		OkCodes:      r.ok,
		MoreHeaders:  headers,
	})
	var h http.Header
	if resp != nil {
		h = resp.Header
	}
	if err != nil {
		var ue gophercloud.ErrUnexpectedResponseCode
		if h == nil && errors.As(err, &ue) {
			h = ue.ResponseHeader
		}
		return h, classify(ctx, err)
	}
	return h, nil
}

// get runs a GET, retrying with bounded exponential backoff (and jitter)
// while it fails with nova.ErrUnavailable. Reads have no side effect, so
// retrying them is always safe.
func (c *Client) get(ctx context.Context, sc *gophercloud.ServiceClient, url string, out any) (http.Header, error) {
	delay := c.cfg.RetryBase
	for attempt := 1; ; attempt++ {
		h, err := c.do(ctx, request{sc: sc, method: http.MethodGet, url: url, out: out, ok: []int{http.StatusOK}})
		if err == nil || !errors.Is(err, nova.ErrUnavailable) || attempt >= c.cfg.ReadAttempts || ctx.Err() != nil {
			if err != nil && attempt > 1 {
				err = fmt.Errorf("%w (%d attempts)", err, attempt)
			}
			return h, err
		}
		wait := delay + time.Duration(rand.Int64N(int64(delay)/5+1))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return h, fmt.Errorf("%w (%d attempts, then %w)", err, attempt, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, c.cfg.RetryMax)
	}
}

// action POSTs a server action and returns its receipt. It is not
// retried: when it fails with nova.ErrUnavailable its outcome is unknown.
func (c *Client) action(ctx context.Context, serverID string, body any) (nova.Receipt, error) {
	h, err := c.do(ctx, request{
		sc: c.compute, method: http.MethodPost,
		url:  c.compute.ServiceURL("servers", url.PathEscape(serverID), "action"),
		body: body, ok: []int{http.StatusAccepted},
	})
	return receipt(ctx, h), err
}

func receipt(ctx context.Context, h http.Header) nova.Receipt {
	r := nova.Receipt{GlobalRequestID: nova.RequestID(ctx)}
	if h != nil {
		r.LocalRequestID = h.Get(headerLocalRequestID)
		if r.LocalRequestID == "" {
			r.LocalRequestID = h.Get(headerComputeRequestID)
		}
	}
	return r
}

// classify translates a gophercloud or transport error to the nova
// sentinels, keeping Nova's own message.
func classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	// A 401 whose re-authentication failed: gophercloud's error does not
	// unwrap, so classify the re-authentication's own failure. Keystone
	// down (no answer, 5xx) is an outage like Nova's: ErrUnavailable, so
	// that reads are retried and followed actions wait it out.
	var rae *gophercloud.ErrUnableToReauthenticate
	if errors.As(err, &rae) && rae.ErrReauth != nil {
		if re := classify(ctx, rae.ErrReauth); errors.Is(re, nova.ErrUnavailable) {
			return fmt.Errorf("%w: keystone re-authentication: %w", nova.ErrUnavailable, rae.ErrReauth)
		}
	}
	var ue gophercloud.ErrUnexpectedResponseCode
	var pue *gophercloud.ErrUnexpectedResponseCode
	code, body := 0, []byte(nil)
	switch {
	case errors.As(err, &ue):
		code, body = ue.Actual, ue.Body
	case errors.As(err, &pue):
		code, body = pue.Actual, pue.Body
	}
	if code != 0 {
		var sentinel error
		switch {
		case code == http.StatusNotFound:
			sentinel = nova.ErrNotFound
		case code == http.StatusConflict:
			sentinel = nova.ErrConflict
		case code == http.StatusBadRequest:
			sentinel = nova.ErrBadRequest
		case code >= 500, code == http.StatusTooManyRequests:
			sentinel = nova.ErrUnavailable
		default:
			return fmt.Errorf("nova: HTTP %d: %s", code, message(body))
		}
		return fmt.Errorf("%w (HTTP %d: %s)", sentinel, code, message(body))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", nova.ErrUnavailable, ctx.Err())
	}
	var ne net.Error
	var ue2 *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue2) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", nova.ErrUnavailable, err)
	}
	return err
}

// message extracts the message of a Nova or placement error body:
// {"itemNotFound": {"code": 404, "message": "..."}} or
// {"errors": [{"status": 404, "title": "...", "detail": "..."}]}.
func message(body []byte) string {
	var nv map[string]json.RawMessage
	if json.Unmarshal(body, &nv) == nil {
		if raw, ok := nv["errors"]; ok {
			var pe []struct{ Title, Detail string }
			if json.Unmarshal(raw, &pe) == nil && len(pe) > 0 {
				return strings.TrimSpace(pe[0].Title + ": " + strings.Join(strings.Fields(pe[0].Detail), " "))
			}
		}
		for _, raw := range nv {
			var m struct{ Message string }
			if json.Unmarshal(raw, &m) == nil && m.Message != "" {
				return m.Message
			}
		}
	}
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// parseTime reads Nova's timestamps ("2026-11-22T13:42:28.000000",
// "2026-11-22T13:42:28Z"); those without a zone are UTC.
func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// query builds "?k=v&..." from pairs, skipping empty values.
func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
