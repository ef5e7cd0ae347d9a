package kit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
)

func server(generation int64, rv string) *clerumv1alpha1.McpServer {
	return &clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{
		Namespace: "mcp-server", Name: "s1", Generation: generation, ResourceVersion: rv,
	}}
}

func TestOwnHandlersDropStatusOnlyUpdates(t *testing.T) {
	var got []cache.ObjectName
	h := OwnHandlers(func(k cache.ObjectName) { got = append(got, k) })
	h.OnAdd(server(1, "1"), false)
	statusWrite := server(1, "2")
	statusWrite.Status.Ready = true
	h.OnUpdate(server(1, "1"), statusWrite)
	h.OnUpdate(server(1, "2"), server(2, "3"))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "mcp-server/s1"})
	assert.Len(t, got, 3, "add, spec change and tombstoned delete; the status write is dropped")
	for _, k := range got {
		assert.Equal(t, cache.ObjectName{Namespace: "mcp-server", Name: "s1"}, k)
	}
}

func TestChildHandlersSeeStatusUpdates(t *testing.T) {
	var got []cache.ObjectName
	owner := OwnerByRefOrLabel("clerum.io/v1alpha1", "McpServer", "mcp-server", "clerum.io/mcpserver")
	h := ChildHandlers(owner, func(k cache.ObjectName) { got = append(got, k) })
	child := &metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1", Generation: 4, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "clerum.io/v1alpha1", Kind: "McpServer", Name: "s1", UID: "u1", Controller: ptr.To(true),
	}}}
	deployment := &metav1.PartialObjectMetadata{ObjectMeta: *child}
	h.OnUpdate(deployment, deployment) // a readiness change: same generation
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "mcp-server/s1", Obj: deployment})
	assert.Equal(t, []cache.ObjectName{{Namespace: "mcp-server", Name: "s1"}, {Namespace: "mcp-server", Name: "s1"}}, got)
}

func TestOwnerByRefOrLabel(t *testing.T) {
	owner := OwnerByRefOrLabel("clerum.io/v1alpha1", "Host", "mcp-host", "clerum.io/host")
	ref := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "clerum.io/v1alpha1", Kind: kind, Name: name, UID: "u", Controller: ptr.To(true)}}
	}
	tests := []struct {
		name string
		obj  metav1.ObjectMeta
		want string
	}{
		{name: "a controller reference names the owner", obj: metav1.ObjectMeta{Namespace: "mcp-host", OwnerReferences: ref("Host", "h1")}, want: "h1"},
		{name: "the reference wins over the label", obj: metav1.ObjectMeta{Namespace: "mcp-host", OwnerReferences: ref("Host", "h1"), Labels: map[string]string{"clerum.io/host": "h2"}}, want: "h1"},
		{name: "a child in another namespace is found by its label", obj: metav1.ObjectMeta{Namespace: "channels", Labels: map[string]string{"clerum.io/host": "h3"}}, want: "h3"},
		{name: "a reference to another kind names no owner", obj: metav1.ObjectMeta{Namespace: "mcp-host", OwnerReferences: ref("McpServer", "s1"), Labels: map[string]string{"clerum.io/host": "h1"}}},
		{name: "an unlabelled object without a reference names no owner", obj: metav1.ObjectMeta{Namespace: "mcp-host"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := owner(&tc.obj)
			assert.Equal(t, tc.want != "", ok)
			assert.Equal(t, tc.want, k.Name)
			if ok {
				assert.Equal(t, "mcp-host", k.Namespace)
			}
		})
	}
}

