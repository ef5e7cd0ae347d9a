package kit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// Fixtures shared with owned_integration_test.go: one fully defaulted child
// of each kind, as a builder would emit it for a Host, so that the API
// server keeps it unchanged.

var hostGVK = schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("Host")

func newHost(namespace, name string, uid types.UID) *clerumv1alpha1.Host {
	return &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid},
		Spec:       clerumv1alpha1.HostSpec{ContextRef: "ctx"},
	}
}

func ownerOf(h *clerumv1alpha1.Host) kit.Owner {
	return kit.Owner{Object: h, GVK: hostGVK, IdentityLabel: names.LabelHost}
}

func managedLabels(host string) map[string]string {
	return map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: host, names.LabelApp: "mcp-host"}
}

// childMeta is a builder's metadata: HCC's labels and the controller
// reference a builder prints (render has no UID; Ensure fills it in).
func childMeta(namespace, name, host string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: managedLabels(host),
		Annotations: map[string]string{"clerum.io/builder": "test"}}
}

func podSelector(host string) map[string]string {
	return map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: host}
}

func buildDeployment(namespace, name, host string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: childMeta(namespace, name, host),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: podSelector(host)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podSelector(host)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:                     "mcp-host",
						Image:                    "registry.example/mcp-host:1.0",
						Ports:                    []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
						Env:                      []corev1.EnvVar{{Name: "MODE", Value: "test"}},
						VolumeMounts:             []corev1.VolumeMount{{Name: "tokens", MountPath: "/var/run/tokens", ReadOnly: true}},
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						ImagePullPolicy:          corev1.PullIfNotPresent,
					}},
					Volumes: []corev1.Volume{{Name: "tokens", VolumeSource: corev1.VolumeSource{
						Secret: &corev1.SecretVolumeSource{SecretName: "tokens", DefaultMode: ptr.To[int32](0o644)},
					}}},
					RestartPolicy:                 corev1.RestartPolicyAlways,
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					DNSPolicy:                     corev1.DNSClusterFirst,
					SecurityContext:               &corev1.PodSecurityContext{},
					SchedulerName:                 corev1.DefaultSchedulerName,
				},
			},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromString("25%")),
					MaxSurge:       ptr.To(intstr.FromString("25%")),
				},
			},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

func buildService(namespace, name, host string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: childMeta(namespace, name, host),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: podSelector(host),
			Ports: []corev1.ServicePort{{
				Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP,
			}},
			SessionAffinity:       corev1.ServiceAffinityNone,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

func buildConfigMap(namespace, name, host string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: childMeta(namespace, name, host),
		Data:       map[string]string{"config.yaml": "listen: 8080\n"},
	}
}

func buildSecret(namespace, name, host string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: childMeta(namespace, name, host),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"bootstrap-credential": []byte("c1"), "expires-at": []byte("2030-01-01T00:00:00Z")},
	}
}

// expandableClass is the storage class of test claims; the integration
// test creates it with allowVolumeExpansion so a claim may grow.
const expandableClass = "hcc-expandable"

func buildPVC(namespace, name, host string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: childMeta(namespace, name, host),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName: ptr.To(expandableClass),
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
		},
	}
}

func buildServiceAccount(namespace, name, host string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		ObjectMeta:                   childMeta(namespace, name, host),
		AutomountServiceAccountToken: ptr.To(true),
	}
}

func buildRole(namespace, name, host string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: childMeta(namespace, name, host),
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{clerumv1alpha1.GroupName}, Resources: []string{"hosts"}, ResourceNames: []string{host}, Verbs: []string{"get"},
		}},
	}
}

func buildRoleBinding(namespace, name, host string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: childMeta(namespace, name, host),
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
	}
}

func buildNetworkPolicy(namespace, name, host string) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: childMeta(namespace, name, host),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: podSelector(host)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{names.LabelApp: names.AppRPCProxy}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(6080))}},
			}},
		},
	}
	p.Labels[names.LabelPolicyType] = names.PolicyTypeHost
	return p
}

// withRef returns obj as the API server would hold it after HCC created it
// for owner.
func withRef[T kit.Child](obj T, owner *clerumv1alpha1.Host) T {
	obj.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(owner, hostGVK)})
	obj.SetUID("child-uid")
	obj.SetResourceVersion("7")
	return obj
}

const ns = "mcp-host"

var (
	liveHost = newHost(ns, "h1", "uid-1")
	owner    = ownerOf(liveHost)
)

