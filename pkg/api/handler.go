package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/strictjson"
	"github.com/clerum/hcc/pkg/version"
)

const (
	// DefaultTokenCacheSize bounds the verified-token cache: comfortably
	// more than the live Hosts of one cluster, each holding one or two
	// tokens at a time, at about 200 bytes an entry.
	DefaultTokenCacheSize = 16384
	// rateLimitMaxKeys caps the rate limiter's memory (see
	// fixedWindowLimiter): two actions for 32768 Hosts.
	rateLimitMaxKeys = 1 << 16
	// entryCacheMaxEntries bounds the encoded-entry cache: more than the
	// McpServers of one namespace (test/bench serves 10,000; at 4,096 the
	// cache was cleared over and over), at about 300 bytes an entry.
	entryCacheMaxEntries = 1 << 16
	// maxCredentialBodyBytes caps the credential request body, which holds
	// one server name (a DNS label).
	maxCredentialBodyBytes = 4 << 10
	// timestampLayout is RFC 3339 in UTC with milliseconds,
	// "2026-02-14T15:11:12.000Z", as docs/http-api.md shows it.
	timestampLayout = "2006-01-02T15:04:05.000Z07:00"
)

// Error bodies. Each is the only body of its status, whatever the cause,
// so a caller learns nothing from a refusal beyond its status.
var (
	bodyUnauthorized          = []byte(`{"error":"unauthorized"}`)
	bodyNotFound              = []byte(`{"error":"not_found"}`)
	bodyBadRequest            = []byte(`{"error":"bad_request"}`)
	bodyGone                  = []byte(`{"error":"gone"}`)
	bodyRateLimited           = []byte(`{"error":"rate_limited"}`)
	bodyMethodNotAllowed      = []byte(`{"error":"method_not_allowed"}`)
	bodyUnavailable           = []byte(`{"error":"unavailable"}`)
	bodyCredentialUnavailable = []byte(`{"error":"credential_unavailable"}`)
)

// Options configure NewHandler.
type Options struct {
	// Sources are what the API routes read. Unused when Dev is set.
	Sources Sources
	// Inventory, when set, caches each Context's v2 inventory; the
	// informers behind Sources keep it exact (NewInventoryCache). Unused
	// when Dev is set.
	Inventory *InventoryCache
	// Dev, when set, serves the dev-mode fixtures: the v1 inventory from
	// them, and v2 fails closed since no live Host authority exists.
	Dev *DevFixtures
	// Namespace is the MCP server namespace, part of every server URL.
	Namespace     string
	ClusterDomain string
	HostAuth      config.HostAuth
	// DesktopToken guards the desktop route; empty leaves it open.
	DesktopToken string
	// TokenCacheSize bounds the verified-token cache; 0 disables it.
	TokenCacheSize int
	// Readiness gates the API routes (503 until ready) and backs /ready.
	Readiness *health.Readiness
	Gatherer  prometheus.Gatherer
	Metrics   *Metrics
	// ImageRefused is the image allowlist's refusal in enforce mode
	// (imagepolicy.Enforced over CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES, the
	// controller's own judgement), nil in audit mode: a refused server is
	// reported deployed and ready false and its credential is not handed
	// out (docs/http-api.md).
	ImageRefused func(*v1alpha1.McpServer) bool
	// Clock is the time used for tokens, rate limits and timestamps;
	// defaults to the real clock.
	Clock clock.PassiveClock
	Log   zerolog.Logger
}

type handler struct {
	src           Sources
	dev           *DevFixtures
	namespace     string
	clusterDomain string
	verifier      TokenVerifier
	limiter       *fixedWindowLimiter
	entries       *entryCache
	// inventory is Options.Inventory; nil builds every inventory afresh.
	inventory *InventoryCache
	// refused is Options.ImageRefused; nil refuses nothing.
	refused func(*v1alpha1.McpServer) bool
	// desktopDigest is SHA-256 of the desktop token, nil when open.
	desktopDigest []byte
	readiness     *health.Readiness
	metrics       *Metrics
	clock         clock.PassiveClock
	// log is for audit and operational lines; refusals go to refusalLog,
	// sampled so that a flood of bad tokens cannot flood the logs (the
	// failure metric still counts every one).
	log        zerolog.Logger
	refusalLog zerolog.Logger
}

