//go:build integration

package e2e

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file is the expectation for deploy/examples written by hand from
// the documents (docs/names.md, docs/mcpserver.md, docs/containers.md,
// docs/host.md, docs/networkpolicy.md, docs/sharedfilesystem.md,
// docs/globalfilesystem.md and the contract), never from render or the
// builders: render's expected set shares the builders with the controller,
// so a builder bug would sit on both sides of that comparison. Defaults are
// those of deploy/base and pkg/config's documented defaults.

// exampleObjects is every object HCC must create for deploy/examples on
// the shipped configuration, namespace defaults included, as
// "Kind namespace/name".
var exampleObjects = func() []string {
	set := []string{
		// McpServers fetch (sse), notes (stdio), tracker (remote): a
		// Deployment and a Service each, and the remote server's proxy
		// ConfigMap.
		"Deployment mcp-server/fetch", "Service mcp-server/fetch",
		"Deployment mcp-server/notes", "Service mcp-server/notes",
		"Deployment mcp-server/tracker", "Service mcp-server/tracker", "ConfigMap mcp-server/tracker",
		// Host research-1, desktop on.
		"Deployment mcp-host/research-1", "Service mcp-host/research-1",
		"PersistentVolumeClaim mcp-host/research-1-workspace",
		"Secret mcp-host/host-research-1-mcp-host-runtime-tokens",
		"ServiceAccount mcp-host/host-research-1", "Role mcp-host/host-research-1", "RoleBinding mcp-host/host-research-1",
		"NetworkPolicy mcp-host/allow-rpc-proxy-desktop-research-1",
		"Deployment channels/channel-reader-research-1", "Service channels/channel-reader-research-1",
		"NetworkPolicy channels/channel-reader-research-1-egress",
		// SharedFileSystem team-docs (hostRefs: research-1).
		"Deployment mcp-host/wfc-team-docs", "Service mcp-host/wfc-team-docs",
		"PersistentVolumeClaim mcp-host/wfc-team-docs-data",
		"NetworkPolicy mcp-host/wfc-team-docs-ingress", "NetworkPolicy mcp-host/wfc-team-docs-egress",
		// GlobalFileSystem main.
		"Deployment gfs/gfsc-main", "Service gfs/gfsc-main", "NetworkPolicy gfs/gfsc-main-egress",
		// L2: Context research names fetch, notes, tracker; support names notes.
		"NetworkPolicy mcp-server/ctx-research-fetch", "NetworkPolicy mcp-host/ctx-research-fetch-egress", "NetworkPolicy rpc-proxy/rpc-egress-research-fetch",
		"NetworkPolicy mcp-server/ctx-research-notes", "NetworkPolicy mcp-host/ctx-research-notes-egress", "NetworkPolicy rpc-proxy/rpc-egress-research-notes",
		"NetworkPolicy mcp-server/ctx-research-tracker", "NetworkPolicy mcp-host/ctx-research-tracker-egress", "NetworkPolicy rpc-proxy/rpc-egress-research-tracker",
		"NetworkPolicy mcp-server/ctx-support-notes", "NetworkPolicy mcp-host/ctx-support-notes-egress", "NetworkPolicy rpc-proxy/rpc-egress-support-notes",
		// L3: fetch's public-web binding web, tracker's CIDR binding tracker.
		"NetworkPolicy mcp-server/ext-egress-fetch-web", "NetworkPolicy mcp-server/ext-egress-tracker-tracker",
		// L1 of the MCP server namespace.
		"NetworkPolicy mcp-server/allow-host-context-controller-api",
	}
	// L0 and L1 of CONTEXT_MAPPER_RUNTIME_NAMESPACES (deploy/base:
	// mcp-server, sandbox-recipes, rpc-proxy, sandbox-ui; sandbox-ui is
	// minimal-infra: DNS only). allow-hcc-api-egress-NS only where a
	// discovery pod class lives: rpc-proxy (app: rpc-proxy) and the sandbox
	// namespace sandbox-recipes (workflow MCP hosts).
	for _, ns := range []string{"mcp-server", "sandbox-recipes", "rpc-proxy", "sandbox-ui"} {
		set = append(set, "NetworkPolicy "+ns+"/deny-all-"+ns, "NetworkPolicy "+ns+"/allow-dns-egress-"+ns)
		if ns != "sandbox-ui" {
			set = append(set, "NetworkPolicy "+ns+"/allow-k8s-api-egress-"+ns)
		}
		if ns == "rpc-proxy" || ns == "sandbox-recipes" {
			set = append(set, "NetworkPolicy "+ns+"/allow-hcc-api-egress-"+ns)
		}
	}
	slices.Sort(set)
	return set
}()

