package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// enforcing configures the handler as hcc-api does from
// CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES and ..._ENFORCE_IMAGE_ALLOWLIST.
func enforcing(t testing.TB, enforce bool, prefixes ...string) harnessOption {
	policy, err := imagepolicy.Parse(prefixes)
	require.NoError(t, err)
	return func(o *Options) { o.ImageRefused = imagepolicy.Enforced(policy, enforce) }
}

// refusedWorld is the standard world with alpha's image outside the
// allowlist "example/": its status still says deployed and ready, as an
// operator that has not caught up (or ran in audit mode) left it.
func refusedWorld(t testing.TB) *world {
	w := standardWorld(t)
	alpha := withAuth(newServer("alpha", v1alpha1.TransportSSE), "alpha-creds", "token")
	alpha.Spec.Image = "evil.io/x:1"
	put(t, w.servers, alpha)
	return w
}

func statusByName(t *testing.T, h *harness, token string) map[string]serverStatus {
	rec := h.inventory(token)
	require.Equal(t, http.StatusOK, rec.Code)
	out := map[string]serverStatus{}
	for _, e := range decode[hostInventory](t, rec).Servers {
		out[e.Name] = e.Status
	}
	return out
}

// Enforce mode: a refused server is listed deployed and ready false and its
// credential is the uniform 404; audit mode hands it out as before. The
// other servers are untouched either way.
func TestEnforceModeWithholdsARefusedServer(t *testing.T) {
	audit := newHarness(t, refusedWorld(t), enforcing(t, false, "example/"))
	token := audit.token("host-a", "uid-a")
	rec := audit.credential(token, "alpha")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "s3cret-alpha")
	assert.Equal(t, serverStatus{Deployed: true, Ready: true}, statusByName(t, audit, token)["alpha"])

	h := newHarness(t, refusedWorld(t), enforcing(t, true, "example/"))
	token = h.token("host-a", "uid-a")
	rec = h.credential(token, "alpha")
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.Equal(t, `{"error":"not_found"}`, rec.Body.String(), "the same bytes as an ungranted server")
	assert.Zero(t, h.world.secretReads.Load(), "its Secret is never read")
	status := statusByName(t, h, token)
	assert.Equal(t, serverStatus{Deployed: false, Ready: false}, status["alpha"])
	assert.Equal(t, serverStatus{Deployed: true, Ready: true}, status["beta"], "an allowed server is unaffected")
	require.Equal(t, http.StatusOK, h.credential(token, "beta").Code)

	// The v1 system inventory says the same.
	rec = h.do(http.MethodGet, "/api/v1/mcpservers", "", "")
	require.Equal(t, http.StatusOK, rec.Code)
	for _, e := range decode[systemInventory](t, rec).Servers {
		if e.Name == "alpha" {
			assert.Equal(t, serverStatus{Deployed: false, Ready: false}, e.Status)
		}
	}
}

// A server whose image becomes refused while its credential is read is
// refused by the re-check after the read.
func TestEnforceModeRevalidatesTheImageAfterTheRead(t *testing.T) {
	w := standardWorld(t)
	alpha := withAuth(newServer("alpha", v1alpha1.TransportSSE), "alpha-creds", "token")
	w.secretReads.Store(0)
	w.onSecretRead = func() {
		changed := alpha.DeepCopy()
		changed.Spec.Image = "evil.io/x:1"
		put(t, w.servers, changed)
	}
	h := newHarness(t, w, enforcing(t, true, "example/"))
	rec := h.credential(h.token("host-a", "uid-a"), "alpha")
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.NotContains(t, rec.Body.String(), "s3cret-alpha")
}

// A Secret no server may read is never handed out as a credential: it is
// unavailable, like a missing one.
func TestAForbiddenSecretIsNeverACredential(t *testing.T) {
	for name, change := range map[string]func(*corev1.Secret){
		"service-account token": func(s *corev1.Secret) { s.Type = corev1.SecretTypeServiceAccountToken },
		"dockerconfigjson":      func(s *corev1.Secret) { s.Type = corev1.SecretTypeDockerConfigJson },
		"HCC-managed":           func(s *corev1.Secret) { s.Labels = map[string]string{names.LabelManagedBy: names.ManagedByValue} },
	} {
		t.Run(name, func(t *testing.T) {
			w := standardWorld(t)
			s := newSecret("alpha-creds", "uid-secret-alpha", map[string]string{"token": "s3cret-alpha"})
			change(s)
			put(t, w.secrets, s)
			h := newHarness(t, w)
			rec := h.credential(h.token("host-a", "uid-a"), "alpha")
			assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
			assert.Equal(t, `{"error":"credential_unavailable"}`, rec.Body.String())
		})
	}
}

