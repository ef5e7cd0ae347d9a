// Package resources holds what the Host operator writes, as pure
// functions: objects in, objects out, no client. The controller
// (pkg/controllers/host) and render (pkg/render) both plan a Host's
// children with MakeChildren, so what render prints is what the controller
// writes.
//
// This file holds the builders. The interfaces of the containers they run
// — environment, mounted files, ports — and what the two NetworkPolicies
// allow are written down in docs/host.md and pinned by the golden tests
// beside it. Builders emit every field the API server would default, so a
// child that matches the builder is never rewritten (kittest.RoundTrip
// proves it against a real API server). They set no owner references: the
// kit adds them, and leaves them off the channels-namespace children, which
// no reference can reach.
package resources

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/secretdigest"
	"github.com/clerum/hcc/pkg/workload"
)

// Names of the containers, ports and volumes of the pods HCC runs for a
// Host (docs/host.md).
const (
	// ContainerMcpHost runs CONTEXT_MAPPER_HOST_IMAGE, first in the pod.
	ContainerMcpHost = "mcp-host"
	// ContainerDesktop is the desktop sidecar (CONTEXT_MAPPER_DESKTOP_IMAGE).
	ContainerDesktop = "desktop"
	// ContainerChannelReader runs CONTEXT_MAPPER_CHANNEL_READER_IMAGE.
	ContainerChannelReader = "channel-reader"

	// PortHTTP names mcp-host's port (CONTEXT_MAPPER_HOST_PORT).
	PortHTTP = "http"
	// PortDesktop names the desktop port (CONTEXT_MAPPER_DESKTOP_PORT).
	PortDesktop = "desktop"
	// PortHandoff names channel-reader's port
	// (CONTEXT_MAPPER_CHANNEL_READER_HANDOFF_PORT).
	PortHandoff = "handoff"

	volumeWorkspace     = "workspace"
	volumeRuntimeTokens = "runtime-tokens"
	volumeAPIToken      = "kube-api-access"
	volumeTmp           = "tmp"
	volumeDesktopTmp    = "desktop-tmp"

	// RuntimeTokensDir is where mcp-host finds the runtime-token Secret's
	// keys as files. The kubelet replaces them in place when the Secret
	// changes, so a refreshed credential needs no restart (docs/containers.md).
	RuntimeTokensDir = "/var/run/secrets/clerum.io/mcp-host-runtime-tokens"
	// ServiceAccountDir is where mcp-host, and only mcp-host, finds its
	// ServiceAccount token, the cluster CA and the namespace: client-go's
	// in-cluster configuration reads them there.
	ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// TmpDir is the writable scratch directory of every container: their
	// root filesystems are read-only.
	TmpDir = "/tmp"
)

// Keys of the runtime-token Secret (docs/control-api.md): files of the same names in
// RuntimeTokensDir.
const (
	KeyBootstrapCredential = "bootstrap-credential"
	KeyExpiresAt           = "expires-at"
)

// Annotations on the runtime-token Secret. The Secret informer caches no
// values, so what the controller needs to decide a refresh lives here: the
// UID of the Host the credential was issued for (a Host re-created under its
// name needs a new one at once) and its expiry. HCC believes them only
// under its mark (mark.Annotation, ReadIssuance).
const (
	AnnotationIssuedForUID = "clerum.io/issued-for-uid"
	AnnotationExpiresAt    = "clerum.io/expires-at"
)

// Environment variables of the mcp-host container (docs/host.md). They are
// set after the ConfigMap's envFrom, so the ConfigMap cannot override them.
const (
	EnvHostName         = "MCP_HOST_NAME"
	EnvHostNamespace    = "MCP_HOST_NAMESPACE"
	EnvHostPort         = "MCP_HOST_PORT"
	EnvWorkspacePath    = "MCP_HOST_WORKSPACE_PATH"
	EnvGatewayURL       = "MCP_HOST_GATEWAY_URL"
	EnvHCCAPIURL        = "HCC_API_URL"
	EnvRuntimeTokensDir = "MCP_HOST_RUNTIME_TOKENS_DIR"
	EnvDesktopURL       = "MCP_HOST_DESKTOP_URL"
)

// Environment variables of the desktop sidecar.
const (
	EnvDesktopPort          = "DESKTOP_PORT"
	EnvDesktopWorkspacePath = "DESKTOP_WORKSPACE_PATH"
)

