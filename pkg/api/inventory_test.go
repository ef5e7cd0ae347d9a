package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

func TestHostInventoryListsExactlyTheGrantedEnabledServers(t *testing.T) {
	w := standardWorld(t)
	h := newHarness(t, w)
	rec := h.inventory(h.token("host-a", "uid-a"))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))

	alpha, err := w.sources().McpServers.Get("alpha")
	require.NoError(t, err)
	alphaRevision := readCredential(w.sources().Secrets, alpha).revision(alpha)
	assert.JSONEq(t, `{
		"servers": [
			{
				"name": "alpha",
				"transport": {"type": "sse", "url": "http://alpha.mcp-server.svc.cluster.local:3000/sse"},
				"enabled": true,
				"status": {"deployed": true, "ready": true},
				"authRequired": true,
				"credentialRevision": "`+alphaRevision+`"
			},
			{
				"name": "beta",
				"transport": {"type": "streamable-http", "url": "http://beta.mcp-server.svc.cluster.local:3000/mcp"},
				"enabled": true,
				"status": {"deployed": true, "ready": true},
				"authRequired": false
			}
		],
		"timestamp": "2026-02-14T15:11:12.000Z"
	}`, rec.Body.String())
	assert.NotContains(t, rec.Body.String(), "s3cret")
	assert.NotContains(t, rec.Body.String(), "alpha-creds")

	// host-b sees only its own Context's server.
	rec = h.inventory(h.token("host-b", "uid-b"))
	require.Equal(t, http.StatusOK, rec.Code)
	inv := decode[hostInventory](t, rec)
	require.Len(t, inv.Servers, 1)
	assert.Equal(t, "gamma", inv.Servers[0].Name)
}

func TestHostInventoryFollowsTheLiveContext(t *testing.T) {
	w := standardWorld(t)
	h := newHarness(t, w)
	tok := h.token("host-a", "uid-a")
	names := func() []string {
		var out []string
		for _, s := range decode[hostInventory](t, h.inventory(tok)).Servers {
			out = append(out, s.Name)
		}
		return out
	}
	assert.Equal(t, []string{"alpha", "beta"}, names())

	put(t, w.contexts, newContext("ctx-a", "beta", "beta"))
	assert.Equal(t, []string{"beta"}, names(), "duplicates listed once")

	put(t, w.hosts, newHost("host-a", "uid-a", "ctx-b"))
	assert.Equal(t, []string{"gamma"}, names(), "the live contextRef decides, not the token")
}

func TestInventoryEntriesHaveExactlyTheContractFields(t *testing.T) {
	h := newHarness(t, standardWorld(t))
	var v2 struct {
		Servers []map[string]json.RawMessage `json:"servers"`
	}
	require.NoError(t, json.Unmarshal(h.inventory(h.token("host-a", "uid-a")).Body.Bytes(), &v2))
	for _, e := range v2.Servers {
		want := []string{"name", "transport", "enabled", "status", "authRequired"}
		if string(e["authRequired"]) == "true" {
			want = append(want, "credentialRevision")
		}
		assert.ElementsMatch(t, want, keysOf(e))
	}

	var v1 struct {
		Servers    []map[string]json.RawMessage `json:"servers"`
		ContextRef string                       `json:"contextRef"`
	}
	rec := h.do(http.MethodGet, "/api/v1/mcpservers", "", "")
	require.Equal(t, http.StatusOK, rec.Code)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v1))
	assert.Equal(t, "*", v1.ContextRef)
	assert.Len(t, v1.Servers, 6, "v1 is the global inventory")
	for _, e := range v1.Servers {
		assert.ElementsMatch(t, []string{"name", "contextRef", "transport", "enabled", "status"}, keysOf(e))
	}
	assert.NotContains(t, rec.Body.String(), "creds", "v1 exposes no Secret metadata")
	assert.Empty(t, rec.Header().Get("Cache-Control"), "v1 is anonymous and public")
}