// TestOwnership covers docs/ownership.md through Plan: which objects holding a
// child's name HCC writes, takes over or refuses.
func TestOwnership(t *testing.T) {
	desired := buildDeployment(ns, "h1", "h1")
	ref := func(apiVersion, kind, name string, uid types.UID, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid,
			Controller: ptr.To(controller), BlockOwnerDeletion: ptr.To(true)}
	}
	hostRef := func(name string, uid types.UID) metav1.OwnerReference {
		return ref(hostGVK.GroupVersion().String(), "Host", name, uid, true)
	}
	tests := []struct {
		name   string
		owner  kit.Owner
		live   func(*appsv1.Deployment)
		action kit.Action
		cause  kit.Cause // refused when set
	}{
		{name: "a managed child referring to the live owner is HCC's", action: kit.ActionNone,
			live: func(*appsv1.Deployment) {}},
		{name: "an object without the managed-by label is refused as unmanaged", cause: kit.CauseUnmanaged,
			live: func(d *appsv1.Deployment) { delete(d.Labels, names.LabelManagedBy) }},
		{name: "a managed-by label of another value is refused as unmanaged", cause: kit.CauseUnmanaged,
			live: func(d *appsv1.Deployment) { d.Labels[names.LabelManagedBy] = "someone-else" }},
		{name: "an identity label naming another Host is refused as another writer's", cause: kit.CauseOtherWriter,
			live: func(d *appsv1.Deployment) { d.Labels[names.LabelHost] = "h2" }},
		{name: "a managed object without the identity label is refused as another writer's", cause: kit.CauseOtherWriter,
			live: func(d *appsv1.Deployment) {
				delete(d.Labels, names.LabelHost)
				d.Labels[names.LabelMcpServer] = "h1"
			}},
		{name: "a controller reference to the owner's name with another UID is taken over", action: kit.ActionTakeOver,
			live: func(d *appsv1.Deployment) { d.OwnerReferences = []metav1.OwnerReference{hostRef("h1", "uid-old")} }},
		{name: "a managed child with no controller reference, from an earlier HCC, is taken over", action: kit.ActionTakeOver,
			live: func(d *appsv1.Deployment) { d.OwnerReferences = nil }},
		{name: "a controller reference to another live Host is refused as another owner's", cause: kit.CauseOtherOwner,
			live: func(d *appsv1.Deployment) { d.OwnerReferences = []metav1.OwnerReference{hostRef("h2", "uid-2")} }},
		{name: "a controller reference to another kind under the owner's name is refused", cause: kit.CauseOtherOwner,
			live: func(d *appsv1.Deployment) {
				d.OwnerReferences = []metav1.OwnerReference{ref("clerum.io/v1alpha1", "McpServer", "h1", "uid-s", true)}
			}},
		{name: "a controller reference to the same kind in another group is refused", cause: kit.CauseOtherOwner,
			live: func(d *appsv1.Deployment) {
				d.OwnerReferences = []metav1.OwnerReference{ref("example.com/v1", "Host", "h1", "uid-1", true)}
			}},
		{name: "a reference to another version of the owner's group is rewritten, not taken over", action: kit.ActionUpdate,
			live: func(d *appsv1.Deployment) {
				d.OwnerReferences = []metav1.OwnerReference{ref("clerum.io/v1alpha0", "Host", "h1", "uid-1", true)}
			}},
		{name: "a non-controller reference someone added stays and needs no write", action: kit.ActionNone,
			live: func(d *appsv1.Deployment) {
				d.OwnerReferences = append(d.OwnerReferences, ref("v1", "ConfigMap", "backup", "uid-b", false))
			}},
		{name: "without owner references, a managed child is decided by its labels alone", owner: owner.WithoutReference(),
			action: kit.ActionNone, live: func(d *appsv1.Deployment) { d.OwnerReferences = nil }},
		{name: "without owner references, a child another live owner controls is refused", owner: owner.WithoutReference(),
			cause: kit.CauseOtherOwner, live: func(d *appsv1.Deployment) { d.OwnerReferences = []metav1.OwnerReference{hostRef("h2", "uid-2")} }},
		{name: "without owner references, an unmanaged object is still refused", owner: owner.WithoutReference(), cause: kit.CauseUnmanaged,
			live: func(d *appsv1.Deployment) { d.Labels = nil; d.OwnerReferences = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := owner
			if tt.owner.Object != nil {
				o = tt.owner
			}
			live := withRef(buildDeployment(ns, "h1", "h1"), liveHost)
			tt.live(live)
			before := live.DeepCopy()
			write, action, err := kit.Plan(kit.Deployments, o, live, desired)
			assert.Equal(t, before, live, "Plan must not modify live")
			if tt.cause != "" {
				refused, ok := errors.AsType[*kit.RefusedError](err)
				require.True(t, ok, "want a RefusedError, got %v", err)
				assert.Equal(t, tt.cause, refused.Cause)
				assert.ErrorIs(t, err, kit.ErrNotOwned)
				assert.Nil(t, write)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.action, action)
			if action == kit.ActionTakeOver || action == kit.ActionUpdate {
				ctl := metav1.GetControllerOf(write)
				require.NotNil(t, ctl)
				assert.Equal(t, liveHost.UID, ctl.UID)
				assert.Equal(t, "clerum.io/v1alpha1", ctl.APIVersion)
			}
		})
	}
}

func TestNetworkPolicyOwnershipFollowsThePolicyType(t *testing.T) {
	desired := buildNetworkPolicy(ns, "allow-rpc-proxy-desktop-h1", "h1")
	tests := []struct {
		name   string
		live   func(*networkingv1.NetworkPolicy)
		cause  kit.Cause
		action kit.Action
	}{
		{name: "a policy of HCC's type for the owner is HCC's", live: func(*networkingv1.NetworkPolicy) {}, action: kit.ActionNone},
		{name: "a managed policy of another writer's type is refused", cause: kit.CauseOtherWriter,
			live: func(p *networkingv1.NetworkPolicy) { p.Labels[names.LabelPolicyType] = names.PolicyTypeContextAllow }},
		{name: "a managed policy with no type and no identity label is the repairable class, relabelled", action: kit.ActionUpdate,
			live: func(p *networkingv1.NetworkPolicy) {
				delete(p.Labels, names.LabelPolicyType)
				delete(p.Labels, names.LabelHost)
			}},
		{name: "a policy whose identity label names another Host is refused", cause: kit.CauseOtherWriter,
			live: func(p *networkingv1.NetworkPolicy) { p.Labels[names.LabelHost] = "h2" }},
		{name: "an unmanaged policy of HCC's type is refused", cause: kit.CauseUnmanaged,
			live: func(p *networkingv1.NetworkPolicy) { delete(p.Labels, names.LabelManagedBy) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := withRef(buildNetworkPolicy(ns, "allow-rpc-proxy-desktop-h1", "h1"), liveHost)
			tt.live(live)
			write, action, err := kit.Plan(kit.NetworkPolicies, owner, live, desired)
			if tt.cause != "" {
				refused, ok := errors.AsType[*kit.RefusedError](err)
				require.True(t, ok, "want a RefusedError, got %v", err)
				assert.Equal(t, tt.cause, refused.Cause)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.action, action)
			if action == kit.ActionUpdate {
				assert.Equal(t, names.PolicyTypeHost, write.Labels[names.LabelPolicyType])
				assert.Equal(t, "h1", write.Labels[names.LabelHost])
			}
		})
	}
}

