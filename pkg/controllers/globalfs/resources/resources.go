// Package resources is the GlobalFileSystem reconciler's plan: pure
// functions from a GlobalFileSystem and what the reconciler reads (the
// Postgres Secret, the JWT ConfigMap, the other GlobalFileSystems, the
// configuration) to the children HCC writes for it. The reconciler
// (pkg/controllers/globalfs) ensures what MakeChildren returns, and render
// prints what Plan returns, which is the same struct flattened.
//
// Objects in, objects out, no client: nothing here imports client-go, the
// kit or the generated clientsets. The gfsc container interface —
// environment, arguments, mounted paths, port — and what the egress policy
// allows are written down in docs/globalfilesystem.md and pinned by the
// golden tests beside it. Builders emit every field the API server would
// default, so a child that matches the builder is never rewritten
// (kittest.RoundTrip proves it). They set no owner references: the kit
// adds them, and Plan prints them with an empty uid.
package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/workload"
)

// Names of the containers, ports and volumes of the pods HCC runs for a
// GlobalFileSystem (docs/globalfilesystem.md).
const (
	// ContainerGFSC runs CONTEXT_MAPPER_GFSC_IMAGE, first in the pod.
	ContainerGFSC = "gfsc"
	// ContainerSeed runs the same image in the seed Job, with SeedArgs.
	ContainerSeed = "seed-root"
	// ContainerWaitForPostgres is the init container of both pods
	// (CONTEXT_MAPPER_GFSC_INIT_IMAGE).
	ContainerWaitForPostgres = "wait-for-postgres"

	// PortHTTP names gfsc's port (CONTEXT_MAPPER_GFSC_PORT).
	PortHTTP = "http"

	volumeTmp = "tmp"
	// TmpDir is the only writable path of every container: their root
	// filesystems are read-only.
	TmpDir = "/tmp"
)

// Environment variables of the gfsc and seed containers
// (docs/globalfilesystem.md).
const (
	EnvName          = "GFSC_GLOBAL_FILESYSTEM"
	EnvNamespace     = "GFSC_NAMESPACE"
	EnvPort          = "GFSC_PORT"
	EnvDriveName     = "GFSC_DRIVE_NAME"
	EnvTokenAudience = "GFSC_TOKEN_AUDIENCE"
	// EnvDatabaseURL holds the Postgres connection string, from the
	// Postgres Secret's key by secretKeyRef: it is never in the pod spec.
	EnvDatabaseURL = "GFSC_DATABASE_URL"
	// EnvPostgresHost and EnvPostgresPort, only in the init container,
	// are the host and port of the connection string (PostgresWaitTarget):
	// the init container never sees the connection string or its password.
	EnvPostgresHost = "GFSC_POSTGRES_HOST"
	EnvPostgresPort = "GFSC_POSTGRES_PORT"
	// EnvJWTPublicKey holds the PEM public key gfsc verifies access tokens
	// with, from the JWT ConfigMap's key by configMapKeyRef.
	EnvJWTPublicKey = "GFSC_JWT_PUBLIC_KEY"
)

// Labels and annotations of the objects built here besides the identity
// labels of docs/names.md.
const (
	// LabelComponent tells the gfsc pods (ComponentGFSC), which the
	// Deployment and Service select, from the seed Job's (ComponentSeed);
	// the egress policy selects both.
	LabelComponent = "clerum.io/component"
	ComponentGFSC  = "gfsc"
	ComponentSeed  = "seed"
	// AnnotationConfigDigest, on the gfsc pod template and the seed Job, is
	// ConfigDigest of the values the pods read from the Postgres Secret and
	// the JWT ConfigMap: a rotated value rolls the pods (and re-creates a
	// seed Job that has not succeeded).
	AnnotationConfigDigest = "clerum.io/config-digest"
	// AnnotationDrive, on the seed Job, is the drive it seeds.
	AnnotationDrive = "clerum.io/drive"
)

// The numeric identity every gfsc and seed container runs as.
const (
	PodUser  int64 = 65532
	PodGroup int64 = 65532
)

