//go:build integration

package kit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// cp is the one control plane every integration test of this package
// shares; each test works in namespaces of its own.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}

// env is one test's view of the API server: an admin client that plays
// everyone else (users, other controllers), and the kit's writer behind a
// client whose writes are counted.
type env struct {
	admin    kubernetes.Interface
	hcc      clientset.Interface
	writes   *kittest.Writes
	children *kit.Children
	recorder *record.FakeRecorder
	refused  chan string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	counted, writes := kittest.CountWrites(cp.Config())
	e := &env{
		admin:    kubernetes.NewForConfigOrDie(cp.Config()),
		hcc:      clientset.NewForConfigOrDie(cp.Config()),
		writes:   writes,
		recorder: record.NewFakeRecorder(64),
		refused:  make(chan string, 64),
	}
	e.children = kit.NewChildren(kubernetes.NewForConfigOrDie(counted), nil, "hcc-test", e.recorder,
		func(kind string, cause kit.Cause) { e.refused <- kind + "/" + string(cause) })
	return e
}

func (e *env) namespace(t *testing.T, name string) string {
	t.Helper()
	_, err := e.admin.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return name
}

func (e *env) createHost(t *testing.T, namespace, name string) *clerumv1alpha1.Host {
	t.Helper()
	h, err := e.hcc.ClerumV1alpha1().Hosts(namespace).Create(context.Background(), newHost(namespace, name, ""), metav1.CreateOptions{})
	require.NoError(t, err)
	return h
}

// recreateHost deletes the Host and creates it again under its name: a new
// UID. No garbage collector runs here, so its children stay behind.
func (e *env) recreateHost(t *testing.T, h *clerumv1alpha1.Host) *clerumv1alpha1.Host {
	t.Helper()
	require.NoError(t, e.hcc.ClerumV1alpha1().Hosts(h.Namespace).Delete(context.Background(), h.Name, metav1.DeleteOptions{}))
	again := e.createHost(t, h.Namespace, h.Name)
	require.NotEqual(t, h.UID, again.UID)
	return again
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func (e *env) refusals() []string {
	var out []string
	for {
		select {
		case r := <-e.refused:
			out = append(out, r)
		default:
			return out
		}
	}
}

// kindCase is one kind of child and how someone else might change the
// content HCC owns of it.
type kindCase[T kit.Child] struct {
	kind  kit.Kind[T]
	build func(namespace, name, host string) T
	// tamper makes a change to what HCC owns, as a user or another
	// controller would; nil for a kind whose owned content cannot change
	// after creation (a claim's spec).
	tamper func(T)
}

func TestOwnedKindsAgainstTheAPIServer(t *testing.T) {
	t.Run("Deployment", func(t *testing.T) {
		t.Parallel()
		runKind(t, kindCase[*appsv1.Deployment]{kind: kit.Deployments, build: buildDeployment, tamper: func(d *appsv1.Deployment) {
			pod := &d.Spec.Template.Spec
			pod.Containers[0].Env = append(pod.Containers[0].Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
			pod.Containers = append(pod.Containers, corev1.Container{Name: "sidecar", Image: "registry.example/sidecar:1"})
			pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}})
	})
	t.Run("Service", func(t *testing.T) {
		t.Parallel()
		runKind(t, kindCase[*corev1.Service]{kind: kit.Services, build: buildService, tamper: func(s *corev1.Service) {
			s.Spec.Ports[0].TargetPort = intstr.FromInt32(9090)
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "debug", Port: 6060, Protocol: corev1.ProtocolTCP})
		}})
	})
	t.Run("ConfigMap", func(t *testing.T) {
		t.Parallel()
		runKind(t, kindCase[*corev1.ConfigMap]{kind: kit.ConfigMaps, build: buildConfigMap, tamper: func(c *corev1.ConfigMap) {
			c.Data["config.yaml"] = "listen: 1\n"
			c.Data["extra"] = "x"
		}})
	})
	t.Run("Secret", func(t *testing.T) {
		t.Parallel()
		runKind(t, kindCase[*corev1.Secret]{kind: kit.Secrets, build: buildSecret, tamper: func(s *corev1.Secret) {
			s.Data["bootstrap-credential"] = []byte("stolen")
		}})
	})
	t.Run("PersistentVolumeClaim", func(t *testing.T) {
		t.Parallel()
		runKind(t, kindCase[*corev1.PersistentVolumeClaim]{kind: kit.PersistentVolumeClaims, build: buildPVC})
	})
	t.Run("ServiceAccount", func(t *testing.T) {
		t.Parallel()
		runKind(t, kindCase[*corev1.ServiceAccount]{kind: kit.ServiceAccounts, build: buildServiceAccount, tamper: func(a *corev1.ServiceAccount) {
			a.AutomountServiceAccountToken = ptr.To(false)
		}})
	})
	t.Run("Role", func(t *testing.T) {
		t.Parallel()
		runKind(t, kindCase[*rbacv1.Role]{kind: kit.Roles, build: buildRole, tamper: func(r *rbacv1.Role) {
			r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}})
		}})
	})
	t.Run("RoleBinding", func(t *testing.T) {
		t.Parallel()
		runKind(t, kindCase[*rbacv1.RoleBinding]{kind: kit.RoleBindings, build: buildRoleBinding, tamper: func(b *rbacv1.RoleBinding) {
			b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"})
		}})
	})
	t.Run("Job", func(t *testing.T) {
		t.Parallel()
		// HCC owns no content of a Job (its template cannot change): no
		// tamper case, only ownership and zero writes.
		runKind(t, kindCase[*batchv1.Job]{kind: kit.Jobs, build: buildJob})
	})
	t.Run("NetworkPolicy", func(t *testing.T) {
		t.Parallel()
		runKind(t, kindCase[*networkingv1.NetworkPolicy]{kind: kit.NetworkPolicies, build: buildNetworkPolicy, tamper: func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress[0].From = append(p.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})
		}})
	})
}