// planCase is one compare-and-normalise case: live is the desired object
// as the API server holds it, changed by edit.
type planCase[T kit.Child] struct {
	name   string
	edit   func(live, desired T)
	action kit.Action
	cause  kit.Cause
	check  func(t *testing.T, write T)
}

func runPlanCases[T kit.Child](t *testing.T, kind kit.Kind[T], build func(namespace, name, host string) T, cases []planCase[T]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			desired := build(ns, "h1", "h1")
			live := withRef(build(ns, "h1", "h1"), liveHost)
			tt.edit(live, desired)
			liveBefore := live.DeepCopyObject()
			desiredBefore := desired.DeepCopyObject()
			write, action, err := kit.Plan(kind, owner, live, desired)
			assert.Equal(t, liveBefore, runtime.Object(live), "Plan must not modify live")
			assert.Equal(t, desiredBefore, runtime.Object(desired), "Plan must not modify desired")
			if tt.cause != "" {
				refused, ok := errors.AsType[*kit.RefusedError](err)
				require.True(t, ok, "want a RefusedError, got %v", err)
				assert.Equal(t, tt.cause, refused.Cause)
				assert.ErrorIs(t, err, kit.ErrChangeRefused)
				assert.Equal(t, kind.Name, refused.Kind)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.action, action, "diff: %s", kit.Diff(kind, live, write))
			if action == kit.ActionNone {
				assert.Equal(t, live, write, "an unchanged child is returned as it is")
				return
			}
			assert.Equal(t, "7", write.GetResourceVersion(), "an update carries the cached resourceVersion")
			assert.Equal(t, types.UID("child-uid"), write.GetUID(), "and the cached UID")
			if tt.check != nil {
				tt.check(t, write)
			}
		})
	}
}

func TestPlanDeployment(t *testing.T) {
	runPlanCases(t, kit.Deployments, buildDeployment, []planCase[*appsv1.Deployment]{
		{name: "an unchanged Deployment needs no write", edit: func(_, _ *appsv1.Deployment) {}},
		{name: "labels and annotations others added are kept without a write", edit: func(l, _ *appsv1.Deployment) {
			l.Labels["team"] = "x"
			l.Annotations["deployment.kubernetes.io/revision"] = "3"
		}},
		{name: "status and server bookkeeping are not compared", edit: func(l, _ *appsv1.Deployment) {
			l.Status.ReadyReplicas = 1
			l.Generation = 4
			l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		}},
		{name: "a label of HCC's changed by hand is restored, others' kept", action: kit.ActionUpdate,
			edit: func(l, _ *appsv1.Deployment) {
				l.Labels[names.LabelApp] = "other"
				l.Labels["team"] = "x"
			},
			check: func(t *testing.T, w *appsv1.Deployment) {
				assert.Equal(t, "mcp-host", w.Labels[names.LabelApp])
				assert.Equal(t, "x", w.Labels["team"])
			}},
		{name: "an env var someone added is a difference to undo", action: kit.ActionUpdate,
			edit: func(l, _ *appsv1.Deployment) {
				l.Spec.Template.Spec.Containers[0].Env = append(l.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
			},
			check: func(t *testing.T, w *appsv1.Deployment) {
				assert.Len(t, w.Spec.Template.Spec.Containers[0].Env, 1)
			}},
		{name: "a container someone added is a difference to undo", action: kit.ActionUpdate,
			edit: func(l, _ *appsv1.Deployment) {
				l.Spec.Template.Spec.Containers = append(l.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "x"})
			},
			check: func(t *testing.T, w *appsv1.Deployment) { assert.Len(t, w.Spec.Template.Spec.Containers, 1) }},
		{name: "a pod-template annotation from kubectl rollout restart is undone", action: kit.ActionUpdate,
			edit: func(l, _ *appsv1.Deployment) {
				l.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
			}},
		{name: "quantities in different notations are equal", edit: func(l, d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			l.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}
		}},
		{name: "a changed selector is refused: it is immutable", cause: kit.CauseImmutable, edit: func(_, d *appsv1.Deployment) {
			d.Spec.Selector.MatchLabels["extra"] = "1"
		}},
		{name: "finalizers others added are kept", edit: func(l, _ *appsv1.Deployment) {
			l.Finalizers = []string{"example.com/hold"}
		}},
	})
}

