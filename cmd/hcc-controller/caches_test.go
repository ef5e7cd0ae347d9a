package main

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
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
// the table covers every kind the reconcilers cache. It reads what the
// informers themselves stored of an object their list returned, not the
// transform HCC meant them to have: an informer built without its
// transform fails it.
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

	// One object each cache's list returns, carrying both, on the server.
	caches := deps.Informers.Caches()
	keys := make([]string, len(caches))
	for i, c := range caches {
		obj := newOfKind(t, c.Kind)
		m, err := meta.Accessor(obj)
		require.NoError(t, err)
		ns, name := c.Namespace, c.Name
		if ns == "" {
			ns = "any"
		}
		if name == "" {
			name = "x"
		}
		m.SetNamespace(ns)
		m.SetName(name)
		m.SetUID(types.UID("uid-" + c.Resource.Resource + "-" + ns + "-" + name))
		m.SetLabels(map[string]string{names.LabelManagedBy: names.ManagedByValue})
		m.SetAnnotations(map[string]string{kit.LastAppliedAnnotation: `{"metadata":{"name":"x"}}`})
		m.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}})
		require.True(t, c.Selects(m), "%s/%s: the cache's list would not return the test's object", c.Namespace, c.Resource.Resource)
		tracker := kube.Tracker()
		if c.Resource.Group == clerumv1alpha1.GroupVersion.Group {
			tracker = hcc.Tracker()
		}
		if err := tracker.Create(c.Resource, obj, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "%s/%s", c.Namespace, c.Resource.Resource)
		}
		keys[i] = ns + "/" + name
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); deps.Informers.Shutdown() })
	deps.Informers.Start(stop)

	kinds := map[string]bool{}
	for i, c := range caches {
		kinds[c.Kind.Kind] = true
		t.Run(c.Namespace+"/"+c.Resource.Resource+"/"+c.Name, func(t *testing.T) {
			var stored any
			require.Eventually(t, func() bool {
				var ok bool
				stored, ok, err = c.Indexer.GetByKey(keys[i])
				require.NoError(t, err)
				return ok
			}, 10*time.Second, 10*time.Millisecond, "the informer never stored %s", keys[i])
			cached, err := meta.Accessor(stored)
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
