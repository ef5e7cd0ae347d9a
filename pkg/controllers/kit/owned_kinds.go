package kit

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The kinds of child HCC writes, and for each what HCC owns of it. Builders
// emit objects as the API server defaults them (kittest.RoundTrip proves it);
// the rules below only copy what the server assigns per object (addresses,
// bindings) and refuse changes it would reject. Everything HCC owns is
// compared whole: an entry someone else added to a list HCC owns is a
// difference, undone by the next write.

// Deployments: HCC owns the whole spec, pod template included.
var Deployments = Kind[*appsv1.Deployment]{
	Name: "Deployment",
	client: func(k kubernetes.Interface, ns string) ChildClient[*appsv1.Deployment] {
		return k.AppsV1().Deployments(ns)
	},
	prepare: func(write, live *appsv1.Deployment) error {
		if !equality.Semantic.DeepEqual(write.Spec.Selector, live.Spec.Selector) {
			return immutable("spec.selector")
		}
		// The API server copies serviceAccountName into the deprecated
		// serviceAccount; a builder should not have to spell it.
		pod := &write.Spec.Template.Spec
		deprecated := &pod.DeprecatedServiceAccount
		if *deprecated == "" {
			*deprecated = pod.ServiceAccountName
		}
		return nil
	},
	owned: func(d *appsv1.Deployment) any { return d.Spec },
}

// Services: HCC owns the spec except the addresses and ports the API server
// allocates, which a builder cannot know: clusterIP(s), IP families (they
// depend on the cluster's stack), node ports and the health-check node
// port. A builder that does name an address owns it.
var Services = Kind[*corev1.Service]{
	Name: "Service",
	client: func(k kubernetes.Interface, ns string) ChildClient[*corev1.Service] {
		return k.CoreV1().Services(ns)
	},
	prepare: prepareService,
	owned:   func(s *corev1.Service) any { return s.Spec },
}

func prepareService(write, live *corev1.Service) error {
	w, l := &write.Spec, &live.Spec
	switch {
	case w.ClusterIP == "":
		w.ClusterIP = l.ClusterIP
	case l.ClusterIP != "" && w.ClusterIP != l.ClusterIP:
		return immutable("spec.clusterIP")
	}
	if len(w.ClusterIPs) == 0 {
		w.ClusterIPs = slices.Clone(l.ClusterIPs)
	}
	if len(w.IPFamilies) == 0 {
		w.IPFamilies = slices.Clone(l.IPFamilies)
	}
	if w.IPFamilyPolicy == nil && l.IPFamilyPolicy != nil {
		w.IPFamilyPolicy = ptr.To(*l.IPFamilyPolicy)
	}
	if w.HealthCheckNodePort == 0 {
		w.HealthCheckNodePort = l.HealthCheckNodePort
	}
	for i := range w.Ports {
		p := &w.Ports[i]
		if p.NodePort != 0 {
			continue
		}
		// A port is identified by number and protocol: the API server
		// rejects two ports sharing both.
		for _, lp := range l.Ports {
			if lp.Port == p.Port && lp.Protocol == p.Protocol {
				p.NodePort = lp.NodePort
			}
		}
	}
	return nil
}

// ConfigMaps: HCC owns data, binaryData and immutable. An immutable
// ConfigMap someone marked so keeps the mark; its data cannot change.
var ConfigMaps = Kind[*corev1.ConfigMap]{
	Name: "ConfigMap",
	client: func(k kubernetes.Interface, ns string) ChildClient[*corev1.ConfigMap] {
		return k.CoreV1().ConfigMaps(ns)
	},
	prepare: func(write, live *corev1.ConfigMap) error {
		if write.Immutable == nil && live.Immutable != nil {
			write.Immutable = ptr.To(*live.Immutable)
		}
		same := equality.Semantic.DeepEqual(write.Data, live.Data) && equality.Semantic.DeepEqual(write.BinaryData, live.BinaryData)
		return immutableData(write.Immutable, live.Immutable, same)
	},
	owned: func(c *corev1.ConfigMap) any {
		return struct {
			Data       map[string]string
			BinaryData map[string][]byte
			Immutable  *bool
		}{c.Data, c.BinaryData, c.Immutable}
	},
}