func TestPlanService(t *testing.T) {
	assigned := func(l *corev1.Service) {
		l.Spec.ClusterIP = "10.0.0.7"
		l.Spec.ClusterIPs = []string{"10.0.0.7"}
		l.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		l.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	}
	runPlanCases(t, kit.Services, buildService, []planCase[*corev1.Service]{
		{name: "addresses and families the API server assigned need no write", edit: func(l, _ *corev1.Service) { assigned(l) }},
		{name: "a changed port is written, keeping the assigned address", action: kit.ActionUpdate,
			edit: func(l, d *corev1.Service) {
				assigned(l)
				d.Spec.Ports[0].Port = 81
			},
			check: func(t *testing.T, w *corev1.Service) {
				assert.Equal(t, "10.0.0.7", w.Spec.ClusterIP)
				assert.Equal(t, []string{"10.0.0.7"}, w.Spec.ClusterIPs)
				assert.Equal(t, int32(81), w.Spec.Ports[0].Port)
			}},
		{name: "node ports the API server allocated are kept", edit: func(l, d *corev1.Service) {
			assigned(l)
			l.Spec.Type, d.Spec.Type = corev1.ServiceTypeNodePort, corev1.ServiceTypeNodePort
			l.Spec.Ports[0].NodePort = 30080
			l.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
			d.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}},
		{name: "a selector someone changed is restored", action: kit.ActionUpdate, edit: func(l, _ *corev1.Service) {
			assigned(l)
			l.Spec.Selector = map[string]string{"app": "other"}
		}},
		{name: "a headless builder facing a Service with an address is refused", cause: kit.CauseImmutable,
			edit: func(l, d *corev1.Service) {
				assigned(l)
				d.Spec.ClusterIP = corev1.ClusterIPNone
			}},
	})
}

func TestPlanConfigMapAndSecret(t *testing.T) {
	runPlanCases(t, kit.ConfigMaps, buildConfigMap, []planCase[*corev1.ConfigMap]{
		{name: "an unchanged ConfigMap needs no write", edit: func(_, _ *corev1.ConfigMap) {}},
		{name: "changed data is restored", action: kit.ActionUpdate, edit: func(l, _ *corev1.ConfigMap) { l.Data["config.yaml"] = "x" }},
		{name: "a key someone added is removed", action: kit.ActionUpdate, edit: func(l, _ *corev1.ConfigMap) { l.Data["extra"] = "x" }},
		{name: "an immutable mark someone set is kept while the data agrees", edit: func(l, _ *corev1.ConfigMap) { l.Immutable = ptr.To(true) }},
		{name: "new data for an immutable ConfigMap is refused", cause: kit.CauseImmutable, edit: func(l, d *corev1.ConfigMap) {
			l.Immutable = ptr.To(true)
			d.Data["config.yaml"] = "new"
		}},
	})
	runPlanCases(t, kit.Secrets, buildSecret, []planCase[*corev1.Secret]{
		{name: "an unchanged Secret needs no write", edit: func(_, _ *corev1.Secret) {}},
		{name: "a builder's stringData compares as the data the API server keeps", edit: func(_, d *corev1.Secret) {
			d.StringData = map[string]string{"bootstrap-credential": "c1"}
			delete(d.Data, "bootstrap-credential")
		}},
		{name: "a new credential is written", action: kit.ActionUpdate, edit: func(_, d *corev1.Secret) {
			d.Data["bootstrap-credential"] = []byte("c2")
		}, check: func(t *testing.T, w *corev1.Secret) { assert.Equal(t, "c2", string(w.Data["bootstrap-credential"])) }},
		{name: "a changed type is refused: it is immutable", cause: kit.CauseImmutable, edit: func(l, _ *corev1.Secret) {
			l.Type = corev1.SecretTypeDockerConfigJson
		}},
	})
}

func TestPlanPersistentVolumeClaim(t *testing.T) {
	bound := func(l *corev1.PersistentVolumeClaim) {
		// Bound to the volume provisioned for it.
		l.Spec.VolumeName = "pvc-child-uid"
		l.Status.Phase = corev1.ClaimBound
	}
	runPlanCases(t, kit.PersistentVolumeClaims, buildPVC, []planCase[*corev1.PersistentVolumeClaim]{
		{name: "a bound claim needs no write", edit: func(l, _ *corev1.PersistentVolumeClaim) { bound(l) }},
		{name: "the cluster's default storage class is kept when the builder names none", edit: func(l, d *corev1.PersistentVolumeClaim) {
			d.Spec.StorageClassName = nil
			l.Spec.StorageClassName = ptr.To("standard")
		}},
		{name: "a larger request grows the claim, keeping its binding", action: kit.ActionUpdate,
			edit: func(l, d *corev1.PersistentVolumeClaim) {
				bound(l)
				d.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
			},
			check: func(t *testing.T, w *corev1.PersistentVolumeClaim) {
				assert.Equal(t, "pvc-child-uid", w.Spec.VolumeName)
				assert.Equal(t, "2Gi", ptr.To(w.Spec.Resources.Requests[corev1.ResourceStorage]).String())
			}},
		{name: "a smaller request is refused: claims never shrink", cause: kit.CauseShrink,
			edit: func(l, d *corev1.PersistentVolumeClaim) {
				bound(l)
				d.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("512Mi")
			}},
		{name: "a claim grown by hand beyond the builder's request is refused, not shrunk", cause: kit.CauseShrink,
			edit: func(l, _ *corev1.PersistentVolumeClaim) {
				l.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Gi")
			}},
		{name: "another storage class is refused: it is immutable", cause: kit.CauseImmutable,
			edit: func(_, d *corev1.PersistentVolumeClaim) { d.Spec.StorageClassName = ptr.To("fast") }},
		{name: "other access modes are refused: they are immutable", cause: kit.CauseImmutable,
			edit: func(_, d *corev1.PersistentVolumeClaim) {
				d.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			}},
	})
}

