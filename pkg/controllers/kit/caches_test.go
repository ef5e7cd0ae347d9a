package kit

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"

	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
)

// The one-ConfigMap informer is started and shut down with the others, and
// lists only its ConfigMap, through its transform.
func TestConfigMapInformerStartsWithTheOthers(t *testing.T) {
	kube := kubefake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "jwt",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}})
	var mu sync.Mutex
	var lists []core.ListRestrictions
	kube.PrependReactor("list", "configmaps", func(a core.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		lists = append(lists, a.(core.ListAction).GetListRestrictions())
		assert.Equal(t, "mcp-host", a.GetNamespace())
		return false, nil, nil
	})
	i := NewInformers(kube, hccfake.NewSimpleClientset())
	jwt := i.ConfigMap("mcp-host", "jwt", Transform{})

	stop := make(chan struct{})
	i.Start(stop)
	timeout := time.AfterFunc(10*time.Second, func() { close(stop) })
	require.NoError(t, WaitForSync("test", stop, jwt.HasSynced), "Start starts it")
	timeout.Stop()
	close(stop)
	i.Shutdown()
	assert.True(t, jwt.IsStopped(), "Shutdown waits for it")

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, lists)
	assert.Equal(t, "metadata.name=jwt", lists[0].Fields.String(), "it lists only its ConfigMap")
	obj, ok, err := jwt.GetIndexer().GetByKey("mcp-host/jwt")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Empty(t, obj.(*corev1.ConfigMap).ManagedFields, "a nil transform is StripUnread")
}

// One ConfigMap asked for with one transform is one informer; with another
// transform, or in another namespace, another.
func TestConfigMapInformersAreSharedByTransform(t *testing.T) {
	i := NewInformers(kubefake.NewClientset(), hccfake.NewSimpleClientset())
	jwt := i.ConfigMap("mcp-host", "jwt", Transform{})
	assert.Same(t, jwt, i.ConfigMap("mcp-host", "jwt", StripUnreadTransform), "the zero Transform is StripUnread: shared")
	assert.NotSame(t, jwt, i.ConfigMap("gfs", "jwt", Transform{}), "another namespace: another ConfigMap")
	existence := Transform{Name: "existence", Func: func(obj any) (any, error) { return obj, nil }}
	other := i.ConfigMap("mcp-host", "jwt", existence)
	assert.NotSame(t, jwt, other, "another transform: an informer of its own")
	assert.Same(t, other, i.ConfigMap("mcp-host", "jwt", existence))
	// Two closures of one function share a code pointer; their names tell
	// them apart.
	assert.NotSame(t, i.ConfigMap("mcp-host", "jwt", keepTransform("a")), i.ConfigMap("mcp-host", "jwt", keepTransform("b")))
	assert.Len(t, i.Caches(), 5)
}

func TestCachesResolveTheBuiltInKinds(t *testing.T) {
	i := NewInformers(kubefake.NewClientset(), hccfake.NewSimpleClientset())
	for _, r := range []string{"deployments", "services", "configmaps", "persistentvolumeclaims", "serviceaccounts",
		"roles", "rolebindings", "networkpolicies", "jobs", "pods"} {
		i.Kube("ns", ManagedObjects, r)
	}
	i.Secrets("ns")
	got := map[string]string{}
	for _, c := range i.Caches() {
		got[c.Resource.Resource] = c.Kind.String()
	}
	assert.Equal(t, "apps/v1, Kind=Deployment", got["deployments"])
	assert.Equal(t, "batch/v1, Kind=Job", got["jobs"])
	assert.Equal(t, "networking.k8s.io/v1, Kind=NetworkPolicy", got["networkpolicies"])
	assert.Equal(t, "rbac.authorization.k8s.io/v1, Kind=RoleBinding", got["rolebindings"])
	assert.Equal(t, "/v1, Kind=Secret", got["secrets"])
	assert.Len(t, got, 11)
	assert.Panics(t, func() { kubeResource("events") }, "two stable kinds: ambiguous")
}

// A transform set with Transform is what the test caches store, and two
// reconcilers sharing an informer cannot give it two transforms.
func TestTransformIsRecordedForTheCaches(t *testing.T) {
	i := NewInformers(kubefake.NewClientset(), hccfake.NewSimpleClientset())
	pods := i.Kube("mcp-host", ManagedObjects, "pods").Core().V1().Pods().Informer()
	nameOnly := func(obj any) (any, error) {
		p := obj.(*corev1.Pod)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}, nil
	}
	named := Transform{Name: "name-only", Func: nameOnly}
	require.NoError(t, i.SetTransform("mcp-host", "pods", pods, named))
	require.NoError(t, i.SetTransform("mcp-host", "pods", pods, named), "the same transform again")
	require.Error(t, i.SetTransform("mcp-host", "pods", pods, StripUnreadTransform), "another transform")
	// Two closures of one function are one code pointer: only the name
	// tells them apart.
	services := i.Kube("mcp-host", ManagedObjects, "services").Core().V1().Services().Informer()
	require.NoError(t, i.SetTransform("mcp-host", "services", services, keepTransform("a")))
	require.Error(t, i.SetTransform("mcp-host", "services", services, keepTransform("b")), "another name")
	assert.Panics(t, func() { i.ConfigMap("mcp-host", "x", Transform{Func: nameOnly}) }, "a transform needs a name")
	var found bool
	for _, c := range i.Caches() {
		if c.Resource.Resource != "pods" {
			continue
		}
		found = true
		out, err := c.Transform(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "p", Labels: map[string]string{"a": "b"}}})
		require.NoError(t, err)
		assert.Empty(t, out.(*corev1.Pod).Labels, "the cache stores what the informer's transform keeps")
	}
	assert.True(t, found)
}

// keepTransform returns a transform named keep-key: every call's function
// is a closure of one function literal, so all share one code pointer
// (noinline keeps the compiler from making them distinct copies).
//
//go:noinline
func keepTransform(key string) Transform {
	return Transform{Name: "keep-" + key, Func: func(obj any) (any, error) { _ = key; return obj, nil }}
}