func keysOf(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestServerTransport(t *testing.T) {
	cases := []struct {
		name      string
		transport v1alpha1.Transport
		remote    bool
		want      transportInfo
	}{
		{"sse default path", v1alpha1.Transport{Type: v1alpha1.TransportSSE}, false,
			transportInfo{"sse", "http://s.ns.svc.example.org:3000/sse"}},
		{"streamable-http default path", v1alpha1.Transport{Type: v1alpha1.TransportStreamableHTTP, Port: ptr.To[int32](8080)}, false,
			transportInfo{"streamable-http", "http://s.ns.svc.example.org:8080/mcp"}},
		{"stdio is served by the bridge as streamable-http", v1alpha1.Transport{Type: v1alpha1.TransportStdio}, false,
			transportInfo{"streamable-http", "http://s.ns.svc.example.org:3000/mcp"}},
		{"stdio keeps its path", v1alpha1.Transport{Type: v1alpha1.TransportStdio, Path: "/bridge"}, false,
			transportInfo{"streamable-http", "http://s.ns.svc.example.org:3000/bridge"}},
		{"explicit path", v1alpha1.Transport{Type: v1alpha1.TransportSSE, Path: "/v1/events"}, false,
			transportInfo{"sse", "http://s.ns.svc.example.org:3000/v1/events"}},
		{"remote keeps its declared type at the proxy Service", v1alpha1.Transport{Type: v1alpha1.TransportSSE, Port: ptr.To[int32](9000)}, true,
			transportInfo{"sse", "http://s.ns.svc.example.org:9000/sse"}},
		{"remote streamable-http", v1alpha1.Transport{Type: v1alpha1.TransportStreamableHTTP}, true,
			transportInfo{"streamable-http", "http://s.ns.svc.example.org:3000/mcp"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &v1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: v1alpha1.McpServerSpec{Transport: tc.transport}}
			if tc.remote {
				s.Spec.Remote = &v1alpha1.Remote{URL: "https://mcp.example.com/sse"}
			}
			assert.Equal(t, tc.want, serverTransport(s, "ns", "example.org"))
		})
	}
}