// Environment variables of the channel-reader container.
const (
	EnvReaderHostName      = "CHANNEL_READER_HOST_NAME"
	EnvReaderHostNamespace = "CHANNEL_READER_HOST_NAMESPACE"
	EnvReaderHostURL       = "CHANNEL_READER_HOST_URL"
	EnvReaderHandoffPort   = "CHANNEL_READER_HANDOFF_PORT"
)

// Pod labels of channel-reader. Among pods only Host pods carry
// clerum.io/host (docs/names.md): the channel-reader pods are told apart by
// LabelChannelReader instead, whose value is the Host's name. The
// Deployment, Service and policy objects carry clerum.io/host like every
// per-Host object.
const (
	LabelChannelReader = "clerum.io/channel-reader"
	AppChannelReader   = names.AppChannelReader
)

// apiGatewayService is hcc-api's Service in the control-plane namespace
// (deploy/base/api/service.yaml): it shares its pods' app label.
const apiGatewayService = names.AppAPIGateway

// The numeric identity every Host and channel-reader pod runs as
// (docs/containers.md): the workspace volume is group-owned by PodGroup.
const (
	PodUser  int64 = 65532
	PodGroup int64 = 65532
)

const dnsPort int32 = 53

// Options is the part of the configuration the builders read.
type Options struct {
	HostNamespace     string // CONTEXT_MAPPER_HOST_NAMESPACE
	ChannelsNamespace string // CONTEXT_MAPPER_CHANNELS_NAMESPACE
	RPCProxyNamespace string // CONTEXT_MAPPER_RPC_PROXY_NAMESPACE
	ClusterDomain     string // CONTEXT_MAPPER_CLUSTER_DOMAIN

	Image           string            // CONTEXT_MAPPER_HOST_IMAGE
	ImagePullPolicy corev1.PullPolicy // CONTEXT_MAPPER_HOST_IMAGE_PULL_POLICY
	ImagePullSecret string            // CONTEXT_MAPPER_HOST_IMAGE_PULL_SECRET; empty: none
	Port            int32             // CONTEXT_MAPPER_HOST_PORT
	// ConfigMapName (CONTEXT_MAPPER_HOST_CONFIGMAP_NAME) is loaded through
	// a required envFrom; empty: none. The controller writes no Deployment
	// while it is missing.
	ConfigMapName         string
	Resources             corev1.ResourceRequirements
	WorkspaceStorageClass string // empty: the cluster's default class
	WorkspaceSize         resource.Quantity
	WorkspacePath         string

	DesktopImage     string // CONTEXT_MAPPER_DESKTOP_IMAGE
	DesktopPort      int32  // CONTEXT_MAPPER_DESKTOP_PORT
	DesktopResources corev1.ResourceRequirements

	ChannelReaderImage       string            // CONTEXT_MAPPER_CHANNEL_READER_IMAGE
	ChannelReaderPullPolicy  corev1.PullPolicy // CONTEXT_MAPPER_CHANNEL_READER_IMAGE_PULL_POLICY
	ChannelReaderHandoffPort int32             // CONTEXT_MAPPER_CHANNEL_READER_HANDOFF_PORT

	GatewayURL string // MCP_HOST_GATEWAY_URL, given to mcp-host
	// HCCAPIURL is hcc-api's in-cluster URL, given to mcp-host (see
	// HCCAPIURL).
	HCCAPIURL string
	// NodeLocalDNSCIDR (CONTEXT_MAPPER_NODELOCAL_DNS_CIDR), when valid, is
	// a DNS destination of channel-reader besides kube-dns.
	NodeLocalDNSCIDR netip.Prefix
	// RuntimeTokenMark marks and verifies the runtime-token Secret, keyed
	// from INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET. The zero Key (render, which
	// holds no secret) marks nothing and believes nothing.
	RuntimeTokenMark mark.Key
	// ClaimMark marks the workspace claim right after its creation
	// (docs/ownership.md, "Claims"), keyed from
	// INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET. With the zero Key no claim is
	// marked, and only one without a volume, or bound to the volume
	// provisioned for it, is HCC's.
	ClaimMark mark.Key
	// SecretRequireLabel (HCC_HOST_SECRET_REQUIRE_LABEL) is Admit's rule for
	// spec.secretRef: false, any Secret but the kinds no Host may read;
	// true, only one labelled LabelSecretForHost=<host> (SecretRefRule).
	SecretRequireLabel bool
}