// checkExamples checks the live cluster, converged on deploy/examples,
// against the hand-written expectation: the set of objects, and the key
// fields of each.
// The scenario's own objects, extra, are added to the expected set.
func checkExamples(t *testing.T, extra ...string) {
	t.Helper()
	got := actualSet(t)
	// The seed Job runs until it has succeeded once (docs/globalfilesystem.md);
	// whether it is still listed depends on timing, not on the builders.
	got = slices.DeleteFunc(got, func(s string) bool { return s == "Job gfs/gfsc-main-seed" })
	want := append(slices.Clone(exampleObjects), extra...)
	slices.Sort(want)
	assert.Equal(t, want, got, "the objects deploy/examples must produce (hand-written)")

	checkServers(t)
	checkHost(t)
	checkFileSystems(t)
	checkPolicies(t)
}

const (
	managedBy = "clerum.io/managed-by"
	hccValue  = "host-context-controller"
)

func getDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

func getService(t *testing.T, ns, name string) *corev1.Service {
	t.Helper()
	s, err := kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

func getPolicy(t *testing.T, ns, name string) *networkingv1.NetworkPolicy {
	t.Helper()
	p, err := kube.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

// assertOwner checks that obj's controller owner reference is kind/name.
func assertOwner(t *testing.T, m metav1.Object, kind, name string) {
	t.Helper()
	ref := metav1.GetControllerOf(m)
	if assert.NotNil(t, ref, "%s has a controller owner", m.GetName()) {
		assert.Equal(t, kind+"/"+name, ref.Kind+"/"+ref.Name, "%s's owner", m.GetName())
	}
}

// assertLabels checks that every label of want is on m.
func assertLabels(t *testing.T, m metav1.Object, want map[string]string) {
	t.Helper()
	for k, v := range want {
		assert.Equal(t, v, m.GetLabels()[k], "%s: label %s", m.GetName(), k)
	}
}

// servicePorts is a Service's ports as "name=port".
func servicePorts(s *corev1.Service) []string {
	var out []string
	for _, p := range s.Spec.Ports {
		out = append(out, p.Name+"="+itoa(p.Port))
	}
	slices.Sort(out)
	return out
}

// containerPorts is a container's ports as "name=port".
func containerPorts(c corev1.Container) []string {
	var out []string
	for _, p := range c.Ports {
		out = append(out, p.Name+"="+itoa(p.ContainerPort))
	}
	slices.Sort(out)
	return out
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// container is the container (or init container) of d named name.
func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	spec := d.Spec.Template.Spec
	for _, c := range append(slices.Clone(spec.Containers), spec.InitContainers...) {
		if c.Name == name {
			return c
		}
	}
	t.Errorf("%s has no container %s", d.Name, name)
	return corev1.Container{}
}

// checkServers: docs/mcpserver.md and docs/containers.md.
func checkServers(t *testing.T) {
	t.Helper()
	for _, s := range []string{"fetch", "notes", "tracker"} {
		d := getDeployment(t, "mcp-server", s)
		assertOwner(t, d, "McpServer", s)
		assertLabels(t, d, map[string]string{"app": s, managedBy: hccValue, "clerum.io/mcpserver": s})
		assertLabels(t, &d.Spec.Template, map[string]string{"app": s, managedBy: hccValue, "clerum.io/mcpserver": s})
		assert.Equal(t, s, d.Spec.Selector.MatchLabels["app"], "%s: selector", s)
		pod := d.Spec.Template.Spec
		assert.False(t, pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken, "%s: no service account token", s)
		if assert.NotNil(t, pod.SecurityContext) && assert.NotNil(t, pod.SecurityContext.RunAsUser) {
			assert.Equal(t, int64(65532), *pod.SecurityContext.RunAsUser, "%s: runs as 65532", s)
		}
		svc := getService(t, "mcp-server", s)
		assertOwner(t, svc, "McpServer", s)
		assert.Equal(t, s, svc.Spec.Selector["app"], "%s: Service selector", s)
	}

	// fetch: sse on 8080, its image as given, FETCH_USER_AGENT from the
	// Secret by reference, the secret digest on the template.
	fetch := getDeployment(t, "mcp-server", "fetch")
	c := fetch.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "mcp-server", c.Name)
	assert.Equal(t, "ghcr.io/evenfire-ai/mcp-fetch:1.0.0", c.Image)
	assert.Equal(t, []string{"mcp=8080"}, containerPorts(c))
	var ref *corev1.SecretKeySelector
	for _, e := range c.Env {
		if e.Name == "FETCH_USER_AGENT" && e.ValueFrom != nil {
			ref = e.ValueFrom.SecretKeyRef
		}
	}
	if assert.NotNil(t, ref, "FETCH_USER_AGENT comes from a secretKeyRef") {
		assert.Equal(t, "fetch-env/user-agent", ref.Name+"/"+ref.Key)
	}
	assert.True(t, strings.HasPrefix(fetch.Spec.Template.Annotations["clerum.io/secret-digest"], "hmac-sha256:"), "fetch: secret digest")
	assert.Equal(t, []string{"mcp=8080"}, servicePorts(getService(t, "mcp-server", "fetch")))

	// notes: stdio; the shim runs the command, the bridge serves
	// streamable-http on 8080 at /mcp; one replica.
	notes := getDeployment(t, "mcp-server", "notes")
	c = notes.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "mcp-server", c.Name)
	assert.Equal(t, "ghcr.io/evenfire-ai/mcp-notes:1.0.0", c.Image)
	assert.Equal(t, []string{"/hcc-stdio/stdio-shim", "--socket", "/hcc-stdio/stdio.sock", "--", "mcp-notes", "--stdio"}, c.Command)
	bridge := container(t, notes, "stdio-bridge")
	assert.Equal(t, "docker.io/clerum/stdio-bridge:0.9.5", bridge.Image)
	assert.Equal(t, []string{"serve", "--listen", ":8080", "--path", "/mcp", "--socket", "/hcc-stdio/stdio.sock"}, bridge.Args)
	assert.Equal(t, []string{"mcp=8080"}, containerPorts(bridge))
	install := container(t, notes, "stdio-shim-install")
	assert.Equal(t, []string{"install-shim", "/hcc-stdio/stdio-shim"}, install.Args)
	if assert.NotNil(t, notes.Spec.Replicas) {
		assert.Equal(t, int32(1), *notes.Spec.Replicas)
	}
	assert.Equal(t, []string{"mcp=8080"}, servicePorts(getService(t, "mcp-server", "notes")))

	// tracker: remote; only the egress proxy, configured from the
	// ConfigMap named after the server, on the default port 3000.
	tracker := getDeployment(t, "mcp-server", "tracker")
	pod := tracker.Spec.Template.Spec
	if assert.Len(t, pod.Containers, 1, "a remote server runs only the proxy") {
		c = pod.Containers[0]
		assert.Equal(t, "egress-proxy", c.Name)
		assert.True(t, strings.HasSuffix(c.Image, "clerum/nginx-egress-proxy:0.1.0"), c.Image)
		assert.Equal(t, []string{"-c", "/etc/hcc-egress-proxy/nginx.conf", "-g", "daemon off;"}, c.Args)
		assert.Equal(t, []string{"mcp=3000"}, containerPorts(c))
		var mounted bool
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/etc/hcc-egress-proxy" {
				mounted = m.ReadOnly
				for _, v := range pod.Volumes {
					if v.Name == m.Name {
						mounted = mounted && v.ConfigMap != nil && v.ConfigMap.Name == "tracker"
					}
				}
			}
		}
		assert.True(t, mounted, "the proxy mounts ConfigMap tracker read-only at /etc/hcc-egress-proxy")
	}
	assert.Equal(t, []string{"mcp=3000"}, servicePorts(getService(t, "mcp-server", "tracker")))
	cm, err := kube.CoreV1().ConfigMaps("mcp-server").Get(context.Background(), "tracker", metav1.GetOptions{})
	require.NoError(t, err)
	assertOwner(t, cm, "McpServer", "tracker")
	conf := cm.Data["nginx.conf"]
	assert.Contains(t, conf, "140.82.112.21", "the proxy's upstream is the remote URL")
	assert.Contains(t, conf, "3000", "the proxy listens on the transport port")
}