// A server named like a platform workload (from before the CRD refused
// such names) runs nothing: its credential is withheld in either mode.
func TestAReservedNameIsWithheld(t *testing.T) {
	w := standardWorld(t)
	put(t, w.contexts, newContext("ctx-a", "alpha", "mcp-proxy"))
	put(t, w.servers, withAuth(newServer("mcp-proxy", v1alpha1.TransportSSE), "alpha-creds", "token"))
	h := newHarness(t, w)
	token := h.token("host-a", "uid-a")
	rec := h.credential(token, "mcp-proxy")
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.NotContains(t, rec.Body.String(), "s3cret-alpha")
	assert.Equal(t, serverStatus{Deployed: false, Ready: false}, statusByName(t, h, token)["mcp-proxy"])
}

// imageVerdict sets s's ImageAllowed condition to False with reason,
// observed for generation.
func imageVerdict(s *v1alpha1.McpServer, reason string, generation int64) *v1alpha1.McpServer {
	s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionImageAllowed, Status: metav1.ConditionFalse,
		Reason: reason, ObservedGeneration: generation,
	})
	return s
}

// An hcc-api left in audit mode (an overlay that set enforce mode on the
// controller only) still withholds a server whose status says the
// controller refused its image in enforce mode for the current spec; a
// verdict for an older spec, or an audit-mode verdict, withholds nothing.
func TestTheControllersEnforceVerdictWithholdsInAuditMode(t *testing.T) {
	for name, tc := range map[string]struct {
		reason     string
		observed   int64
		generation int64
		withheld   bool
	}{
		"ImageNotAllowed for this generation":     {reasonImageNotAllowed, 2, 2, true},
		"ImageNotAllowed for an older generation": {reasonImageNotAllowed, 1, 2, false},
		"AuditOnly": {reasons.AuditOnly, 2, 2, false},
	} {
		t.Run(name, func(t *testing.T) {
			w := standardWorld(t)
			alpha := withAuth(newServer("alpha", v1alpha1.TransportSSE), "alpha-creds", "token")
			alpha.Spec.Image = "evil.io/x:1"
			alpha.Generation, alpha.Status.ObservedGeneration = tc.generation, tc.generation
			put(t, w.servers, imageVerdict(alpha, tc.reason, tc.observed))
			h := newHarness(t, w, enforcing(t, false, "example/"))
			token := h.token("host-a", "uid-a")
			rec := h.credential(token, "alpha")
			secretReads := h.world.secretReads.Load()
			status := statusByName(t, h, token)
			assert.Equal(t, serverStatus{Deployed: true, Ready: true}, status["beta"], "other servers are unaffected")
			if !tc.withheld {
				require.Equal(t, http.StatusOK, rec.Code)
				assert.Contains(t, rec.Body.String(), "s3cret-alpha")
				assert.Equal(t, serverStatus{Deployed: true, Ready: true}, status["alpha"])
				return
			}
			assert.Equal(t, http.StatusNotFound, rec.Code)
			assert.Equal(t, `{"error":"not_found"}`, rec.Body.String(), "the same bytes as an ungranted server")
			assert.Zero(t, secretReads, "its Secret is never read")
			assert.Equal(t, serverStatus{Deployed: false, Ready: false}, status["alpha"])
			rec = h.do(http.MethodGet, "/api/v1/mcpservers", "", "")
			require.Equal(t, http.StatusOK, rec.Code)
			for _, e := range decode[systemInventory](t, rec).Servers {
				if e.Name == "alpha" {
					assert.Equal(t, serverStatus{Deployed: false, Ready: false}, e.Status)
				}
			}
		})
	}
}

// The status only ever withholds: hcc-api in enforce mode refuses an image
// its allowlist refuses even when the status says the image is allowed.
func TestAnAllowedVerdictDoesNotOverrideEnforceMode(t *testing.T) {
	w := standardWorld(t)
	alpha := withAuth(newServer("alpha", v1alpha1.TransportSSE), "alpha-creds", "token")
	alpha.Spec.Image = "evil.io/x:1"
	alpha.Status.Conditions = []metav1.Condition{{
		Type: v1alpha1.ConditionImageAllowed, Status: metav1.ConditionTrue,
		Reason: reasons.ImageAllowed, ObservedGeneration: alpha.Generation,
	}}
	put(t, w.servers, alpha)
	h := newHarness(t, w, enforcing(t, true, "example/"))
	token := h.token("host-a", "uid-a")
	assert.Equal(t, http.StatusNotFound, h.credential(token, "alpha").Code)
	assert.Equal(t, serverStatus{Deployed: false, Ready: false}, statusByName(t, h, token)["alpha"])
}

// reasonImageNotAllowed is a copy of the controller's reason (pkg/api may
// not import the controllers); the two must not drift apart.
func TestReasonImageNotAllowedMatchesTheController(t *testing.T) {
	assert.Equal(t, reasons.ImageNotAllowed, reasonImageNotAllowed)
}