// OptionsFrom returns the builders' options from the configuration.
func OptionsFrom(cfg *config.Config) Options {
	return Options{
		HostNamespace:     cfg.Namespaces.Host,
		ChannelsNamespace: cfg.Namespaces.Channels,
		RPCProxyNamespace: cfg.Namespaces.RPCProxy,
		ClusterDomain:     cfg.Core.ClusterDomain,

		Image:                 cfg.Host.Image,
		ImagePullPolicy:       cfg.Host.ImagePullPolicy,
		ImagePullSecret:       cfg.Host.ImagePullSecret,
		Port:                  cfg.Host.Port,
		ConfigMapName:         cfg.Host.ConfigMapName,
		Resources:             *cfg.Host.Resources.DeepCopy(),
		WorkspaceStorageClass: cfg.Host.WorkspaceStorageClass,
		WorkspaceSize:         cfg.Host.WorkspaceSize.DeepCopy(),
		WorkspacePath:         cfg.Host.WorkspacePath,

		DesktopImage:     cfg.Desktop.Image,
		DesktopPort:      cfg.Desktop.Port,
		DesktopResources: *cfg.Desktop.Resources.DeepCopy(),

		ChannelReaderImage:       cfg.ChannelReader.Image,
		ChannelReaderPullPolicy:  cfg.ChannelReader.ImagePullPolicy,
		ChannelReaderHandoffPort: cfg.ChannelReader.HandoffPort,

		GatewayURL:       cfg.ControlAPI.GatewayURL,
		HCCAPIURL:        HCCAPIURL(cfg.Namespaces.ControlPlane, cfg.Core.ClusterDomain, cfg.Core.Port),
		NodeLocalDNSCIDR: cfg.NetPol.NodeLocalDNSCIDR,
		RuntimeTokenMark: mark.NewKey(cfg.ControlAPI.HMACSecret, mark.PurposeRuntimeToken),
		ClaimMark:        mark.NewKey(cfg.ControlAPI.HMACSecret, mark.PurposeClaim),

		SecretRequireLabel: cfg.Host.SecretRequireLabel,
	}
}

// HCCAPIURL is the URL of hcc-api's Service in controlPlaneNamespace. The
// Service's port is CONTEXT_MAPPER_PORT, like the container's, which the
// allow-hcc-api-egress policies open.
func HCCAPIURL(controlPlaneNamespace, clusterDomain string, port int32) string {
	return fmt.Sprintf("http://%s.%s.svc.%s:%d", apiGatewayService, controlPlaneNamespace, clusterDomain, port)
}

// Errors that keep a Host from being built.
var (
	// ErrContextID: a Host pod must carry its Context's contextId, a label
	// value; a Host without one is not deployed (it would match no L2
	// allow, or the wrong one).
	ErrContextID = errors.New("the Host's contextId is empty or not a label value")
	// ErrReservedSecretRef: spec.secretRef names a Secret the Host's pod
	// must never read — another Host's runtime-token Secret, or the image
	// pull secret. The Role would otherwise grant it.
	ErrReservedSecretRef = errors.New("spec.secretRef names a Secret reserved by HCC: another Host's runtime-token Secret or the image pull secret")
)

// ValidateSecretRef refuses a spec.secretRef the Host's pod may not be
// granted (ErrReservedSecretRef). BuildRole leaves such a name out.
func ValidateSecretRef(h *clerumv1alpha1.Host, opts Options) error {
	ref := h.Spec.SecretRef
	if ref == nil || ref.Name == "" || ref.Name == names.HostRuntimeTokens(h.Name) {
		return nil
	}
	// Host names are DNS labels, so runtime-token names are never shortened
	// and always have this shape.
	if (strings.HasPrefix(ref.Name, "host-") && strings.HasSuffix(ref.Name, "-mcp-host-runtime-tokens")) ||
		(opts.ImagePullSecret != "" && ref.Name == opts.ImagePullSecret) {
		return ErrReservedSecretRef
	}
	return nil
}

// labels are the labels of every object built for h in the host namespace,
// and of the channel-reader Deployment, Service and policy.
func labels(h *clerumv1alpha1.Host) map[string]string {
	return map[string]string{
		names.LabelManagedBy: names.ManagedByValue,
		names.LabelHost:      names.Label(h.Name),
	}
}

