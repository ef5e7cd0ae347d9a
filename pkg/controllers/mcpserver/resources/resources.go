// Package resources is the McpServer operator's plan: pure functions from an
// McpServer and what the operator reads for it (its Secrets' digests, the
// image allowlist, the egress gate) to its children — a Deployment and a
// Service (stdio servers with the stdio bridge, remote servers behind the
// platform's egress proxy and its ConfigMap) — or the reason it gets none.
// The controller's sync and `hcc-controller render` both plan through it;
// it imports no client.
//
// This file holds the builders: objects in, objects out. The container
// interfaces they assume — the stdio shim and bridge, the egress proxy's
// configuration — are written down in docs/containers.md and pinned by the
// golden tests beside it. Builders emit every field the API server would
// default, so a child that matches the builder is never rewritten
// (kittest.RoundTrip proves it against a real API server).
package resources

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/workload"
)

// Names of the containers, volumes and files of an McpServer pod
// (docs/containers.md).
const (
	// ContainerServer runs spec.image: the server itself, first in the pod.
	ContainerServer = "mcp-server"
	// ContainerStdioBridge serves streamable-http on the transport port and
	// speaks to a stdio server through the shim's socket.
	ContainerStdioBridge = "stdio-bridge"
	// ContainerStdioShimInstall copies the shim into the shared volume.
	ContainerStdioShimInstall = "stdio-shim-install"
	// ContainerEgressProxy runs the platform's nginx for a remote server.
	ContainerEgressProxy = "egress-proxy"

	volumeStdio       = "hcc-stdio"
	volumeProxyConfig = "egress-proxy-config"
	volumeProxyTmp    = "egress-proxy-tmp"

	// StdioDir is where the shim and its socket live in both containers.
	StdioDir = "/hcc-stdio"
	// StdioShim is the shim binary the server container runs, which starts
	// the server's command with its stdin and stdout on StdioSocket.
	StdioShim = StdioDir + "/stdio-shim"
	// StdioSocket is the Unix socket the shim listens on.
	StdioSocket = StdioDir + "/stdio.sock"

	// ProxyConfigDir is where the egress proxy reads nginx.conf.
	ProxyConfigDir = "/etc/hcc-egress-proxy"
	// ProxyConfigKey is the key of nginx.conf in the proxy ConfigMap.
	ProxyConfigKey = "nginx.conf"

	// portName names the MCP port of the serving container and Service.
	portName = "mcp"
)

// AnnotationSecretDigest on the pod template holds a digest of the values
// of the Secret keys the pods read, so a rotated value rolls the pods and
// nothing else does.
const AnnotationSecretDigest = "clerum.io/secret-digest"

// The numeric identity every McpServer pod runs as (docs/containers.md): an
// image whose USER is root still starts as this non-root user, so MCP
// images must tolerate running as an arbitrary non-root UID.
const (
	PodUser  int64 = 65532
	PodGroup int64 = 65532
)

// Options is the part of the configuration the builders read.
type Options struct {
	PullPolicy           corev1.PullPolicy // CONTEXT_MAPPER_MCPSERVER_IMAGE_PULL_POLICY
	StdioBridgeImage     string            // CONTEXT_MAPPER_STDIO_BRIDGE_IMAGE
	StdioBridgeResources corev1.ResourceRequirements
	EgressProxyImage     string // CONTEXT_MAPPER_EGRESS_PROXY_IMAGE
	// DigestKey keys the pod template's secret digest (DigestKey).
	DigestKey []byte
}

