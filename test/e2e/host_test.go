//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

var (
	serverType  = metav1.TypeMeta{APIVersion: "clerum.io/v1alpha1", Kind: "McpServer"}
	contextType = metav1.TypeMeta{APIVersion: "clerum.io/v1alpha1", Kind: "Context"}
	hostType    = metav1.TypeMeta{APIVersion: "clerum.io/v1alpha1", Kind: "Host"}
	secretType  = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
)

func sseServer(name string) *clerumv1alpha1.McpServer {
	return &clerumv1alpha1.McpServer{
		TypeMeta:   serverType,
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mcp-server"},
		Spec:       clerumv1alpha1.McpServerSpec{Image: "ghcr.io/evenfire-ai/" + name + ":1", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
	}
}

func contextOf(name string, servers ...string) *clerumv1alpha1.Context {
	return &clerumv1alpha1.Context{
		TypeMeta:   contextType,
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mcp-server"},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: name, McpServers: servers},
	}
}

func hostOf(name, contextRef string) *clerumv1alpha1.Host {
	return &clerumv1alpha1.Host{
		TypeMeta:   hostType,
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mcp-host"},
		Spec:       clerumv1alpha1.HostSpec{ContextRef: contextRef, Desktop: &clerumv1alpha1.DesktopSpec{Enabled: true}},
	}
}

// accessToken exchanges the bootstrap credential in the Host's
// runtime-token Secret at the development Control API, as mcp-host does.
func (e *env) accessToken(host string) string {
	e.t.Helper()
	secret, err := kube.CoreV1().Secrets("mcp-host").Get(context.Background(), names.HostRuntimeTokens(host), metav1.GetOptions{})
	require.NoError(e.t, err)
	credential := secret.Data["bootstrap-credential"]
	require.NotEmpty(e.t, credential, "the runtime-token Secret holds a credential")
	body, _ := json.Marshal(map[string]string{"credential": string(credential)})
	resp, err := http.Post(e.devURL+"/api/v1/mcp-host/token", "application/json", bytes.NewReader(body))
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	var out struct{ AccessToken string }
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&out))
	return out.AccessToken
}

// call sends an authenticated request to hcc-api.
func call(t *testing.T, api *binary, method, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, api.base+path, bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

type inventoryEntry struct {
	Name   string `json:"name"`
	Status struct {
		Deployed      bool  `json:"deployed"`
		Ready         bool  `json:"ready"`
		Authoritative *bool `json:"authoritative"`
	} `json:"status"`
}

func inventory(t *testing.T, api *binary, token string) []inventoryEntry {
	t.Helper()
	code, body := call(t, api, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
	require.Equal(t, http.StatusOK, code, body)
	var inv struct{ Servers []inventoryEntry }
	require.NoError(t, json.Unmarshal([]byte(body), &inv))
	slices.SortFunc(inv.Servers, func(a, b inventoryEntry) int { return compare(a.Name, b.Name) })
	return inv.Servers
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func entryNames(entries []inventoryEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name
	}
	return out
}

// A Host converges and its credential exchanges for a token with which
// hcc-api lists exactly its Context's enabled servers, ready once kwok runs
// their pods; the credential route hands out the Secret's value. Taking a
// server out of the Context closes the route and revokes its policies;
// putting it back restores both.
func TestHostSeesItsContext(t *testing.T) {
	e := newEnv(t)
	e.startController("solo", "HCC_LEADER_ELECT=false")
	api := e.startAPI()
	defer e.cleanUp()

	e.create(&corev1.Secret{TypeMeta: secretType, ObjectMeta: metav1.ObjectMeta{Name: "beta-token", Namespace: "mcp-server"},
		Data: map[string][]byte{"token": []byte("beta-secret-value")}})
	beta := sseServer("beta")
	beta.Spec.Auth = &clerumv1alpha1.Auth{SecretRef: clerumv1alpha1.SecretKeyReference{Name: "beta-token", Key: "token"}}
	disabled := sseServer("delta")
	disabled.Spec.Enabled = new(bool)
	for _, s := range []*clerumv1alpha1.McpServer{sseServer("alpha"), beta, sseServer("gamma"), disabled} {
		e.create(s)
	}
	e.create(contextOf("team", "alpha", "beta", "delta"))
	e.create(hostOf("h1", "team"))
	e.waitConverged(3 * time.Minute)

	token := e.accessToken("h1")
	var servers []inventoryEntry
	e.eventually("the inventory lists alpha and beta, ready", time.Minute, func() bool {
		servers = inventory(t, api, token)
		return slices.Equal(entryNames(servers), []string{"alpha", "beta"}) && servers[0].Status.Ready && servers[1].Status.Ready
	})
	for _, s := range servers {
		assert.True(t, s.Status.Deployed, s.Name)
		assert.Nil(t, s.Status.Authoritative, "%s: converged, so authoritative", s.Name)
	}
	code, body := call(t, api, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"beta"}`)
	require.Equal(t, http.StatusOK, code, body)
	var cred struct{ Token *string }
	require.NoError(t, json.Unmarshal([]byte(body), &cred))
	require.NotNil(t, cred.Token)
	assert.Equal(t, "beta-secret-value", *cred.Token)
	for _, name := range []string{"gamma", "delta"} {
		code, _ = call(t, api, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"`+name+`"}`)
		assert.Equal(t, http.StatusNotFound, code, "%s is not granted or is disabled", name)
	}

	// beta's L2 policies (docs/networkpolicy.md): its ingress, the Host
	// namespace's egress to it, and the RPC proxy's egress to it.
	l2 := map[string]string{"ctx-team-beta": "mcp-server", "ctx-team-beta-egress": "mcp-host", "rpc-egress-team-beta": "rpc-proxy"}
	policiesExist := func(want bool) func() bool {
		return func() bool {
			for name, ns := range l2 {
				_, err := kube.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), name, metav1.GetOptions{})
				if want != (err == nil) || (!want && !apierrors.IsNotFound(err)) {
					return false
				}
			}
			return true
		}
	}
	e.eventually("beta's L2 policies exist while it is granted", 30*time.Second, policiesExist(true))

	e.update(contextOf("team", "alpha", "delta"))
	e.eventually("the credential route refuses beta", 30*time.Second, func() bool {
		code, _ := call(t, api, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"beta"}`)
		return code == http.StatusNotFound
	})
	e.eventually("beta's L2 policies are revoked", time.Minute, policiesExist(false))
	assert.Equal(t, []string{"alpha"}, entryNames(inventory(t, api, token)))

	e.update(contextOf("team", "alpha", "beta", "delta"))
	e.eventually("the credential route serves beta again", 30*time.Second, func() bool {
		code, _ := call(t, api, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"beta"}`)
		return code == http.StatusOK
	})
	e.eventually("beta's L2 policies are back", time.Minute, policiesExist(true))
	e.waitConverged(time.Minute)
	e.waitPlanned(time.Minute, "exactly the planned objects")
}