// Secrets: HCC owns data, type and immutable, like a ConfigMap's. A
// builder's stringData is folded into data, as the API server does (it never
// returns stringData). Values are compared as they are: a Secret informer
// whose transform drops values cannot prove a Secret unchanged, so a
// reconciler with such a cache ensures a Secret when it has new data to
// write, or passes a live object it read with Get.
var Secrets = Kind[*corev1.Secret]{
	Name: "Secret",
	client: func(k kubernetes.Interface, ns string) ChildClient[*corev1.Secret] {
		return k.CoreV1().Secrets(ns)
	},
	prepare: func(write, live *corev1.Secret) error {
		foldStringData(write)
		if write.Type == "" {
			write.Type = corev1.SecretTypeOpaque // the API server's default
		}
		if write.Type != live.Type {
			return immutable("type")
		}
		if write.Immutable == nil && live.Immutable != nil {
			write.Immutable = ptr.To(*live.Immutable)
		}
		return immutableData(write.Immutable, live.Immutable, equality.Semantic.DeepEqual(write.Data, live.Data))
	},
	owned: func(s *corev1.Secret) any {
		return struct {
			Data      map[string][]byte
			Type      corev1.SecretType
			Immutable *bool
		}{s.Data, s.Type, s.Immutable}
	},
}