// Errors that keep a server from being built; the sync reports them as a
// condition and builds nothing.
var (
	ErrNoImage      = errors.New("spec.image is required for a server that is not remote")
	ErrStdioCommand = errors.New("a stdio server needs spec.command: the stdio shim starts it, so the image's entrypoint cannot be used")
	ErrEnvSecretRef = errors.New("spec.env may not read Secrets or ConfigMaps through valueFrom; name Secret keys in spec.envSecret, which is validated")
	ErrRemoteURL    = errors.New("spec.remote.url must be an absolute http or https URL without user information, query or fragment")
	// ErrImageReference: spec.image does not normalize, so there is no
	// fully qualified reference to run (the allowlist refuses it too).
	ErrImageReference = errors.New("spec.image is not a valid image reference")
	// ErrReservedName: the server's pods would carry a platform workload's
	// app label and be selected by that workload's policies
	// (names.ReservedMcpServerNames). The CRD refuses such names for new
	// objects; an older one gets no workload.
	ErrReservedName = errors.New("metadata.name is a platform app label value reserved for a platform workload; recreate the server under another name")
)

// MaxStdioReplicas caps a stdio server: one process behind one bridge.
const MaxStdioReplicas int32 = 1

// Replicas returns the replicas of s's Deployment and whether the stdio cap
// lowered them. A disabled server runs none.
func Replicas(s *clerumv1alpha1.McpServer) (replicas int32, capped bool) {
	if !s.Spec.IsEnabled() {
		return 0, false
	}
	replicas = ptr.Deref(s.Spec.Replicas, 1)
	if s.Spec.Remote == nil && s.Spec.Transport.Type == clerumv1alpha1.TransportStdio && replicas > MaxStdioReplicas {
		return MaxStdioReplicas, true
	}
	return replicas, false
}

// ServedTransport is what mcp-host is offered: stdio servers are reached as
// streamable-http at the bridge; the path defaults by type.
func ServedTransport(s *clerumv1alpha1.McpServer) (clerumv1alpha1.TransportType, string) {
	typ := s.Spec.Transport.Type
	if typ == clerumv1alpha1.TransportStdio {
		typ = clerumv1alpha1.TransportStreamableHTTP
	}
	if p := s.Spec.Transport.Path; p != "" {
		return typ, p
	}
	if typ == clerumv1alpha1.TransportSSE {
		return typ, "/sse"
	}
	return typ, "/mcp"
}

// labels are the labels of every object built for s and of its pods.
func labels(s *clerumv1alpha1.McpServer) map[string]string {
	return map[string]string{
		names.LabelApp:       names.Label(s.Name),
		names.LabelManagedBy: names.ManagedByValue,
		names.LabelMcpServer: names.Label(s.Name),
	}
}

// selector selects s's pods; it is immutable once the Deployment exists.
func selector(s *clerumv1alpha1.McpServer) map[string]string {
	return map[string]string{names.LabelApp: names.Label(s.Name), names.LabelMcpServer: names.Label(s.Name)}
}

// BuildDeployment returns s's Deployment in namespace. secretDigest is the
// digest of the envSecret values the pods read ("" when none).
func BuildDeployment(s *clerumv1alpha1.McpServer, namespace string, opts Options, secretDigest string) (*appsv1.Deployment, error) {
	pod, err := buildPodSpec(s, opts)
	if err != nil {
		return nil, err
	}
	replicas, _ := Replicas(s)
	template := metav1.ObjectMeta{Labels: labels(s)}
	if secretDigest != "" {
		template.Annotations = map[string]string{AnnotationSecretDigest: secretDigest}
	}
	maxUnavailable, maxSurge := intstr.FromString("25%"), intstr.FromString("25%")
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names.McpServerWorkload(s.Name), Labels: labels(s)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector(s)},
			Template: corev1.PodTemplateSpec{ObjectMeta: template, Spec: pod},
			// The API server's defaults, spelled out so the child compares
			// equal to what the server keeps.
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable, MaxSurge: &maxSurge},
			},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		},
	}, nil
}

// BuildService returns s's Service in namespace: the MCP port, to the pods
// labelled app: S.
func BuildService(s *clerumv1alpha1.McpServer, namespace string) *corev1.Service {
	port := s.Spec.Transport.EffectivePort()
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names.McpServerWorkload(s.Name), Labels: labels(s)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{names.LabelApp: names.Label(s.Name)},
			Ports: []corev1.ServicePort{{
				Name: portName, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port),
			}},
			SessionAffinity:       corev1.ServiceAffinityNone,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