// TestPlanPersistentVolumeClaimWithAForeignVolume: a claim with HCC's
// labels whose source or volume HCC did not set — a clone of another
// workspace, a volume picked by whoever created it — is refused like an
// unmanaged object, never taken over, whatever annotations it carries.
func TestPlanPersistentVolumeClaimWithAForeignVolume(t *testing.T) {
	clone := &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "victim-workspace"}
	snapshot := &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "victim"}
	// What the volume controller writes on a claim it bound itself, forged.
	binderAnnotations := func(l *corev1.PersistentVolumeClaim) {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
		l.Annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
		l.Status.Phase = corev1.ClaimBound
	}
	for _, tt := range []struct {
		name   string
		edit   func(l *corev1.PersistentVolumeClaim)
		detail string
	}{
		{"a clone of another claim", func(l *corev1.PersistentVolumeClaim) {
			l.Spec.DataSource = clone
			l.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: clone.Kind, Name: clone.Name}
		}, "it is filled from PersistentVolumeClaim victim-workspace"},
		{"a snapshot by dataSourceRef only", func(l *corev1.PersistentVolumeClaim) { l.Spec.DataSourceRef = snapshot },
			"it is filled from VolumeSnapshot.snapshot.storage.k8s.io victim"},
		{"a volume named at creation", func(l *corev1.PersistentVolumeClaim) { l.Spec.VolumeName = "pv-retained-from-another-host" },
			"it names volume pv-retained-from-another-host"},
		{"a volume named at creation, with the binder's annotations forged", func(l *corev1.PersistentVolumeClaim) {
			l.Spec.VolumeName = "pv-retained-from-another-host"
			binderAnnotations(l)
		}, "it names volume pv-retained-from-another-host"},
		{"the volume provisioned for another claim", func(l *corev1.PersistentVolumeClaim) {
			l.Spec.VolumeName = "pvc-another-claims-uid"
			binderAnnotations(l)
		}, "it names volume pvc-another-claims-uid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			desired := buildPVC(ns, "h1", "h1")
			live := withRef(buildPVC(ns, "h1", "h1"), liveHost)
			tt.edit(live)
			_, _, err := kit.Plan(kit.PersistentVolumeClaims, owner, live, desired)
			refused, ok := errors.AsType[*kit.RefusedError](err)
			require.True(t, ok, "want a RefusedError, got %v", err)
			assert.Equal(t, kit.CauseForeignVolume, refused.Cause)
			assert.ErrorIs(t, err, kit.ErrNotOwned, "refused like an unmanaged object")
			assert.NotErrorIs(t, err, kit.ErrChangeRefused)
			assert.Contains(t, refused.Detail, tt.detail)
		})
	}

	t.Run("the binder's binding to the volume provisioned for the claim is kept", func(t *testing.T) {
		desired := buildPVC(ns, "h1", "h1")
		live := withRef(buildPVC(ns, "h1", "h1"), liveHost)
		live.Spec.VolumeName = kit.ProvisionedVolumeName(live)
		binderAnnotations(live)
		write, action, err := kit.Plan(kit.PersistentVolumeClaims, owner, live, desired)
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
		assert.Equal(t, "pvc-child-uid", write.Spec.VolumeName)
	})

	t.Run("a claim with no UID has no provisioned volume", func(t *testing.T) {
		assert.Empty(t, kit.ProvisionedVolumeName(&corev1.PersistentVolumeClaim{}))
	})

	t.Run("Ensure reports it as an unmanaged conflict and writes nothing", func(t *testing.T) {
		live := withRef(buildPVC(ns, "h1", "h1"), liveHost)
		live.Spec.DataSource = clone
		live.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: clone.Kind, Name: clone.Name}
		kube := kubefake.NewClientset(live)
		recorder := record.NewFakeRecorder(10)
		var causes []kit.Cause
		children := kit.NewChildren(kube, nil, "hcc-test", recorder, func(_ string, c kit.Cause) { causes = append(causes, c) })
		_, _, err := kit.Ensure(context.Background(), children, kit.PersistentVolumeClaims, owner, live, buildPVC(ns, "h1", "h1"))
		require.ErrorIs(t, err, kit.ErrNotOwned)
		for _, a := range kube.Actions() {
			assert.Contains(t, []string{"get", "list", "watch"}, a.GetVerb(), "nothing is written")
		}
		assert.Equal(t, []kit.Cause{kit.CauseForeignVolume}, causes)
		require.NotEmpty(t, recorder.Events)
		assert.Contains(t, <-recorder.Events, "Warning "+reasons.EventUnmanagedConflict)
	})
}