// NewHandler returns the hcc-api router: the routes of docs/http-api.md,
// /, /health, /ready and /metrics included.
func NewHandler(o Options) http.Handler {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	var verifier TokenVerifier = &rs256Verifier{rules: newTokenRules(o.HostAuth), clock: o.Clock}
	if o.TokenCacheSize > 0 {
		verifier = &cachingVerifier{
			next:   verifier,
			cache:  newTokenCache(o.TokenCacheSize),
			clock:  o.Clock,
			hits:   o.Metrics.tokenCache.WithLabelValues("hit"),
			misses: o.Metrics.tokenCache.WithLabelValues("miss"),
		}
	}
	h := &handler{
		src:           o.Sources,
		dev:           o.Dev,
		namespace:     o.Namespace,
		clusterDomain: o.ClusterDomain,
		verifier:      verifier,
		limiter:       newFixedWindowLimiter(o.HostAuth.RateLimitPerMinute, rateLimitWindow, rateLimitMaxKeys),
		entries:       newEntryCache(entryCacheMaxEntries),
		inventory:     o.Inventory,
		refused:       o.ImageRefused,
		readiness:     o.Readiness,
		metrics:       o.Metrics,
		clock:         o.Clock,
		log:           o.Log,
		refusalLog:    o.Log.Sample(&zerolog.BurstSampler{Burst: 20, Period: time.Second}),
	}
	if o.Dev != nil {
		h.src = o.Dev.sources()
		h.inventory = nil
	}
	if o.DesktopToken != "" {
		d := sha256.Sum256([]byte(o.DesktopToken))
		h.desktopDigest = d[:]
	}

	healthMux := http.NewServeMux()
	health.Register(healthMux, o.Readiness, o.Gatherer)

	r := chi.NewRouter()
	// Each route is instrumented under its own pattern, fixed here, so a
	// raw path never becomes a label and nothing is rebuilt per request.
	handle := func(method, pattern string, fn http.Handler) {
		r.Method(method, pattern, h.instrument(pattern, fn))
	}
	unmatched := func(status int, body []byte) http.HandlerFunc {
		return h.instrument("unmatched", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeBody(w, status, body, false)
		})).ServeHTTP
	}
	r.NotFound(unmatched(http.StatusNotFound, bodyNotFound))
	r.MethodNotAllowed(unmatched(http.StatusMethodNotAllowed, bodyMethodNotAllowed))
	handle(http.MethodGet, "/", http.HandlerFunc(h.serveInfo))
	for _, path := range []string{"/health", "/ready", "/metrics"} {
		handle(http.MethodGet, path, healthMux)
	}
	// The caller-selected v1 routes are tombstoned: no fallback, no hint.
	handle(http.MethodGet, "/api/v1/mcpservers/context/{contextRef}", http.HandlerFunc(serveGone))
	handle(http.MethodGet, "/api/v1/mcpservers/{name}/auth", http.HandlerFunc(serveGone))
	handle(http.MethodGet, "/api/v1/mcpservers", h.requireReady(h.serveSystemInventory))
	handle(http.MethodGet, "/api/v1/desktop/{hostRef}", h.requireReady(h.serveDesktop))
	handle(http.MethodGet, "/api/v2/hosts/self/mcpservers", h.requireReady(h.serveHostInventory))
	handle(http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", h.requireReady(h.serveCredential))
	return r
}

