// Package resources holds what the SharedFileSystem reconciler
// (pkg/controllers/sharedfs) writes, as pure functions: objects in, objects
// out, no client. MakeChildren is the one plan of a file system's children;
// the controller's sync ensures them and render prints them (Plan), so the
// two cannot drift apart. The package imports no client-go, so that
// pkg/render can use it without the controller.
//
// The WFC container's interface — environment, mounted files, port — the
// init container and what the NetworkPolicy admits are written down in
// docs/sharedfilesystem.md and pinned by the golden tests beside it.
// Builders emit every field the API server would default, so a child that
// matches the builder is never rewritten (kittest.RoundTrip proves it
// against a real API server). They set no owner references: the kit adds
// them.
package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/workload"
)

// Names of the containers, port and volumes of a WFC pod
// (docs/sharedfilesystem.md).
const (
	// ContainerWFC runs CONTEXT_MAPPER_WFC_IMAGE, first in the pod
	// (docs/containers.md).
	ContainerWFC = "wfc"
	// ContainerInit runs CONTEXT_MAPPER_WFC_INIT_IMAGE and creates
	// spec.directories on the volume.
	ContainerInit = "init-directories"
	// PortHTTP names the WFC port (CONTEXT_MAPPER_WFC_PORT).
	PortHTTP = "http"

	volumeData   = "data"
	volumeJWTKey = "jwt-public-key"
	volumeTmp    = "tmp"

	// DataDir is where the data claim is mounted, in both containers.
	DataDir = "/data"
	// JWTKeyDir holds the JWT public key as the file JWTKeyFile.
	JWTKeyDir = "/etc/clerum/wfc"
	// JWTKeyFile is the PEM public key the WFC verifies tokens with.
	JWTKeyFile = JWTKeyDir + "/jwt-public-key.pem"
	// TmpDir is the writable scratch directory: root filesystems are
	// read-only.
	TmpDir = "/tmp"
)

// Environment variables of the WFC container (docs/sharedfilesystem.md).
const (
	EnvName           = "WFC_FILESYSTEM_NAME"
	EnvNamespace      = "WFC_NAMESPACE"
	EnvPort           = "WFC_PORT"
	EnvDataDir        = "WFC_DATA_DIR"
	EnvMaxUploadBytes = "WFC_MAX_UPLOAD_BYTES"
	EnvMaxListEntries = "WFC_MAX_LIST_ENTRIES"
	EnvMaxPathDepth   = "WFC_MAX_PATH_DEPTH"
	EnvJWTKeyFile     = "WFC_JWT_PUBLIC_KEY_FILE"
	// EnvAllowedHosts is spec.hostRefs, sorted, without duplicates,
	// comma-separated ("" for none): the Hosts whose tokens the WFC
	// accepts.
	EnvAllowedHosts = "WFC_ALLOWED_HOSTS"
	EnvTmpDir       = "TMPDIR"
)

// AnnotationJWTKeyDigest on the pod template is the SHA-256 of the JWT
// public key the pods were started with: a changed key rolls them, a change
// to another key of the same (shared) ConfigMap does not.
const AnnotationJWTKeyDigest = "clerum.io/jwt-public-key-digest"

// The numeric identity of every WFC pod, both containers: the data volume
// is group-owned by PodGroup through fsGroup.
const (
	PodUser  int64 = 65532
	PodGroup int64 = 65532
)

// Options is the part of the configuration the builders read.
type Options struct {
	HostNamespace string // CONTEXT_MAPPER_HOST_NAMESPACE
	ClusterDomain string // CONTEXT_MAPPER_CLUSTER_DOMAIN

	Image           string            // CONTEXT_MAPPER_WFC_IMAGE
	ImagePullPolicy corev1.PullPolicy // CONTEXT_MAPPER_WFC_IMAGE_PULL_POLICY
	ImagePullSecret string            // CONTEXT_MAPPER_WFC_IMAGE_PULL_SECRET; empty: none
	Port            int32             // CONTEXT_MAPPER_WFC_PORT
	InitImage       string            // CONTEXT_MAPPER_WFC_INIT_IMAGE
	Resources       corev1.ResourceRequirements

	JWTConfigMap    string // CONTEXT_MAPPER_WFC_JWT_PUBLIC_KEY_CM
	JWTConfigMapKey string // CONTEXT_MAPPER_WFC_JWT_PUBLIC_KEY_CM_KEY

	MaxUploadBytes int64 // CONTEXT_MAPPER_WFC_MAX_UPLOAD_BYTES
	MaxListEntries int   // CONTEXT_MAPPER_WFC_MAX_LIST_ENTRIES
	MaxPathDepth   int   // CONTEXT_MAPPER_WFC_MAX_PATH_DEPTH

	// DefaultSize and DefaultStorageClass apply to a SharedFileSystem that
	// names none: the host workspace's (CONTEXT_MAPPER_HOST_WORKSPACE_SIZE,
	// CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS; empty: the cluster's
	// default class).
	DefaultSize         resource.Quantity
	DefaultStorageClass string
	// MaxSize (HCC_SFS_MAX_SIZE) bounds spec.size; zero admits none.
	MaxSize resource.Quantity
	// ClaimMark marks the data claim right after its creation
	// (docs/ownership.md, "Claims"), keyed from
	// INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET. With the zero Key no claim is
	// marked, and only one without a volume, or bound to the volume
	// provisioned for it, is HCC's.
	ClaimMark mark.Key
}