// runKind runs the ownership and zero-write cases for one kind, in order,
// in a namespace of its own: each step starts from the state the one
// before left.
func runKind[T kit.Child](t *testing.T, c kindCase[T]) {
	ctx := context.Background()
	e := newEnv(t)
	kube := kubernetes.NewForConfigOrDie(cp.Config())
	ns := e.namespace(t, "kit-"+strings.ToLower(c.kind.Name))
	host := e.createHost(t, ns, "h1")
	owner := ownerOf(host)
	const name = "h1-child"
	desired := func() T { return c.build(ns, name, "h1") }
	get := func(t *testing.T, n string) T {
		t.Helper()
		obj, err := c.kind.Client(kube, ns).Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		return obj
	}
	update := func(t *testing.T, obj T) T {
		t.Helper()
		out, err := c.kind.Client(kube, ns).Update(ctx, obj, metav1.UpdateOptions{FieldManager: "someone-else"})
		require.NoError(t, err)
		return out
	}
	// ensure runs one sync over the current state and returns what it did
	// and the writes it sent.
	ensure := func(t *testing.T, owner kit.Owner, live T) (kit.Action, int, error) {
		t.Helper()
		e.writes.Reset()
		_, action, err := kit.Ensure(ctx, e.children, c.kind, owner, live, desired())
		return action, e.writes.Count(), err
	}
	assertConverged := func(t *testing.T, owner kit.Owner) {
		t.Helper()
		action, writes, err := ensure(t, owner, get(t, name))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
		assert.Zero(t, writes, "a sync over a converged child writes nothing: %s", e.writes)
	}

	t.Run("the builder's object is created and then kept with no write", func(t *testing.T) {
		kittest.RoundTrip(t, cp.Config(), c.kind, owner, desired())
	})

	if c.tamper != nil {
		t.Run("someone else's change to what HCC owns is undone by one write", func(t *testing.T) {
			live := get(t, name)
			c.tamper(live)
			live = update(t, live)
			require.NotEmpty(t, kit.Diff(c.kind, live, desired()), "the tampering must show")

			action, writes, err := ensure(t, owner, live)
			require.NoError(t, err)
			assert.Equal(t, kit.ActionUpdate, action)
			assert.Equal(t, 1, writes, "%s", e.writes)
			assertConverged(t, owner)
		})
	}

	t.Run("a label of HCC's changed by hand is restored by one write", func(t *testing.T) {
		live := get(t, name)
		labels := live.GetLabels()
		labels[names.LabelApp] = "edited"
		live.SetLabels(labels)
		live = update(t, live)

		action, writes, err := ensure(t, owner, live)
		require.NoError(t, err)
		assert.Equal(t, kit.ActionUpdate, action)
		assert.Equal(t, 1, writes, "%s", e.writes)
		assert.Equal(t, "mcp-host", get(t, name).GetLabels()[names.LabelApp])
		assertConverged(t, owner)
	})

	t.Run("labels and annotations others added stay, with no write", func(t *testing.T) {
		live := get(t, name)
		labels, annotations := live.GetLabels(), live.GetAnnotations()
		labels["team"] = "platform"
		annotations["example.com/audited"] = "yes"
		live.SetLabels(labels)
		live.SetAnnotations(annotations)
		live = update(t, live)

		action, writes, err := ensure(t, owner, live)
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
		assert.Zero(t, writes, "%s", e.writes)
		after := get(t, name)
		assert.Equal(t, "platform", after.GetLabels()["team"])
		assert.Equal(t, "yes", after.GetAnnotations()["example.com/audited"])
	})

	t.Run("an unmanaged object holding a name is refused and never written", func(t *testing.T) {
		e.events()
		foreign := c.build(ns, "h1-unmanaged", "h1")
		foreign.SetLabels(map[string]string{"team": "platform"})
		foreign.SetOwnerReferences(nil)
		created, err := c.kind.Client(kube, ns).Create(ctx, foreign, metav1.CreateOptions{})
		require.NoError(t, err)

		// First as a cache of managed objects sees it (not at all), then as
		// a cache of everything does.
		_, action, err := kit.Ensure(ctx, e.children, c.kind, owner, *new(T), c.build(ns, "h1-unmanaged", "h1"))
		assertRefused(t, err, kit.CauseUnmanaged)
		assert.Equal(t, kit.ActionNone, action)
		e.writes.Reset()
		_, _, err = kit.Ensure(ctx, e.children, c.kind, owner, created, c.build(ns, "h1-unmanaged", "h1"))
		assertRefused(t, err, kit.CauseUnmanaged)
		assert.Zero(t, e.writes.Count(), "%s", e.writes)

		assert.Equal(t, created.GetResourceVersion(), get(t, "h1-unmanaged").GetResourceVersion(), "the object is left as it is")
		assert.Equal(t, []string{c.kind.Name + "/Unmanaged"}, e.refusals(), "counted once")
		events := e.events()
		require.Len(t, events, 2, "a Warning on the owner and one on the object")
		assert.Contains(t, events[0], "Warning "+reasons.EventUnmanagedConflict)
	})

	t.Run("a child controlled by a different live owner is refused", func(t *testing.T) {
		other := e.createHost(t, ns, "h2")
		foreign := c.build(ns, "h1-foreign", "h1")
		foreign.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(other, hostGVK)})
		created, err := c.kind.Client(kube, ns).Create(ctx, foreign, metav1.CreateOptions{})
		require.NoError(t, err)

		e.writes.Reset()
		_, _, err = kit.Ensure(ctx, e.children, c.kind, owner, created, c.build(ns, "h1-foreign", "h1"))
		assertRefused(t, err, kit.CauseOtherOwner)
		assert.Zero(t, e.writes.Count(), "%s", e.writes)
		assert.Equal(t, created.GetResourceVersion(), get(t, "h1-foreign").GetResourceVersion())
	})

	t.Run("the child of an owner re-created under its name is taken over by one write", func(t *testing.T) {
		again := ownerOf(e.recreateHost(t, host))
		action, writes, err := ensure(t, again, get(t, name))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionTakeOver, action)
		assert.Equal(t, 1, writes, "%s", e.writes)
		assert.Equal(t, again.Object.GetUID(), metav1.GetControllerOf(get(t, name)).UID)
		assertConverged(t, again)
	})
}

