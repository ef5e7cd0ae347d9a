package api

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	listers "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/health"
)

const (
	serverNS      = "mcp-server"
	hostNS        = "mcp-host"
	issuer        = "control-api"
	audience      = "host-context-controller"
	migrationAud  = "workflow-controller"
	clusterDomain = "cluster.local"
)

// t0 is the fake clock's start, the example timestamp of docs/http-api.md.
var t0 = time.Date(2026, 2, 14, 15, 11, 12, 0, time.UTC)

// Keys are generated once per test binary: RSA generation is slow.
// issuerKey signs the tokens the API accepts, otherKey is an attacker's,
// and rotatedKey is the issuer's next key in the rotation tests.
var (
	keysOnce                        sync.Once
	issuerKey, otherKey, rotatedKey *rsa.PrivateKey
	keysErr                         error
)

func generateKeys() {
	for _, k := range []**rsa.PrivateKey{&issuerKey, &otherKey, &rotatedKey} {
		if *k, keysErr = rsa.GenerateKey(rand.Reader, 2048); keysErr != nil {
			return
		}
	}
}

// keys returns the issuer's key and an attacker's key.
func keys(t testing.TB) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	keysOnce.Do(generateKeys)
	require.NoError(t, keysErr)
	return issuerKey, otherKey
}

// nextIssuerKey returns the key the issuer rotates to.
func nextIssuerKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	keys(t)
	return rotatedKey
}

// issuerKeyID is the kid that names the issuer's key.
func issuerKeyID(t testing.TB) string {
	key, _ := keys(t)
	return KeyID(&key.PublicKey)
}

func hostAuth(t testing.TB) config.HostAuth {
	key, _ := keys(t)
	return config.HostAuth{
		PublicKeys:         []*rsa.PublicKey{&key.PublicKey},
		Issuer:             issuer,
		Audience:           audience,
		MigrationAudience:  migrationAud,
		MaxTTL:             600 * time.Second,
		RateLimitPerMinute: 1000,
	}
}

// --- tokens ---

type jsonObject = map[string]any

// claimsFor returns valid claims for host at now.
func claimsFor(host string, uid types.UID, now time.Time) jsonObject {
	return jsonObject{
		"iss":          issuer,
		"aud":          audience,
		"iat":          now.Unix(),
		"exp":          now.Add(5 * time.Minute).Unix(),
		"hostRefs":     []string{host},
		"host_uid":     string(uid),
		"capabilities": []string{capabilityCredentialRead},
		// Claims that grant nothing, as real tokens carry them.
		"scope":  "workflow",
		"recipe": "standalone",
	}
}

func b64(v []byte) string { return base64.RawURLEncoding.EncodeToString(v) }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// signCompact builds a compact JWS from raw header and payload bytes,
// signed with alg: RS256, RS512, PS256 (key), HS256 (hmacKey) or none.
func signCompact(t testing.TB, header, payload []byte, alg string, key *rsa.PrivateKey, hmacKey []byte) string {
	t.Helper()
	input := b64(header) + "." + b64(payload)
	var sig []byte
	var err error
	switch alg {
	case "RS256":
		d := sha256.Sum256([]byte(input))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	case "RS512":
		d := sha512.Sum512([]byte(input))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA512, d[:])
	case "PS256":
		d := sha256.Sum256([]byte(input))
		sig, err = rsa.SignPSS(rand.Reader, key, crypto.SHA256, d[:], nil)
	case "HS256":
		m := hmac.New(sha256.New, hmacKey)
		m.Write([]byte(input))
		sig = m.Sum(nil)
	case "none":
	default:
		t.Fatalf("unknown alg %s", alg)
	}
	require.NoError(t, err)
	return input + "." + b64(sig)
}

// sign signs claims with header under the issuer key with RS256.
func sign(t testing.TB, header, claims jsonObject) string {
	t.Helper()
	key, _ := keys(t)
	return signCompact(t, mustJSON(t, header), mustJSON(t, claims), "RS256", key, nil)
}

func rs256Header() jsonObject { return jsonObject{"alg": "RS256", "typ": "JWT"} }

// --- the cluster the handlers read ---