// Seed Job limits: a few retries of a transient failure, then Failed; a
// finished Job is removed after an hour, which also retries a failed seed
// (the next sync creates a new Job).
const (
	seedBackoffLimit  int32 = 3
	seedDeadline      int64 = 15 * 60
	SeedTTL           int32 = 60 * 60
	dnsPort           int32 = 53
	defaultPGPort           = "5432"
	waitForPostgresSh       = `set -eu
host=${` + EnvPostgresHost + `:-}
port=${` + EnvPostgresPort + `:-}
if [ -z "$host" ]; then
  echo "no Postgres host was taken from the connection string; not waiting"
  exit 0
fi
# Only a plain host name or address and a port are waited for (HCC checked
# them too): an option-like name could be read by nc as an option.
case "$host" in
  -*|*[!A-Za-z0-9.:_-]*) echo "cannot tell one Postgres host; not waiting"; exit 0 ;;
esac
case "$port" in
  ''|*[!0-9]*) echo "cannot tell the Postgres port; not waiting"; exit 0 ;;
esac
# At most five minutes: gfsc itself retries, and its readiness says more.
tries=0
until nc -z -w 2 "$host" "$port"; do
  tries=$((tries + 1))
  if [ "$tries" -ge 150 ]; then
    echo "Postgres did not accept connections in five minutes; starting anyway"
    exit 0
  fi
  echo "waiting for Postgres to accept connections"
  sleep 2
done
`
)

// SeedArgs are the seed container's arguments for drive.
func SeedArgs(drive string) []string { return []string{"seed-root", "--drive", drive} }

// Options is the part of the configuration the builders read.
type Options struct {
	ControlPlaneNamespace string // CONTEXT_MAPPER_CONTROL_PLANE_NAMESPACE: where Postgres runs
	ClusterDomain         string // CONTEXT_MAPPER_CLUSTER_DOMAIN

	Image             string            // CONTEXT_MAPPER_GFSC_IMAGE
	ImagePullPolicy   corev1.PullPolicy // CONTEXT_MAPPER_GFSC_IMAGE_PULL_POLICY
	ImagePullSecret   string            // CONTEXT_MAPPER_GFSC_IMAGE_PULL_SECRET; empty: none
	PriorityClassName string            // CONTEXT_MAPPER_GFSC_PRIORITY_CLASS; empty: none
	InitImage         string            // CONTEXT_MAPPER_GFSC_INIT_IMAGE
	Port              int32             // CONTEXT_MAPPER_GFSC_PORT
	Resources         corev1.ResourceRequirements

	PostgresAppLabel  string // CONTEXT_MAPPER_GFS_POSTGRES_APP_LABEL
	PostgresPort      int32  // CONTEXT_MAPPER_GFS_POSTGRES_PORT
	PostgresSecret    string // CONTEXT_MAPPER_GFS_PG_SECRET
	PostgresSecretKey string // CONTEXT_MAPPER_GFS_PG_SECRET_KEY
	JWTConfigMap      string // CONTEXT_MAPPER_GFS_JWT_CONFIGMAP
	JWTConfigMapKey   string // CONTEXT_MAPPER_GFS_JWT_CONFIGMAP_KEY
	DriveName         string // CONTEXT_MAPPER_GFS_DRIVE_NAME: the default of spec.driveName
	TokenAudience     string // CONTEXT_MAPPER_GFS_TOKEN_AUDIENCE

	// NodeLocalDNSCIDR (CONTEXT_MAPPER_NODELOCAL_DNS_CIDR), when valid, is
	// a DNS destination besides kube-dns.
	NodeLocalDNSCIDR netip.Prefix

	// WaitHost and WaitPort are what the init container waits for: the
	// host and port of the Postgres connection string, which the
	// reconciler reads (PostgresWaitTarget) so the init container needs no
	// password; render computes them from the raw value it reads from its
	// input. Empty: it does not wait.
	WaitHost, WaitPort string
}

// PostgresWaitTarget returns the host and port the init container waits
// for, from the connection string: a postgres:// or postgresql:// URL with
// one plain host (a name, or an address, bracketed IPv6 included) and a
// numeric port (default 5432). Anything else — not a URL, several hosts, a
// host that could be read as an option — gives "", "": not waited for.
// Errors never reach a message: the string holds a password.
func PostgresWaitTarget(connectionString string) (host, port string) {
	u, err := url.Parse(strings.TrimSpace(connectionString))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Opaque != "" {
		return "", ""
	}
	host, port = u.Hostname(), u.Port()
	if port == "" {
		port = defaultPGPort
	}
	if host == "" || strings.HasPrefix(host, "-") || strings.ContainsFunc(host, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".:_-", r))
	}) {
		return "", ""
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", ""
	}
	return host, port
}