func foldStringData(s *corev1.Secret) {
	if len(s.StringData) == 0 {
		return
	}
	if s.Data == nil {
		s.Data = make(map[string][]byte, len(s.StringData))
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

// PersistentVolumeClaims: a claim's spec is fixed at creation except that
// its storage request may grow (and its volume attributes class change).
// A default storage class, when the builder names none, comes from the
// cluster. Shrinking, or changing anything else, is refused: the data on
// the volume is never put at risk by a builder or configuration change.
// Growing a claim that is not bound, or whose class does not allow
// expansion, is refused by the API server, with its error.
//
// What a claim mounts is decided by its dataSource, dataSourceRef and
// volumeName, and a claim's labels say nothing of who set them
// (docs/ownership.md, "Claims"). HCC's builders set none of the three, and
// HCC marks every claim it creates (WithMarker; mark.PurposeClaim) right
// after the create, over the UID the API server just gave it:
//
//   - A claim carrying a valid mark is HCC's own. Its volumeName was set by
//     the volume binder, to whatever volume (dynamic or static) it bound
//     the claim to: HCC created it without one. Its data sources are
//     immutable, so they are still the builder's (none).
//   - An unmarked claim with no data source and no volume is taken over,
//     and marked in the same update.
//   - An unmarked claim with a data source, or a volume, is refused like an
//     unmanaged object (CauseForeignVolume, ErrNotOwned), never taken
//     over: nobody can have a Host or a WFC mount a clone of another claim
//     or a volume they picked. The one exception is a claim an earlier HCC
//     created, before marks, that dynamic provisioning bound: a volume
//     named pvc-<the claim's UID>, the name Kubernetes' provisioners give
//     the volume they create for a claim. That UID is the API server's and
//     volumes are cluster-scoped, so it names a volume provisioned for this
//     very claim; the claim is taken over and marked.
var PersistentVolumeClaims = Kind[*corev1.PersistentVolumeClaim]{
	Name: "PersistentVolumeClaim",
	client: func(k kubernetes.Interface, ns string) ChildClient[*corev1.PersistentVolumeClaim] {
		return k.CoreV1().PersistentVolumeClaims(ns)
	},
	vet:     sameVolume,
	prepare: preparePVC,
	owned:   func(c *corev1.PersistentVolumeClaim) any { return c.Spec },
}

// CauseForeignVolume: a PersistentVolumeClaim's data source or volume is
// not one HCC set. It is an ownership refusal (errors.Is ErrNotOwned):
// what the claim would mount is someone else's choice.
const CauseForeignVolume Cause = "ForeignVolume"

// ProvisionedVolumeName is the name Kubernetes' provisioners (the in-tree
// ones and every CSI driver behind the external-provisioner with its
// default --volume-name-prefix) give the volume they create for claim: the
// one binding PersistentVolumeClaims accepts on an unmarked claim. "" for a
// claim with no UID.
func ProvisionedVolumeName(claim *corev1.PersistentVolumeClaim) string {
	if claim.UID == "" {
		return ""
	}
	return "pvc-" + string(claim.UID)
}

func preparePVC(write, live *corev1.PersistentVolumeClaim) error {
	w, l := &write.Spec, &live.Spec
	// sameVolume (the kind's vet) has accepted live's sources and volume.
	w.DataSource, w.DataSourceRef = l.DataSource.DeepCopy(), l.DataSourceRef.DeepCopy()
	w.VolumeName = l.VolumeName
	if w.StorageClassName == nil && l.StorageClassName != nil {
		w.StorageClassName = ptr.To(*l.StorageClassName)
	}
	if w.VolumeMode == nil && l.VolumeMode != nil {
		w.VolumeMode = ptr.To(*l.VolumeMode)
	}

	want, have := w.Resources.Requests[corev1.ResourceStorage], l.Resources.Requests[corev1.ResourceStorage]
	if want.Cmp(have) < 0 {
		return &RefusedError{Cause: CauseShrink,
			Detail: fmt.Sprintf("its storage request would shrink from %s to %s; a claim only grows", have.String(), want.String())}
	}
	rest := w.DeepCopy()
	rest.VolumeAttributesClassName = l.VolumeAttributesClassName
	if _, ok := l.Resources.Requests[corev1.ResourceStorage]; ok {
		rest.Resources.Requests[corev1.ResourceStorage] = have
	} else {
		delete(rest.Resources.Requests, corev1.ResourceStorage)
	}
	if !equality.Semantic.DeepEqual(*rest, *l) {
		return immutable("spec (only resources.requests.storage may grow, and volumeAttributesClassName change)")
	}
	return nil
}

// ServiceAccounts: HCC owns automountServiceAccountToken and its own image
// pull secrets. Entries others add to imagePullSecrets (platforms inject
// registry credentials into every account) and to secrets stay: fighting
// such a controller would write forever.
var ServiceAccounts = Kind[*corev1.ServiceAccount]{
	Name: "ServiceAccount",
	client: func(k kubernetes.Interface, ns string) ChildClient[*corev1.ServiceAccount] {
		return k.CoreV1().ServiceAccounts(ns)
	},
	prepare: func(write, live *corev1.ServiceAccount) error {
		write.Secrets = slices.Clone(live.Secrets)
		pull := slices.Clone(live.ImagePullSecrets)
		for _, s := range write.ImagePullSecrets {
			if !contains(pull, s) {
				pull = append(pull, s)
			}
		}
		write.ImagePullSecrets = pull
		return nil
	},
	owned: func(a *corev1.ServiceAccount) any {
		return struct {
			AutomountServiceAccountToken *bool
			ImagePullSecrets             []corev1.LocalObjectReference
			Secrets                      []corev1.ObjectReference
		}{a.AutomountServiceAccountToken, a.ImagePullSecrets, a.Secrets}
	},
}

// Roles: HCC owns the rules.
var Roles = Kind[*rbacv1.Role]{
	Name: "Role",
	client: func(k kubernetes.Interface, ns string) ChildClient[*rbacv1.Role] {
		return k.RbacV1().Roles(ns)
	},
	prepare: func(_, _ *rbacv1.Role) error { return nil },
	owned:   func(r *rbacv1.Role) any { return r.Rules },
}

// RoleBindings: HCC owns the subjects and the role reference, which cannot
// change after creation.
var RoleBindings = Kind[*rbacv1.RoleBinding]{
	Name: "RoleBinding",
	client: func(k kubernetes.Interface, ns string) ChildClient[*rbacv1.RoleBinding] {
		return k.RbacV1().RoleBindings(ns)
	},
	prepare: func(write, live *rbacv1.RoleBinding) error {
		if write.RoleRef != live.RoleRef {
			return immutable("roleRef")
		}
		return nil
	},
	owned: func(b *rbacv1.RoleBinding) any {
		return struct {
			Subjects []rbacv1.Subject
			RoleRef  rbacv1.RoleRef
		}{b.Subjects, b.RoleRef}
	},
}

// NetworkPolicies: HCC owns the spec. Ownership also follows the policy
// type (docs/ownership.md): a managed policy of another writer's type is
// refused; one with no type on HCC's name is the repairable class, taken
// and labelled.
var NetworkPolicies = Kind[*networkingv1.NetworkPolicy]{
	Name: "NetworkPolicy",
	client: func(k kubernetes.Interface, ns string) ChildClient[*networkingv1.NetworkPolicy] {
		return k.NetworkingV1().NetworkPolicies(ns)
	},
	prepare:     func(_, _ *networkingv1.NetworkPolicy) error { return nil },
	owned:       func(p *networkingv1.NetworkPolicy) any { return p.Spec },
	policyTyped: true,
}

// sameVolume refuses a live claim whose source or binding is not the
// builder's (PersistentVolumeClaims), unless it is marked and its volume is
// the binder's. On success the live claim's source fields equal the
// builder's, once the API server's mirroring of dataSource into
// dataSourceRef (and back) is allowed for.
func sameVolume(write, live *corev1.PersistentVolumeClaim, marked bool) error {
	w, l := &write.Spec, &live.Spec
	foreign := func(detail string) error { return &RefusedError{Cause: CauseForeignVolume, Detail: detail} }
	// The API server mirrors dataSource and dataSourceRef into each other.
	wantSource, wantRef := w.DataSource, w.DataSourceRef
	if wantSource == nil && wantRef != nil && wantRef.Namespace == nil {
		wantSource = &corev1.TypedLocalObjectReference{APIGroup: wantRef.APIGroup, Kind: wantRef.Kind, Name: wantRef.Name}
	}
	if wantRef == nil && wantSource != nil {
		wantRef = &corev1.TypedObjectReference{APIGroup: wantSource.APIGroup, Kind: wantSource.Kind, Name: wantSource.Name}
	}
	if !equality.Semantic.DeepEqual(wantSource, l.DataSource) || !equality.Semantic.DeepEqual(wantRef, l.DataSourceRef) {
		return foreign(fmt.Sprintf("it is filled from %s, which HCC did not set; it is not taken over", describeSource(live)))
	}
	switch {
	case l.VolumeName == w.VolumeName:
	case w.VolumeName == "" && marked:
		// HCC created it without a volume: the binder chose this one.
	case w.VolumeName == "" && l.VolumeName == ProvisionedVolumeName(live):
		// Bound to the volume provisioned for this very claim.
	case w.VolumeName == "":
		return foreign(fmt.Sprintf("it names volume %s and carries no valid mark of HCC's: HCC did not create it, "+
			"or created it before marks and it is bound to a volume not provisioned for it; it is not taken over", l.VolumeName))
	default:
		return foreign(fmt.Sprintf("it names volume %q, not %s; it is not taken over", l.VolumeName, w.VolumeName))
	}
	return nil
}

func describeSource(l *corev1.PersistentVolumeClaim) string {
	var r struct {
		group, kind, name string
	}
	switch {
	case l.Spec.DataSourceRef != nil:
		r.group, r.kind, r.name = ptr.Deref(l.Spec.DataSourceRef.APIGroup, ""), l.Spec.DataSourceRef.Kind, l.Spec.DataSourceRef.Name
		if ns := ptr.Deref(l.Spec.DataSourceRef.Namespace, ""); ns != "" {
			r.name = ns + "/" + r.name
		}
	case l.Spec.DataSource != nil:
		r.group, r.kind, r.name = ptr.Deref(l.Spec.DataSource.APIGroup, ""), l.Spec.DataSource.Kind, l.Spec.DataSource.Name
	default:
		return "no data source"
	}
	if r.group != "" {
		r.kind += "." + r.group
	}
	return r.kind + " " + r.name
}

func immutable(field string) *RefusedError {
	return &RefusedError{Cause: CauseImmutable, Detail: field + " cannot change after creation"}
}

// immutableData refuses any change to the data of an object marked
// immutable, or to the mark itself, which the API server never lifts.
func immutableData(write, live *bool, sameData bool) error {
	if ptr.Deref(live, false) && (!sameData || !ptr.Deref(write, false)) {
		return &RefusedError{Cause: CauseImmutable, Detail: "it is marked immutable, so its data cannot change"}
	}
	return nil
}

// Jobs: one-shot work (a GlobalFileSystem's root seed). A Job's pod template
// cannot change once it is created, and the API server fills in its
// selector and template labels, so HCC owns no content of a Job: Ensure
// creates a missing one, keeps its labels and annotations, and never
// rewrites its spec. A Job that must run differently is deleted and
// created again by its reconciler.
var Jobs = Kind[*batchv1.Job]{
	Name: "Job",
	client: func(k kubernetes.Interface, ns string) ChildClient[*batchv1.Job] {
		return k.BatchV1().Jobs(ns)
	},
	// An update (metadata only) sends the live spec: the builder's lacks
	// the selector and labels the API server filled in, and a Job's
	// template may not change.
	prepare: func(write, live *batchv1.Job) error {
		write.Spec = *live.Spec.DeepCopy()
		return nil
	},
	owned: func(*batchv1.Job) any { return nil },
}