// world holds the objects handlers read, in indexers behind real listers.
// Secret reads are counted and may run a hook, so tests can prove when a
// Secret is read and mutate the world in the middle of a request.
//
// Like an informer, the world tells its InventoryCache of every object
// it stores or deletes, right after the store: a handler built over the
// world (newHarness) serves inventories from that cache.
type world struct {
	servers, contexts, hosts, secrets cache.Indexer
	inventory                         *InventoryCache

	secretReads atomic.Int32
	// onSecretRead, when set, runs inside every Secret read, before it.
	onSecretRead func()
	// afterSecretRead, when set, runs after every Secret read returned:
	// between the credential read and its revalidation.
	afterSecretRead func()
}

// notifyingIndexer calls changed with the name of every object stored or
// deleted, after the store, as an informer calls its event handlers.
type notifyingIndexer struct {
	cache.Indexer
	changed func(name string)
}

func (n notifyingIndexer) Add(obj any) error    { return n.notify(obj, n.Indexer.Add(obj)) }
func (n notifyingIndexer) Update(obj any) error { return n.notify(obj, n.Indexer.Update(obj)) }
func (n notifyingIndexer) Delete(obj any) error { return n.notify(obj, n.Indexer.Delete(obj)) }

func (n notifyingIndexer) notify(obj any, err error) error {
	if err == nil && n.changed != nil {
		n.changed(objectName(obj))
	}
	return err
}

type countingSecrets struct {
	next SecretReader
	w    *world
}

var _ SecretReader = (*countingSecrets)(nil)

func (c *countingSecrets) Get(name string) (*corev1.Secret, error) {
	c.w.secretReads.Add(1)
	if c.w.onSecretRead != nil {
		c.w.onSecretRead()
	}
	secret, err := c.next.Get(name)
	if c.w.afterSecretRead != nil {
		c.w.afterSecretRead()
	}
	return secret, err
}

func newWorld() *world {
	w := &world{hosts: newIndexer()}
	servers := newIndexer()
	contexts := newIndexer()
	if err := servers.AddIndexers(cache.Indexers{indexServersBySecret: serversBySecret}); err != nil {
		panic(err)
	}
	if err := contexts.AddIndexers(cache.Indexers{indexContextsByServer: contextsByServer}); err != nil {
		panic(err)
	}
	w.inventory = newInventoryCache(contexts, servers)
	w.servers = notifyingIndexer{servers, w.inventory.serverChanged}
	w.contexts = notifyingIndexer{contexts, w.inventory.contextChanged}
	w.secrets = notifyingIndexer{newIndexer(), w.inventory.secretChanged}
	return w
}

func (w *world) sources() Sources {
	return Sources{
		McpServers: listers.NewMcpServerLister(w.servers).McpServers(serverNS),
		Contexts:   listers.NewContextLister(w.contexts).Contexts(serverNS),
		Hosts:      listers.NewHostLister(w.hosts).Hosts(hostNS),
		Secrets:    &countingSecrets{next: corelisters.NewSecretLister(w.secrets).Secrets(serverNS), w: w},
	}
}

// resourceVersions numbers the writes of put across every world.
var resourceVersions atomic.Int64

// put adds or replaces obj in its indexer as the API server would store
// it: every write gets a new resourceVersion.
func put(t testing.TB, idx cache.Indexer, obj metav1.Object) {
	t.Helper()
	obj.SetResourceVersion(strconv.FormatInt(resourceVersions.Add(1), 10))
	require.NoError(t, idx.Update(obj))
}

func remove(t testing.TB, idx cache.Indexer, obj any) {
	t.Helper()
	require.NoError(t, idx.Delete(obj))
}

func newServer(name string, transport v1alpha1.TransportType) *v1alpha1.McpServer {
	return &v1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: serverNS, UID: types.UID("uid-server-" + name), Generation: 1},
		Spec: v1alpha1.McpServerSpec{
			Enabled:   ptr.To(true),
			Image:     "example/" + name + ":1",
			Transport: v1alpha1.Transport{Type: transport, Port: ptr.To[int32](3000)},
		},
		Status: v1alpha1.McpServerStatus{ObservedGeneration: 1, Deployed: true, Ready: true},
	}
}

// readCredential reads the value s.spec.auth names, as the handlers do.
func readCredential(secrets SecretReader, s *v1alpha1.McpServer) credential {
	return credentialOf(s, credentialSecret(secrets, s))
}

func withAuth(s *v1alpha1.McpServer, secret, key string) *v1alpha1.McpServer {
	s.Spec.Auth = &v1alpha1.Auth{SecretRef: v1alpha1.SecretKeyReference{Name: secret, Key: key}}
	return s
}