// OptionsFrom returns the builders' options from the configuration.
func OptionsFrom(cfg *config.Config) Options {
	return Options{
		HostNamespace: cfg.Namespaces.Host,
		ClusterDomain: cfg.Core.ClusterDomain,

		Image:           cfg.WFC.Image,
		ImagePullPolicy: cfg.WFC.ImagePullPolicy,
		ImagePullSecret: cfg.WFC.ImagePullSecret,
		Port:            cfg.WFC.Port,
		InitImage:       cfg.WFC.InitImage,
		Resources:       *cfg.WFC.Resources.DeepCopy(),

		JWTConfigMap:    cfg.WFC.JWTPublicKeyConfigMap,
		JWTConfigMapKey: cfg.WFC.JWTPublicKeyConfigMapKey,

		MaxUploadBytes: cfg.WFC.MaxUploadBytes,
		MaxListEntries: cfg.WFC.MaxListEntries,
		MaxPathDepth:   cfg.WFC.MaxPathDepth,

		DefaultSize:         cfg.Host.WorkspaceSize.DeepCopy(),
		DefaultStorageClass: cfg.Host.WorkspaceStorageClass,
		MaxSize:             cfg.WFC.SFSMaxSize.DeepCopy(),
		ClaimMark:           mark.NewKey(cfg.ControlAPI.HMACSecret, mark.PurposeClaim),
	}
}