func TestBuildConditions(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	have := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "waiting", ObservedGeneration: 3, LastTransitionTime: then},
		{Type: "ExternalEgressReady", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: 1, LastTransitionTime: then},
	}
	t.Run("an unchanged set is no change", func(t *testing.T) {
		got := BuildConditions(have, 3, now, Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "waiting"})
		assert.False(t, got.Changed)
		require.Len(t, got.Apply, 1, "another manager's condition is not sent")
		assert.Equal(t, then, *got.Apply[0].LastTransitionTime)
	})
	t.Run("a new message keeps the transition time", func(t *testing.T) {
		got := BuildConditions(have, 3, now, Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "still waiting"})
		assert.True(t, got.Changed)
		assert.Equal(t, then, *got.Apply[0].LastTransitionTime)
	})
	t.Run("a new status moves the transition time", func(t *testing.T) {
		got := BuildConditions(have, 3, now, Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available"})
		assert.True(t, got.Changed)
		assert.Equal(t, metav1.NewTime(now), *got.Apply[0].LastTransitionTime)
	})
	t.Run("a new generation is a change", func(t *testing.T) {
		got := BuildConditions(have, 4, now, Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "waiting"})
		assert.True(t, got.Changed)
		assert.Equal(t, int64(4), *got.Apply[0].ObservedGeneration)
	})
	t.Run("the whole owned set is sent every time, a missing one is a change", func(t *testing.T) {
		got := BuildConditions(have, 3, now,
			Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "waiting"},
			Condition{Type: "SecretsResolved", Status: metav1.ConditionTrue, Reason: "Found"})
		assert.True(t, got.Changed)
		require.Len(t, got.Apply, 2)
		assert.Equal(t, "Ready", *got.Apply[0].Type)
		assert.Equal(t, "SecretsResolved", *got.Apply[1].Type)
	})
}

func TestInformersShareOneWatchPerKindAndNamespace(t *testing.T) {
	i := NewInformers(kubefake.NewClientset(), hccfake.NewClientset())
	a := i.Kube("mcp-server", ManagedObjects, "networkpolicies")
	b := i.Kube("mcp-server", ManagedObjects, "networkpolicies")
	assert.Same(t, a, b)
	assert.NotSame(t, a, i.Kube("mcp-host", ManagedObjects, "networkpolicies"))
	assert.Same(t, i.HCC("mcp-server"), i.HCC("mcp-server"))
	assert.Panics(t, func() { i.Kube("mcp-server", AllObjects, "networkpolicies") },
		"a second watch of a kind with another selector is a wiring error")
	assert.NotPanics(t, func() { i.Kube("mcp-server", AllObjects, "secrets") })
}

func TestBuildOwnedConditionsDropsAConditionNoLongerWanted(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	have := []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available", ObservedGeneration: 2},
		{Type: "RemoteReachable", Status: metav1.ConditionTrue, Reason: "BindingCoversHost", ObservedGeneration: 2},
		{Type: "ExternalEgressReady", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: 2},
	}
	ready := Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available"}
	got := BuildOwnedConditions(have, []string{"Ready", "RemoteReachable"}, 2, now, ready)
	assert.True(t, got.Changed, "the write that removes RemoteReachable is made")
	require.Len(t, got.Apply, 1)
	got = BuildOwnedConditions(have[:1], []string{"Ready", "RemoteReachable"}, 2, now, ready)
	assert.False(t, got.Changed, "another manager's condition is not ours to drop")
}

func TestInformersAskedForAfterStartPanic(t *testing.T) {
	i := NewInformers(kubefake.NewClientset(), hccfake.NewClientset())
	i.Kube("mcp-server", ManagedObjects, "deployments")
	stop := make(chan struct{})
	defer close(stop)
	i.Start(stop)
	assert.Panics(t, func() { i.Kube("mcp-server", ManagedObjects, "services") }, "it would never be started")
	assert.Panics(t, func() { i.HCC("mcp-server") })
}