// BuildProxyConfig returns the ConfigMap holding a remote server's nginx
// configuration, or nil for a server that is not remote.
func BuildProxyConfig(s *clerumv1alpha1.McpServer, namespace string) (*corev1.ConfigMap, error) {
	if s.Spec.Remote == nil {
		return nil, nil
	}
	conf, err := nginxConfig(s)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names.McpServerProxyConfig(s.Name), Labels: labels(s)},
		Data:       map[string]string{ProxyConfigKey: conf},
	}, nil
}

// RemoteHost returns the host and port a remote server's proxy must reach,
// for the check that one of the server's egress bindings covers them.
func RemoteHost(s *clerumv1alpha1.McpServer) (host string, port int32, err error) {
	u, err := remoteURL(s)
	if err != nil {
		return "", 0, err
	}
	p, _ := strconv.Atoi(u.Port())
	return u.Hostname(), int32(p), nil
}

func remoteURL(s *clerumv1alpha1.McpServer) (*url.URL, error) {
	u, err := url.Parse(s.Spec.Remote.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		u.Opaque != "" || u.Fragment != "" || u.RawQuery != "" || u.ForceQuery || strings.ContainsAny(u.Host, " \t\n;{}'\"\\$") {
		return nil, ErrRemoteURL
	}
	if u.Port() == "" {
		u.Host += map[string]string{"https": ":443", "http": ":80"}[u.Scheme]
	}
	if _, err := strconv.ParseUint(u.Port(), 10, 16); err != nil {
		return nil, ErrRemoteURL
	}
	// The escaped path goes into nginx.conf: nothing in it may end a
	// directive, open a block or name a variable.
	if strings.ContainsAny(u.EscapedPath(), " \t\n;{}'\"\\$") {
		return nil, ErrRemoteURL
	}
	return u, nil
}

// nginxConfig renders the egress proxy's configuration (docs/containers.md):
// listen on the transport port; the served path (transport.path, or the
// type's default) goes to the remote URL, and every other path to the same
// path at the remote origin (an SSE server announces where to post
// messages); verify the upstream's certificate for https; never buffer (SSE
// and streamable-http stream). Every value written into the file was parsed
// from the URL and is free of nginx syntax.
func nginxConfig(s *clerumv1alpha1.McpServer) (string, error) {
	u, err := remoteURL(s)
	if err != nil {
		return "", err
	}
	_, served := ServedTransport(s)
	origin := u.Scheme + "://" + u.Host
	// The Host header names the port unless it is the scheme's default
	// (RFC 9110 §7.2); remoteURL always spelled the port out.
	host := strings.TrimSuffix(u.Host, map[string]string{"https": ":443", "http": ":80"}[u.Scheme])
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by host-context-controller for McpServer %s; do not edit.
worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path /tmp/client_body;
  proxy_temp_path /tmp/proxy;
  fastcgi_temp_path /tmp/fastcgi;
  uwsgi_temp_path /tmp/uwsgi;
  scgi_temp_path /tmp/scgi;
  server {
    listen %d;
    proxy_http_version 1.1;
    proxy_set_header Host %s;
    proxy_set_header Connection "";
    proxy_buffering off;
    proxy_cache off;
    proxy_read_timeout 1h;
`, s.Name, s.Spec.Transport.EffectivePort(), host)
	if u.Scheme == "https" {
		fmt.Fprintf(&b, `    proxy_ssl_server_name on;
    proxy_ssl_name %s;
    proxy_ssl_verify on;
    proxy_ssl_verify_depth 3;
    proxy_ssl_trusted_certificate /etc/ssl/certs/ca-certificates.crt;
`, u.Hostname())
	}
	fmt.Fprintf(&b, `    location = %s {
      proxy_pass %s%s;
    }
    location / {
      proxy_pass %s;
    }
  }
}
`, served, origin, u.EscapedPath(), origin)
	return b.String(), nil
}

// buildPodSpec returns the hardened pod of s: the serving container first.
func buildPodSpec(s *clerumv1alpha1.McpServer, opts Options) (corev1.PodSpec, error) {
	pod := corev1.PodSpec{
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr.To[int64](30),
		DNSPolicy:                     corev1.DNSClusterFirst,
		SchedulerName:                 corev1.DefaultSchedulerName,
		SecurityContext:               workload.PodSecurity(PodUser, PodGroup),
	}
	port := s.Spec.Transport.EffectivePort()
	switch {
	case s.Spec.Remote != nil:
		// The container fields, if set, are ignored (IgnoredFields).
		if _, err := remoteURL(s); err != nil {
			return pod, err
		}
		proxy := container(ContainerEgressProxy, opts.EgressProxyImage, opts.PullPolicy)
		proxy.Args = []string{"-c", ProxyConfigDir + "/" + ProxyConfigKey, "-g", "daemon off;"}
		proxy.Ports = servingPort(port)
		proxy.ReadinessProbe = tcpProbe()
		proxy.Resources = opts.StdioBridgeResources
		proxy.VolumeMounts = []corev1.VolumeMount{
			{Name: volumeProxyConfig, MountPath: ProxyConfigDir, ReadOnly: true},
			{Name: volumeProxyTmp, MountPath: "/tmp"},
		}
		pod.Containers = []corev1.Container{proxy}
		pod.Volumes = []corev1.Volume{
			{Name: volumeProxyConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: names.McpServerProxyConfig(s.Name)},
				DefaultMode:          ptr.To[int32](0o644),
			}}},
			emptyDir(volumeProxyTmp),
		}
		return pod, nil
	case s.Spec.Image == "":
		return pod, ErrNoImage
	}

	// The container runs the fully qualified reference the allowlist
	// judged, never the author's spelling of it: the runtime then pulls
	// exactly the repository the verdict names.
	image, err := imagepolicy.Normalize(s.Spec.Image)
	if err != nil {
		return pod, fmt.Errorf("%w: it %v", ErrImageReference, err)
	}
	server := container(ContainerServer, image, opts.PullPolicy)
	env, err := serverEnv(s)
	if err != nil {
		return pod, err
	}
	server.Env = env
	if s.Spec.Resources != nil {
		server.Resources = *s.Spec.Resources.DeepCopy()
	}
	if s.Spec.Transport.Type != clerumv1alpha1.TransportStdio {
		server.Command, server.Args = clone(s.Spec.Command), clone(s.Spec.Args)
		server.Ports = servingPort(port)
		server.ReadinessProbe = tcpProbe()
		pod.Containers = []corev1.Container{server}
		return pod, nil
	}

	// stdio: the shim, copied from the bridge image into a shared volume,
	// starts the server's command with stdin and stdout on a Unix socket;
	// the bridge serves streamable-http on the transport port and relays to
	// the socket. Nothing is asked of the author's image but spec.command.
	if len(s.Spec.Command) == 0 {
		return pod, ErrStdioCommand
	}
	server.Command = append([]string{StdioShim, "--socket", StdioSocket, "--"}, s.Spec.Command...)
	server.Args = clone(s.Spec.Args)
	server.VolumeMounts = []corev1.VolumeMount{{Name: volumeStdio, MountPath: StdioDir}}

	install := container(ContainerStdioShimInstall, opts.StdioBridgeImage, opts.PullPolicy)
	install.Args = []string{"install-shim", StdioShim}
	install.Resources = opts.StdioBridgeResources
	install.VolumeMounts = []corev1.VolumeMount{{Name: volumeStdio, MountPath: StdioDir}}

	_, path := ServedTransport(s)
	bridge := container(ContainerStdioBridge, opts.StdioBridgeImage, opts.PullPolicy)
	bridge.Args = []string{"serve", "--listen", ":" + strconv.Itoa(int(port)), "--path", path, "--socket", StdioSocket}
	bridge.Ports = servingPort(port)
	bridge.ReadinessProbe = tcpProbe()
	bridge.Resources = opts.StdioBridgeResources
	bridge.VolumeMounts = []corev1.VolumeMount{{Name: volumeStdio, MountPath: StdioDir}}

	pod.InitContainers = []corev1.Container{install}
	pod.Containers = []corev1.Container{server, bridge}
	pod.Volumes = []corev1.Volume{emptyDir(volumeStdio)}
	return pod, nil
}

// IgnoredFields returns the fields of s's spec that its pods do not use, in
// spec order: for a remote server, whichever of spec.image, command, args,
// env and envSecret it sets, as its pod runs only the platform's egress
// proxy; nil for any other server. The CRD accepts them, and servers
// written for earlier controllers set them, so they are reported
// (condition FieldsIgnored), not refused (docs/mcpserver.md).
func IgnoredFields(s *clerumv1alpha1.McpServer) []string {
	if s.Spec.Remote == nil {
		return nil
	}
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"spec.image", s.Spec.Image != ""},
		{"spec.command", len(s.Spec.Command) > 0},
		{"spec.args", len(s.Spec.Args) > 0},
		{"spec.env", len(s.Spec.Env) > 0},
		{"spec.envSecret", s.Spec.EnvSecret != nil},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// IgnoredMessage says which fields of s are ignored (IgnoredFields), or ""
// when none is: the message of the FieldsIgnored condition and event, and
// of render's note.
func IgnoredMessage(s *clerumv1alpha1.McpServer) string {
	fields := IgnoredFields(s)
	switch len(fields) {
	case 0:
		return ""
	case 1:
		return "remote server: " + fields[0] + " is ignored"
	}
	return "remote server: " + strings.Join(fields, ", ") + " are ignored"
}

// EnvSecretOf returns the envSecret s's pods read: spec.envSecret, or nil
// for a remote server, whose proxy reads none (IgnoredFields). The Secret
// check, the pods' environment and the controller's Secret index all read
// it through here, so an ignored envSecret neither gates the server nor
// rolls its pods.
func EnvSecretOf(s *clerumv1alpha1.McpServer) *clerumv1alpha1.EnvSecret {
	if s.Spec.Remote != nil {
		return nil
	}
	return s.Spec.EnvSecret
}

// serverEnv is spec.env followed by one secretKeyRef per envSecret key: a
// Secret value is never inlined. spec.env may not read Secrets or
// ConfigMaps itself — only envSecret's Secret is validated before deploy,
// and a server must not read another server's credentials.
func serverEnv(s *clerumv1alpha1.McpServer) ([]corev1.EnvVar, error) {
	var env []corev1.EnvVar
	for _, e := range s.Spec.Env {
		if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef != nil || e.ValueFrom.ConfigMapKeyRef != nil) {
			return nil, ErrEnvSecretRef
		}
		e := e.DeepCopy()
		if f := e.ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1" // the API server's default: no write per sync
		}
		env = append(env, *e)
	}
	if es := EnvSecretOf(s); es != nil {
		for _, k := range es.Keys {
			env = append(env, corev1.EnvVar{Name: k.EnvName, ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: es.Name},
					Key:                  k.SecretKey,
				},
			}})
		}
	}
	return env, nil
}

// container is a hardened container with the API server's defaults.
func container(name, image string, pull corev1.PullPolicy) corev1.Container {
	return workload.Container(name, image, pull)
}

func servingPort(port int32) []corev1.ContainerPort {
	return []corev1.ContainerPort{{Name: portName, ContainerPort: port, Protocol: corev1.ProtocolTCP}}
}

// tcpProbe is ready once the MCP port accepts connections; MCP defines no
// health endpoint.
func tcpProbe() *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(portName)}},
		TimeoutSeconds:   1,
		PeriodSeconds:    10,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
}

func emptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

func clone(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}
