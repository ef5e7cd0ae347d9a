package sharedfs

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources/resourcestest"
	"github.com/clerum/hcc/pkg/mark"
)

// planned is one child, reduced to what sync and render must agree on:
// its metadata HCC sets and its spec. Server-set fields (uid,
// resourceVersion, creationTimestamp, status) are left out.
type planned struct {
	Labels, Annotations map[string]string
	// OwnerReferences without their uid: render's owner has none.
	OwnerReferences []metav1.OwnerReference
	Spec            any
}

// plannedChildren keys objs by kind, namespace and name. The claim's HCC
// mark (mark.Annotation) is dropped: it is signed over the uid the API
// server gives the claim, which render cannot know.
func plannedChildren(t *testing.T, objs []runtime.Object) map[string]planned {
	t.Helper()
	out := map[string]planned{}
	for _, o := range objs {
		var kind string
		var m metav1.Object
		var spec any
		switch o := o.(type) {
		case *corev1.PersistentVolumeClaim:
			kind, m, spec = "PersistentVolumeClaim", o, o.Spec
		case *networkingv1.NetworkPolicy:
			kind, m, spec = "NetworkPolicy", o, o.Spec
		case *corev1.Service:
			kind, m, spec = "Service", o, o.Spec
		case *appsv1.Deployment:
			kind, m, spec = "Deployment", o, o.Spec
		default:
			t.Fatalf("a child of an unexpected kind: %T", o)
		}
		annotations := maps.Clone(m.GetAnnotations())
		if kind == "PersistentVolumeClaim" {
			delete(annotations, mark.Annotation)
		}
		if len(annotations) == 0 {
			annotations = nil
		}
		var refs []metav1.OwnerReference
		for _, r := range m.GetOwnerReferences() {
			r.UID = ""
			refs = append(refs, r)
		}
		key := fmt.Sprintf("%s %s/%s", kind, m.GetNamespace(), m.GetName())
		require.NotContains(t, out, key, "one child per name")
		out[key] = planned{Labels: m.GetLabels(), Annotations: annotations, OwnerReferences: refs, Spec: spec}
	}
	return out
}

// synced is every child the fake API server holds after f's syncs.
func (f *fixture) synced() []runtime.Object {
	ctx := context.Background()
	var out []runtime.Object
	cs, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	out = append(out, objects(cs.Items)...)
	ps, err := f.Kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	out = append(out, objects(ps.Items)...)
	ss, err := f.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	out = append(out, objects(ss.Items)...)
	ds, err := f.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	out = append(out, objects(ds.Items)...)
	return out
}

// TestSyncAndRenderProduceTheSameChildren: the children the controller's
// sync writes into an empty cluster are the ones render prints
// (resources.Plan) for the same file systems and configuration, field for
// field — both come from resources.MakeChildren.
func TestSyncAndRenderProduceTheSameChildren(t *testing.T) {
	all := []*clerumv1alpha1.SharedFileSystem{
		resourcestest.NewFS("team", resourcestest.WithHosts("bob", "alice", "bob"), resourcestest.WithDirs("shared/docs", "inbox"), resourcestest.WithSize("20Gi")),
		resourcestest.NewFS("closed"), // no hostRefs: no egress policy
		resourcestest.NewFS("big", resourcestest.WithHosts("carol"), resourcestest.WithSize("100Gi"), func(fs *clerumv1alpha1.SharedFileSystem) {
			fs.Spec.StorageClassName = ptr.To("fast")
		}),
		resourcestest.NewFS("default-size", resourcestest.WithHosts("dave")),
	}
	lookup := func(cm *corev1.ConfigMap) func(string) *corev1.ConfigMap {
		return func(name string) *corev1.ConfigMap {
			if cm != nil && cm.Name == name {
				return cm
			}
			return nil
		}
	}

	for name, cm := range map[string]*corev1.ConfigMap{
		"admitted": jwtConfigMap(resourcestest.RSAKey(t)),
		"blocked":  nil, // no key: sync creates nothing, render prints nothing
	} {
		t.Run(name, func(t *testing.T) {
			objs := []runtime.Object{}
			for _, fs := range all {
				objs = append(objs, fs)
			}
			if cm != nil {
				objs = append(objs, cm)
			}
			f := newFixture(t, objs...)
			var plan []runtime.Object
			for _, fs := range all {
				f.mustSync(fs.Name)
				plan = append(plan, resources.Plan(fs, resources.Admit(lookup(cm), resourcestest.Options), resourcestest.Options)...)
			}
			got, want := plannedChildren(t, f.synced()), plannedChildren(t, plan)
			if cm != nil {
				// The exclusion in plannedChildren is of a field sync does
				// write.
				require.Contains(t, f.claim("wfc-team-data").Annotations, mark.Annotation)
				require.Equal(t, 4*4+3, len(want), "four children each, and an egress policy for each fs with hostRefs")
			} else {
				require.Empty(t, want)
			}
			assert.ElementsMatch(t, keys(want), keys(got), "the same children, by kind, namespace and name")
			for k, w := range want {
				if g, ok := got[k]; ok {
					assert.Equal(t, w, g, "%s: sync and render differ", k)
				}
			}
		})
	}
}

func keys(m map[string]planned) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