func TestPlanServiceAccountAndRBAC(t *testing.T) {
	runPlanCases(t, kit.ServiceAccounts, buildServiceAccount, []planCase[*corev1.ServiceAccount]{
		{name: "pull secrets and secrets a platform added are kept without a write", edit: func(l, _ *corev1.ServiceAccount) {
			l.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "platform-dockercfg"}}
			l.Secrets = []corev1.ObjectReference{{Name: "platform-token"}}
		}},
		{name: "the builder's pull secret is added beside the platform's", action: kit.ActionUpdate,
			edit: func(l, d *corev1.ServiceAccount) {
				l.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "platform-dockercfg"}}
				d.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "hcc-pull"}}
			},
			check: func(t *testing.T, w *corev1.ServiceAccount) {
				assert.Equal(t, []corev1.LocalObjectReference{{Name: "platform-dockercfg"}, {Name: "hcc-pull"}}, w.ImagePullSecrets)
			}},
		{name: "token automounting switched off by hand is restored", action: kit.ActionUpdate,
			edit: func(l, _ *corev1.ServiceAccount) { l.AutomountServiceAccountToken = ptr.To(false) }},
	})
	runPlanCases(t, kit.Roles, buildRole, []planCase[*rbacv1.Role]{
		{name: "an unchanged Role needs no write", edit: func(_, _ *rbacv1.Role) {}},
		{name: "a rule someone added is removed", action: kit.ActionUpdate, edit: func(l, _ *rbacv1.Role) {
			l.Rules = append(l.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}})
		}},
	})
	runPlanCases(t, kit.RoleBindings, buildRoleBinding, []planCase[*rbacv1.RoleBinding]{
		{name: "an unchanged RoleBinding needs no write", edit: func(_, _ *rbacv1.RoleBinding) {}},
		{name: "a subject someone added is removed", action: kit.ActionUpdate, edit: func(l, _ *rbacv1.RoleBinding) {
			l.Subjects = append(l.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"})
		}},
		{name: "another role is refused: roleRef is immutable", cause: kit.CauseImmutable, edit: func(_, d *rbacv1.RoleBinding) {
			d.RoleRef.Name = "admin"
		}},
	})
	runPlanCases(t, kit.NetworkPolicies, func(namespace, name, host string) *networkingv1.NetworkPolicy {
		return buildNetworkPolicy(namespace, name, host)
	}, []planCase[*networkingv1.NetworkPolicy]{
		{name: "an unchanged NetworkPolicy needs no write", edit: func(_, _ *networkingv1.NetworkPolicy) {}},
		{name: "a peer someone added is removed", action: kit.ActionUpdate, edit: func(l, _ *networkingv1.NetworkPolicy) {
			l.Spec.Ingress[0].From = append(l.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})
		}},
	})
}

func TestPlanCreate(t *testing.T) {
	t.Run("a new child gets a controller reference to the live owner, replacing the builder's", func(t *testing.T) {
		desired := buildDeployment(ns, "h1", "h1")
		rendered := newHost(ns, "h1", "") // render prints the reference without a UID
		desired.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rendered, hostGVK)}
		write, action, err := kit.Plan(kit.Deployments, owner, nil, desired)
		require.NoError(t, err)
		assert.Equal(t, kit.ActionCreate, action)
		assert.Equal(t, []metav1.OwnerReference{*metav1.NewControllerRef(liveHost, hostGVK)}, write.OwnerReferences)
	})
	t.Run("a child in another namespace gets no owner reference", func(t *testing.T) {
		write, _, err := kit.Plan(kit.Deployments, owner, nil, buildDeployment("channels", "channel-reader-h1", "h1"))
		require.NoError(t, err)
		assert.Empty(t, write.OwnerReferences)
	})
	t.Run("a child without a reference by choice gets none", func(t *testing.T) {
		write, _, err := kit.Plan(kit.PersistentVolumeClaims, owner.WithoutReference(), nil, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Empty(t, write.OwnerReferences)
	})
	t.Run("a builder that forgot HCC's labels is an error, not a write", func(t *testing.T) {
		desired := buildConfigMap(ns, "h1", "h1")
		delete(desired.Labels, names.LabelHost)
		_, _, err := kit.Plan(kit.ConfigMaps, owner, nil, desired)
		require.Error(t, err)
		assert.NotErrorIs(t, err, kit.ErrNotOwned)
	})
	t.Run("a NetworkPolicy without a policy type is an error", func(t *testing.T) {
		desired := buildNetworkPolicy(ns, "p", "h1")
		delete(desired.Labels, names.LabelPolicyType)
		_, _, err := kit.Plan(kit.NetworkPolicies, owner, nil, desired)
		require.Error(t, err)
	})
	t.Run("an owner without a UID cannot be referenced", func(t *testing.T) {
		_, _, err := kit.Plan(kit.Deployments, ownerOf(newHost(ns, "h1", "")), nil, buildDeployment(ns, "h1", "h1"))
		require.Error(t, err)
	})
	t.Run("a child being deleted is waited for", func(t *testing.T) {
		live := withRef(buildDeployment(ns, "h1", "h1"), liveHost)
		live.DeletionTimestamp = ptr.To(metav1.Now())
		_, _, err := kit.Plan(kit.Deployments, owner, live, buildDeployment(ns, "h1", "h1"))
		assert.ErrorIs(t, err, kit.ErrBeingDeleted)
	})
}

// ensureFixture is Ensure over a fake clientset, recording actions,
// events and refusals.
type ensureFixture struct {
	kube     *kubefake.Clientset
	recorder *record.FakeRecorder
	refused  []string
	children *kit.Children
}

func newEnsureFixture(objects ...runtime.Object) *ensureFixture {
	f := &ensureFixture{kube: kubefake.NewClientset(objects...), recorder: record.NewFakeRecorder(16)}
	f.children = kit.NewChildren(f.kube, nil, "hcc-host", f.recorder, func(kind string, cause kit.Cause) {
		f.refused = append(f.refused, kind+"/"+string(cause))
	})
	f.kube.ClearActions()
	return f
}

