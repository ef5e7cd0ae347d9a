//go:build integration

package deploy

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// fieldManager is the manager of every apply in this test.
const fieldManager = "hcc-deploy-test"

// warnings collects the API server's warning headers (deprecations, Pod
// Security): a shipped manifest must draw none.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// applier server-side applies objects through a dynamic client, finding
// each kind's resource through discovery.
type applier struct {
	client   dynamic.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	warnings *warnings
}

func newApplier(t *testing.T, cp *controlplane.ControlPlane) (*applier, kubernetes.Interface) {
	t.Helper()
	w := &warnings{}
	config := rest.CopyConfig(cp.Config())
	config.WarningHandler = w
	disco, err := discovery.NewDiscoveryClientForConfig(config)
	require.NoError(t, err)
	client, err := dynamic.NewForConfig(config)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfig(cp.Config())
	require.NoError(t, err)
	return &applier{
		client:   client,
		mapper:   restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
		warnings: w,
	}, kube
}

// apply server-side applies obj; dryRun asks the API server to validate,
// default and admit it without persisting anything.
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("no resource for %s: %w", gvk, err)
	}
	var resource dynamic.ResourceInterface = a.client.Resource(mapping.Resource)
	if mapping.Scope.Name() == "namespace" {
		resource = a.client.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = resource.Apply(ctx, obj.GetName(), obj, opts)
	return err
}

// applyAll dry-runs every object, Namespaces first (as kubectl orders
// them), and fails the test for each the API server rejects or warns about.
func (a *applier) applyAll(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ordered := ofKind(objs, "Namespace")
	for _, o := range objs {
		if o.GetKind() != "Namespace" {
			ordered = append(ordered, o)
		}
	}
	require.Len(t, ordered, len(objs))
	for _, o := range ordered {
		at := fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		assert.NoError(t, a.apply(ctx, o, true), "the API server rejects %s", at)
		assert.Empty(t, a.warnings.take(), "the API server warns about %s", at)
	}
}

// TestManifestsPassTheAPIServer dry-runs every object of the production
// install and of the minikube overlay against a real kube-apiserver:
// schema, defaulting, validation and admission, for the built-in kinds and
// the CRDs alike.
//
// The control plane starts without HCC's CRDs, as a fresh cluster does:
// `kubectl apply -f deploy/crds` is the first step of the install.
func TestManifestsPassTheAPIServer(t *testing.T) {
	cp := controlplane.Start(t, controlplane.Options{CRDDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, kube := newApplier(t, cp)

	// The first step, object by object as kubectl -f sends them: every
	// document of every file must be an object some resource serves (a
	// kustomization.yaml there is not).
	t.Run("deploy/crds", func(t *testing.T) {
		files := crdFiles(t)
		require.NotEmpty(t, files)
		for file, crd := range files {
			assert.NoError(t, a.apply(ctx, crd, true), "the API server rejects %s", file)
			assert.Empty(t, a.warnings.take(), "the API server warns about %s", file)
		}
	})

	// The same with kubectl itself, as the install says.
	t.Run("kubectl apply -f deploy/crds", func(t *testing.T) {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			t.Skip("no kubectl on PATH; the subtest above dry-runs the same objects")
		}
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", cp.Kubeconfig(),
			"apply", "--dry-run=server", "-f", filepath.Join(repoRoot(t), crdsDir))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		for _, crd := range crdFiles(t) {
			assert.Contains(t, string(out), "customresourcedefinition.apiextensions.k8s.io/"+crd.GetName()+" created (server dry run)")
		}
	})

	t.Run("production", func(t *testing.T) {
		objs := build(t, productionTree)
		// deploy/ creates no namespace: the platform does, before it.
		for _, ns := range namespacesOf(objs) {
			_, err := kube.CoreV1().Namespaces().Create(ctx,
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		a.applyAll(ctx, t, objs)
	})

	// The leader-election Role, applied for real and judged by the API
	// server's RBAC authorizer for hcc-controller's account.
	t.Run("leader election Role", func(t *testing.T) {
		objs := build(t, productionTree)
		// control-plane exists when the production subtest ran first.
		_, err := kube.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "control-plane"}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		for _, o := range []*unstructured.Unstructured{
			find(t, objs, "Role", "hcc-controller-leader-election"),
			find(t, objs, "RoleBinding", "hcc-controller-leader-election"),
		} {
			require.NoError(t, a.apply(ctx, o, false), "%s %s", o.GetKind(), o.GetName())
		}
		a.warnings.take()
		allowed := func(verb, name string) bool {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "system:serviceaccount:control-plane:hcc-controller",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:control-plane", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: "control-plane", Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: name,
				},
			}}
			got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			require.NoError(t, err)
			return got.Status.Allowed
		}
		// RBAC objects reach the authorizer's cache shortly after they are
		// written: wait for the granted request to pass.
		require.Eventually(t, func() bool { return allowed("get", "hcc-controller") }, 10*time.Second, 100*time.Millisecond,
			"hcc-controller may not get its Lease")
		for _, verb := range []string{"get", "update"} {
			assert.True(t, allowed(verb, "hcc-controller"), "%s the hcc-controller Lease", verb)
			assert.False(t, allowed(verb, "kube-scheduler"), "%s another component's Lease", verb)
		}
		assert.True(t, allowed("create", ""), "the first replica creates the Lease")
		for _, verb := range []string{"list", "watch", "patch", "delete"} {
			assert.False(t, allowed(verb, ""), "%s Leases", verb)
		}
	})

	t.Run("minikube", func(t *testing.T) {
		objs := build(t, minikubeTree)
		a.applyAll(ctx, t, objs)

		// With the overlay's Pod Security labels really on the namespaces,
		// the Deployments dry-run again: the API server warns about a pod
		// template that the namespace's warn level (restricted everywhere)
		// would refuse.
		for _, ns := range ofKind(objs, "Namespace") {
			require.NoError(t, a.apply(ctx, ns, false), "Namespace %s", ns.GetName())
		}
		a.warnings.take()
		for _, d := range ofKind(objs, "Deployment") {
			live, err := kube.CoreV1().Namespaces().Get(ctx, d.GetNamespace(), metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, "restricted", live.Labels["pod-security.kubernetes.io/warn"])
			require.NoError(t, a.apply(ctx, d, true), "Deployment %s", d.GetName())
			assert.Empty(t, a.warnings.take(), "Pod Security warns about Deployment %s", d.GetName())
		}
	})

	// A rejected object must fail the dry run, or the passes above prove
	// nothing.
	t.Run("a rejected object fails", func(t *testing.T) {
		bad := find(t, build(t, productionTree), "Deployment", api).DeepCopy()
		require.NoError(t, unstructured.SetNestedField(bad.Object, int64(-1), "spec", "replicas"))
		err := a.apply(ctx, bad, true)
		require.Error(t, err)
		assert.True(t, strings.Contains(err.Error(), "replicas"), err.Error())
		a.warnings.take()
	})
}

// namespacesOf returns the namespaces objs live in, each once.
func namespacesOf(objs []*unstructured.Unstructured) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	return out
}