// OptionsFrom returns the builders' options from the configuration.
func OptionsFrom(cfg *config.Config) Options {
	g := cfg.GFS
	return Options{
		ControlPlaneNamespace: cfg.Namespaces.ControlPlane,
		ClusterDomain:         cfg.Core.ClusterDomain,
		Image:                 g.Image,
		ImagePullPolicy:       g.ImagePullPolicy,
		ImagePullSecret:       g.ImagePullSecret,
		PriorityClassName:     g.PriorityClassName,
		InitImage:             g.InitImage,
		Port:                  g.Port,
		Resources:             *g.Resources.DeepCopy(),
		PostgresAppLabel:      g.PostgresAppLabel,
		PostgresPort:          g.PostgresPort,
		PostgresSecret:        g.PostgresSecret,
		PostgresSecretKey:     g.PostgresSecretKey,
		JWTConfigMap:          g.JWTConfigMap,
		JWTConfigMapKey:       g.JWTConfigMapKey,
		DriveName:             g.DriveName,
		TokenAudience:         g.TokenAudience,
		NodeLocalDNSCIDR:      cfg.NetPol.NodeLocalDNSCIDR,
	}
}

// DriveName is the drive g's gfsc serves: spec.driveName, else the default.
func DriveName(g *clerumv1alpha1.GlobalFileSystem, opts Options) string {
	if g.Spec.DriveName != "" {
		return g.Spec.DriveName
	}
	return opts.DriveName
}

// Endpoint is the in-cluster URL of g's gfsc Service, for status.endpoint.
func Endpoint(g *clerumv1alpha1.GlobalFileSystem, opts Options) string {
	return fmt.Sprintf("http://%s.%s.svc.%s:%d", names.GFSCWorkload(g.Name), g.Namespace, opts.ClusterDomain, opts.Port)
}

// SeedJobName names g's seed Job. A Job's name is also a label value on its
// pods, so it is fitted to 63 characters.
func SeedJobName(gfs string) string { return names.GFSCSeedJob(gfs) }

// ConfigDigest is the digest of what the pods read from the cluster: the
// Postgres Secret key's value as the Secret cache holds it (itself a SHA-256
// digest, never the value) and the JWT ConfigMap key's PEM. It reveals
// neither, and changes when either does.
func ConfigDigest(secretValueDigest []byte, publicKeyPEM string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:", len(secretValueDigest))
	h.Write(secretValueDigest)
	fmt.Fprintf(h, "%d:%s", len(publicKeyPEM), publicKeyPEM)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// labels are the labels of every object built for g, and of its pods.
func labels(g *clerumv1alpha1.GlobalFileSystem) map[string]string {
	return map[string]string{
		names.LabelManagedBy:        names.ManagedByValue,
		names.LabelGlobalFileSystem: names.Label(g.Name),
	}
}

func component(g *clerumv1alpha1.GlobalFileSystem, c string) map[string]string {
	l := labels(g)
	l[LabelComponent] = c
	return l
}

// BuildDeployment returns g's gfsc Deployment. digest is ConfigDigest of
// the referenced values, which the caller has validated.
func BuildDeployment(g *clerumv1alpha1.GlobalFileSystem, opts Options, digest string) *appsv1.Deployment {
	pod := podSpec(opts, corev1.RestartPolicyAlways)
	gfsc := container(ContainerGFSC, opts.Image, opts.ImagePullPolicy)
	gfsc.Ports = []corev1.ContainerPort{{Name: PortHTTP, ContainerPort: opts.Port, Protocol: corev1.ProtocolTCP}}
	gfsc.ReadinessProbe = tcpProbe(PortHTTP)
	gfsc.Resources = *opts.Resources.DeepCopy()
	gfsc.Env = append(commonEnv(g, opts),
		corev1.EnvVar{Name: EnvPort, Value: strconv.Itoa(int(opts.Port))},
		corev1.EnvVar{Name: EnvTokenAudience, Value: opts.TokenAudience},
		corev1.EnvVar{Name: EnvJWTPublicKey, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: opts.JWTConfigMap}, Key: opts.JWTConfigMapKey,
		}}},
	)
	pod.InitContainers = []corev1.Container{waitForPostgres(opts)}
	pod.Containers = []corev1.Container{gfsc}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: names.GFSCWorkload(g.Name), Labels: labels(g)},
		Spec: appsv1.DeploymentSpec{
			// One writer per drive: gfsc is the drive's only writer.
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: component(g, ComponentGFSC)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: component(g, ComponentGFSC),
					Annotations: map[string]string{AnnotationConfigDigest: digest}},
				Spec: pod,
			},
			// Recreate: a rollout never runs two writers of one drive.
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}
}