// instrument records the requests of one route: count by status code and
// latency.
func (h *handler) instrument(route string, next http.Handler) http.Handler {
	latency := h.metrics.duration.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		h.metrics.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
		latency.Observe(time.Since(start).Seconds())
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// requireReady answers 503 until every cache has synced: an empty cache
// would otherwise turn into wrong 401s, 404s and empty inventories.
func (h *handler) requireReady(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.readiness.Ready() {
			writeBody(w, http.StatusServiceUnavailable, bodyUnavailable, true)
			return
		}
		next(w, r)
	})
}

func (h *handler) serveInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"name":    "hcc-api",
		"version": version.Version,
		"devMode": h.dev != nil,
		"routes": []string{
			"GET /health", "GET /ready", "GET /metrics",
			"GET /api/v1/mcpservers",
			"GET /api/v1/desktop/{hostRef}",
			"GET /api/v2/hosts/self/mcpservers",
			"POST /api/v2/hosts/self/mcpservers/credential",
		},
	}, false)
}

func serveGone(w http.ResponseWriter, _ *http.Request) {
	writeBody(w, http.StatusGone, bodyGone, false)
}

// serveSystemInventory is the anonymous, metadata-only v1 inventory of
// every server, kept for the mcp-proxy poller.
func (h *handler) serveSystemInventory(w http.ResponseWriter, _ *http.Request) {
	servers, err := h.src.McpServers.List(labels.Everything())
	if err != nil {
		writeBody(w, http.StatusServiceUnavailable, bodyUnavailable, false)
		return
	}
	slices.SortFunc(servers, func(a, b *v1alpha1.McpServer) int { return strings.Compare(a.Name, b.Name) })
	inv := systemInventory{Servers: make([]systemInventoryEntry, 0, len(servers)), ContextRef: "*", Timestamp: h.timestamp()}
	for _, s := range servers {
		inv.Servers = append(inv.Servers, systemInventoryEntry{
			Name:       s.Name,
			ContextRef: s.Spec.ContextRef,
			Transport:  h.transportOf(s),
			Enabled:    s.Spec.IsEnabled(),
			Status:     statusOf(s, h.refused),
		})
	}
	writeJSON(w, http.StatusOK, inv, false)
}

type desktopStatus struct {
	HostRef string `json:"hostRef"`
	Enabled bool   `json:"enabled"`
	Ready   bool   `json:"ready"`
}

// serveDesktop reports whether a Host has the desktop sidecar and is Ready.
func (h *handler) serveDesktop(w http.ResponseWriter, r *http.Request) {
	if h.desktopDigest != nil && !h.desktopTokenMatches(bearerToken(r)) {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeBody(w, http.StatusUnauthorized, bodyUnauthorized, true)
		return
	}
	host, err := h.src.Hosts.Get(chi.URLParam(r, "hostRef"))
	if err != nil {
		writeBody(w, http.StatusNotFound, bodyNotFound, true)
		return
	}
	writeJSON(w, http.StatusOK, desktopStatus{
		HostRef: host.Name,
		Enabled: host.Spec.DesktopEnabled(),
		Ready:   meta.IsStatusConditionTrue(host.Status.Conditions, v1alpha1.ConditionReady),
	}, true)
}

// desktopTokenMatches compares digests in constant time: comparing equal
// length digests also hides the configured token's length.
func (h *handler) desktopTokenMatches(token string) bool {
	d := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(d[:], h.desktopDigest) == 1
}

// serveHostInventory lists the servers the caller's live Context grants.
// The authority is resolved on every request; the inventory of its
// Context comes from the InventoryCache when there is one, and is built
// afresh otherwise.
func (h *handler) serveHostInventory(w http.ResponseWriter, r *http.Request) {
	a, ok := h.authorize(w, r, actionInventory)
	if !ok {
		return
	}
	head := h.inventoryHead(a.context)
	buf := inventoryBuffers.Get().(*[]byte)
	*buf = appendHostInventory((*buf)[:0], head, h.clock.Now())
	writeBody(w, http.StatusOK, *buf, true)
	if cap(*buf) <= maxPooledInventory {
		inventoryBuffers.Put(buf)
	}
}