func newContext(name string, servers ...string) *v1alpha1.Context {
	return &v1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: serverNS},
		Spec:       v1alpha1.ContextSpec{ContextID: name, McpServers: servers},
	}
}

func newHost(name string, uid types.UID, contextRef string) *v1alpha1.Host {
	return &v1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hostNS, UID: uid},
		Spec:       v1alpha1.HostSpec{ContextRef: contextRef},
	}
}

func newSecret(name string, uid types.UID, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: serverNS, UID: uid, ResourceVersion: "1"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// standardWorld is the fixture most tests share:
//
//	host-a (uid-a) -> ctx-a: alpha (sse, auth), beta (stdio), disabled, missing, deleting
//	host-b (uid-b) -> ctx-b: gamma
//	delta exists in no Context.
func standardWorld(t testing.TB) *world {
	w := newWorld()
	put(t, w.hosts, newHost("host-a", "uid-a", "ctx-a"))
	put(t, w.hosts, newHost("host-b", "uid-b", "ctx-b"))
	put(t, w.contexts, newContext("ctx-a", "alpha", "beta", "disabled", "missing", "deleting"))
	put(t, w.contexts, newContext("ctx-b", "gamma"))
	put(t, w.servers, withAuth(newServer("alpha", v1alpha1.TransportSSE), "alpha-creds", "token"))
	put(t, w.servers, newServer("beta", v1alpha1.TransportStdio))
	disabled := newServer("disabled", v1alpha1.TransportSSE)
	disabled.Spec.Enabled = ptr.To(false)
	put(t, w.servers, disabled)
	deleting := newServer("deleting", v1alpha1.TransportSSE)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	deleting.Finalizers = []string{"example.com/hold"}
	put(t, w.servers, deleting)
	put(t, w.servers, withAuth(newServer("gamma", v1alpha1.TransportSSE), "gamma-creds", "token"))
	put(t, w.servers, withAuth(newServer("delta", v1alpha1.TransportSSE), "alpha-creds", "token"))
	put(t, w.secrets, newSecret("alpha-creds", "uid-secret-alpha", map[string]string{"token": "s3cret-alpha"}))
	put(t, w.secrets, newSecret("gamma-creds", "uid-secret-gamma", map[string]string{"token": "s3cret-gamma"}))
	return w
}

// --- the handler under test ---

type harness struct {
	t         testing.TB
	world     *world
	clock     *clocktesting.FakePassiveClock
	metrics   *Metrics
	handler   http.Handler
	readiness *health.Readiness
}

type harnessOption func(*Options)

func newHarness(t testing.TB, w *world, opts ...harnessOption) *harness {
	t.Helper()
	h := &harness{t: t, world: w, clock: clocktesting.NewFakePassiveClock(t0)}
	reg := prometheus.NewPedanticRegistry()
	h.metrics = NewMetrics(reg)
	h.readiness = health.NewReadiness("informers")
	h.readiness.Set("informers", true)
	o := Options{
		Sources:        w.sources(),
		Inventory:      w.inventory,
		Namespace:      serverNS,
		ClusterDomain:  clusterDomain,
		HostAuth:       hostAuth(t),
		TokenCacheSize: 64,
		Readiness:      h.readiness,
		Gatherer:       reg,
		Metrics:        h.metrics,
		Clock:          h.clock,
		Log:            zerolog.Nop(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	h.handler = NewHandler(o)
	return h
}

// token returns a valid token for host at the harness's current time.
func (h *harness) token(host string, uid types.UID) string {
	return sign(h.t, rs256Header(), claimsFor(host, uid, h.clock.Now()))
}

func (h *harness) do(method, path, token, body string) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, path, nil)
	} else {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.handler.ServeHTTP(rec, r)
	return rec
}

func (h *harness) inventory(token string) *httptest.ResponseRecorder {
	return h.do(http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
}

func (h *harness) credential(token, serverName string) *httptest.ResponseRecorder {
	return h.do(http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"`+serverName+`"}`)
}

func (h *harness) authFailures(reason failure) float64 {
	return counterValue(h.t, h.metrics.authFailures.WithLabelValues(string(reason)))
}

func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

func decode[T any](t testing.TB, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v), rec.Body.String())
	return v
}