// KeyDigest is the value of AnnotationJWTKeyDigest for a public key.
func KeyDigest(publicKey string) string {
	sum := sha256.Sum256([]byte(publicKey))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Endpoint is the in-cluster URL of fs's WFC Service.
func Endpoint(fs *clerumv1alpha1.SharedFileSystem, opts Options) string {
	return fmt.Sprintf("http://%s.%s.svc.%s:%d", names.WFCWorkload(fs.Name), opts.HostNamespace, opts.ClusterDomain, opts.Port)
}

// labels are the labels of every object built for fs, and of its pods.
func labels(fs *clerumv1alpha1.SharedFileSystem) map[string]string {
	return map[string]string{
		names.LabelManagedBy:        names.ManagedByValue,
		names.LabelSharedFileSystem: names.Label(fs.Name),
	}
}

// selector selects fs's pods; it is the Deployment's immutable selector.
func selector(fs *clerumv1alpha1.SharedFileSystem) map[string]string { return labels(fs) }

// allowedHosts is spec.hostRefs sorted and without duplicates, as label
// values: the order a user wrote them in never rolls the pods or rewrites
// the policy.
func allowedHosts(fs *clerumv1alpha1.SharedFileSystem) []string {
	out := make([]string, 0, len(fs.Spec.HostRefs))
	for _, h := range fs.Spec.HostRefs {
		out = append(out, names.Label(h))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// directories is spec.directories sorted and without duplicates.
func directories(fs *clerumv1alpha1.SharedFileSystem) []string {
	out := slices.Clone(fs.Spec.Directories)
	slices.Sort(out)
	return slices.Compact(out)
}

// ClaimSize is the storage fs asks for: spec.size, else the default.
func ClaimSize(fs *clerumv1alpha1.SharedFileSystem, opts Options) resource.Quantity {
	if fs.Spec.Size != nil {
		return fs.Spec.Size.DeepCopy()
	}
	return opts.DefaultSize.DeepCopy()
}

// CheckSize reports why fs's spec.size may not be given to its claim: it
// is above opts.MaxSize (HCC_SFS_MAX_SIZE). nil when it may, or when fs
// names no size (the default applies).
func CheckSize(fs *clerumv1alpha1.SharedFileSystem, opts Options) error {
	if fs.Spec.Size == nil || fs.Spec.Size.Cmp(opts.MaxSize) <= 0 {
		return nil
	}
	return fmt.Errorf("spec.size %s is above HCC_SFS_MAX_SIZE (%s)", fs.Spec.Size.String(), opts.MaxSize.String())
}

// initScript creates each argument as a directory under DataDir. The
// directories are passed as arguments ("$@"), never spliced into the
// script, so no name can be read as shell; mkdir -p makes a second run a
// no-op. umask 002 keeps them group-writable for PodGroup.
const initScript = `set -eu
umask 002
for d in "$@"; do mkdir -p -- "` + DataDir + `/$d"; done`

// BuildDeployment returns fs's WFC Deployment. keyDigest is KeyDigest of
// the JWT public key the caller validated.
func BuildDeployment(fs *clerumv1alpha1.SharedFileSystem, keyDigest string, opts Options) *appsv1.Deployment {
	pod := corev1.PodSpec{
		EnableServiceLinks:            ptr.To(false),
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		DNSPolicy:                     corev1.DNSClusterFirst,
		SchedulerName:                 corev1.DefaultSchedulerName,
		// The WFC reads no API object: no token in the pod.
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext:              workload.PodSecurity(PodUser, PodGroup),
	}
	// The kubelet makes a fresh volume group-owned by PodGroup and
	// group-writable, so no container needs root to chown it; on a volume
	// whose root already belongs to PodGroup it walks nothing.
	pod.SecurityContext.FSGroupChangePolicy = ptr.To(corev1.FSGroupChangeOnRootMismatch)
	if opts.ImagePullSecret != "" {
		pod.ImagePullSecrets = []corev1.LocalObjectReference{{Name: opts.ImagePullSecret}}
	}

	wfc := container(ContainerWFC, opts.Image, opts.ImagePullPolicy)
	wfc.Ports = []corev1.ContainerPort{{Name: PortHTTP, ContainerPort: opts.Port, Protocol: corev1.ProtocolTCP}}
	wfc.ReadinessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(PortHTTP)}},
		TimeoutSeconds:   1,
		PeriodSeconds:    10,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	wfc.Resources = *opts.Resources.DeepCopy()
	wfc.Env = []corev1.EnvVar{
		{Name: EnvName, Value: fs.Name},
		{Name: EnvNamespace, Value: opts.HostNamespace},
		{Name: EnvPort, Value: strconv.Itoa(int(opts.Port))},
		{Name: EnvDataDir, Value: DataDir},
		{Name: EnvMaxUploadBytes, Value: strconv.FormatInt(opts.MaxUploadBytes, 10)},
		{Name: EnvMaxListEntries, Value: strconv.Itoa(opts.MaxListEntries)},
		{Name: EnvMaxPathDepth, Value: strconv.Itoa(opts.MaxPathDepth)},
		{Name: EnvJWTKeyFile, Value: JWTKeyFile},
		{Name: EnvAllowedHosts, Value: strings.Join(allowedHosts(fs), ",")},
		{Name: EnvTmpDir, Value: TmpDir},
	}
	wfc.VolumeMounts = []corev1.VolumeMount{
		{Name: volumeData, MountPath: DataDir},
		{Name: volumeJWTKey, MountPath: JWTKeyDir, ReadOnly: true},
		{Name: volumeTmp, MountPath: TmpDir},
	}
	pod.Containers = []corev1.Container{wfc}

	if dirs := directories(fs); len(dirs) > 0 {
		// Runs as the pod's non-root user: fsGroup already made the volume
		// writable for it (docs/sharedfilesystem.md, "Init container").
		init := container(ContainerInit, opts.InitImage, opts.ImagePullPolicy)
		init.Command = append([]string{"/bin/sh", "-c", initScript, "init-directories"}, dirs...)
		init.Resources = *opts.Resources.DeepCopy()
		init.VolumeMounts = []corev1.VolumeMount{{Name: volumeData, MountPath: DataDir}}
		pod.InitContainers = []corev1.Container{init}
	}

	pod.Volumes = []corev1.Volume{
		{Name: volumeData, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: names.WFCData(fs.Name)}}},
		// The one key, not the whole (shared, platform) ConfigMap. Not
		// optional: the key was validated before the Deployment was
		// written, and a pod without it must not start.
		{Name: volumeJWTKey, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: opts.JWTConfigMap},
			Items:                []corev1.KeyToPath{{Key: opts.JWTConfigMapKey, Path: "jwt-public-key.pem"}},
			DefaultMode:          ptr.To(corev1.ConfigMapVolumeSourceDefaultMode),
		}}},
		{Name: volumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}

	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.WFCWorkload(fs.Name), Labels: labels(fs)},
		Spec: appsv1.DeploymentSpec{
			// One pod: the data claim is ReadWriteOnce.
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: selector(fs)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(fs), Annotations: map[string]string{AnnotationJWTKeyDigest: keyDigest}},
				Spec:       pod,
			},
			// Recreate: a ReadWriteOnce volume is never wanted by two pods,
			// which a rolling update would start side by side.
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

