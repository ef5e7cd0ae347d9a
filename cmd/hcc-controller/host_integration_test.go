//go:build integration

package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clerum/hcc/internal/testing/apitest"
	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/host"
	hostresources "github.com/clerum/hcc/pkg/controllers/host/resources"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// fakeControlAPI implements both routes of docs/control-api.md: the bootstrap
// credential HCC obtains (its bearer verified as the Control API would) and
// the exchange mcp-host performs, which returns an RS256 access token of
// docs/http-api.md for the credential's Host.
type fakeControlAPI struct {
	t      *testing.T
	secret []byte
	key    *rsa.PrivateKey

	mu     sync.Mutex
	issued map[string]issuedCredential // by credential
	calls  int
}

type issuedCredential struct {
	host string
	uid  types.UID
}

func (f *fakeControlAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case controlapi.RouteBootstrapCredentials:
		if _, err := controlapi.VerifyInternalToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), f.secret, time.Now()); err != nil {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var req struct{ Namespace, HostRef, HostUID string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Namespace != "mcp-host" || req.HostRef == "" || req.HostUID == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.calls++
		cred := fmt.Sprintf("bootstrap-%s-%d", req.HostRef, f.calls)
		f.issued[cred] = issuedCredential{host: req.HostRef, uid: types.UID(req.HostUID)}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]string{"credential": cred, "expiresAt": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)})
	case "/api/v1/mcp-host/token":
		var req struct{ Credential string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		got, ok := f.issued[req.Credential]
		f.mu.Unlock()
		if !ok {
			http.Error(w, "unknown credential", http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"accessToken": apitest.HostToken(f.t, f.key, got.host, got.uid),
			"expiresAt": time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339)})
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeControlAPI) bootstrapCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// TestHostOperator runs the controller, under the shipped RBAC, against a
// real API server and a fake Control API: a Host converges in both
// namespaces; its Secret holds a bootstrap credential that exchanges for an
// access token hcc-api accepts, whose inventory lists exactly the servers
// of the Host's Context; deleting the Host leaves nothing behind. Two
// faults come first: mcp-host-config is missing (the Host waits,
// Ready=False/ConfigMissing, and converges once it appears), and a
// runtime-token Secret was pre-created with HCC's labels and forged
// annotations (it is overwritten with a credential from the Control API,
// read through the real Secret informer and its digesting transform).
func TestHostOperator(t *testing.T) {
	apiBinary := apitest.Build(t)
	c := startCluster(t)
	kube := c.kube
	hcc := clientset.NewForConfigOrDie(c.cp.Config())
	ctx := context.Background()
	waitUntil := poller(t, 90*time.Second)

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	fake := &fakeControlAPI{t: t, secret: []byte("integration-secret"), key: key, issued: map[string]issuedCredential{}}
	controlAPI := httptest.NewServer(fake)
	t.Cleanup(controlAPI.Close)

	for _, name := range []string{"alpha", "beta"} {
		_, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, &clerumv1alpha1.McpServer{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       clerumv1alpha1.McpServerSpec{Image: "mongodb/" + name + ":1", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: "tenant", McpServers: []string{"alpha"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	created, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Create(ctx, &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: "h1"},
		Spec:       clerumv1alpha1.HostSpec{ContextRef: "tenant", Desktop: &clerumv1alpha1.DesktopSpec{Enabled: true}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Someone who may write Secrets in mcp-host, but does not hold
	// INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET, plants a credential of theirs.
	forgedExpiry := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	_, err = kube.CoreV1().Secrets("mcp-host").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "host-h1-mcp-host-runtime-tokens",
			Labels:      map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h1"},
			Annotations: map[string]string{hostresources.AnnotationIssuedForUID: string(created.UID), hostresources.AnnotationExpiresAt: forgedExpiry}},
		Data: map[string][]byte{hostresources.KeyBootstrapCredential: []byte("attacker-credential"), hostresources.KeyExpiresAt: []byte(forgedExpiry)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET is integration-secret (startController).
	startController(t, c, map[string]string{
		"HCC_LEADER_ELECT":                            "false",
		"CONTROL_API_BASE_URL":                        controlAPI.URL,
		"MCP_HOST_GATEWAY_URL":                        controlAPI.URL,
		"CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS": "",
	})

	getHost := func() *clerumv1alpha1.Host {
		got, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
		require.NoError(t, err)
		return got
	}
	exists := func(err error) bool { return err == nil }

	// No mcp-host-config yet: no Deployment, and Ready says why.
	waitUntil("Ready=False/ConfigMissing without mcp-host-config", func() bool {
		cond := meta.FindStatusCondition(getHost().Status.Conditions, clerumv1alpha1.ConditionReady)
		return cond != nil && cond.Reason == reasons.ConfigMissing
	})
	_, err = kube.AppsV1().Deployments("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no Host pod starts without its configuration: %v", err)
	_, err = kube.CoreV1().ConfigMaps("mcp-host").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-host-config"}, Data: map[string]string{"CLERUM_AUTH_JWT_PUBLIC_KEY": "k"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	waitUntil("the Host's objects exist in both namespaces", func() bool {
		_, d := kube.AppsV1().Deployments("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
		_, s := kube.CoreV1().Services("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
		_, p := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, "h1-workspace", metav1.GetOptions{})
		_, sec := kube.CoreV1().Secrets("mcp-host").Get(ctx, "host-h1-mcp-host-runtime-tokens", metav1.GetOptions{})
		_, sa := kube.CoreV1().ServiceAccounts("mcp-host").Get(ctx, "host-h1", metav1.GetOptions{})
		_, r := kube.RbacV1().Roles("mcp-host").Get(ctx, "host-h1", metav1.GetOptions{})
		_, rb := kube.RbacV1().RoleBindings("mcp-host").Get(ctx, "host-h1", metav1.GetOptions{})
		_, dp := kube.NetworkingV1().NetworkPolicies("mcp-host").Get(ctx, "allow-rpc-proxy-desktop-h1", metav1.GetOptions{})
		_, cd := kube.AppsV1().Deployments("channels").Get(ctx, "channel-reader-h1", metav1.GetOptions{})
		_, cs := kube.CoreV1().Services("channels").Get(ctx, "channel-reader-h1", metav1.GetOptions{})
		_, cp := kube.NetworkingV1().NetworkPolicies("channels").Get(ctx, "channel-reader-h1-egress", metav1.GetOptions{})
		for _, err := range []error{d, s, p, sec, sa, r, rb, dp, cd, cs, cp} {
			if !exists(err) {
				return false
			}
		}
		return true
	})
	deployment, err := kube.AppsV1().Deployments("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "tenant", deployment.Spec.Template.Labels[names.LabelContext])
	assert.Equal(t, "host-h1", deployment.Spec.Template.Spec.ServiceAccountName)
	waitUntil("AuthReady and the credential's expiry in status", func() bool {
		cond := meta.FindStatusCondition(getHost().Status.Conditions, clerumv1alpha1.ConditionAuthReady)
		return cond != nil && cond.Status == metav1.ConditionTrue && getHost().Status.CredentialExpiresAt != nil
	})
	assert.Equal(t, "tenant", getHost().Status.ContextID)
	assert.Equal(t, 1, fake.bootstrapCalls(), "one Control API call per Host")
	assert.Contains(t, getHost().Finalizers, clerumv1alpha1.FinalizerHostCleanup)

	// The credential exchanges for an access token hcc-api accepts, whose
	// inventory is the Host's Context's servers exactly.
	secret, err := kube.CoreV1().Secrets("mcp-host").Get(ctx, "host-h1-mcp-host-runtime-tokens", metav1.GetOptions{})
	require.NoError(t, err)
	credential := string(secret.Data[hostresources.KeyBootstrapCredential])
	require.NotEmpty(t, credential)
	assert.NotEqual(t, "attacker-credential", credential, "the forged credential is overwritten")
	assert.NotEmpty(t, secret.Annotations[mark.Annotation])
	var forged []corev1.Event
	waitUntil("a ForgedCredential event", func() bool {
		events, err := kube.CoreV1().Events("mcp-host").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		forged = nil
		for _, e := range events.Items {
			if e.Reason == host.EventForgedCredential && e.InvolvedObject.Name == "h1" {
				forged = append(forged, e)
			}
		}
		return len(forged) > 0
	})
	require.Len(t, forged, 1)
	assert.Equal(t, int32(1), forged[0].Count, "reported once")
	assert.NotContains(t, forged[0].Message, "attacker-credential")
	body, _ := json.Marshal(map[string]string{"credential": credential})
	resp, err := http.Post(controlAPI.URL+"/api/v1/mcp-host/token", "application/json", strings.NewReader(string(body)))
	require.NoError(t, err)
	var exchanged struct{ AccessToken string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&exchanged))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, err = controlplane.ApplyRBAC(ctx, kube, filepath.Join("..", "..", "deploy", "base", "api", "rbac.yaml"))
	require.NoError(t, err)
	api := apitest.Start(t, apiBinary, c.cp.ImpersonatingKubeconfig("system:serviceaccount:control-plane:hcc-api",
		"system:serviceaccounts", "system:serviceaccounts:control-plane"), apitest.PublicKeyPEM(t, key))
	api.WaitReady(t)
	var inventory apitest.Inventory
	waitUntil("hcc-api serves the Host's inventory", func() bool {
		code, body := api.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", exchanged.AccessToken, "")
		if code != http.StatusOK {
			return false
		}
		inventory = apitest.DecodeInventory(t, body)
		return true
	})
	require.Len(t, inventory.Servers, 1)
	assert.Equal(t, "alpha", inventory.Servers[0]["name"])

	// Deleting the Host removes everything in both namespaces; with no
	// controller-manager here, a claim held only by pvc-protection with a
	// deletion timestamp counts as gone.
	require.NoError(t, hcc.ClerumV1alpha1().Hosts("mcp-host").Delete(ctx, "h1", metav1.DeleteOptions{}))
	gone := func(err error) bool { return apierrors.IsNotFound(err) }
	waitUntil("the Host and all of its objects are gone", func() bool {
		_, hErr := hcc.ClerumV1alpha1().Hosts("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
		pvc, pErr := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, "h1-workspace", metav1.GetOptions{})
		claimGone := gone(pErr) || (pErr == nil && pvc.DeletionTimestamp != nil)
		_, d := kube.AppsV1().Deployments("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
		_, s := kube.CoreV1().Services("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
		_, sec := kube.CoreV1().Secrets("mcp-host").Get(ctx, "host-h1-mcp-host-runtime-tokens", metav1.GetOptions{})
		_, sa := kube.CoreV1().ServiceAccounts("mcp-host").Get(ctx, "host-h1", metav1.GetOptions{})
		_, r := kube.RbacV1().Roles("mcp-host").Get(ctx, "host-h1", metav1.GetOptions{})
		_, rb := kube.RbacV1().RoleBindings("mcp-host").Get(ctx, "host-h1", metav1.GetOptions{})
		_, dp := kube.NetworkingV1().NetworkPolicies("mcp-host").Get(ctx, "allow-rpc-proxy-desktop-h1", metav1.GetOptions{})
		_, cd := kube.AppsV1().Deployments("channels").Get(ctx, "channel-reader-h1", metav1.GetOptions{})
		_, cs := kube.CoreV1().Services("channels").Get(ctx, "channel-reader-h1", metav1.GetOptions{})
		_, cp := kube.NetworkingV1().NetworkPolicies("channels").Get(ctx, "channel-reader-h1-egress", metav1.GetOptions{})
		for _, err := range []error{hErr, d, s, sec, sa, r, rb, dp, cd, cs, cp} {
			if !gone(err) {
				return false
			}
		}
		return claimGone
	})
}