// inventoryBuffers hold answers while they are written: Write copies them,
// so one answer's buffer serves the next. One larger than
// maxPooledInventory (a Context of thousands of servers) is left to the
// collector rather than kept.
var inventoryBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledInventory = 256 << 10

// inventoryHead returns the inventory of ctx up to its timestamp
// (hostInventoryHead), from the cache when it holds the current one.
func (h *handler) inventoryHead(ctx *v1alpha1.Context) []byte {
	if h.inventory == nil {
		return h.buildInventoryHead(ctx)
	}
	head, ticket, ok := h.inventory.get(ctx)
	if ok {
		h.metrics.inventoryHits.Inc()
		return head
	}
	h.metrics.inventoryMisses.Inc()
	head = h.buildInventoryHead(ctx)
	h.inventory.put(ticket, ctx, head)
	return head
}

// buildInventoryHead reads the servers ctx grants and their Secrets now
// and encodes them; only the encoding of each entry is memoized (see
// entryCache).
func (h *handler) buildInventoryHead(ctx *v1alpha1.Context) []byte {
	servers := grantedServers(ctx, h.src.McpServers)
	entries := make([][]byte, 0, len(servers))
	for _, s := range servers {
		entries = append(entries, h.entries.get(s, credentialSecret(h.src.Secrets, s), h.encodeHostEntry))
	}
	return hostInventoryHead(entries)
}

// encodeHostEntry encodes the inventory entry of server s, whose auth
// names secret (nil if none or missing).
func (h *handler) encodeHostEntry(s *v1alpha1.McpServer, secret *corev1.Secret) []byte {
	e := hostInventoryEntry{
		Name:         s.Name,
		Transport:    h.transportOf(s),
		Enabled:      s.Spec.IsEnabled(),
		Status:       statusOf(s, h.refused),
		AuthRequired: s.Spec.Auth != nil,
	}
	if e.AuthRequired {
		e.CredentialRevision = credentialOf(s, secret).revision(s)
	}
	return mustMarshal(e)
}

type credentialResponse struct {
	// Token is null for a server without auth.
	Token              *string `json:"token"`
	CredentialRevision string  `json:"credentialRevision"`
}

// serveCredential hands out one granted server's credential. The order is
// the security argument: authority, then the body, then the grant, and
// only then the Secret; after the read the authority, the grant, the
// server's auth reference and the Secret's version are checked again, so
// a revocation or a write racing the read wins (see revalidate).
func (h *handler) serveCredential(w http.ResponseWriter, r *http.Request) {
	a, ok := h.authorize(w, r, actionCredential)
	if !ok {
		return
	}
	name, ok := decodeCredentialRequest(w, r)
	if !ok {
		writeBody(w, http.StatusBadRequest, bodyBadRequest, true)
		return
	}
	server, ok := grantedServer(a.context, name, h.src.McpServers)
	if !ok || withheld(server, h.refused) {
		writeBody(w, http.StatusNotFound, bodyNotFound, true)
		return
	}
	secret := credentialSecret(h.src.Secrets, server)
	cred := credentialOf(server, secret)
	if err := revalidate(h.src, a, server, secret, h.refused); err != nil {
		if errors.Is(err, errNotGranted) {
			writeBody(w, http.StatusNotFound, bodyNotFound, true)
		} else {
			h.refuse(w, r, err)
		}
		return
	}
	if cred.required && !cred.resolved {
		h.log.Warn().Str("server", server.Name).Str("secret", cred.ref.Name).Str("key", cred.ref.Key).
			Msg("credential requested but its Secret or key is missing")
		writeBody(w, http.StatusServiceUnavailable, bodyCredentialUnavailable, true)
		return
	}
	resp := credentialResponse{CredentialRevision: cred.revision(server)}
	if cred.required {
		token := string(cred.value)
		resp.Token = &token
	}
	h.log.Info().Str("audit", "credential").
		Str("host", a.host.Name).Str("hostUID", string(a.host.UID)).
		Str("server", server.Name).Bool("authRequired", cred.required).
		Str("credentialRevision", resp.CredentialRevision).
		Msg("credential handed out")
	writeJSON(w, http.StatusOK, resp, true)
}