func assertRefused(t *testing.T, err error, cause kit.Cause) {
	t.Helper()
	refused, ok := errors.AsType[*kit.RefusedError](err)
	require.True(t, ok, "want a RefusedError, got %v", err)
	assert.Equal(t, cause, refused.Cause)
}

func TestClaimGrowsButNeverShrinks(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	ns := e.namespace(t, "kit-claim-size")
	owner := ownerOf(e.createHost(t, ns, "h1"))
	_, err := e.admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: expandableClass},
		Provisioner:          "example.com/none",
		AllowVolumeExpansion: ptr.To(true),
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	claims := e.admin.CoreV1().PersistentVolumeClaims(ns)
	sized := func(size string) *corev1.PersistentVolumeClaim {
		c := buildPVC(ns, "h1-workspace", "h1")
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
		return c
	}

	created := kittest.RoundTrip(t, cp.Config(), kit.PersistentVolumeClaims, owner, sized("1Gi"))
	// Bind it as the volume controller would: only a bound claim may grow.
	created.Spec.VolumeName = kit.ProvisionedVolumeName(created)
	bound, err := claims.Update(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	bound.Status.Phase = corev1.ClaimBound
	bound.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	bound, err = claims.UpdateStatus(ctx, bound, metav1.UpdateOptions{})
	require.NoError(t, err)

	t.Run("a bound claim is kept with no write", func(t *testing.T) {
		e.writes.Reset()
		_, action, err := kit.Ensure(ctx, e.children, kit.PersistentVolumeClaims, owner, bound, sized("1Gi"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
		assert.Zero(t, e.writes.Count(), "%s", e.writes)
	})

	t.Run("a larger request grows it by one write", func(t *testing.T) {
		// The resize admission plugin judges the class from its informer,
		// which may not have the class created a moment ago: Forbidden until
		// it does, as the loop would retry it.
		var grown *corev1.PersistentVolumeClaim
		var action kit.Action
		require.Eventually(t, func() bool {
			e.writes.Reset()
			grown, action, err = kit.Ensure(ctx, e.children, kit.PersistentVolumeClaims, owner, bound, sized("2Gi"))
			return !apierrors.IsForbidden(err)
		}, 10*time.Second, 50*time.Millisecond)
		require.NoError(t, err)
		assert.Equal(t, kit.ActionUpdate, action)
		assert.Equal(t, 1, e.writes.Count(), "%s", e.writes)
		assert.Equal(t, "2Gi", ptr.To(grown.Spec.Resources.Requests[corev1.ResourceStorage]).String())
		assert.Equal(t, kit.ProvisionedVolumeName(created), grown.Spec.VolumeName)
		bound = grown
	})

	t.Run("a smaller request is refused and never written", func(t *testing.T) {
		e.writes.Reset()
		_, _, err := kit.Ensure(ctx, e.children, kit.PersistentVolumeClaims, owner, bound, sized("1Gi"))
		assertRefused(t, err, kit.CauseShrink)
		assert.ErrorIs(t, err, kit.ErrChangeRefused)
		assert.Zero(t, e.writes.Count(), "%s", e.writes)
		assert.Equal(t, []string{"PersistentVolumeClaim/Shrink"}, e.refusals())
	})
}

func TestChildInAnotherNamespaceIsOwnedByLabels(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	hosts := e.namespace(t, "kit-hosts")
	channels := e.namespace(t, "kit-channels")
	host := e.createHost(t, hosts, "h1")
	reader := func() *appsv1.Deployment { return buildDeployment(channels, names.ChannelReader("h1"), "h1") }

	created := kittest.RoundTrip(t, cp.Config(), kit.Deployments, ownerOf(host), reader())
	assert.Empty(t, created.OwnerReferences, "an owner reference cannot cross namespaces")

	t.Run("a re-created owner changes nothing: labels alone decide", func(t *testing.T) {
		again := ownerOf(e.recreateHost(t, host))
		e.writes.Reset()
		_, action, err := kit.Ensure(ctx, e.children, kit.Deployments, again, created, reader())
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
		assert.Zero(t, e.writes.Count(), "%s", e.writes)
	})

	t.Run("an unmanaged object with the name is refused", func(t *testing.T) {
		foreign := buildDeployment(channels, "channel-reader-h2", "h2")
		foreign.Labels = nil
		live, err := e.admin.AppsV1().Deployments(channels).Create(ctx, foreign, metav1.CreateOptions{})
		require.NoError(t, err)
		h2 := ownerOf(e.createHost(t, hosts, "h2"))
		e.writes.Reset()
		_, _, err = kit.Ensure(ctx, e.children, kit.Deployments, h2, live, buildDeployment(channels, "channel-reader-h2", "h2"))
		assertRefused(t, err, kit.CauseUnmanaged)
		assert.Zero(t, e.writes.Count())
	})

	t.Run("a cached copy behind the server is a Conflict for the loop to retry", func(t *testing.T) {
		stale := created.DeepCopy()
		current, err := e.admin.AppsV1().Deployments(channels).Get(ctx, created.Name, metav1.GetOptions{})
		require.NoError(t, err)
		current.Spec.Replicas = ptr.To[int32](3)
		_, err = e.admin.AppsV1().Deployments(channels).Update(ctx, current, metav1.UpdateOptions{})
		require.NoError(t, err)
		stale.Spec.Replicas = ptr.To[int32](2) // differs from desired, so Ensure writes
		_, _, err = kit.Ensure(ctx, e.children, kit.Deployments, ownerOf(host), stale, reader())
		assert.True(t, apierrors.IsConflict(err), "got %v", err)
	})
}

// recordingTB catches what RoundTrip reports, to test that it fails.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestRoundTripShowsADefaultTheBuilderMissed(t *testing.T) {
	e := newEnv(t)
	ns := e.namespace(t, "kit-roundtrip")
	owner := ownerOf(e.createHost(t, ns, "h1"))
	sloppy := buildDeployment(ns, "h1", "h1")
	sloppy.Spec.RevisionHistoryLimit = nil // the API server defaults it to 10
	sloppy.Spec.Template.Spec.Containers[0].TerminationMessagePath = ""

	rec := &recordingTB{TB: t}
	kittest.RoundTrip(rec, cp.Config(), kit.Deployments, owner, sloppy)
	require.Len(t, rec.errors, 1)
	assert.Contains(t, rec.errors[0], `-  "revisionHistoryLimit": 10`)
	assert.Contains(t, rec.errors[0], `"terminationMessagePath": "/dev/termination-log"`)
	assert.Contains(t, rec.errors[0], "PUT /apis/apps/v1/namespaces/kit-roundtrip/deployments/h1")
}

func buildJob(namespace, name, host string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: childMeta(namespace, name, host),
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podSelector(host)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "seed", Image: "registry.example/seed:1.0", Args: []string{"seed"},
						TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						ImagePullPolicy: corev1.PullIfNotPresent,
					}},
					RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](30),
					DNSPolicy: corev1.DNSClusterFirst, SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: corev1.DefaultSchedulerName,
				},
			},
		},
	}
}