// checkHost: docs/host.md.
func checkHost(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	const h = "research-1"
	hostLabels := map[string]string{managedBy: hccValue, "clerum.io/host": h}

	d := getDeployment(t, "mcp-host", h)
	assertOwner(t, d, "Host", h)
	assertLabels(t, d, hostLabels)
	assertLabels(t, &d.Spec.Template, hostLabels)
	pod := d.Spec.Template.Spec
	assert.Equal(t, "host-"+h, pod.ServiceAccountName)
	c := pod.Containers[0]
	assert.Equal(t, "docker.io/clerum/mcp-host:0.9.5", c.Image)
	assert.Contains(t, containerPorts(c), "http=8080")
	var desktop bool
	for _, c := range append(slices.Clone(pod.Containers), pod.InitContainers...) {
		desktop = desktop || slices.Contains(containerPorts(c), "desktop=3000")
	}
	assert.True(t, desktop, "the desktop container serves port desktop 3000")
	// The runtime-token Secret arrives as a mounted Secret volume, not
	// through subPath (contract §9).
	var tokens string
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "host-"+h+"-mcp-host-runtime-tokens" {
			tokens = v.Name
		}
	}
	if assert.NotEmpty(t, tokens, "the runtime-token Secret is a volume") {
		var mounted bool
		for _, m := range c.VolumeMounts {
			if m.Name == tokens {
				mounted = true
				assert.Empty(t, m.SubPath, "the runtime tokens are not mounted by subPath")
			}
		}
		assert.True(t, mounted, "mcp-host mounts the runtime tokens")
	}
	svc := getService(t, "mcp-host", h)
	assertOwner(t, svc, "Host", h)
	assert.Equal(t, []string{"desktop=3000", "http=8080"}, servicePorts(svc))

	secret, err := kube.CoreV1().Secrets("mcp-host").Get(ctx, "host-"+h+"-mcp-host-runtime-tokens", metav1.GetOptions{})
	require.NoError(t, err)
	assertOwner(t, secret, "Host", h)
	assertLabels(t, secret, hostLabels)
	assert.NotEmpty(t, secret.Data["bootstrap-credential"])
	assert.NotEmpty(t, secret.Data["expires-at"])

	pvc, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, h+"-workspace", metav1.GetOptions{})
	require.NoError(t, err)
	assertLabels(t, pvc, hostLabels)

	sa, err := kube.CoreV1().ServiceAccounts("mcp-host").Get(ctx, "host-"+h, metav1.GetOptions{})
	require.NoError(t, err)
	assertOwner(t, sa, "Host", h)
	rb, err := kube.RbacV1().RoleBindings("mcp-host").Get(ctx, "host-"+h, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Role/host-"+h, rb.RoleRef.Kind+"/"+rb.RoleRef.Name)
	if assert.Len(t, rb.Subjects, 1) {
		assert.Equal(t, "ServiceAccount mcp-host/host-"+h, rb.Subjects[0].Kind+" "+rb.Subjects[0].Namespace+"/"+rb.Subjects[0].Name)
	}

	// rpc-proxy reaches the desktop port, nothing else.
	np := getPolicy(t, "mcp-host", "allow-rpc-proxy-desktop-"+h)
	assertLabels(t, np, map[string]string{"clerum.io/policy-type": "host", "clerum.io/host": h})
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
	if assert.Len(t, np.Spec.Ingress, 1) {
		assert.Equal(t, []string{"TCP/3000"}, rulePorts(np.Spec.Ingress[0].Ports))
		assert.Equal(t, []string{"ns:rpc-proxy app=rpc-proxy"}, peers(np.Spec.Ingress[0].From))
	}

	cr := getDeployment(t, "channels", "channel-reader-"+h)
	assertLabels(t, cr, hostLabels)
	assert.Equal(t, "clerum/channel-reader:0.9.5", cr.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, []string{"handoff=8099"}, containerPorts(cr.Spec.Template.Spec.Containers[0]))
	assert.Equal(t, []string{"handoff=8099"}, servicePorts(getService(t, "channels", "channel-reader-"+h)))
	assertLabels(t, getPolicy(t, "channels", "channel-reader-"+h+"-egress"), map[string]string{"clerum.io/policy-type": "host"})
}