// hostSelector selects h's pods. It is the Deployment's selector, which is
// immutable: the contextId label is left out of it so that a contextId
// change replaces the pods instead of orphaning them.
func hostSelector(h *clerumv1alpha1.Host) map[string]string { return labels(h) }

// readerSelector selects h's channel-reader pods.
func readerSelector(h *clerumv1alpha1.Host) map[string]string {
	return map[string]string{
		names.LabelManagedBy: names.ManagedByValue,
		LabelChannelReader:   names.Label(h.Name),
	}
}

func readerPodLabels(h *clerumv1alpha1.Host) map[string]string {
	l := readerSelector(h)
	l[names.LabelApp] = AppChannelReader
	return l
}

// BuildDeployment returns h's mcp-host Deployment in the host namespace.
// contextID is the spec.contextId of h's Context, which the caller has
// proved holds it; its pods carry it as clerum.io/context.
func BuildDeployment(h *clerumv1alpha1.Host, contextID string, opts Options) (*appsv1.Deployment, error) {
	if contextID == "" || len(validation.IsValidLabelValue(contextID)) > 0 {
		return nil, ErrContextID
	}
	podLabels := labels(h)
	podLabels[names.LabelContext] = contextID
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.HostWorkload(h.Name), Labels: labels(h)},
		Spec: appsv1.DeploymentSpec{
			// One pod: the workspace claim is ReadWriteOnce.
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: hostSelector(h)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: hostPodSpec(h, opts)},
			// Recreate: no pod with an old contextId label outlives a change,
			// and the RWO workspace is never wanted by two pods.
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}, nil
}

// DeployedImage returns the mcp-host image of a live Deployment — what is
// stamped on the Host's pods, for status — or "" when it has none.
func DeployedImage(d *appsv1.Deployment) string {
	if d == nil {
		return ""
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == ContainerMcpHost {
			return c.Image
		}
	}
	return ""
}

// hostPodSpec is h's hardened pod: mcp-host first, then the desktop when
// spec.desktop.enabled.
func hostPodSpec(h *clerumv1alpha1.Host, opts Options) corev1.PodSpec {
	pod := hardenedPod()
	// The pod reads its own Host and Secrets with its own account (BuildRole):
	// the one pod HCC writes with a service account token.
	// Its token is mounted into mcp-host alone, through a projected volume,
	// not by automount, which would give it to every container: the
	// desktop, which rpc-proxy reaches, must not read the credential.
	pod.ServiceAccountName = names.HostIdentity(h.Name)
	pod.AutomountServiceAccountToken = ptr.To(false)
	// The workspace can be large: change its ownership only when its root
	// does not already belong to PodGroup, not on every start.
	pod.SecurityContext.FSGroupChangePolicy = ptr.To(corev1.FSGroupChangeOnRootMismatch)
	if opts.ImagePullSecret != "" {
		pod.ImagePullSecrets = []corev1.LocalObjectReference{{Name: opts.ImagePullSecret}}
	}

	mcpHost := container(ContainerMcpHost, opts.Image, opts.ImagePullPolicy)
	mcpHost.Ports = []corev1.ContainerPort{{Name: PortHTTP, ContainerPort: opts.Port, Protocol: corev1.ProtocolTCP}}
	mcpHost.ReadinessProbe = tcpProbe(PortHTTP)
	mcpHost.Resources = *opts.Resources.DeepCopy()
	if opts.ConfigMapName != "" {
		// Required, not optional: the ConfigMap holds the platform's trust
		// anchors (the WFC's public key, the proxy), and a pod must not
		// start without them. The controller writes no Deployment while it
		// is missing.
		mcpHost.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: opts.ConfigMapName},
		}}}
	}
	mcpHost.Env = []corev1.EnvVar{
		{Name: EnvHostName, Value: h.Name},
		{Name: EnvHostNamespace, Value: opts.HostNamespace},
		{Name: EnvHostPort, Value: strconv.Itoa(int(opts.Port))},
		{Name: EnvWorkspacePath, Value: opts.WorkspacePath},
		{Name: EnvGatewayURL, Value: opts.GatewayURL},
		{Name: EnvHCCAPIURL, Value: opts.HCCAPIURL},
		{Name: EnvRuntimeTokensDir, Value: RuntimeTokensDir},
	}
	mcpHost.VolumeMounts = []corev1.VolumeMount{
		{Name: volumeWorkspace, MountPath: opts.WorkspacePath},
		// A whole-volume mount, never subPath: the kubelet updates only
		// whole Secret volumes when the Secret changes.
		{Name: volumeRuntimeTokens, MountPath: RuntimeTokensDir, ReadOnly: true},
		{Name: volumeTmp, MountPath: TmpDir},
		{Name: volumeAPIToken, MountPath: ServiceAccountDir, ReadOnly: true},
	}
	pod.Volumes = []corev1.Volume{
		{Name: volumeWorkspace, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: names.HostWorkspace(h.Name),
		}}},
		{Name: volumeRuntimeTokens, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: names.HostRuntimeTokens(h.Name),
			// Owner and group (PodGroup, through fsGroup) read; nobody else.
			DefaultMode: ptr.To[int32](0o440),
		}}},
		emptyDir(volumeTmp),
		apiTokenVolume(),
	}
	pod.Containers = []corev1.Container{mcpHost}
	if !h.Spec.DesktopEnabled() {
		return pod
	}

	pod.Containers[0].Env = append(pod.Containers[0].Env,
		corev1.EnvVar{Name: EnvDesktopURL, Value: "http://127.0.0.1:" + strconv.Itoa(int(opts.DesktopPort))})
	desktop := container(ContainerDesktop, opts.DesktopImage, opts.ImagePullPolicy)
	desktop.Ports = []corev1.ContainerPort{{Name: PortDesktop, ContainerPort: opts.DesktopPort, Protocol: corev1.ProtocolTCP}}
	desktop.ReadinessProbe = tcpProbe(PortDesktop)
	desktop.Resources = *opts.DesktopResources.DeepCopy()
	desktop.Env = []corev1.EnvVar{
		{Name: EnvDesktopPort, Value: strconv.Itoa(int(opts.DesktopPort))},
		{Name: EnvDesktopWorkspacePath, Value: opts.WorkspacePath},
	}
	// The desktop shares the workspace (what is saved there is the Host's)
	// but not the credential, nor mcp-host's scratch directory.
	desktop.VolumeMounts = []corev1.VolumeMount{
		{Name: volumeWorkspace, MountPath: opts.WorkspacePath},
		{Name: volumeDesktopTmp, MountPath: TmpDir},
	}
	pod.Containers = append(pod.Containers, desktop)
	pod.Volumes = append(pod.Volumes, emptyDir(volumeDesktopTmp))
	return pod
}