// DeployedDrive returns the drive a live gfsc Deployment serves, or "".
func DeployedDrive(d *appsv1.Deployment) string {
	if d == nil {
		return ""
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != ContainerGFSC {
			continue
		}
		for _, e := range c.Env {
			if e.Name == EnvDriveName {
				return e.Value
			}
		}
	}
	return ""
}

// BuildSeedJob returns g's seed Job: the gfsc image run once with SeedArgs,
// which create the drive's root directory if it is missing (idempotent).
func BuildSeedJob(g *clerumv1alpha1.GlobalFileSystem, opts Options, digest string) *batchv1.Job {
	drive := DriveName(g, opts)
	pod := podSpec(opts, corev1.RestartPolicyNever)
	seed := container(ContainerSeed, opts.Image, opts.ImagePullPolicy)
	seed.Args = SeedArgs(drive)
	seed.Resources = *opts.Resources.DeepCopy()
	seed.Env = commonEnv(g, opts)
	pod.InitContainers = []corev1.Container{waitForPostgres(opts)}
	pod.Containers = []corev1.Container{seed}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: SeedJobName(g.Name), Labels: labels(g),
			Annotations: map[string]string{AnnotationDrive: drive, AnnotationConfigDigest: digest}},
		Spec: batchv1.JobSpec{
			Parallelism:             ptr.To[int32](1),
			Completions:             ptr.To[int32](1),
			BackoffLimit:            ptr.To(seedBackoffLimit),
			ActiveDeadlineSeconds:   ptr.To(seedDeadline),
			TTLSecondsAfterFinished: ptr.To(SeedTTL),
			CompletionMode:          ptr.To(batchv1.NonIndexedCompletion),
			Suspend:                 ptr.To(false),
			Template:                corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: component(g, ComponentSeed)}, Spec: pod},
		},
	}
}

// ReasonDriveConflict is the Ready reason (False) and Warning event of a
// GlobalFileSystem that does not hold its drive: an older one names it, or
// another's gfsc still serves it.
const ReasonDriveConflict = "DriveConflict"

// EventSeedJobUnmarked is the Warning event of a seed Job that carries
// HCC's labels but not a valid mark: it is deleted and created anew.
const EventSeedJobUnmarked = "SeedJobUnmarked"

// SeedJobMark is HCC's mark on a seed Job (docs/globalfilesystem.md, "The
// seed Job's mark"): an HMAC over the GlobalFileSystem's UID, the Job's
// namespace, name and UID, and the drive and configuration digest its
// annotations name. The Job's UID stands for its spec: a Job's pod
// template never changes, and HCC marks only a Job it has just created
// from BuildSeedJob, so a mark copied onto any other Job — another name,
// another GlobalFileSystem, a re-created one — does not verify.
func SeedJobMark(key mark.Key, g *clerumv1alpha1.GlobalFileSystem, j *batchv1.Job) string {
	return key.Sign(SeedMarkFields(g, j)...)
}

// SeedJobMarked reports whether j carries a valid SeedJobMark.
func SeedJobMarked(key mark.Key, g *clerumv1alpha1.GlobalFileSystem, j *batchv1.Job) bool {
	return key.Verify(j.Annotations[mark.Annotation], SeedMarkFields(g, j)...)
}

// SeedMarkFields are the fields SeedJobMark signs, in order.
func SeedMarkFields(g *clerumv1alpha1.GlobalFileSystem, j *batchv1.Job) []string {
	return []string{string(g.UID), j.Namespace, j.Name, string(j.UID), j.Annotations[AnnotationDrive], j.Annotations[AnnotationConfigDigest]}
}

// SeedJobState reads a seed Job's outcome from its conditions.
func SeedJobState(j *batchv1.Job) (complete, failed bool) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			complete = true
		case batchv1.JobFailed:
			failed = true
		}
	}
	return complete, failed
}

// commonEnv is the environment of both the gfsc and the seed containers.
func commonEnv(g *clerumv1alpha1.GlobalFileSystem, opts Options) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: EnvName, Value: g.Name},
		{Name: EnvNamespace, Value: g.Namespace},
		{Name: EnvDriveName, Value: DriveName(g, opts)},
		databaseURL(opts),
	}
}

