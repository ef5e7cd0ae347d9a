package diff

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

func liveCluster(t *testing.T, objs ...runtime.Object) *overlay {
	t.Helper()
	return newOverlay(context.Background(), dynamicfake.NewSimpleDynamicClient(scheme, objs...))
}

func secret(name string, labels map[string]string) *corev1.Secret {
	return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: name, Labels: labels, ResourceVersion: "7"}}
}

var managed = map[string]string{names.LabelManagedBy: names.ManagedByValue}

func TestAListReadsTheLiveClusterWithItsSelectorsOnce(t *testing.T) {
	o := liveCluster(t, secret("ours", managed), secret("theirs", nil))
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: names.LabelManagedBy + "=" + names.ManagedByValue}
	list, err := o.kube.CoreV1().Secrets("mcp-host").List(ctx, sel)
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "only what the selector selects")
	assert.Equal(t, "ours", list.Items[0].Name)
	assert.Equal(t, "7", list.ResourceVersion, "a list is current as of its newest item")

	// The overlay's own delete wins over the live object.
	require.NoError(t, o.kube.CoreV1().Secrets("mcp-host").Delete(ctx, "ours", metav1.DeleteOptions{}))
	list, err = o.kube.CoreV1().Secrets("mcp-host").List(ctx, sel)
	require.NoError(t, err)
	assert.Empty(t, list.Items)
	_, err = o.kube.CoreV1().Secrets("mcp-host").Get(ctx, "ours", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a deleted object is never read again: %v", err)

	// A field selector on the name, as a one-object informer lists.
	byName, err := o.kube.CoreV1().Secrets("mcp-host").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=theirs"})
	require.NoError(t, err)
	require.Len(t, byName.Items, 1)
	assert.Equal(t, "theirs", byName.Items[0].Name)
}

func TestAGetOrCreateSeesWhatOnlyTheLiveClusterHolds(t *testing.T) {
	o := liveCluster(t, secret("theirs", nil))
	ctx := context.Background()
	got, err := o.kube.CoreV1().Secrets("mcp-host").Get(ctx, "theirs", metav1.GetOptions{})
	require.NoError(t, err, "a get reads through")
	assert.Equal(t, "theirs", got.Name)

	o = liveCluster(t, secret("theirs", nil))
	_, err = o.kube.CoreV1().Secrets("mcp-host").Create(ctx, secret("theirs", managed), metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "a create of a name the live cluster holds fails as there: %v", err)
	writes := o.recorded()
	require.Len(t, writes, 1, "a refused write is still a write sent")
	assert.Equal(t, "create", writes[0].verb)
	assert.Error(t, writes[0].err)
}

func TestWritesAreRecordedWithTheirChangesAndStatusApart(t *testing.T) {
	owner := &clerumv1alpha1.Host{TypeMeta: metav1.TypeMeta{APIVersion: "clerum.io/v1alpha1", Kind: "Host"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "h1", UID: "host-uid"}}
	live := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "h1", ResourceVersion: "9",
			Labels: map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h1"}}}
	o := liveCluster(t, live, owner)
	ctx := context.Background()

	d, err := o.kube.AppsV1().Deployments("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
	require.NoError(t, err)
	d.OwnerReferences = []metav1.OwnerReference{{APIVersion: "clerum.io/v1alpha1", Kind: "Host", Name: "h1", UID: "host-uid", Controller: new(true)}}
	d.Labels["clerum.io/context"] = "team"
	_, err = o.kube.AppsV1().Deployments("mcp-host").Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	h, err := o.hcc.ClerumV1alpha1().Hosts("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
	require.NoError(t, err)
	h.Status.ObservedGeneration = 1
	_, err = o.hcc.ClerumV1alpha1().Hosts("mcp-host").UpdateStatus(ctx, h, metav1.UpdateOptions{})
	require.NoError(t, err)

	rows, status := writesOf(o.recorded())
	assert.Equal(t, 1, status)
	require.Len(t, rows, 1)
	assert.Equal(t, Write{Controller: "host", Verb: "update", Action: "take-over", Group: "apps", Resource: "deployments",
		Kind: "Deployment", Namespace: "mcp-host", Name: "h1",
		Fields: []string{"metadata.labels[clerum.io/context]", "metadata.ownerReferences"}}, rows[0])
}

func TestChangedFields(t *testing.T) {
	before := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: "1", UID: "a",
		Annotations: map[string]string{"clerum.io/expires-at": "x"}},
		Data: map[string][]byte{"token": []byte("old"), "same": []byte("1")}}
	after := before.DeepCopy()
	after.ResourceVersion, after.UID = "2", "b"
	after.Annotations["clerum.io/expires-at"] = "y"
	after.Data["token"] = []byte("new")
	assert.Equal(t, []string{"data.token", "metadata.annotations[clerum.io/expires-at]"}, changedFields(before, after),
		"what the API server sets is no change; a value is named, never quoted")
	assert.Empty(t, changedFields(before, before.DeepCopy()))

	d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "a", Image: "x:1"}}}}}}
	d2 := d.DeepCopy()
	d2.Spec.Template.Spec.Containers[0].Image = "x:2"
	assert.Equal(t, []string{"spec.template.spec.containers[0].image"}, changedFields(d, d2))
	d2.Spec.Template.Spec.Containers = append(d2.Spec.Template.Spec.Containers, corev1.Container{Name: "b"})
	assert.Equal(t, []string{"spec.template.spec.containers"}, changedFields(d, d2), "a list that grows changes as a whole")
}