// apiTokenVolume is what automount would mount — a bound, expiring token
// of the pod's ServiceAccount, the cluster's CA and the namespace — as a
// volume only mcp-host mounts, with the API server's defaults spelled out.
func apiTokenVolume() corev1.Volume {
	return corev1.Volume{Name: volumeAPIToken, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}}}
}

// BuildService returns h's Service in the host namespace: mcp-host's port,
// and the desktop's when spec.desktop.enabled.
func BuildService(h *clerumv1alpha1.Host, opts Options) *corev1.Service {
	ports := []corev1.ServicePort{servicePort(PortHTTP, opts.Port)}
	if h.Spec.DesktopEnabled() {
		ports = append(ports, servicePort(PortDesktop, opts.DesktopPort))
	}
	return service(opts.HostNamespace, names.HostWorkload(h.Name), labels(h), hostSelector(h), ports)
}

// BuildWorkspaceClaim returns h's workspace claim: ReadWriteOnce, of the
// configured size and storage class (none named: the cluster's default).
func BuildWorkspaceClaim(h *clerumv1alpha1.Host, opts Options) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.HostWorkspace(h.Name), Labels: labels(h)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: opts.WorkspaceSize.DeepCopy()},
			},
			VolumeMode: ptr.To(corev1.PersistentVolumeFilesystem),
		},
	}
	if opts.WorkspaceStorageClass != "" {
		c.Spec.StorageClassName = ptr.To(opts.WorkspaceStorageClass)
	}
	return c
}