func (f *ensureFixture) writes() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func (f *ensureFixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestEnsure(t *testing.T) {
	ctx := context.Background()

	t.Run("an absent child is created once, as the field manager", func(t *testing.T) {
		f := newEnsureFixture()
		got, action, err := kit.Ensure(ctx, f.children, kit.Deployments, owner, nil, buildDeployment(ns, "h1", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionCreate, action)
		assert.Equal(t, "h1", got.Name)
		require.Equal(t, []string{"create deployments"}, f.writes())
		create := f.kube.Actions()[0].(clienttesting.CreateActionImpl)
		assert.Equal(t, "hcc-host", create.GetCreateOptions().FieldManager)
	})

	t.Run("a child this process created is read, not created again, until the cache shows it", func(t *testing.T) {
		f := newEnsureFixture()
		desired := buildDeployment(ns, "h1", "h1")
		_, _, err := kit.Ensure(ctx, f.children, kit.Deployments, owner, nil, desired)
		require.NoError(t, err)
		f.kube.ClearActions()
		// A sync before the watch delivered the create: the cache has none.
		_, action, err := kit.Ensure(ctx, f.children, kit.Deployments, owner, nil, buildDeployment(ns, "h1", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
		assert.Empty(t, f.writes(), "no second create, which could only meet AlreadyExists")
		require.Len(t, f.kube.Actions(), 1)
		assert.Equal(t, "get", f.kube.Actions()[0].GetVerb())

		// Deleted before the cache ever showed it: created again.
		require.NoError(t, f.kube.AppsV1().Deployments(ns).Delete(ctx, "h1", metav1.DeleteOptions{}))
		f.kube.ClearActions()
		_, action, err = kit.Ensure(ctx, f.children, kit.Deployments, owner, nil, buildDeployment(ns, "h1", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionCreate, action)
		assert.Equal(t, []string{"create deployments"}, f.writes())

		// Once the cache showed it, a miss is a deletion the cache saw:
		// created again at once, without a read first.
		live, err := f.kube.AppsV1().Deployments(ns).Get(ctx, "h1", metav1.GetOptions{})
		require.NoError(t, err)
		_, _, err = kit.Ensure(ctx, f.children, kit.Deployments, owner, live, buildDeployment(ns, "h1", "h1"))
		require.NoError(t, err)
		require.NoError(t, f.kube.AppsV1().Deployments(ns).Delete(ctx, "h1", metav1.DeleteOptions{}))
		f.kube.ClearActions()
		_, action, err = kit.Ensure(ctx, f.children, kit.Deployments, owner, nil, buildDeployment(ns, "h1", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionCreate, action)
		require.Len(t, f.kube.Actions(), 1)
		assert.Equal(t, "create", f.kube.Actions()[0].GetVerb())
	})

	t.Run("an unchanged child is not written", func(t *testing.T) {
		live := withRef(buildService(ns, "h1", "h1"), liveHost)
		f := newEnsureFixture(live)
		got, action, err := kit.Ensure(ctx, f.children, kit.Services, owner, live, buildService(ns, "h1", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
		assert.Same(t, live, got)
		assert.Empty(t, f.kube.Actions())
	})

	t.Run("a changed child is updated once, as the field manager", func(t *testing.T) {
		live := withRef(buildConfigMap(ns, "h1", "h1"), liveHost)
		live.Data["config.yaml"] = "edited"
		f := newEnsureFixture(live)
		got, action, err := kit.Ensure(ctx, f.children, kit.ConfigMaps, owner, live, buildConfigMap(ns, "h1", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionUpdate, action)
		assert.Equal(t, "listen: 8080\n", got.Data["config.yaml"])
		require.Equal(t, []string{"update configmaps"}, f.writes())
		update := f.kube.Actions()[0].(clienttesting.UpdateActionImpl)
		assert.Equal(t, "hcc-host", update.GetUpdateOptions().FieldManager)
	})

	t.Run("an unmanaged child is refused without a write, reported once per state", func(t *testing.T) {
		live := buildRole(ns, "host-h1", "h1")
		live.Labels = map[string]string{"team": "x"}
		live.ResourceVersion = "3"
		f := newEnsureFixture(live)
		for range 2 {
			_, _, err := kit.Ensure(ctx, f.children, kit.Roles, owner, live, buildRole(ns, "host-h1", "h1"))
			assert.ErrorIs(t, err, kit.ErrNotOwned)
		}
		assert.Empty(t, f.kube.Actions())
		assert.Equal(t, []string{"Role/Unmanaged"}, f.refused)
		events := f.events()
		require.Len(t, events, 2, "one on the owner, one on the object")
		assert.Contains(t, events[0], "Warning "+reasons.EventUnmanagedConflict)
		assert.Contains(t, events[0], "Role mcp-host/host-h1 is not written")

		live.ResourceVersion = "4" // someone edited it, still unmanaged
		_, _, err := kit.Ensure(ctx, f.children, kit.Roles, owner, live, buildRole(ns, "host-h1", "h1"))
		assert.ErrorIs(t, err, kit.ErrNotOwned)
		assert.Len(t, f.refused, 2, "a new state of the object is reported again")
	})

	t.Run("a name held by an object the cache does not show is read and refused", func(t *testing.T) {
		hidden := buildSecret(ns, "host-h1-mcp-host-runtime-tokens", "h1")
		hidden.Labels = nil // an informer of managed objects never sees it
		f := newEnsureFixture(hidden)
		_, _, err := kit.Ensure(ctx, f.children, kit.Secrets, owner, nil, buildSecret(ns, "host-h1-mcp-host-runtime-tokens", "h1"))
		refused, ok := errors.AsType[*kit.RefusedError](err)
		require.True(t, ok, "want a RefusedError, got %v", err)
		assert.Equal(t, kit.CauseUnmanaged, refused.Cause)
		assert.Equal(t, []string{"create secrets"}, f.writes(), "only the create that failed")
		assert.Equal(t, []string{"Secret/Unmanaged"}, f.refused)
	})

	t.Run("a name held by HCC's own object the cache has not seen yet is judged as cached", func(t *testing.T) {
		existing := withRef(buildServiceAccount(ns, "host-h1", "h1"), liveHost)
		f := newEnsureFixture(existing)
		_, action, err := kit.Ensure(ctx, f.children, kit.ServiceAccounts, owner, nil, buildServiceAccount(ns, "host-h1", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
		assert.Equal(t, []string{"create serviceaccounts"}, f.writes())
	})

	t.Run("a child of an owner re-created under its name is taken over with a Normal event", func(t *testing.T) {
		live := withRef(buildRoleBinding(ns, "host-h1", "h1"), newHost(ns, "h1", "uid-old"))
		f := newEnsureFixture(live)
		got, action, err := kit.Ensure(ctx, f.children, kit.RoleBindings, owner, live, buildRoleBinding(ns, "host-h1", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionTakeOver, action)
		assert.Equal(t, liveHost.UID, metav1.GetControllerOf(got).UID)
		assert.Equal(t, []string{"update rolebindings"}, f.writes())
		events := f.events()
		require.Len(t, events, 1)
		assert.Contains(t, events[0], "Normal "+reasons.EventTakenOver)
	})

	t.Run("a claim that would shrink is refused with ChangeRefused", func(t *testing.T) {
		live := withRef(buildPVC(ns, "h1-workspace", "h1"), liveHost)
		desired := buildPVC(ns, "h1-workspace", "h1")
		desired.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("100Mi")
		f := newEnsureFixture(live)
		_, _, err := kit.Ensure(ctx, f.children, kit.PersistentVolumeClaims, owner, live, desired)
		assert.ErrorIs(t, err, kit.ErrChangeRefused)
		assert.Empty(t, f.kube.Actions())
		assert.Equal(t, []string{"PersistentVolumeClaim/Shrink"}, f.refused)
		events := f.events()
		require.Len(t, events, 1, "on the owner only: the claim is HCC's")
		assert.Contains(t, events[0], "Warning "+reasons.EventChangeRefused)
	})

	t.Run("a failed update is returned for the loop to retry", func(t *testing.T) {
		live := withRef(buildNetworkPolicy(ns, "p", "h1"), liveHost)
		live.Spec.Ingress = nil
		f := newEnsureFixture() // absent from the server: the cache is behind
		_, _, err := kit.Ensure(ctx, f.children, kit.NetworkPolicies, owner, live, buildNetworkPolicy(ns, "p", "h1"))
		assert.ErrorIs(t, err, kit.ErrCacheBehind, "a child deleted since the cache saw it is retried quietly")
	})
}

// stubLister answers Get from one map, or with err.
type stubLister[T kit.Child] struct {
	objs map[string]T
	err  error
}

func (l stubLister[T]) Get(name string) (T, error) {
	var zero T
	if l.err != nil {
		return zero, l.err
	}
	if o, ok := l.objs[name]; ok {
		return o, nil
	}
	return zero, apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, name)
}

func TestEnsureFromReadsTheLiveObjectFromTheLister(t *testing.T) {
	h := newHost("mcp-host", "h1", "uid-h1")
	owner := ownerOf(h)
	desired := buildService("mcp-host", "h1", "h1")
	ctx := context.Background()

	t.Run("not in the cache: created", func(t *testing.T) {
		kube := kubefake.NewClientset()
		children := kit.NewChildren(kube, nil, "hcc-test", record.NewFakeRecorder(10), nil)
		require.NoError(t, kit.EnsureFrom(ctx, children, kit.Services, owner, stubLister[*corev1.Service]{}, desired))
		_, err := kube.CoreV1().Services("mcp-host").Get(ctx, "h1", metav1.GetOptions{})
		require.NoError(t, err)
	})
	t.Run("in the cache as built: nothing written", func(t *testing.T) {
		live := withRef(buildService("mcp-host", "h1", "h1"), h)
		kube := kubefake.NewClientset(live)
		children := kit.NewChildren(kube, nil, "hcc-test", record.NewFakeRecorder(10), nil)
		require.NoError(t, kit.EnsureFrom(ctx, children, kit.Services, owner,
			stubLister[*corev1.Service]{objs: map[string]*corev1.Service{"h1": live}}, desired))
		for _, a := range kube.Actions() {
			assert.Contains(t, []string{"get", "list", "watch"}, a.GetVerb(), "nothing is written")
		}
	})
	t.Run("a lister error is returned and nothing written", func(t *testing.T) {
		kube := kubefake.NewClientset()
		children := kit.NewChildren(kube, nil, "hcc-test", record.NewFakeRecorder(10), nil)
		err := kit.EnsureFrom(ctx, children, kit.Services, owner, stubLister[*corev1.Service]{err: errors.New("broken cache")}, desired)
		require.ErrorContains(t, err, "broken cache")
		assert.Empty(t, kube.Actions())
	})
}