// checkFileSystems: docs/sharedfilesystem.md and docs/globalfilesystem.md.
func checkFileSystems(t *testing.T) {
	t.Helper()
	wfc := getDeployment(t, "mcp-host", "wfc-team-docs")
	assertOwner(t, wfc, "SharedFileSystem", "team-docs")
	assertLabels(t, wfc, map[string]string{managedBy: hccValue, "clerum.io/sharedfilesystem": "team-docs"})
	assert.Equal(t, appsv1.RecreateDeploymentStrategyType, wfc.Spec.Strategy.Type)
	if assert.NotNil(t, wfc.Spec.Replicas) {
		assert.Equal(t, int32(1), *wfc.Spec.Replicas)
	}
	assert.Equal(t, "docker.io/clerum/workspace-files-controller:0.9.5", wfc.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, []string{"http=8086"}, containerPorts(wfc.Spec.Template.Spec.Containers[0]))
	assert.Equal(t, []string{"http=8086"}, servicePorts(getService(t, "mcp-host", "wfc-team-docs")))
	pvc, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(context.Background(), "wfc-team-docs-data", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pvc.Spec.AccessModes)
	assert.Equal(t, "5Gi", pvc.Spec.Resources.Requests.Storage().String())
	in := getPolicy(t, "mcp-host", "wfc-team-docs-ingress")
	assertLabels(t, in, map[string]string{"clerum.io/policy-type": "filesystem", "clerum.io/sharedfilesystem": "team-docs"})
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, in.Spec.PolicyTypes)
	if assert.Len(t, in.Spec.Ingress, 1) {
		assert.Equal(t, []string{"TCP/8086"}, rulePorts(in.Spec.Ingress[0].Ports))
	}
	out := getPolicy(t, "mcp-host", "wfc-team-docs-egress")
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, out.Spec.PolicyTypes)

	gfsc := getDeployment(t, "gfs", "gfsc-main")
	assertOwner(t, gfsc, "GlobalFileSystem", "main")
	assertLabels(t, gfsc, map[string]string{managedBy: hccValue, "clerum.io/globalfilesystem": "main"})
	assert.Equal(t, appsv1.RecreateDeploymentStrategyType, gfsc.Spec.Strategy.Type)
	assert.Equal(t, "clerum/gfs-controller:test", gfsc.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, []string{"http=8087"}, containerPorts(gfsc.Spec.Template.Spec.Containers[0]))
	assert.Equal(t, []string{"http=8087"}, servicePorts(getService(t, "gfs", "gfsc-main")))
	assertLabels(t, getPolicy(t, "gfs", "gfsc-main-egress"), map[string]string{"clerum.io/policy-type": "filesystem", "clerum.io/globalfilesystem": "main"})
}