// BuildRuntimeTokenSecret returns h's runtime-token Secret holding the
// bootstrap credential the Control API issued for h (docs/control-api.md), expiring
// at expiresAt. The annotations record h's UID and the expiry for a cache
// that holds no values, and HCC's mark over both and the credential's digest
// (opts.RuntimeTokenMark; docs/host.md): labels and annotations anyone can
// write, the mark only a holder of INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET. The
// expiry is written in whole seconds, rounded down: HCC refreshes early
// rather than late.
func BuildRuntimeTokenSecret(h *clerumv1alpha1.Host, opts Options, credential string, expiresAt time.Time) *corev1.Secret {
	s := BuildEmptyRuntimeTokenSecret(h, opts)
	expiry := expiresAt.UTC().Truncate(time.Second).Format(time.RFC3339)
	s.Annotations = map[string]string{AnnotationIssuedForUID: string(h.UID), AnnotationExpiresAt: expiry}
	// Signed over the value's digest, which is what the Secret informer
	// caches: the mark verifies from the cached copy.
	if m := opts.RuntimeTokenMark.Sign(string(h.UID), expiry, string(secretdigest.ValueDigest([]byte(credential)))); m != "" {
		s.Annotations[mark.Annotation] = m
	}
	s.Data = map[string][]byte{KeyBootstrapCredential: []byte(credential), KeyExpiresAt: []byte(expiry)}
	return s
}

// BuildEmptyRuntimeTokenSecret returns h's runtime-token Secret with no
// data and no issuance annotations: what render prints, since only the
// Control API can supply the credential.
func BuildEmptyRuntimeTokenSecret(h *clerumv1alpha1.Host, opts Options) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.HostRuntimeTokens(h.Name), Labels: labels(h)},
		Type:       corev1.SecretTypeOpaque,
	}
}

// Trust is what HCC makes of the credential a runtime-token Secret holds.
type Trust int

const (
	// NoCredential: no Secret, or one that claims no credential (no
	// issuance annotations, no mark, no credential key), like render's.
	NoCredential Trust = iota
	// Marked: HCC's mark verifies over the UID, the expiry and the
	// credential's digest, and the expires-at key holds that expiry. HCC
	// wrote it.
	Marked
	// Unmarked: it claims a credential but carries no mark: written by an
	// HCC from before marks, or by someone else.
	Unmarked
	// Mismatch: it carries a mark that does not verify: written or edited
	// by someone else, or marked under an earlier
	// INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET.
	Mismatch
	// Replayed: marked, for this Host's UID, but an older credential than
	// the one this process wrote last, put back by someone else. ReadIssuance
	// never returns it: only the sync, which remembers its last write, can
	// tell.
	Replayed
)

func (t Trust) String() string {
	switch t {
	case Marked:
		return "marked"
	case Unmarked:
		return "unmarked"
	case Mismatch:
		return "mismatch"
	case Replayed:
		return "replayed"
	}
	return "none"
}

// Issuance is what a runtime-token Secret says of its credential. UID and
// ExpiresAt are what it claims (zero when missing or malformed); only a
// Marked issuance proves them.
type Issuance struct {
	Trust     Trust
	UID       types.UID
	ExpiresAt time.Time
	// Digest is the credential's secretdigest.ValueDigest, as the cache holds it:
	// which credential the Secret holds, without its value.
	Digest string
}

// ReadIssuance reads s, as the Secret informer caches it (values replaced
// by secretdigest.ValueDigest), against key: the UID of the Host its credential was
// issued for, its expiry, and whether HCC's mark proves them. A nil s holds
// no credential.
func ReadIssuance(s *corev1.Secret, key mark.Key) Issuance {
	if s == nil {
		return Issuance{}
	}
	uidClaim, hasUID := s.Annotations[AnnotationIssuedForUID]
	expiry, hasExpiry := s.Annotations[AnnotationExpiresAt]
	m, hasMark := s.Annotations[mark.Annotation]
	credentialDigest, hasCredential := s.Data[KeyBootstrapCredential]
	if !hasUID && !hasExpiry && !hasMark && !hasCredential {
		return Issuance{}
	}
	iss := Issuance{Trust: Unmarked, UID: types.UID(uidClaim), Digest: string(credentialDigest)}
	expiresAt, err := time.Parse(time.RFC3339, expiry)
	if err == nil {
		iss.ExpiresAt = expiresAt
	}
	if !hasMark {
		return iss
	}
	iss.Trust = Mismatch
	if uidClaim == "" || err != nil || !hasCredential ||
		string(s.Data[KeyExpiresAt]) != string(secretdigest.ValueDigest([]byte(expiry))) ||
		!key.Verify(m, uidClaim, expiry, string(credentialDigest)) {
		return iss
	}
	iss.Trust = Marked
	return iss
}

