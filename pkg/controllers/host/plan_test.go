package host

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
)

// TestSyncAndRenderProduceTheSameChildren runs the real sync of a few Hosts
// against the fake clientsets and requires that what it wrote, in both
// namespaces, is exactly what resources.Plan (render's) plans for the same
// Hosts, Context and Secrets: the same objects, with the same labels,
// annotations, owner references and content. What only the API server or
// the Control API supplies is left out on both sides (normalised).
func TestSyncAndRenderProduceTheSameChildren(t *testing.T) {
	hosts := []*clerumv1alpha1.Host{
		resourcestest.NewHost("plain"),
		resourcestest.NewHost("desk", resourcestest.WithDesktop),
		resourcestest.NewHost("withref", resourcestest.WithSecretRef("withref-env"), resourcestest.WithDesktop),
	}
	c1 := context1()
	secrets := []*corev1.Secret{{
		ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "withref-env", ResourceVersion: "1",
			Labels: map[string]string{resources.LabelSecretForHost: "withref"}},
	}}

	objs := []runtime.Object{c1}
	for _, h := range hosts {
		objs = append(objs, h)
	}
	for _, s := range secrets {
		objs = append(objs, s)
	}
	f := newFixture(t, objs...)
	for _, h := range hosts {
		f.mustSync(h.Name)
	}
	got := normalise(t, written(t, f))

	var planned []runtime.Object
	for _, h := range hosts {
		a := resources.Admit(h, c1, []*clerumv1alpha1.Context{c1}, func(name string) *corev1.Secret {
			for _, s := range secrets {
				if s.Name == name {
					return s
				}
			}
			return nil
		}, contextNS, resourcestest.Options)
		require.Empty(t, a.Block, "host %s", h.Name)
		children, err := resources.Plan(h, a, resourcestest.Options)
		require.NoError(t, err)
		planned = append(planned, children...)
	}
	want := normalise(t, planned)

	// Ten per Host, and the desktop policy of the two with a desktop: the
	// comparison below is not between two empty sets.
	require.Len(t, got, 3*10+2, "written: %v", keys(got))
	assert.Equal(t, keys(want), keys(got), "the objects sync writes and render plans")
	for k, w := range want {
		if g, ok := got[k]; ok {
			assert.Equal(t, w, g, "%s: what sync writes differs from what render plans", k)
		}
	}
}

// written returns every object HCC created in the fake API server, in
// every namespace.
func written(t *testing.T, f *fixture) []runtime.Object {
	t.Helper()
	ctx, all := context.Background(), metav1.ListOptions{}
	var out []runtime.Object
	add := func(list runtime.Object, err error) {
		require.NoError(t, err)
		items, err := metaItems(list)
		require.NoError(t, err)
		for _, o := range items {
			if o.(metav1.Object).GetLabels()[names.LabelManagedBy] == names.ManagedByValue {
				out = append(out, o)
			}
		}
	}
	add(f.Kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, all))
	add(f.Kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, all))
	add(f.Kube.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, all))
	add(f.Kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, all))
	add(f.Kube.CoreV1().ServiceAccounts(metav1.NamespaceAll).List(ctx, all))
	add(f.Kube.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, all))
	add(f.Kube.RbacV1().Roles(metav1.NamespaceAll).List(ctx, all))
	add(f.Kube.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, all))
	add(f.Kube.NetworkingV1().NetworkPolicies(metav1.NamespaceAll).List(ctx, all))
	return out
}

// metaItems returns the items of a typed list as objects.
func metaItems(list runtime.Object) ([]runtime.Object, error) {
	v := reflect.ValueOf(list).Elem().FieldByName("Items")
	if !v.IsValid() {
		return nil, fmt.Errorf("%T has no Items", list)
	}
	out := make([]runtime.Object, 0, v.Len())
	for i := range v.Len() {
		out = append(out, v.Index(i).Addr().Interface().(runtime.Object))
	}
	return out, nil
}

// normalise keys objs by kind/namespace/name and keeps of each what HCC
// decides: labels, annotations, owner references without their uid, and
// every field besides metadata and status. Left out, on both sides, is
// what the API server or the Control API supplies: the uid, the
// resourceVersion and the other server-set metadata, the deprecated
// serviceAccount the API server copies from serviceAccountName, the mark
// a workspace claim gets over its uid, and the runtime-token Secret's
// credential, expiry and their mark.
func normalise(t *testing.T, objs []runtime.Object) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		m := o.(metav1.Object)
		kind := reflect.TypeOf(o).Elem().Name()
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, err)
		delete(u, "apiVersion")
		delete(u, "kind")
		delete(u, "status")
		delete(u, "metadata")

		annotations := map[string]string{}
		for k, v := range m.GetAnnotations() {
			annotations[k] = v
		}
		switch kind {
		case "PersistentVolumeClaim":
			delete(annotations, mark.Annotation)
		case "Secret":
			if m.GetName() == names.HostRuntimeTokens(m.GetLabels()[names.LabelHost]) {
				delete(annotations, mark.Annotation)
				delete(annotations, resources.AnnotationIssuedForUID)
				delete(annotations, resources.AnnotationExpiresAt)
				delete(u, "data")
			}
		case "Deployment":
			if pod, ok := nestedMap(u, "spec", "template", "spec"); ok {
				delete(pod, "serviceAccount")
			}
		}
		var refs []map[string]any
		for _, r := range m.GetOwnerReferences() {
			r.UID = ""
			ru, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
			require.NoError(t, err)
			refs = append(refs, ru)
		}
		u["metadata"] = map[string]any{
			"labels":          m.GetLabels(),
			"annotations":     annotations,
			"ownerReferences": refs,
		}
		key := kind + " " + m.GetNamespace() + "/" + m.GetName()
		require.NotContains(t, out, key, "planned or written twice")
		out[key] = u
	}
	return out
}

func nestedMap(u map[string]any, path ...string) (map[string]any, bool) {
	for _, p := range path {
		next, ok := u[p].(map[string]any)
		if !ok {
			return nil, false
		}
		u = next
	}
	return u, true
}

func keys(m map[string]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
