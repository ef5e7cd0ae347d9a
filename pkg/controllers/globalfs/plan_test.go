package globalfs

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources/resourcestest"
	"github.com/clerum/hcc/pkg/mark"
)

// TestSyncAndRenderProduceTheSameChildren runs the reconciler's sync on a
// fresh cluster and resources.Plan (what render prints) on the same inputs,
// and requires the same children: the same kinds, namespaces and names, and
// equal labels, annotations, owner references and specs. Plan is
// resources.MakeChildren flattened and sync ensures MakeChildren, so this
// pins the flattening, the inputs each side gives it (the wait target, the
// admission, the options) and the decisions taken before it (the drive
// holder, a block).
//
// Excluded, on both sides alike: what the API server sets (uid,
// resourceVersion, creationTimestamp, generation, managedFields, status),
// the owner references' uid (Plan prints an empty one, the kit names the
// live owner's), and HCC's mark on the seed Job, an HMAC over the Job's
// server-assigned UID that render cannot know.
func TestSyncAndRenderProduceTheSameChildren(t *testing.T) {
	seeded := func(g *clerumv1alpha1.GlobalFileSystem) { g.Status.RootSeeded = true }
	onDrive := func(d string) func(*clerumv1alpha1.GlobalFileSystem) {
		return func(g *clerumv1alpha1.GlobalFileSystem) { g.Spec.DriveName = d }
	}
	cases := map[string]struct {
		filesystems []*clerumv1alpha1.GlobalFileSystem
		config      []runtime.Object
		opts        func(*resources.Options)
		want        int // children, so that no case passes on two empty sets
	}{
		"a fresh one, a seeded one, and one whose drive is held": {
			filesystems: []*clerumv1alpha1.GlobalFileSystem{
				resourcestest.NewGFS("main"),
				resourcestest.NewGFS("archive", onDrive("archive"), seeded),
				resourcestest.NewGFS("spare", onDrive(resourcestest.Options.DriveName)), // main, older by name, holds it
			},
			config: []runtime.Object{resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM)},
			want:   4 + 3,
		},
		"NodeLocal DNSCache, no pull secret, no priority class": {
			filesystems: []*clerumv1alpha1.GlobalFileSystem{resourcestest.NewGFS("main"), resourcestest.NewGFS("other", onDrive("other"))},
			config:      []runtime.Object{resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM)},
			opts: func(o *resources.Options) {
				o.NodeLocalDNSCIDR = netip.MustParsePrefix("169.254.20.10/32")
				o.ImagePullSecret, o.PriorityClassName = "", ""
			},
			want: 4 + 4,
		},
		"blocked: no JWT ConfigMap": {
			filesystems: []*clerumv1alpha1.GlobalFileSystem{resourcestest.NewGFS("main")},
			config:      []runtime.Object{resourcestest.PGSecret()},
			want:        0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := append([]runtime.Object{}, tc.config...)
			for _, g := range tc.filesystems {
				objs = append(objs, g)
			}
			f := newFixture(t, objs...)
			opts := resourcestest.Options
			if tc.opts != nil {
				tc.opts(&opts)
			}
			f.c.cfg.Build = opts
			for _, g := range tc.filesystems {
				f.mustSync(g.Name)
			}

			// Render's inputs, as pkg/render computes them: the wait target
			// from the raw connection string, admission from the digested
			// Secret, the drive holder among the given file systems.
			var secret *corev1.Secret
			var configMap *corev1.ConfigMap
			for _, o := range tc.config {
				switch o := o.(type) {
				case *corev1.Secret:
					secret = resourcestest.Digested(o)
				case *corev1.ConfigMap:
					configMap = o
				}
			}
			opts.WaitHost, opts.WaitPort = resources.PostgresWaitTarget(resourcestest.ConnectionString)
			var planned []runtime.Object
			for _, g := range tc.filesystems {
				if resources.DriveHeld(g, tc.filesystems, opts) != "" {
					continue
				}
				planned = append(planned, resources.Plan(g, resources.Admit(secret, configMap, opts), opts)...)
			}

			synced := f.created(t)
			require.Len(t, synced, tc.want, "children sync created")
			want, got := normalise(t, planned), normalise(t, synced)
			require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), "Plan's children, then sync's")
			for key := range want {
				assert.Equal(t, want[key], got[key], "%s: Plan's, then sync's", key)
			}
		})
	}
}

// created returns every child in the fake API server's tracker.
func (f *fixture) created(t *testing.T) []runtime.Object {
	t.Helper()
	ctx := context.Background()
	var out []runtime.Object
	deployments, err := f.Kube.AppsV1().Deployments(resourcestest.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range deployments.Items {
		out = append(out, &deployments.Items[i])
	}
	services, err := f.Kube.CoreV1().Services(resourcestest.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range services.Items {
		out = append(out, &services.Items[i])
	}
	policies, err := f.Kube.NetworkingV1().NetworkPolicies(resourcestest.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range policies.Items {
		out = append(out, &policies.Items[i])
	}
	jobs, err := f.Kube.BatchV1().Jobs(resourcestest.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for i := range jobs.Items {
		out = append(out, &jobs.Items[i])
	}
	return out
}

// normalise returns each object as YAML by "Kind namespace/name", holding
// only what both sync and render decide: labels, annotations less HCC's
// mark, owner references less their uid, and the spec.
func normalise(t *testing.T, objs []runtime.Object) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		m, ok := o.(metav1.Object)
		require.True(t, ok, "%T", o)
		var kind string
		var spec any
		switch o := o.(type) {
		case *appsv1.Deployment:
			kind, spec = "Deployment", o.Spec
		case *corev1.Service:
			kind, spec = "Service", o.Spec
		case *networkingv1.NetworkPolicy:
			kind, spec = "NetworkPolicy", o.Spec
		case *batchv1.Job:
			kind, spec = "Job", o.Spec
		default:
			t.Fatalf("unexpected child %T", o)
		}
		annotations := map[string]string{}
		for k, v := range m.GetAnnotations() {
			if k != mark.Annotation {
				annotations[k] = v
			}
		}
		owners := append([]metav1.OwnerReference{}, m.GetOwnerReferences()...)
		for i := range owners {
			owners[i].UID = ""
		}
		y, err := yaml.Marshal(map[string]any{
			"labels": m.GetLabels(), "annotations": annotations, "ownerReferences": owners, "spec": spec,
		})
		require.NoError(t, err)
		key := kind + " " + m.GetNamespace() + "/" + m.GetName()
		_, dup := out[key]
		require.False(t, dup, "two of %s", key)
		out[key] = string(y)
	}
	return out
}