// decodeCredentialRequest reads the body: one JSON object whose only
// member is serverName, so spelled, with a non-empty string value.
// encoding/json matches member names case-insensitively and lets the last
// duplicate win, so {"serverName":"beta","SERVERNAME":"alpha"} would ask
// for alpha while a reader on the way (a proxy, an audit filter) sees
// beta. strictjson.Object sees every member name exactly as sent.
func decodeCredentialRequest(w http.ResponseWriter, r *http.Request) (string, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCredentialBodyBytes))
	if err != nil {
		return "", false
	}
	members, err := strictjson.Object(body)
	if err != nil || len(members) != 1 {
		return "", false
	}
	name, ok := strictjson.String(members["serverName"])
	return name, ok && name != ""
}

// authorize runs the gates every v2 request passes before its own logic:
// token, live authority, then the rate limit of the verified Host. Only a
// request that passed the first two is counted, so nobody can spend a real
// Host's budget without its token. On failure it has answered.
func (h *handler) authorize(w http.ResponseWriter, r *http.Request, act action) (authority, bool) {
	a, err := h.authenticate(r)
	if err != nil {
		h.refuse(w, r, err)
		return authority{}, false
	}
	if ok, retryAfter := h.limiter.allow(limitKey{hostUID: a.host.UID, action: act}, h.clock.Now()); !ok {
		h.metrics.rateLimited.WithLabelValues(string(act)).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retryAfter, time.Second).Seconds()))))
		writeBody(w, http.StatusTooManyRequests, bodyRateLimited, true)
		return authority{}, false
	}
	return a, true
}

func (h *handler) authenticate(r *http.Request) (authority, error) {
	if h.dev != nil {
		return authority{}, failDevMode
	}
	claims, err := h.verifier.VerifyHostToken(bearerToken(r))
	if err != nil {
		return authority{}, err
	}
	return resolveAuthority(h.src, claims)
}

// refuse answers the uniform 401; the reason goes to the metric and the
// sampled log only.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	reason, ok := err.(failure)
	if !ok {
		reason = failMalformed
	}
	h.metrics.authFailures.WithLabelValues(string(reason)).Inc()
	h.refusalLog.Info().Str("reason", string(reason)).Str("path", r.URL.Path).Str("remote", r.RemoteAddr).
		Msg("refused v2 request")
	w.Header().Set("WWW-Authenticate", "Bearer")
	writeBody(w, http.StatusUnauthorized, bodyUnauthorized, true)
}

// bearerToken returns the token of the request's only Authorization
// header, or "" when there is none, several, or another scheme.
func bearerToken(r *http.Request) string {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return ""
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return token
}

func (h *handler) transportOf(s *v1alpha1.McpServer) transportInfo {
	t := serverTransport(s, h.namespace, h.clusterDomain)
	if h.dev != nil {
		if url := h.dev.urls[s.Name]; url != "" {
			t.URL = url
		}
	}
	return t
}

func (h *handler) timestamp() string {
	return h.clock.Now().UTC().Format(timestampLayout)
}

// writeBody writes a prepared JSON body. Protected responses (the v2 and
// desktop routes) must never be stored by a cache on the way.
func writeBody(w http.ResponseWriter, status int, body []byte, protected bool) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if protected {
		hdr.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, v any, protected bool) {
	writeBody(w, status, mustMarshal(v), protected)
}

// mustMarshal encodes one of this package's response types, which hold
// only strings, bools, numbers, slices and maps with string keys: encoding
// cannot fail, so a failure is a programming error (and net/http recovers
// the panic for the one request).
func mustMarshal(v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", v, err))
	}
	return body
}