// checkPolicies: docs/networkpolicy.md and docs/names.md.
func checkPolicies(t *testing.T) {
	t.Helper()
	for _, ns := range []string{"mcp-server", "sandbox-recipes", "rpc-proxy", "sandbox-ui"} {
		deny := getPolicy(t, ns, "deny-all-"+ns)
		assertLabels(t, deny, map[string]string{managedBy: hccValue, "clerum.io/policy-type": "deny-all"})
		assert.Empty(t, deny.Spec.PodSelector.MatchLabels, "deny-all selects every pod")
		assert.Empty(t, deny.Spec.PodSelector.MatchExpressions, "deny-all selects every pod")
		assert.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, deny.Spec.PolicyTypes)
		assert.Empty(t, deny.Spec.Ingress)
		assert.Empty(t, deny.Spec.Egress)
		dns := getPolicy(t, ns, "allow-dns-egress-"+ns)
		assertLabels(t, dns, map[string]string{"clerum.io/policy-type": "infrastructure"})
		var toDNS bool
		for _, r := range dns.Spec.Egress {
			toDNS = toDNS || slices.Contains(peers(r.To), "ns:kube-system k8s-app=kube-dns") && slices.Contains(rulePorts(r.Ports), "UDP/53")
		}
		assert.True(t, toDNS, "%s: DNS egress reaches kube-dns on UDP 53", ns)
	}

	// L2: ingress to S from the Context's Host pods (and rpc-proxy,
	// mcp-proxy) on S's transport port; the egress half in the host
	// namespace; rpc-proxy's egress to S. Server pods are selected by
	// clerum.io/mcpserver (docs/upgrade.md: "the server pods selected by
	// clerum.io/mcpserver"), which only HCC's pods carry, not by app, which
	// any pod may; Host pods by their Context and HCC's managed-by label.
	ports := map[string]string{"fetch": "TCP/8080", "notes": "TCP/8080", "tracker": "TCP/3000"}
	for _, cs := range [][2]string{{"research", "fetch"}, {"research", "notes"}, {"research", "tracker"}, {"support", "notes"}} {
		cid, s := cs[0], cs[1]
		owner := map[string]string{managedBy: hccValue, "clerum.io/policy-type": "context-allow", "clerum.io/mcpserver": s, "clerum.io/context": cid}
		in := getPolicy(t, "mcp-server", "ctx-"+cid+"-"+s)
		assertLabels(t, in, owner)
		assert.Equal(t, s, in.Spec.PodSelector.MatchLabels["clerum.io/mcpserver"], "ctx-%s-%s selects the server's pods", cid, s)
		assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, in.Spec.PolicyTypes)
		var from []string
		for _, r := range in.Spec.Ingress {
			assert.Equal(t, []string{ports[s]}, rulePorts(r.Ports), "ctx-%s-%s: port", cid, s)
			from = append(from, peers(r.From)...)
		}
		assert.Contains(t, from, "ns:mcp-host clerum.io/context="+cid+","+managedBy+"="+hccValue, "ctx-%s-%s admits the Context's Host pods", cid, s)
		assert.Contains(t, from, "ns:rpc-proxy app=rpc-proxy")
		assert.Contains(t, from, "ns:control-plane app=mcp-proxy")

		out := getPolicy(t, "mcp-host", "ctx-"+cid+"-"+s+"-egress")
		assertLabels(t, out, owner)
		assert.Equal(t, cid, out.Spec.PodSelector.MatchLabels["clerum.io/context"], "ctx-%s-%s-egress selects the Context's Host pods", cid, s)
		assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, out.Spec.PolicyTypes)
		if assert.Len(t, out.Spec.Egress, 1) {
			assert.Equal(t, []string{"ns:mcp-server clerum.io/mcpserver=" + s}, peers(out.Spec.Egress[0].To))
			assert.Equal(t, []string{ports[s]}, rulePorts(out.Spec.Egress[0].Ports))
		}

		rpc := getPolicy(t, "rpc-proxy", "rpc-egress-"+cid+"-"+s)
		assertLabels(t, rpc, map[string]string{"clerum.io/policy-type": "rpc-proxy-egress", "clerum.io/mcpserver": s, "clerum.io/context": cid})
		assert.Equal(t, "rpc-proxy", rpc.Spec.PodSelector.MatchLabels["app"])
		if assert.Len(t, rpc.Spec.Egress, 1) {
			assert.Equal(t, []string{"ns:mcp-server clerum.io/mcpserver=" + s}, peers(rpc.Spec.Egress[0].To))
			assert.Equal(t, []string{ports[s]}, rulePorts(rpc.Spec.Egress[0].Ports))
		}
	}

	// L3: public-web is 0.0.0.0/0 on TCP 80 and 443 minus the deny
	// ranges; the CIDR binding is that network on its port.
	web := getPolicy(t, "mcp-server", "ext-egress-fetch-web")
	assertLabels(t, web, map[string]string{"clerum.io/policy-type": "external-egress", "clerum.io/mcpserver": "fetch", "clerum.io/egress-binding": "web"})
	assert.Equal(t, "fetch", web.Spec.PodSelector.MatchLabels["clerum.io/mcpserver"])
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, web.Spec.PolicyTypes)
	if assert.Len(t, web.Spec.Egress, 1) && assert.Len(t, web.Spec.Egress[0].To, 1) && assert.NotNil(t, web.Spec.Egress[0].To[0].IPBlock) {
		block := web.Spec.Egress[0].To[0].IPBlock
		assert.Equal(t, "0.0.0.0/0", block.CIDR)
		assert.Contains(t, block.Except, "10.0.0.0/8")
		assert.Contains(t, block.Except, "169.254.0.0/16")
		assert.ElementsMatch(t, []string{"TCP/80", "TCP/443"}, rulePorts(web.Spec.Egress[0].Ports))
	}
	tr := getPolicy(t, "mcp-server", "ext-egress-tracker-tracker")
	assertLabels(t, tr, map[string]string{"clerum.io/policy-type": "external-egress", "clerum.io/mcpserver": "tracker", "clerum.io/egress-binding": "tracker"})
	assert.Equal(t, "tracker", tr.Spec.PodSelector.MatchLabels["clerum.io/mcpserver"])
	if assert.Len(t, tr.Spec.Egress, 1) && assert.Len(t, tr.Spec.Egress[0].To, 1) && assert.NotNil(t, tr.Spec.Egress[0].To[0].IPBlock) {
		assert.Equal(t, "140.82.112.0/20", tr.Spec.Egress[0].To[0].IPBlock.CIDR)
		assert.Equal(t, []string{"TCP/443"}, rulePorts(tr.Spec.Egress[0].Ports))
	}
}

// rulePorts is a rule's ports as "PROTOCOL/port".
func rulePorts(ports []networkingv1.NetworkPolicyPort) []string {
	var out []string
	for _, p := range ports {
		proto := "TCP"
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		port := ""
		if p.Port != nil {
			port = p.Port.String()
		}
		out = append(out, proto+"/"+port)
	}
	slices.Sort(out)
	return out
}

// peers is a rule's peers as "ns:NAMESPACE k=v,..." (the namespace by its
// kubernetes.io/metadata.name label) or "cidr:CIDR".
func peers(ps []networkingv1.NetworkPolicyPeer) []string {
	var out []string
	for _, p := range ps {
		if p.IPBlock != nil {
			out = append(out, "cidr:"+p.IPBlock.CIDR)
			continue
		}
		ns := ""
		if p.NamespaceSelector != nil {
			ns = p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
		}
		var labels []string
		if p.PodSelector != nil {
			for k, v := range p.PodSelector.MatchLabels {
				labels = append(labels, k+"="+v)
			}
		}
		slices.Sort(labels)
		out = append(out, "ns:"+ns+" "+strings.Join(labels, ","))
	}
	slices.Sort(out)
	return out
}
