//go:build integration

package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/internal/testing/apitest"
	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/logging"
)

// apiServiceAccount is the identity deploy/base/api binds its read-only Roles to.
const apiServiceAccount = "system:serviceaccount:control-plane:hcc-api"

// TestAPIServesHostScopedInventoryAndCredentials runs the real hcc-api
// binary, two replicas, as the service account of deploy/base/api, whose Roles
// grant only get, list and watch: every answer below is proof the binary
// needs nothing more. Keys are generated here; the Control API is played
// by the test.
func TestAPIServesHostScopedInventoryAndCredentials(t *testing.T) {
	// klog's logger is process-wide: route it before any client runs.
	logging.Setup("hcc-api-test", "info")
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "control-plane"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	applyAPIRBAC(t, ctx, e.kube)

	readOnly := kubernetes.NewForConfigOrDie(e.cp.ImpersonatingConfig(apiServiceAccount, "system:serviceaccounts", "system:serviceaccounts:control-plane"))
	_, err = readOnly.CoreV1().Secrets(serverNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "the API's service account must not write: %v", err)

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	// nextKey is the key the Control API rotates to. The second replica
	// already holds it beside key, as in the middle of a rotation.
	nextKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)

	// The world: host-a's Context grants alpha (auth), beta (no auth) and a
	// missing server; gamma exists but is not granted.
	hcc := e.hcc.ClerumV1alpha1()
	_, err = e.kube.CoreV1().Secrets(serverNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha-creds"},
		StringData: map[string]string{"token": "s3cret-1"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	alpha := apiServer("api-alpha", clerumv1alpha1.TransportSSE)
	alpha.Spec.Auth = &clerumv1alpha1.Auth{SecretRef: clerumv1alpha1.SecretKeyReference{Name: "alpha-creds", Key: "token"}}
	for _, s := range []*clerumv1alpha1.McpServer{alpha, apiServer("api-beta", clerumv1alpha1.TransportStdio), apiServer("api-gamma", clerumv1alpha1.TransportSSE)} {
		_, err = hcc.McpServers(serverNS).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = hcc.Contexts(serverNS).Create(ctx, newContext("api-ctx", "api-ctx", "api-alpha", "api-beta", "api-missing"), metav1.CreateOptions{})
	require.NoError(t, err)
	host, err := hcc.Hosts(hostNS).Create(ctx, newHost("api-host", "api-ctx"), metav1.CreateOptions{})
	require.NoError(t, err)

	bin := apitest.Build(t)
	kubeconfig := e.cp.ImpersonatingKubeconfig(apiServiceAccount, "system:serviceaccounts", "system:serviceaccounts:control-plane")
	replicas := []*apitest.Replica{
		apitest.Start(t, bin, kubeconfig, apitest.PublicKeyPEM(t, key)),
		apitest.Start(t, bin, kubeconfig, apitest.PublicKeyPEM(t, key)+apitest.PublicKeyPEM(t, nextKey)),
	}
	for _, r := range replicas {
		r.WaitReady(t)
	}
	a, b := replicas[0], replicas[1]
	token := apitest.HostToken(t, key, "api-host", host.UID)

	t.Run("inventory lists exactly the granted servers, identically on every replica", func(t *testing.T) {
		status, body := a.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
		require.Equal(t, http.StatusOK, status, body)
		inv := apitest.DecodeInventory(t, body)
		require.Len(t, inv.Servers, 2)
		assert.Equal(t, "api-alpha", inv.Servers[0]["name"])
		assert.Equal(t, map[string]any{"type": "sse", "url": "http://api-alpha.mcp-server.svc.cluster.local:3000/sse"}, inv.Servers[0]["transport"])
		assert.Equal(t, true, inv.Servers[0]["authRequired"])
		assert.NotEmpty(t, inv.Servers[0]["credentialRevision"])
		assert.Equal(t, "api-beta", inv.Servers[1]["name"])
		assert.Equal(t, map[string]any{"type": "streamable-http", "url": "http://api-beta.mcp-server.svc.cluster.local:3000/mcp"}, inv.Servers[1]["transport"])
		assert.Equal(t, false, inv.Servers[1]["authRequired"])
		// Never reconciled (no controller runs here): not authoritative.
		assert.Equal(t, map[string]any{"deployed": false, "ready": false, "authoritative": false}, inv.Servers[0]["status"])

		_, bodyB := b.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
		assert.Equal(t, inv.Servers, apitest.DecodeInventory(t, bodyB).Servers)
	})

	t.Run("a replica holding two keys accepts tokens of either", func(t *testing.T) {
		next := apitest.HostToken(t, nextKey, "api-host", host.UID)
		status, _ := b.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", next, "")
		assert.Equal(t, http.StatusOK, status)
		status, body := a.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", next, "")
		assert.Equal(t, http.StatusUnauthorized, status, "the first replica does not hold the next key yet")
		assert.Equal(t, `{"error":"unauthorized"}`, body)
		status, _ = b.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
		assert.Equal(t, http.StatusOK, status)
	})

	revision := func(r *apitest.Replica) string {
		_, body := r.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
		return apitest.DecodeInventory(t, body).Servers[0]["credentialRevision"].(string)
	}

	t.Run("credential is handed out for a granted server only", func(t *testing.T) {
		status, body := a.Do(t, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"api-alpha"}`)
		require.Equal(t, http.StatusOK, status, body)
		assert.JSONEq(t, `{"token":"s3cret-1","credentialRevision":"`+revision(a)+`"}`, body)
		_, bodyB := b.Do(t, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"api-alpha"}`)
		assert.Equal(t, body, bodyB)

		for _, name := range []string{"api-gamma", "api-missing", "nothing"} {
			status, body = a.Do(t, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"`+name+`"}`)
			assert.Equal(t, http.StatusNotFound, status, name)
			assert.Equal(t, `{"error":"not_found"}`, body, name)
		}
		status, body = a.Do(t, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"api-beta"}`)
		assert.Equal(t, http.StatusOK, status)
		assert.Contains(t, body, `"token":null`)
	})

	t.Run("a rotated Secret changes the revision and the value", func(t *testing.T) {
		before := revision(a)
		_, err := e.kube.CoreV1().Secrets(serverNS).Update(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "alpha-creds"},
			StringData: map[string]string{"token": "s3cret-2"},
		}, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitFor(t, ctx, func() bool { return revision(a) != before && revision(b) != before })
		assert.Equal(t, revision(a), revision(b))
		_, body := a.Do(t, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"api-alpha"}`)
		assert.Contains(t, body, `"token":"s3cret-2"`)
	})

	// The inventory is cached per Context (docs/http-api.md, "Caching"):
	// each edit below reaches it as an informer event.
	names := func(r *apitest.Replica) []string {
		_, body := r.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
		var out []string
		for _, s := range apitest.DecodeInventory(t, body).Servers {
			out = append(out, s["name"].(string))
		}
		return out
	}
	t.Run("a Context edit changes which servers the Host sees", func(t *testing.T) {
		edit := func(servers ...string) {
			c, err := hcc.Contexts(serverNS).Get(ctx, "api-ctx", metav1.GetOptions{})
			require.NoError(t, err)
			c.Spec.McpServers = servers
			_, err = hcc.Contexts(serverNS).Update(ctx, c, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		edit("api-alpha", "api-gamma")
		for _, r := range replicas {
			waitFor(t, ctx, func() bool { return slices.Equal(names(r), []string{"api-alpha", "api-gamma"}) })
		}
		edit("api-alpha", "api-beta", "api-missing")
		for _, r := range replicas {
			waitFor(t, ctx, func() bool { return slices.Equal(names(r), []string{"api-alpha", "api-beta"}) })
		}
	})

	t.Run("a server edit changes its entry", func(t *testing.T) {
		s, err := hcc.McpServers(serverNS).Get(ctx, "api-beta", metav1.GetOptions{})
		require.NoError(t, err)
		s.Spec.Transport.Port = ptr.To[int32](8443)
		_, err = hcc.McpServers(serverNS).Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
		for _, r := range replicas {
			waitFor(t, ctx, func() bool {
				_, body := r.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
				return strings.Contains(body, "api-beta.mcp-server.svc.cluster.local:8443/mcp")
			})
		}
	})

	t.Run("the anonymous v1 inventory is metadata only", func(t *testing.T) {
		status, body := a.Do(t, http.MethodGet, "/api/v1/mcpservers", "", "")
		require.Equal(t, http.StatusOK, status)
		for _, name := range []string{"api-alpha", "api-beta", "api-gamma"} {
			assert.Contains(t, body, `"name":"`+name+`"`)
		}
		assert.NotContains(t, body, "alpha-creds")
		assert.NotContains(t, body, "s3cret")
	})

	t.Run("a Host recreated with a new UID is refused its old token", func(t *testing.T) {
		require.NoError(t, hcc.Hosts(hostNS).Delete(ctx, "api-host", metav1.DeleteOptions{}))
		waitFor(t, ctx, func() bool {
			status, _ := a.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
			return status == http.StatusUnauthorized
		})
		recreated, err := hcc.Hosts(hostNS).Create(ctx, newHost("api-host", "api-ctx"), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NotEqual(t, host.UID, recreated.UID)
		fresh := apitest.HostToken(t, key, "api-host", recreated.UID)
		for _, r := range replicas {
			waitFor(t, ctx, func() bool {
				status, _ := r.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", fresh, "")
				return status == http.StatusOK
			})
			status, body := r.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
			assert.Equal(t, http.StatusUnauthorized, status)
			assert.Equal(t, `{"error":"unauthorized"}`, body)
			status, _ = r.Do(t, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"api-alpha"}`)
			assert.Equal(t, http.StatusUnauthorized, status)
		}
	})

	t.Run("metrics report synced caches", func(t *testing.T) {
		_, body := a.Do(t, http.MethodGet, "/metrics", "", "")
		for _, informer := range []string{"mcpservers", "contexts", "hosts", "secrets"} {
			assert.Contains(t, body, `clerum_hcc_api_informer_synced{informer="`+informer+`"} 1`)
		}
		assert.Regexp(t, `clerum_hcc_api_inventory_cache_lookups_total\{result="hit"\} [1-9]`, body, "the inventory cache serves")
		assert.Regexp(t, `clerum_hcc_api_informer_events_total\{event="update",informer="contexts"\} [1-9]`, body)
	})

	for _, r := range replicas {
		assert.Equal(t, 0, r.Stop(t), "exit code after SIGTERM; log:\n%s", r.LogTail())
	}
}

func apiServer(name string, transport clerumv1alpha1.TransportType) *clerumv1alpha1.McpServer {
	return &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clerumv1alpha1.McpServerSpec{
			Enabled:   ptr.To(true),
			Image:     "example/" + name + ":1",
			Transport: clerumv1alpha1.Transport{Type: transport},
		},
	}
}

// applyAPIRBAC creates the Roles and RoleBindings of deploy/base/api/rbac.yaml
// and checks that they grant no write verb.
func applyAPIRBAC(t *testing.T, ctx context.Context, kube kubernetes.Interface) {
	t.Helper()
	roles, err := controlplane.ApplyRBAC(ctx, kube, filepath.Join("..", "..", "deploy", "base", "api", "rbac.yaml"))
	require.NoError(t, err)
	require.Len(t, roles, 2)
	for _, role := range roles {
		for _, rule := range role.Rules {
			assert.Subset(t, []string{"get", "list", "watch"}, rule.Verbs, "rbac.yaml grants a write verb")
		}
	}
}