// BuildServiceAccount returns h's ServiceAccount. It mounts no token by
// default; the Host's pod asks for one explicitly, so no other pod that
// names the account gets a token without saying so.
func BuildServiceAccount(h *clerumv1alpha1.Host, opts Options) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta:                   metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.HostIdentity(h.Name), Labels: labels(h)},
		AutomountServiceAccountToken: ptr.To(false),
	}
}

// BuildRole returns h's Role: read its own Host object and its own Secrets
// (the runtime-token Secret and spec.secretRef's, unless ValidateSecretRef
// refuses its name), each by name. It is built only for a Host Admit
// admitted, so spec.secretRef's Secret passed SecretRefRule too; a Host
// blocked on its Secret gets its Role rewritten without the grant (the
// controller builds it for the Host without spec.secretRef). get reads one object; list and watch are
// allowed only with a field selector on metadata.name, which is how the
// API server matches them against resourceNames — an informer on the one
// object works, an unfiltered list or watch is forbidden.
func BuildRole(h *clerumv1alpha1.Host, opts Options) *rbacv1.Role {
	secrets := []string{names.HostRuntimeTokens(h.Name)}
	if ref := h.Spec.SecretRef; ref != nil && ref.Name != "" && ref.Name != secrets[0] && ValidateSecretRef(h, opts) == nil {
		secrets = append(secrets, ref.Name)
	}
	read := []string{"get", "list", "watch"}
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: names.HostIdentity(h.Name), Labels: labels(h)},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{clerumv1alpha1.GroupName}, Resources: []string{"hosts"}, ResourceNames: []string{h.Name}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: secrets, Verbs: append([]string(nil), read...)},
		},
	}
}

// BuildRoleBinding binds h's Role to h's ServiceAccount.
func BuildRoleBinding(h *clerumv1alpha1.Host, opts Options) *rbacv1.RoleBinding {
	name := names.HostIdentity(h.Name)
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.HostNamespace, Name: name, Labels: labels(h)},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: opts.HostNamespace}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
	}
}

// BuildDesktopPolicy returns allow-rpc-proxy-desktop-<host>, or nil when
// the Host has no desktop: rpc-proxy's pods may open the desktop port of
// h's pods, and nothing else — not mcp-host's port, not another Host's pods.
func BuildDesktopPolicy(h *clerumv1alpha1.Host, opts Options) *networkingv1.NetworkPolicy {
	if !h.Spec.DesktopEnabled() {
		return nil
	}
	p := policy(h, opts.HostNamespace, names.HostDesktopPolicy(h.Name), hostSelector(h), networkingv1.PolicyTypeIngress)
	p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
		From:  []networkingv1.NetworkPolicyPeer{podsIn(opts.RPCProxyNamespace, map[string]string{names.LabelApp: names.AppRPCProxy})},
		Ports: []networkingv1.NetworkPolicyPort{policyPort(corev1.ProtocolTCP, opts.DesktopPort)},
	}}
	return p
}

// BuildChannelReaderDeployment returns h's channel-reader Deployment in the
// channels namespace.
func BuildChannelReaderDeployment(h *clerumv1alpha1.Host, opts Options) *appsv1.Deployment {
	pod := hardenedPod()
	pod.AutomountServiceAccountToken = ptr.To(false)
	reader := container(ContainerChannelReader, opts.ChannelReaderImage, opts.ChannelReaderPullPolicy)
	reader.Ports = []corev1.ContainerPort{{Name: PortHandoff, ContainerPort: opts.ChannelReaderHandoffPort, Protocol: corev1.ProtocolTCP}}
	reader.ReadinessProbe = tcpProbe(PortHandoff)
	reader.Env = []corev1.EnvVar{
		{Name: EnvReaderHostName, Value: h.Name},
		{Name: EnvReaderHostNamespace, Value: opts.HostNamespace},
		{Name: EnvReaderHostURL, Value: hostURL(h, opts)},
		{Name: EnvReaderHandoffPort, Value: strconv.Itoa(int(opts.ChannelReaderHandoffPort))},
	}
	reader.VolumeMounts = []corev1.VolumeMount{{Name: volumeTmp, MountPath: TmpDir}}
	pod.Containers = []corev1.Container{reader}
	pod.Volumes = []corev1.Volume{emptyDir(volumeTmp)}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.ChannelsNamespace, Name: names.ChannelReader(h.Name), Labels: labels(h)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: readerSelector(h)},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: readerPodLabels(h)}, Spec: pod},
			// Recreate: one reader per Host at any time, so a rollout never
			// has two readers delivering the same channel traffic.
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