// BuildService returns fs's WFC Service, on the WFC port.
func BuildService(fs *clerumv1alpha1.SharedFileSystem, opts Options) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.WFCWorkload(fs.Name), Labels: labels(fs)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector(fs),
			Ports: []corev1.ServicePort{{Name: PortHTTP, Protocol: corev1.ProtocolTCP, Port: opts.Port,
				TargetPort: intstr.FromString(PortHTTP)}},
			SessionAffinity:       corev1.ServiceAffinityNone,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

// BuildClaim returns fs's data claim wfc-F-data: ReadWriteOnce, of
// ClaimSize, in spec.storageClassName or else the default class (none
// named: the cluster's default).
func BuildClaim(fs *clerumv1alpha1.SharedFileSystem, opts Options) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.WFCData(fs.Name), Labels: labels(fs)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: ClaimSize(fs, opts)},
			},
			VolumeMode: ptr.To(corev1.PersistentVolumeFilesystem),
		},
	}
	switch {
	case fs.Spec.StorageClassName != nil && *fs.Spec.StorageClassName != "":
		c.Spec.StorageClassName = ptr.To(*fs.Spec.StorageClassName)
	case opts.DefaultStorageClass != "":
		c.Spec.StorageClassName = ptr.To(opts.DefaultStorageClass)
	}
	return c
}

// BuildIngressPolicy returns wfc-F-ingress, of policy type filesystem: the
// WFC pods of fs admit, on the WFC port only, the pods of the host
// namespace labelled clerum.io/host with one of spec.hostRefs (only Host
// pods carry that label, docs/names.md). With no hostRefs the policy has no
// rule and admits nobody.
func BuildIngressPolicy(fs *clerumv1alpha1.SharedFileSystem, opts Options) *networkingv1.NetworkPolicy {
	l := labels(fs)
	l[names.LabelPolicyType] = names.PolicyTypeFileSystem
	p := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.WFCIngressPolicy(fs.Name), Labels: l},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selector(fs)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if hosts := allowedHosts(fs); len(hosts) > 0 {
		protocol, port := corev1.ProtocolTCP, intstr.FromInt32(opts.Port)
		// A pod selector without a namespace selector: the policy's own
		// namespace, the host namespace.
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: names.LabelHost, Operator: metav1.LabelSelectorOpIn, Values: hosts,
				}},
			}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &protocol, Port: &port}},
		}}
	}
	return p
}

// BuildEgressPolicy returns wfc-F-egress, of policy type filesystem, the
// other half of BuildIngressPolicy: under the host namespace's default deny
// (L0), the pods of the Hosts in spec.hostRefs may reach F's WFC pods on
// the WFC port, and nothing else by this policy. nil without hostRefs: no
// Host may, and an empty In list is no valid selector.
func BuildEgressPolicy(fs *clerumv1alpha1.SharedFileSystem, opts Options) *networkingv1.NetworkPolicy {
	hosts := allowedHosts(fs)
	if len(hosts) == 0 {
		return nil
	}
	l := labels(fs)
	l[names.LabelPolicyType] = names.PolicyTypeFileSystem
	protocol, port := corev1.ProtocolTCP, intstr.FromInt32(opts.Port)
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.WFCEgressPolicy(fs.Name), Labels: l},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: names.LabelHost, Operator: metav1.LabelSelectorOpIn, Values: hosts,
			}}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: selector(fs)}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &protocol, Port: &port}},
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		},
	}
}

// container is a hardened container with the API server's defaults.
func container(name, image string, pull corev1.PullPolicy) corev1.Container {
	return workload.Container(name, image, pull)
}