func TestStatusIsNonAuthoritativeExactlyWhenHCCCannotVouchForIt(t *testing.T) {
	egress := func(status metav1.ConditionStatus, observed int64) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionExternalEgressReady, Status: status, ObservedGeneration: observed}}
	}
	cases := []struct {
		name       string
		generation int64
		observed   int64
		conditions []metav1.Condition
		want       string
	}{
		{"reconciled, no egress bindings", 3, 3, nil, `{"deployed":true,"ready":true}`},
		{"reconciled, egress programmed for this generation", 3, 3, egress(metav1.ConditionTrue, 3), `{"deployed":true,"ready":true}`},
		{"latest generation not reconciled", 4, 3, nil, `{"deployed":true,"ready":true,"authoritative":false}`},
		{"egress not programmed", 3, 3, egress(metav1.ConditionFalse, 3), `{"deployed":true,"ready":true,"authoritative":false}`},
		{"egress unknown", 3, 3, egress(metav1.ConditionUnknown, 3), `{"deployed":true,"ready":true,"authoritative":false}`},
		{"egress condition stale", 3, 3, egress(metav1.ConditionTrue, 2), `{"deployed":true,"ready":true,"authoritative":false}`},
		{"a newer observation is fine", 3, 4, egress(metav1.ConditionTrue, 4), `{"deployed":true,"ready":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer("s", v1alpha1.TransportSSE)
			s.Generation, s.Status.ObservedGeneration, s.Status.Conditions = tc.generation, tc.observed, tc.conditions
			got, err := json.Marshal(statusOf(s, nil))
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
		})
	}
}

func TestCredentialRevision(t *testing.T) {
	alpha := withAuth(newServer("alpha", v1alpha1.TransportSSE), "creds", "token")
	secret := newSecret("creds", "uid-secret", map[string]string{"token": "hunter2"})
	rev := func(s *v1alpha1.McpServer, sec SecretReader) string { return readCredential(sec, s).revision(s) }
	reader := func(secrets ...*corev1.Secret) SecretReader {
		w := newWorld()
		for _, s := range secrets {
			put(t, w.secrets, s)
		}
		return w.sources().Secrets
	}
	base := rev(alpha, reader(secret))

	t.Run("is the same on every replica", func(t *testing.T) {
		// A second replica has its own copies of the same objects.
		assert.Equal(t, base, rev(alpha.DeepCopy(), reader(secret.DeepCopy())))
	})
	t.Run("ignores metadata churn of the Secret", func(t *testing.T) {
		s := secret.DeepCopy()
		s.ResourceVersion = "99"
		s.Annotations = map[string]string{"touched": "yes"}
		s.Data["other"] = []byte("unrelated")
		assert.Equal(t, base, rev(alpha, reader(s)))
	})
	t.Run("changes when the value changes", func(t *testing.T) {
		s := secret.DeepCopy()
		s.Data["token"] = []byte("hunter3")
		assert.NotEqual(t, base, rev(alpha, reader(s)))
	})
	t.Run("changes when the Secret is recreated", func(t *testing.T) {
		s := secret.DeepCopy()
		s.UID = "uid-secret-2"
		assert.NotEqual(t, base, rev(alpha, reader(s)))
	})
	t.Run("differs between servers sharing a Secret key", func(t *testing.T) {
		other := withAuth(newServer("other", v1alpha1.TransportSSE), "creds", "token")
		assert.NotEqual(t, base, rev(other, reader(secret)))
	})
	t.Run("changes when the Secret appears", func(t *testing.T) {
		missing := rev(alpha, reader())
		assert.NotEqual(t, base, missing)
		assert.Equal(t, missing, rev(alpha, reader(newSecret("creds", "uid-secret", map[string]string{"wrong-key": "x"}))),
			"a missing key is the same state as a missing Secret")
	})
	t.Run("is not a digest of the value alone", func(t *testing.T) {
		assert.NotContains(t, base, "hunter2")
		assert.NotEqual(t, mac(nil, "value", string(alpha.UID), "creds", "token", "hunter2"), base,
			"without the Secret's UID the revision cannot be recomputed from a guess")
	})
	t.Run("exists for servers without auth", func(t *testing.T) {
		beta := newServer("beta", v1alpha1.TransportStdio)
		assert.NotEmpty(t, rev(beta, reader()))
		assert.Equal(t, rev(beta, reader()), rev(beta.DeepCopy(), reader(secret)))
	})
}

func TestRevisionChangesInTheInventoryWhenTheValueChanges(t *testing.T) {
	w := standardWorld(t)
	h := newHarness(t, w)
	tok := h.token("host-a", "uid-a")
	revision := func() string { return decode[hostInventory](t, h.inventory(tok)).Servers[0].CredentialRevision }
	before := revision()
	assert.Equal(t, before, decode[credentialResponse](t, h.credential(tok, "alpha")).CredentialRevision,
		"inventory and credential agree on the revision")

	put(t, w.secrets, newSecret("alpha-creds", "uid-secret-alpha", map[string]string{"token": "rotated"}))
	after := revision()
	assert.NotEqual(t, before, after)
	got := decode[credentialResponse](t, h.credential(tok, "alpha"))
	assert.Equal(t, after, got.CredentialRevision)
	assert.Equal(t, "rotated", *got.Token)
}

func TestReplicasAnswerIdentically(t *testing.T) {
	a := newHarness(t, standardWorld(t))
	b := newHarness(t, standardWorld(t))
	tok := a.token("host-a", "uid-a")
	assert.Equal(t, a.inventory(tok).Body.String(), b.inventory(tok).Body.String())
	assert.Equal(t, a.credential(tok, "alpha").Body.String(), b.credential(tok, "alpha").Body.String())
	assert.Equal(t, a.do(http.MethodGet, "/api/v1/mcpservers", "", "").Body.String(), b.do(http.MethodGet, "/api/v1/mcpservers", "", "").Body.String())
}

func TestHostInventoryBodyIsWhatJSONWouldEncode(t *testing.T) {
	entries := []hostInventoryEntry{
		{Name: "a", Transport: transportInfo{"sse", "http://a/sse"}, Enabled: true, AuthRequired: true, CredentialRevision: "r"},
		{Name: "b\"<>&", Transport: transportInfo{"streamable-http", "http://b/mcp"}, Enabled: true, Status: serverStatus{Authoritative: new(bool)}},
	}
	for n := range len(entries) + 1 {
		var encoded [][]byte
		for _, e := range entries[:n] {
			encoded = append(encoded, mustMarshal(e))
		}
		want := mustMarshal(hostInventory{Servers: append([]hostInventoryEntry{}, entries[:n]...), Timestamp: "2026-02-14T15:11:12.000Z"})
		assert.Equal(t, string(want), string(appendHostInventory(nil, hostInventoryHead(encoded), t0)))
		assert.Equal(t, "prefix"+string(want), string(appendHostInventory([]byte("prefix"), hostInventoryHead(encoded), t0.In(time.FixedZone("CET", 3600)))),
			"appended after dst, in UTC")
	}
}

// Entries are memoized by the identity of cache objects: an updated object
// is a new one, and the next answer reflects it.
func TestHostInventoryReflectsEveryObjectUpdate(t *testing.T) {
	w := standardWorld(t)
	h := newHarness(t, w)
	tok := h.token("host-a", "uid-a")
	first := func() hostInventoryEntry { return decode[hostInventory](t, h.inventory(tok)).Servers[0] }
	require.Equal(t, serverStatus{Deployed: true, Ready: true}, first().Status)

	alpha := withAuth(newServer("alpha", v1alpha1.TransportSSE), "alpha-creds", "token")
	alpha.Generation = 2
	alpha.Status.Ready = false
	put(t, w.servers, alpha)
	assert.Equal(t, serverStatus{Deployed: true, Ready: false, Authoritative: ptr.To(false)}, first().Status)

	alpha = alpha.DeepCopy()
	alpha.Spec.Transport.Port = ptr.To[int32](8443)
	put(t, w.servers, alpha)
	assert.Equal(t, "http://alpha.mcp-server.svc.cluster.local:8443/sse", first().Transport.URL)

	before := first().CredentialRevision
	remove(t, w.secrets, newSecret("alpha-creds", "", nil))
	assert.NotEqual(t, before, first().CredentialRevision, "a deleted Secret changes the revision")
}

// versioned returns s as the API server would store its version rv.
func versioned(s *v1alpha1.McpServer, rv string) *v1alpha1.McpServer {
	s = s.DeepCopy()
	s.ResourceVersion = rv
	return s
}

func TestEntryCacheKeepsOneEntryPerServer(t *testing.T) {
	c := newEntryCache(16)
	calls := 0
	encode := func(s *v1alpha1.McpServer, secret *corev1.Secret) []byte {
		calls++
		b := string(s.UID) + "@" + s.ResourceVersion
		if secret != nil {
			b += "+" + string(secret.UID) + "@" + secret.ResourceVersion
		}
		return []byte(b)
	}
	alpha := newServer("alpha", v1alpha1.TransportSSE)
	secret := newSecret("alpha-creds", "uid-secret", nil)

	t.Run("updates replace the entry rather than add one", func(t *testing.T) {
		for rv := range 10 {
			got := c.get(versioned(alpha, strconv.Itoa(rv+1)), secret, encode)
			assert.Equal(t, "uid-server-alpha@"+strconv.Itoa(rv+1)+"+uid-secret@1", string(got))
		}
		assert.Equal(t, 10, calls)
		assert.Len(t, c.entries, 1, "superseded versions are not kept")
	})
	t.Run("a copy of the current version is served from the cache", func(t *testing.T) {
		// A relist after a watch reconnect delivers new objects of the
		// same versions.
		c.get(versioned(alpha, "10"), secret.DeepCopy(), encode)
		assert.Equal(t, 10, calls)
	})
	t.Run("a recreated server does not get the old entry", func(t *testing.T) {
		recreated := versioned(alpha, "10")
		recreated.UID = "uid-server-alpha-2"
		assert.Equal(t, "uid-server-alpha-2@10+uid-secret@1", string(c.get(recreated, secret, encode)))
		assert.Equal(t, 11, calls)
		assert.Len(t, c.entries, 1)
	})
	t.Run("a new Secret version or a recreated Secret is a new entry", func(t *testing.T) {
		current := versioned(alpha, "10")
		current.UID = "uid-server-alpha-2"
		updated := secret.DeepCopy()
		updated.ResourceVersion = "2"
		assert.Equal(t, "uid-server-alpha-2@10+uid-secret@2", string(c.get(current, updated, encode)))
		recreated := secret.DeepCopy()
		recreated.UID = "uid-secret-2"
		assert.Equal(t, "uid-server-alpha-2@10+uid-secret-2@1", string(c.get(current, recreated, encode)))
		assert.Equal(t, "uid-server-alpha-2@10", string(c.get(current, nil, encode)), "the Secret went away")
		assert.Equal(t, 14, calls)
		assert.Len(t, c.entries, 1)
	})
	t.Run("an object without a resourceVersion is never cached", func(t *testing.T) {
		before := calls
		c.get(newServer("fixture", v1alpha1.TransportSSE), nil, encode)
		c.get(newServer("fixture", v1alpha1.TransportSSE), nil, encode)
		assert.Equal(t, before+2, calls)
	})
}

func TestEntryCacheIsBounded(t *testing.T) {
	c := newEntryCache(3)
	calls := 0
	encode := func(s *v1alpha1.McpServer, _ *corev1.Secret) []byte { calls++; return []byte(s.Name) }
	var servers []*v1alpha1.McpServer
	for _, name := range []string{"a", "b", "c", "d"} {
		servers = append(servers, versioned(newServer(name, v1alpha1.TransportSSE), "1"))
	}
	for _, s := range servers {
		assert.Equal(t, s.Name, string(c.get(s, nil, encode)))
	}
	assert.Equal(t, 4, calls)
	assert.LessOrEqual(t, len(c.entries), 3)
	c.get(servers[3], nil, encode)
	assert.Equal(t, 4, calls, "a current entry is served from the cache")
}

// The handler's entry cache holds test/bench's fleet: at 10,000 servers a
// smaller bound cleared it over and over, and every rebuilt inventory
// encoded its entries again.
func TestEntryCacheHoldsTheBenchmarkFleet(t *testing.T) {
	c := newEntryCache(entryCacheMaxEntries)
	calls := 0
	encode := func(s *v1alpha1.McpServer, _ *corev1.Secret) []byte { calls++; return []byte(s.Name) }
	servers := make([]*v1alpha1.McpServer, 10000)
	for i := range servers {
		servers[i] = versioned(newServer(fmt.Sprintf("s%05d", i), v1alpha1.TransportSSE), "1")
		c.get(servers[i], nil, encode)
	}
	for _, s := range servers {
		c.get(s, nil, encode)
	}
	assert.Equal(t, len(servers), calls, "each entry encoded once")
}
