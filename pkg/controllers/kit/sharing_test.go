package kit

import (
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func sharingDeployment(name string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "s1"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "s1"}},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532)},
					Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}}}},
				},
			},
		},
	}
}

func mapPointer(m any) uintptr { return reflect.ValueOf(m).Pointer() }

// Objects that carry a value alike hold one copy of it; a value that
// differs in anything, a label's value or a selector's nil against empty
// labels, is its own.
func TestSharedValuesShareOnlyWhatIsAlike(t *testing.T) {
	v := newSharedValues()
	a := sharingDeployment("a", map[string]string{"clerum.io/host": "h1", "team": "x"})
	b := sharingDeployment("b", map[string]string{"clerum.io/host": "h1", "team": "x"})
	c := sharingDeployment("c", map[string]string{"clerum.io/host": "h1", "team": "y"})
	c.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	c.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](1000)
	want := []*appsv1.Deployment{a.DeepCopy(), b.DeepCopy(), c.DeepCopy()}
	for _, d := range []*appsv1.Deployment{a, b, c} {
		v.share(d)
	}
	for i, d := range []*appsv1.Deployment{a, b, c} {
		assert.Equal(t, want[i], d, "sharing changes no value")
	}
	assert.Equal(t, mapPointer(a.Labels), mapPointer(b.Labels), "alike labels: one map")
	assert.NotEqual(t, mapPointer(a.Labels), mapPointer(c.Labels), "a label's value differs")
	assert.Same(t, a.Spec.Selector, b.Spec.Selector)
	assert.Equal(t, mapPointer(a.Spec.Selector.MatchLabels), mapPointer(a.Spec.Template.Labels), "a selector's labels are a label set like any other")
	assert.Equal(t, mapPointer(a.Spec.Template.Spec.Containers[0].Resources.Limits), mapPointer(b.Spec.Template.Spec.Containers[0].Resources.Limits))
	assert.NotEqual(t, mapPointer(a.Spec.Template.Spec.Containers[0].Resources.Limits), mapPointer(c.Spec.Template.Spec.Containers[0].Resources.Limits))
	assert.Same(t, a.Spec.Template.Spec.SecurityContext, b.Spec.Template.Spec.SecurityContext)
	assert.NotSame(t, a.Spec.Template.Spec.SecurityContext, c.Spec.Template.Spec.SecurityContext)

	empty := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: &metav1.LabelSelector{}},
			{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{}}},
			{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpExists}}}},
			{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpDoesNotExist}}}},
		}}},
	}}
	wantPolicy := empty.DeepCopy()
	v.share(empty)
	assert.Equal(t, wantPolicy, empty, "nil and empty label sets and each requirement kept as they were")
}

// An entry lives as long as the first object that carried it: once every
// carrier is gone, the table is empty again.
func TestSharedValuesForgetWhatNoCachedObjectHolds(t *testing.T) {
	v := newSharedValues()
	func() {
		objs := []*appsv1.Deployment{sharingDeployment("a", map[string]string{"x": "1"}), sharingDeployment("b", map[string]string{"x": "1"})}
		for _, d := range objs {
			v.share(d)
		}
		require.Positive(t, v.size())
		runtime.KeepAlive(objs)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for v.size() > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	assert.Zero(t, v.size(), "the objects are gone; so are their entries")
}

// client-go passes an object through the transform twice before it is
// cached (a watch-list relist: once into its temporary store, again in
// Replace). The second pass must write nothing into what the object
// already shares: a shared selector is a cached object's, which other
// goroutines read meanwhile (TestWatchRelistAfterCompaction found such
// a write under -race).
func TestASecondPassWritesNothingShared(t *testing.T) {
	v := newSharedValues()
	policy := func(name string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "channels", Name: name},
			Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{
					PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mcp-proxy"}},
				}}}},
			},
		}
	}
	cached := policy("cached")
	v.share(cached) // the first carrier, in a cache now
	fresh := policy("fresh")
	v.share(fresh)
	require.Same(t, cached.Spec.Egress[0].To[0].PodSelector, fresh.Spec.Egress[0].To[0].PodSelector)

	// Readers of the cached object, as a reconciler's comparison reads it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			_ = len(cached.Spec.Egress[0].To[0].PodSelector.MatchLabels)
		}
	}()
	for range 100 {
		v.share(fresh) // the second pass
	}
	<-done
	assert.Equal(t, map[string]string{"app": "mcp-proxy"}, fresh.Spec.Egress[0].To[0].PodSelector.MatchLabels)
}