// BuildChannelReaderService returns h's channel-reader Service in the
// channels namespace, on the handoff port.
func BuildChannelReaderService(h *clerumv1alpha1.Host, opts Options) *corev1.Service {
	return service(opts.ChannelsNamespace, names.ChannelReader(h.Name), labels(h), readerSelector(h),
		[]corev1.ServicePort{servicePort(PortHandoff, opts.ChannelReaderHandoffPort)})
}

// BuildChannelReaderPolicy returns channel-reader-<host>-egress: h's
// channel-reader may resolve names (kube-dns, and NodeLocal DNSCache when
// configured) and open mcp-host's port on h's own pods; nothing else — no
// other Host, no Control API, no Internet. The policy isolates the reader's
// egress even where the channels namespace has no deny-all, which is why it
// carries its own DNS rule.
func BuildChannelReaderPolicy(h *clerumv1alpha1.Host, opts Options) *networkingv1.NetworkPolicy {
	p := policy(h, opts.ChannelsNamespace, names.ChannelReaderEgressPolicy(h.Name), readerSelector(h), networkingv1.PolicyTypeEgress)
	dns := []networkingv1.NetworkPolicyPort{policyPort(corev1.ProtocolUDP, dnsPort), policyPort(corev1.ProtocolTCP, dnsPort)}
	p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{podsIn(names.KubeSystem, map[string]string{names.KubeDNSLabelKey: names.KubeDNSLabelVal})},
		Ports: dns,
	}}
	if opts.NodeLocalDNSCIDR.IsValid() {
		p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: opts.NodeLocalDNSCIDR.String()}}},
			Ports: []networkingv1.NetworkPolicyPort{policyPort(corev1.ProtocolUDP, dnsPort), policyPort(corev1.ProtocolTCP, dnsPort)},
		})
	}
	p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
		To:    []networkingv1.NetworkPolicyPeer{podsIn(opts.HostNamespace, hostSelector(h))},
		Ports: []networkingv1.NetworkPolicyPort{policyPort(corev1.ProtocolTCP, opts.Port)},
	})
	return p
}

// hostURL is h's Service as channel-reader reaches it.
func hostURL(h *clerumv1alpha1.Host, opts Options) string {
	return fmt.Sprintf("http://%s.%s.svc.%s:%d", names.HostWorkload(h.Name), opts.HostNamespace, opts.ClusterDomain, opts.Port)
}

// hardenedPod is the pod every Host and channel-reader pod starts from,
// with the API server's defaults.
func hardenedPod() corev1.PodSpec {
	return corev1.PodSpec{
		EnableServiceLinks:            ptr.To(false),
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		DNSPolicy:                     corev1.DNSClusterFirst,
		SchedulerName:                 corev1.DefaultSchedulerName,
		SecurityContext:               workload.PodSecurity(PodUser, PodGroup),
	}
}

// container is a hardened container with the API server's defaults.
func container(name, image string, pull corev1.PullPolicy) corev1.Container {
	return workload.Container(name, image, pull)
}

// tcpProbe is ready once the named port accepts connections.
func tcpProbe(port string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(port)}},
		TimeoutSeconds:   1,
		PeriodSeconds:    10,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

func service(namespace, name string, labels, selector map[string]string, ports []corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeClusterIP,
			Selector:              selector,
			Ports:                 ports,
			SessionAffinity:       corev1.ServiceAffinityNone,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromString(name)}
}

// policy is a NetworkPolicy of h's, of policy type host (docs/names.md), with
// its policy types set explicitly.
func policy(h *clerumv1alpha1.Host, namespace, name string, pods map[string]string, typ networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	l := labels(h)
	l[names.LabelPolicyType] = names.PolicyTypeHost
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: l},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: pods},
			PolicyTypes: []networkingv1.PolicyType{typ},
		},
	}
}

// podsIn is a peer of the pods matching pods in namespace, selected by its
// immutable name label.
func podsIn(namespace string, pods map[string]string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{names.NamespaceNameKey: namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: pods},
	}
}

func policyPort(protocol corev1.Protocol, number int32) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(number)
	return networkingv1.NetworkPolicyPort{Protocol: &protocol, Port: &p}
}