func databaseURL(opts Options) corev1.EnvVar {
	return corev1.EnvVar{Name: EnvDatabaseURL, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: opts.PostgresSecret}, Key: opts.PostgresSecretKey,
	}}}
}

// waitForPostgres is the init container: it waits until the connection
// string's host (opts.WaitHost, opts.WaitPort: never the string itself,
// which holds the password) accepts TCP connections, so gfsc and the seed start against a reachable database
// instead of crash-looping while Postgres starts. It needs no volume and
// no privilege: it runs as PodUser with every capability dropped.
func waitForPostgres(opts Options) corev1.Container {
	c := container(ContainerWaitForPostgres, opts.InitImage, opts.ImagePullPolicy)
	c.Command = []string{"sh", "-c", waitForPostgresSh}
	c.Env = []corev1.EnvVar{{Name: EnvPostgresHost, Value: opts.WaitHost}, {Name: EnvPostgresPort, Value: opts.WaitPort}}
	c.Resources = *opts.Resources.DeepCopy()
	c.VolumeMounts = []corev1.VolumeMount{{Name: volumeTmp, MountPath: TmpDir}}
	return c
}

// BuildService returns g's gfsc Service.
func BuildService(g *clerumv1alpha1.GlobalFileSystem, opts Options) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: names.GFSCWorkload(g.Name), Labels: labels(g)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: component(g, ComponentGFSC),
			Ports: []corev1.ServicePort{{Name: PortHTTP, Protocol: corev1.ProtocolTCP, Port: opts.Port,
				TargetPort: intstr.FromString(PortHTTP)}},
			SessionAffinity:       corev1.ServiceAffinityNone,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

// BuildEgressPolicy returns gfsc-<G>-egress: g's pods (gfsc and the seed)
// may resolve names (kube-dns, and NodeLocal DNSCache when configured) and
// open the Postgres port on the Postgres pods of the control-plane
// namespace; nothing else. It carries its own DNS rule so that it isolates
// the pods' egress even where the GFS namespace has no deny-all.
func BuildEgressPolicy(g *clerumv1alpha1.GlobalFileSystem, opts Options) *networkingv1.NetworkPolicy {
	l := labels(g)
	l[names.LabelPolicyType] = names.PolicyTypeFileSystem
	dns := func() []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{policyPort(corev1.ProtocolUDP, dnsPort), policyPort(corev1.ProtocolTCP, dnsPort)}
	}
	egress := []networkingv1.NetworkPolicyEgressRule{
		{
			To:    []networkingv1.NetworkPolicyPeer{podsIn(opts.ControlPlaneNamespace, map[string]string{names.LabelApp: opts.PostgresAppLabel})},
			Ports: []networkingv1.NetworkPolicyPort{policyPort(corev1.ProtocolTCP, opts.PostgresPort)},
		},
		{
			To:    []networkingv1.NetworkPolicyPeer{podsIn(names.KubeSystem, map[string]string{names.KubeDNSLabelKey: names.KubeDNSLabelVal})},
			Ports: dns(),
		},
	}
	if opts.NodeLocalDNSCIDR.IsValid() {
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: opts.NodeLocalDNSCIDR.String()}}},
			Ports: dns(),
		})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: names.GFSCEgressPolicy(g.Name), Labels: l},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels(g)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      egress,
		},
	}
}

// podSpec is the hardened pod of gfsc and the seed, with the API server's
// defaults. No container talks to the Kubernetes API: no token.
func podSpec(opts Options, restart corev1.RestartPolicy) corev1.PodSpec {
	pod := corev1.PodSpec{
		EnableServiceLinks:            ptr.To(false),
		AutomountServiceAccountToken:  ptr.To(false),
		RestartPolicy:                 restart,
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		DNSPolicy:                     corev1.DNSClusterFirst,
		SchedulerName:                 corev1.DefaultSchedulerName,
		PriorityClassName:             opts.PriorityClassName,
		SecurityContext:               workload.PodSecurity(PodUser, PodGroup),
		Volumes:                       []corev1.Volume{{Name: volumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	if opts.ImagePullSecret != "" {
		pod.ImagePullSecrets = []corev1.LocalObjectReference{{Name: opts.ImagePullSecret}}
	}
	return pod
}

// container is a hardened container with the API server's defaults and
// /tmp mounted.
func container(name, image string, pull corev1.PullPolicy) corev1.Container {
	c := workload.Container(name, image, pull)
	c.VolumeMounts = []corev1.VolumeMount{{Name: volumeTmp, MountPath: TmpDir}}
	return c
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
