//go:build integration

package e2e

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// terminatingNamespace is the runtime namespace TestTerminatingNamespace
// holds in Terminating; only that test's controller is told of it.
const terminatingNamespace = "e2e-terminating"

// holdFinalizer keeps an object, and so its namespace, from going away.
const holdFinalizer = "e2e.clerum.io/hold"

// A runtime namespace stuck Terminating — deleted, and held by objects
// with a finalizer — refuses every create with 403 "namespace is being
// terminated". The invariants: that refusal is no failed pass (the
// controller started while the namespace terminates certifies readiness,
// /ready answers 200, and the netpol reconciler counts no error), and
// every other namespace converges to exactly the planned objects. The
// audit log proves the fault was met: the controller's creates of the
// namespace's defaults were refused with 403.
func TestTerminatingNamespace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	holdNamespaceTerminating(t, terminatingNamespace)

	offset := auditOffset(t)
	runtimeNS := strings.Join([]string{"mcp-server", "sandbox-recipes", "rpc-proxy", "sandbox-ui", terminatingNamespace}, ",")
	c := e.startController("solo", "HCC_LEADER_ELECT=false", "CONTEXT_MAPPER_RUNTIME_NAMESPACES="+runtimeNS)
	defer e.cleanUp()

	e.fleet(3, 1)
	start := time.Now()
	e.waitConverged(2 * time.Minute)
	t.Logf("converged in %s beside the terminating namespace", time.Since(start).Round(time.Millisecond))
	e.waitPlanned(time.Minute, "every other namespace holds exactly the planned objects")
	e.eventually("the controller is ready: the netpol pass certified", 30*time.Second, func() bool { return ready(c) })
	assert.Equal(t, 1.0, scrapeMetric(t, c, "clerum_hcc_netpol_certified", ""))
	assert.Equal(t, 1.0, scrapeMetric(t, c, "clerum_hcc_netpol_missing_namespaces", ""), "the terminating namespace is skipped")
	assert.Zero(t, scrapeMetric(t, c, "clerum_hcc_netpol_reconcile_errors_total", `controller="netpol"`), "no pass failed")
	assert.Zero(t, scrapeMetric(t, c, "clerum_hcc_netpol_pass_duration_seconds_count", `kind="full",result="error"`), "no full pass failed")
	assert.Positive(t, scrapeMetric(t, c, "clerum_hcc_netpol_pass_duration_seconds_count", `kind="full",result="success"`))

	refused := 0
	for _, ev := range controllerWrites(t, offset) {
		if ev.Verb == "create" && ev.ObjectRef.Namespace == terminatingNamespace && ev.Code() == http.StatusForbidden {
			refused++
		}
	}
	t.Logf("%d creates refused in %s", refused, terminatingNamespace)
	assert.Positive(t, refused, "the controller met the terminating namespace's 403")
	ns, err := kube.CoreV1().Namespaces().Get(ctx, terminatingNamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase, "the namespace stayed Terminating throughout")
}

// holdNamespaceTerminating creates namespace ns with the Role and
// RoleBinding hcc-controller needs to manage NetworkPolicies in it, both
// with holdFinalizer, deletes the namespace and waits until it is
// Terminating with only those two left. RBAC honours the two while they
// wait for their finalizer, so the controller's creates there reach the
// NamespaceLifecycle admission and meet "is being terminated", not an
// authorization refusal. The cleanup releases the finalizers and waits
// for the namespace to be gone.
func holdNamespaceTerminating(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, createNamespaces(ctx, []string{ns}))
	meta := metav1.ObjectMeta{Name: "hcc-controller-networkpolicies", Namespace: ns, Finalizers: []string{holdFinalizer}}
	_, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"},
		Verbs: []string{"get", "list", "watch", "create", "update", "delete"},
	}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "hcc-controller", Namespace: "control-plane"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		release := []byte(`{"metadata":{"finalizers":null}}`)
		_, err := kube.RbacV1().Roles(ns).Patch(ctx, meta.Name, types.MergePatchType, release, metav1.PatchOptions{})
		assert.NoError(t, ignoreNotFound(err))
		_, err = kube.RbacV1().RoleBindings(ns).Patch(ctx, meta.Name, types.MergePatchType, release, metav1.PatchOptions{})
		assert.NoError(t, ignoreNotFound(err))
		_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		eventually(t, "namespace "+ns+" is gone", 2*time.Minute, func() bool {
			_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return ignoreNotFound(err) == nil && err != nil
		})
	})
	require.NoError(t, kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	start := time.Now()
	var last *corev1.Namespace
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = got
		held := slices.ContainsFunc(got.Status.Conditions, func(c corev1.NamespaceCondition) bool {
			return c.Type == corev1.NamespaceFinalizersRemaining && c.Status == corev1.ConditionTrue
		})
		return got.Status.Phase == corev1.NamespaceTerminating && held, nil
	})
	require.NoError(t, err, "namespace %s is Terminating with only the held objects left; its status: %+v", ns, statusOf(last))
	t.Logf("namespace %s held Terminating %s after its delete", ns, time.Since(start).Round(time.Millisecond))
}

// statusOf is ns's status, or nil.
func statusOf(ns *corev1.Namespace) *corev1.NamespaceStatus {
	if ns == nil {
		return nil
	}
	return &ns.Status
}

// scrapeMetric returns the value of the sample of name whose labels
// contain labels (e.g. `controller="netpol"`; "" for any) on b's
// /metrics — the first such series in sorted order — or 0 when there is
// none.
func scrapeMetric(t *testing.T, b *binary, name, labels string) float64 {
	t.Helper()
	m := scrape(t, b)
	for _, series := range slices.Sorted(maps.Keys(m)) {
		metric, set, _ := strings.Cut(series, "{")
		if metric == name && strings.Contains(set, labels) {
			return m[series]
		}
	}
	return 0
}

// scrapeSum returns the sum of every sample of name on b's /metrics.
func scrapeSum(t *testing.T, b *binary, name string) float64 {
	t.Helper()
	sum := 0.0
	for series, v := range scrape(t, b) {
		if metric, _, _ := strings.Cut(series, "{"); metric == name {
			sum += v
		}
	}
	return sum
}