func TestTakesOver(t *testing.T) {
	ref := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Name: "h1", UID: uid, Controller: new(true)}}
	}
	obj := func(refs []metav1.OwnerReference) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{OwnerReferences: refs}}
	}
	assert.True(t, takesOver(obj(nil), obj(ref("a"))), "a controller reference added")
	assert.True(t, takesOver(obj(ref("gone")), obj(ref("a"))), "a controller reference that names the live owner")
	assert.False(t, takesOver(obj(ref("a")), obj(ref("a"))), "the same controller")
	assert.False(t, takesOver(obj(ref("a")), obj(nil)))
}

func TestABlockTheStatusShowsIsNoChange(t *testing.T) {
	r := &recorder{}
	server := &clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s"}}
	other := &clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "t"}}
	r.Eventf(server, corev1.EventTypeWarning, reasons.EventBlocked, "%s: %s", reasons.InvalidSpec, "needs spec.command")
	r.Eventf(other, corev1.EventTypeWarning, reasons.EventBlocked, "%s: %s", reasons.InvalidSpec, "needs spec.command")
	r.Eventf(other, corev1.EventTypeWarning, reasons.EventBlocked, "%s: %s", reasons.InvalidSpec, "needs spec.command")
	r.Event(other, corev1.EventTypeNormal, reasons.EventReleased, "no longer blocked")
	r.Eventf(other, corev1.EventTypeWarning, reasons.EventBlocked, "%s: %s", reasons.InvalidSpec, "needs spec.command")
	// Blocked until the first pass opened its gate, then released.
	waiting := &clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "u"}}
	r.Eventf(waiting, corev1.EventTypeWarning, reasons.EventBlocked, "%s: %s", reasons.EgressPending, "the gate is closed")
	r.Event(waiting, corev1.EventTypeNormal, reasons.EventReleased, "no longer blocked")
	shown := func(kind, namespace, name string) []metav1.Condition {
		if kind == "McpServer" && name == "s" {
			return []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: reasons.InvalidSpec}}
		}
		return nil
	}
	assert.Equal(t, []Refusal{{Controller: "mcpserver", Type: "block", Kind: "McpServer", Namespace: "mcp-server", Name: "t",
		Reason: reasons.InvalidSpec, Message: "needs spec.command"}}, r.refusals(shown),
		"once each, Normal events and a block released later left out, and s's block is already in its status")
}

func TestRefusalsNameTheirReconciler(t *testing.T) {
	r := &recorder{}
	host := &clerumv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "h1"}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "h1-workspace"}}
	server := &clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s"}}
	const kitMessage = "PersistentVolumeClaim mcp-host/h1-workspace is not written: it does not carry clerum.io/managed-by; it is left as it is"
	// The kit reports on the owner, then on the object holding the name.
	r.Event(host, corev1.EventTypeWarning, reasons.EventUnmanagedConflict, kitMessage)
	r.Event(claim, corev1.EventTypeWarning, reasons.EventUnmanagedConflict, kitMessage)
	r.Event(server, corev1.EventTypeWarning, reasons.EventUnmanagedConflict,
		"NetworkPolicy mcp-server/ctx-a-s is needed by HCC but held by an object HCC does not manage; it is left as it is")
	r.Event(server, corev1.EventTypeWarning, reasons.EventEgressBindingRejected, "api")
	got := map[string]string{}
	for _, x := range r.refusals(func(string, string, string) []metav1.Condition { return nil }) {
		got[x.Kind+"/"+x.Name+"/"+x.Reason] = x.Controller
	}
	assert.Equal(t, map[string]string{
		"Host/h1/UnmanagedConflict":                            "host",
		"PersistentVolumeClaim/h1-workspace/UnmanagedConflict": "host",
		"McpServer/s/UnmanagedConflict":                        "netpol",
		"McpServer/s/EgressBindingRejected":                    "egress",
	}, got)

	finalizer := &clerumv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "h1", Finalizers: []string{"clerum.io/x"}}}
	assert.Equal(t, "host", controllerOf(finalizer), "a Host's own write is the Host reconciler's")
}

// A create refused as an earlier one was is listed once; a different
// refusal of the same object, and every write that succeeds, each keep
// their line.
func TestARefusedWriteTriedAgainIsListedOnce(t *testing.T) {
	services := corev1.SchemeGroupVersion.WithResource("services")
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "alpha"}}
	exists := apierrors.NewAlreadyExists(services.GroupResource(), "alpha")
	forbidden := apierrors.NewForbidden(services.GroupResource(), "alpha", nil)
	create := func(err error) write {
		return write{verb: "create", resource: services, namespace: "mcp-server", name: "alpha", after: svc, err: err}
	}
	rows, _ := writesOf([]write{create(exists), create(exists), create(forbidden), create(exists), create(nil), create(nil)})
	var got []string
	for _, r := range rows {
		got = append(got, r.Verb+" "+r.Error)
	}
	assert.ElementsMatch(t, []string{"create " + exists.Error(), "create " + forbidden.Error(), "create ", "create "}, got)
}