func TestDeleteChildTouchesOnlyTheOwnersChildren(t *testing.T) {
	ctx := context.Background()
	mcpGVK := schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("McpServer")
	hostGVK := schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("Host")
	managed := map[string]string{"clerum.io/managed-by": "host-context-controller", "clerum.io/mcpserver": "s1"}
	deployment := func(name string, labels map[string]string, refs ...metav1.OwnerReference) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name, UID: types.UID(name),
			ResourceVersion: "1", Labels: labels, OwnerReferences: refs}}
	}
	tests := []struct {
		name    string
		obj     runtime.Object
		kind    func(*Children, runtime.Object) (bool, error)
		deleted bool
	}{
		{"the owner's Deployment is deleted", deployment("s1", managed), func(c *Children, o runtime.Object) (bool, error) {
			return DeleteChild(ctx, c, Deployments, mcpGVK, "s1", "clerum.io/mcpserver", o.(*appsv1.Deployment))
		}, true},
		{"an unmanaged Deployment is not", deployment("s1", nil), func(c *Children, o runtime.Object) (bool, error) {
			return DeleteChild(ctx, c, Deployments, mcpGVK, "s1", "clerum.io/mcpserver", o.(*appsv1.Deployment))
		}, false},
		{"another owner's Deployment is not", deployment("s1", managed, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: "u", Controller: ptr.To(true)}),
			func(c *Children, o runtime.Object) (bool, error) {
				return DeleteChild(ctx, c, Deployments, mcpGVK, "s1", "clerum.io/mcpserver", o.(*appsv1.Deployment))
			}, false},
		{"a NetworkPolicy of the NetworkPolicy operator's type is not, whatever its server label", &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{
			Namespace: "mcp-server", Name: "ext-egress-s1-api", UID: "np", ResourceVersion: "1",
			Labels: map[string]string{"clerum.io/managed-by": "host-context-controller", "clerum.io/mcpserver": "s1", "clerum.io/policy-type": "external-egress"},
		}}, func(c *Children, o runtime.Object) (bool, error) {
			return DeleteChild(ctx, c, NetworkPolicies, mcpGVK, "s1", "clerum.io/mcpserver", o.(*networkingv1.NetworkPolicy))
		}, false},
		{"a Host policy of the repairable class (no type) on a name the Host operator reserves is deleted", &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{
			Namespace: "mcp-host", Name: "allow-rpc-proxy-desktop-h1", UID: "np", ResourceVersion: "1",
			Labels: map[string]string{"clerum.io/managed-by": "host-context-controller", "clerum.io/host": "h1"},
		}}, func(c *Children, o runtime.Object) (bool, error) {
			return DeleteChild(ctx, c, NetworkPolicies, hostGVK, "h1", "clerum.io/host", o.(*networkingv1.NetworkPolicy))
		}, true},
		{"one with no type on a name the Host operator does not reserve is not", &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{
			Namespace: "mcp-host", Name: "ctx-c1-s1-egress", UID: "np", ResourceVersion: "1",
			Labels: map[string]string{"clerum.io/managed-by": "host-context-controller", "clerum.io/host": "h1"},
		}}, func(c *Children, o runtime.Object) (bool, error) {
			return DeleteChild(ctx, c, NetworkPolicies, hostGVK, "h1", "clerum.io/host", o.(*networkingv1.NetworkPolicy))
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kube := kubefake.NewClientset(tc.obj)
			deleted, err := tc.kind(NewChildren(kube, nil, "test", nil, nil), tc.obj)
			require.NoError(t, err)
			assert.Equal(t, tc.deleted, deleted)
			deletes := 0
			for _, a := range kube.Actions() {
				if a.GetVerb() == "delete" {
					deletes++
				}
			}
			assert.Equal(t, map[bool]int{true: 1, false: 0}[tc.deleted], deletes)
		})
	}
}

// stubReconciler runs run as its Run.
type stubReconciler struct {
	name string
	run  func(ctx context.Context) error
}

func (s stubReconciler) Name() string                  { return s.name }
func (s stubReconciler) Run(ctx context.Context) error { return s.run(ctx) }

// waitsForCachesThatNeverSync is a reconciler stopped while its caches sync.
func waitsForCachesThatNeverSync(name string) stubReconciler {
	return stubReconciler{name: name, run: func(ctx context.Context) error {
		return WaitForSync(name, ctx.Done(), func() bool { return false })
	}}
}

func TestAShutdownBeforeTheCachesSyncIsACleanStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- RunAll(ctx, []Reconciler{waitsForCachesThatNeverSync("a"), waitsForCachesThatNeverSync("b")})
	}()
	cancel()
	require.NoError(t, <-done, "a SIGTERM while the initial lists are served must exit 0")
}

func TestAFailingReconcilerStopsTheOthersAndIsReported(t *testing.T) {
	boom := errors.New("boom")
	failing := stubReconciler{name: "failing", run: func(context.Context) error { return boom }}
	err := RunAll(context.Background(), []Reconciler{failing, waitsForCachesThatNeverSync("waiting")})
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "failing: boom")
}

func TestCachesThatDidNotSyncWithoutAShutdownAreAFailure(t *testing.T) {
	// A reconciler that reports the sync error although nothing asked it to
	// stop (its own stop channel closed) is a failure, not a clean stop.
	early := stubReconciler{name: "early", run: func(context.Context) error {
		stop := make(chan struct{})
		close(stop)
		return WaitForSync("early", stop, func() bool { return false })
	}}
	err := RunAll(context.Background(), []Reconciler{early})
	require.ErrorIs(t, err, ErrStoppedBeforeSync)
}
