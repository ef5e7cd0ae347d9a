package main

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/kit"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
	hccscheme "github.com/clerum/hcc/pkg/generated/clientset/versioned/scheme"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/names"
)

// keepsLastApplied are the kinds whose caches keep kubectl's last-applied
// annotation, and why: an update is built from their cached copies
// without a read first, and would erase it (kit.StripUnread).
var keepsLastApplied = map[string]string{
	"NetworkPolicy": "the NetworkPolicy operator updates a policy from its cached copy",
}

// Every cache hcc-controller starts drops managedFields and kubectl's
// last-applied annotation, whichever transform it has (StripUnread, a
// Secret's digest, the Host pods' metadata, a ConfigMap's existence), and
// the table covers every kind the reconcilers cache.
func TestEveryCacheDropsWhatNoReconcilerReads(t *testing.T) {
	cfg, err := config.LoadFrom(config.Controller, func(k string) (string, bool) {
		v, ok := map[string]string{
			"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET": "test-secret",
			"CONTROL_API_BASE_URL":                 "http://control-api.invalid",
			"MCP_HOST_GATEWAY_URL":                 "http://gateway.invalid",
		}[k]
		return v, ok
	})
	require.NoError(t, err)
	kube, hcc := kubefake.NewClientset(), hccfake.NewSimpleClientset()
	registry := prometheus.NewRegistry()
	clk := clocktesting.NewFakeClock(time.Now())
	deps := kit.Deps{
		Kube: kube, HCC: hcc, Informers: kit.NewInformers(kube, hcc), Recorder: record.NewFakeRecorder(16),
		Registry: registry, Queues: kit.NewQueues(registry, clk), Clock: clk, Log: zerolog.Nop(),
		Config: cfg, Readiness: health.NewReadiness(),
	}
	issuer, err := newIssuer(deps)
	require.NoError(t, err)
	_, err = newReconcilers(deps, net.DefaultResolver, issuer)
	require.NoError(t, err)

	caches := deps.Informers.Caches()
	kinds := map[string]bool{}
	for _, c := range caches {
		kinds[c.Kind.Kind] = true
		t.Run(c.Namespace+"/"+c.Resource.Resource, func(t *testing.T) {
			obj := newOfKind(t, c.Kind)
			m, err := meta.Accessor(obj)
			require.NoError(t, err)
			m.SetNamespace(c.Namespace)
			m.SetName("x")
			m.SetUID("uid-x")
			m.SetLabels(map[string]string{names.LabelManagedBy: names.ManagedByValue})
			m.SetAnnotations(map[string]string{kit.LastAppliedAnnotation: `{"metadata":{"name":"x"}}`})
			m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}})
			out, err := c.Transform(obj)
			require.NoError(t, err)
			cached, err := meta.Accessor(out)
			require.NoError(t, err)
			assert.Empty(t, cached.GetManagedFields(), "managedFields")
			if why, keep := keepsLastApplied[c.Kind.Kind]; keep {
				assert.Contains(t, cached.GetAnnotations(), kit.LastAppliedAnnotation, why)
			} else {
				assert.NotContains(t, cached.GetAnnotations(), kit.LastAppliedAnnotation)
			}
		})
	}
	// The kinds hcc-controller caches; a new one joins the table by itself,
	// and this list says it was looked at.
	want := []string{"ConfigMap", "Context", "Deployment", "GlobalFileSystem", "Host", "Job", "McpServer", "NetworkPolicy",
		"PersistentVolumeClaim", "Pod", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "SharedFileSystem"}
	var got []string
	for k := range kinds {
		got = append(got, k)
	}
	assert.ElementsMatch(t, want, got)
}

// newOfKind is an empty object of gvk, built-in or clerum.io.
func newOfKind(t *testing.T, gvk schema.GroupVersionKind) runtime.Object {
	t.Helper()
	for _, scheme := range []*runtime.Scheme{kubescheme.Scheme, hccscheme.Scheme} {
		if obj, err := scheme.New(gvk); err == nil {
			return obj
		}
	}
	t.Fatalf("no scheme knows %s", gvk)
	return nil
}
