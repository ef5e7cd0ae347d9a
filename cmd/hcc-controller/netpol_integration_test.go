//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/names"
)

// TestNetworkPolicyOperator runs the controller binary's reconcile loop
// against a real API server: startup revocation before readiness, the
// four-layer set, convergence without writes, revocation when a Context
// drops a server, drift repair and external egress status.
func TestNetworkPolicyOperator(t *testing.T) {
	c := startCluster(t)
	kube, cp := c.kube, c.cp
	hcc := clientset.NewForConfigOrDie(cp.Config())
	ctx := context.Background()

	// A stale allow left by an earlier run: its Context no longer exists.
	stale := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "ctx-old-s1", Labels: map[string]string{
			names.LabelManagedBy: names.ManagedByValue, names.LabelPolicyType: names.PolicyTypeContextAllow,
		}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
	}
	_, err := kube.NetworkingV1().NetworkPolicies("mcp-server").Create(ctx, stale, metav1.CreateOptions{})
	require.NoError(t, err)

	server := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Name: "s1"},
		Spec: clerumv1alpha1.McpServerSpec{
			Image:     "mongodb/mongodb-mcp-server:1.0",
			Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE},
			EgressBindings: []clerumv1alpha1.EgressBinding{
				{Name: "atlas", CIDR: "93.184.216.0/24", Port: ptr.To[int32](443)},
				{Name: "lan", CIDR: "10.0.0.0/8", Port: ptr.To[int32](5432)},
			},
		},
	}
	_, err = hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, server, metav1.CreateOptions{})
	require.NoError(t, err)
	context1 := &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: "context1"},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: "c1", McpServers: []string{"s1"}},
	}
	_, err = hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, context1, metav1.CreateOptions{})
	require.NoError(t, err)

	base := startController(t, c, map[string]string{"HCC_LEADER_ELECT": "false"}).base

	// Readiness is certified only after the stale allow is gone.
	require.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/ready", http.StatusOK, 60*time.Second))
	_, err = kube.NetworkingV1().NetworkPolicies("mcp-server").Get(ctx, "ctx-old-s1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the stale allow was revoked before readiness: %v", err)

	exists := func(ns, name string) bool {
		_, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	waitUntil := poller(t, 30*time.Second)
	trio := [][2]string{{"mcp-server", "ctx-c1-s1"}, {"mcp-host", "ctx-c1-s1-egress"}, {"rpc-proxy", "rpc-egress-c1-s1"}}
	waitUntil("the Context's allows exist", func() bool {
		for _, p := range trio {
			if !exists(p[0], p[1]) {
				return false
			}
		}
		return exists("mcp-server", "ext-egress-s1-atlas")
	})
	for _, ns := range []string{"mcp-server", "mcp-host", "rpc-proxy", "sandbox-recipes"} {
		assert.True(t, exists(ns, "deny-all-"+ns), ns)
		assert.True(t, exists(ns, "allow-dns-egress-"+ns), ns)
	}
	assert.False(t, exists("mcp-server", "ext-egress-s1-lan"), "a private CIDR gets no allow")

	// External egress status, written by hcc-netpol.
	waitUntil("ExternalEgressReady reports the rejected binding", func() bool {
		s, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Get(ctx, "s1", metav1.GetOptions{})
		c := meta.FindStatusCondition(s.Status.Conditions, clerumv1alpha1.ConditionExternalEgressReady)
		return err == nil && c != nil && c.Status == metav1.ConditionFalse && c.Reason == "BindingRejected" &&
			strings.Contains(c.Message, "binding lan")
	})
	events, err := kube.CoreV1().Events("mcp-server").List(ctx, metav1.ListOptions{FieldSelector: "reason=EgressBindingRejected"})
	require.NoError(t, err)
	assert.NotEmpty(t, events.Items, "a Warning event names the rejected binding")

	// Converged: another pass writes nothing.
	writes := scrape(t, base, "clerum_hcc_netpol_writes_total")
	passes := scrape(t, base, `clerum_hcc_netpol_pass_duration_seconds_count{kind="full",result="success"}`)
	s, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Get(ctx, "s1", metav1.GetOptions{})
	require.NoError(t, err)
	s.Annotations = map[string]string{"touch": "1"} // any event triggers a pass
	_, err = hcc.ClerumV1alpha1().McpServers("mcp-server").Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitUntil("a pass ran", func() bool {
		return scrape(t, base, `clerum_hcc_netpol_pass_duration_seconds_count{kind="full",result="success"}`) > passes
	})
	assert.Equal(t, writes, scrape(t, base, "clerum_hcc_netpol_writes_total"), "a pass over a converged cluster writes nothing")

	// Drift: a hand-deleted allow comes back.
	require.NoError(t, kube.NetworkingV1().NetworkPolicies("mcp-host").Delete(ctx, "ctx-c1-s1-egress", metav1.DeleteOptions{}))
	waitUntil("the deleted allow is recreated", func() bool { return exists("mcp-host", "ctx-c1-s1-egress") })

	// The Context drops the server: all three allows are revoked.
	c1, err := hcc.ClerumV1alpha1().Contexts("mcp-server").Get(ctx, "context1", metav1.GetOptions{})
	require.NoError(t, err)
	c1.Spec.McpServers = nil
	_, err = hcc.ClerumV1alpha1().Contexts("mcp-server").Update(ctx, c1, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitUntil("the dropped server's allows are revoked", func() bool {
		for _, p := range trio {
			if exists(p[0], p[1]) {
				return false
			}
		}
		return true
	})
	assert.True(t, exists("mcp-server", "ext-egress-s1-atlas"), "the server's own egress stays")

	// The census agrees: nothing orphaned, nothing capped.
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"census", "--kubeconfig", cp.Kubeconfig(), "--from-deployment=false"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "unexplained orphans (only these count against the caps): 0")
	assert.Contains(t, stdout.String(), "disowned allows (revoked whatever the caps; hostname allows DNS still proves are kept): 0")
	assert.Regexp(t, `(?m)^external-egress +1$`, stdout.String())
	assert.Contains(t, stdout.String(), "absolute 10 (compiled default), percent 20 (compiled default)")
	assert.Contains(t, stdout.String(), "cap would trip: no")
}

// scrape returns the sum of the samples of a metric (name, or name with a
// label set) on the controller's /metrics.
func scrape(t *testing.T, base, metric string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok || !(name == metric || (!strings.Contains(metric, "{") && strings.HasPrefix(name, metric+"{"))) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err)
		sum += v
	}
	return sum
}

// TestNetworkPolicyCertificationSurvivesALaggingWatchCache starts the
// controller behind a proxy that makes mcp-server's NetworkPolicy informer
// see the API server as a lagging watch cache would: its initial list is
// served as of a resourceVersion read before the stale allow was created,
// and its watch starts late. Readiness must still certify only once the
// stale allow is gone.
func TestNetworkPolicyCertificationSurvivesALaggingWatchCache(t *testing.T) {
	c := startCluster(t)
	kube := c.kube
	ctx := context.Background()

	before, err := kube.NetworkingV1().NetworkPolicies("mcp-server").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	staleRV := before.ResourceVersion
	stale := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "ctx-old-s1", Labels: map[string]string{
			names.LabelManagedBy: names.ManagedByValue, names.LabelPolicyType: names.PolicyTypeContextAllow,
			names.LabelContext: "old", names.LabelMcpServer: "s1",
		}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
	}
	_, err = kube.NetworkingV1().NetworkPolicies("mcp-server").Create(ctx, stale, metav1.CreateOptions{})
	require.NoError(t, err)

	lagging := laggingProxy(t, c, "/apis/networking.k8s.io/v1/namespaces/mcp-server/networkpolicies", staleRV, 15*time.Second)
	base := startController(t, lagging, map[string]string{"HCC_LEADER_ELECT": "false"}).base

	require.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/ready", http.StatusOK, 60*time.Second))
	_, err = kube.NetworkingV1().NetworkPolicies("mcp-server").Get(ctx, "ctx-old-s1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the stale allow the lagging cache did not show was revoked before readiness: %v", err)
}

// laggingProxy returns c behind a proxy that serves the informer's initial
// list of path (resourceVersion "0", the watch cache's answer) as of
// staleRV, refuses a streaming watch-list of it (the reflector then falls
// back to that list), and holds its watches for delay: a watch cache that
// lags behind etcd.
func laggingProxy(t *testing.T, c *cluster, path, staleRV string, delay time.Duration) *cluster {
	t.Helper()
	target, err := url.Parse(c.cp.Config().Host)
	require.NoError(t, err)
	transport, err := rest.TransportFor(c.cp.Config())
	require.NoError(t, err)
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:     transport,
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != path {
			proxy.ServeHTTP(w, r)
			return
		}
		watching := q.Get("watch") == "true" || q.Get("watch") == "1"
		switch {
		case watching && q.Get("sendInitialEvents") == "true":
			http.Error(w, "watch-list refused by the test proxy", http.StatusInternalServerError)
			return
		case watching:
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		case q.Get("resourceVersion") == "0":
			q.Set("resourceVersion", staleRV)
			q.Set("resourceVersionMatch", string(metav1.ResourceVersionMatchExact))
			r.URL.RawQuery = q.Encode()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	cfg, err := clientcmd.LoadFromFile(c.kubeconfig)
	require.NoError(t, err)
	for _, cl := range cfg.Clusters {
		cl.Server, cl.CertificateAuthority, cl.CertificateAuthorityData = srv.URL, "", nil
	}
	for _, info := range cfg.AuthInfos {
		// The proxy authenticates as the admin; the controller's requests
		// keep their impersonation headers.
		info.ClientCertificate, info.ClientCertificateData, info.ClientKey, info.ClientKeyData, info.Token = "", nil, "", nil, ""
	}
	kubeconfig := filepath.Join(t.TempDir(), "lagging-kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))
	lagging := *c
	lagging.kubeconfig = kubeconfig
	return &lagging
}

// TestAnUnmanagedDenyAllHolderThatIsNoDefaultDenyWithholdsReadiness: the
// holder of rpc-proxy's deny-all name admits traffic, so the namespace is
// open; /ready and the census name it and say why, and once it is a default
// deny the controller certifies without ever writing it.
func TestAnUnmanagedDenyAllHolderThatIsNoDefaultDenyWithholdsReadiness(t *testing.T) {
	c := startCluster(t)
	kube := c.kube
	ctx := context.Background()
	holder := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "rpc-proxy", Name: "deny-all-rpc-proxy", Labels: map[string]string{"team": "platform"}},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}},
		},
	}
	_, err := kube.NetworkingV1().NetworkPolicies("rpc-proxy").Create(ctx, holder, metav1.CreateOptions{})
	require.NoError(t, err)

	base := startController(t, c, map[string]string{"HCC_LEADER_ELECT": "false"}).base
	reason := func() string {
		resp, err := http.Get(base + "/ready")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		var body struct {
			Reasons map[string]string `json:"reasons"`
		}
		if resp.StatusCode != http.StatusServiceUnavailable || json.NewDecoder(resp.Body).Decode(&body) != nil {
			return ""
		}
		return body.Reasons["netpol-certified"]
	}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true,
		func(context.Context) (bool, error) { return reason() != "", nil }), "/ready says why it is withheld")
	assert.Equal(t, "NetworkPolicy rpc-proxy/deny-all-rpc-proxy holds the default deny's name but is not a default deny: it has 1 ingress rule(s)", reason())
	assert.Equal(t, 1.0, scrape(t, base, "clerum_hcc_netpol_default_deny_withheld"))

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"census", "--kubeconfig", c.cp.Kubeconfig(), "--from-deployment=false"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "rpc-proxy/deny-all-rpc-proxy\tnot a default deny, withholds readiness: it has 1 ingress rule(s)")

	live, err := kube.NetworkingV1().NetworkPolicies("rpc-proxy").Get(ctx, "deny-all-rpc-proxy", metav1.GetOptions{})
	require.NoError(t, err)
	live.Spec.Ingress = nil
	_, err = kube.NetworkingV1().NetworkPolicies("rpc-proxy").Update(ctx, live, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The holder is not watched: any event signals the pass that certifies.
	_, err = c.cpClient(t).ClerumV1alpha1().Contexts("mcp-server").Create(ctx, &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: "touch"}, Spec: clerumv1alpha1.ContextSpec{ContextID: "touch"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/ready", http.StatusOK, 60*time.Second), "a default deny counts as the namespace's")
	after, err := kube.NetworkingV1().NetworkPolicies("rpc-proxy").Get(ctx, "deny-all-rpc-proxy", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "platform"}, after.Labels, "the holder is never written")
}

func (c *cluster) cpClient(t *testing.T) clientset.Interface {
	t.Helper()
	return clientset.NewForConfigOrDie(c.cp.Config())
}

// TestNetworkPolicyWithholdsANewHoldersAllowsWhileTheOldHostsPodsRun: when
// contextId team passes from Context a to Context b, b's new allow of s2 is
// not created while a pod of a's Host still carries team — terminating or
// not — and is created once that pod is gone. a's allows are revoked as
// usual and readiness is unaffected. There is no kubelet: the pod is an
// object, held terminating by a finalizer.
func TestNetworkPolicyWithholdsANewHoldersAllowsWhileTheOldHostsPodsRun(t *testing.T) {
	c := startCluster(t)
	kube := c.kube
	hcc := c.cpClient(t)
	ctx := context.Background()
	for _, name := range []string{"s1", "s2"} {
		_, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, &clerumv1alpha1.McpServer{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       clerumv1alpha1.McpServerSpec{Image: "mongodb/mongodb-mcp-server:1.0", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: clerumv1alpha1.ContextSpec{ContextID: "team", McpServers: []string{"s1"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = hcc.ClerumV1alpha1().Hosts("mcp-host").Create(ctx, &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: "ha"}, Spec: clerumv1alpha1.HostSpec{ContextRef: "a"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	const hold = "clerum.io/test-hold"
	_, err = kube.CoreV1().Pods("mcp-host").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ha-0", Finalizers: []string{hold}, Labels: map[string]string{
			names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "ha", names.LabelContext: "team",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "host", Image: "registry.example/host:1"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	base := startController(t, c, map[string]string{"HCC_LEADER_ELECT": "false"}).base
	require.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/ready", http.StatusOK, 60*time.Second))
	exists := func(ns, name string) bool {
		_, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	trio := func(server string) [][2]string {
		return [][2]string{{"mcp-server", "ctx-team-" + server}, {"mcp-host", "ctx-team-" + server + "-egress"}, {"rpc-proxy", "rpc-egress-team-" + server}}
	}
	anyOf := func(ps [][2]string) bool {
		for _, p := range ps {
			if exists(p[0], p[1]) {
				return true
			}
		}
		return false
	}
	allOf := func(ps [][2]string) bool {
		for _, p := range ps {
			if !exists(p[0], p[1]) {
				return false
			}
		}
		return true
	}
	waitUntil := poller(t, 30*time.Second)
	waitUntil("a's allows exist", func() bool { return allOf(trio("s1")) })

	// The holder changes: a goes, b takes team and names s2.
	require.NoError(t, hcc.ClerumV1alpha1().Contexts("mcp-server").Delete(ctx, "a", metav1.DeleteOptions{}))
	waitUntil("a is gone", func() bool {
		_, err := hcc.ClerumV1alpha1().Contexts("mcp-server").Get(ctx, "a", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	_, err = hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: clerumv1alpha1.ContextSpec{ContextID: "team", McpServers: []string{"s2"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitUntil("the grant is withheld", func() bool { return scrape(t, base, "clerum_hcc_netpol_contextid_grants_withheld") == 1 })
	waitUntil("a's allows are revoked as usual", func() bool { return !anyOf(trio("s1")) })
	assert.False(t, anyOf(trio("s2")), "no allow of team is created while a pod of a's Host carries it")
	events, err := kube.CoreV1().Events("mcp-server").List(ctx, metav1.ListOptions{FieldSelector: "reason=GrantsWithheld"})
	require.NoError(t, err)
	require.Len(t, events.Items, 1)
	assert.Equal(t, "b", events.Items[0].InvolvedObject.Name)
	assert.Contains(t, events.Items[0].Message, "pod ha-0 of Host ha carries it, but the Host's Context a does not hold it")

	// Terminating, the pod keeps its network: a pass still withholds.
	require.NoError(t, kube.CoreV1().Pods("mcp-host").Delete(ctx, "ha-0", metav1.DeleteOptions{}))
	passes := scrape(t, base, `clerum_hcc_netpol_pass_duration_seconds_count{kind="full",result="success"}`)
	s2, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Get(ctx, "s2", metav1.GetOptions{})
	require.NoError(t, err)
	s2.Annotations = map[string]string{"touch": "1"}
	_, err = hcc.ClerumV1alpha1().McpServers("mcp-server").Update(ctx, s2, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitUntil("a pass ran", func() bool {
		return scrape(t, base, `clerum_hcc_netpol_pass_duration_seconds_count{kind="full",result="success"}`) > passes
	})
	assert.False(t, anyOf(trio("s2")), "a terminating pod still withholds")
	assert.Equal(t, 1.0, scrape(t, base, "clerum_hcc_netpol_contextid_grants_withheld"))
	assert.Equal(t, http.StatusOK, testenv.WaitHTTP(base+"/ready", http.StatusOK, time.Second), "withholding is no failed revocation")

	// The pod is gone: its deletion asks for the pass that grants.
	pod, err := kube.CoreV1().Pods("mcp-host").Get(ctx, "ha-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, pod.DeletionTimestamp)
	pod.Finalizers = nil
	_, err = kube.CoreV1().Pods("mcp-host").Update(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitUntil("b's allows are granted", func() bool { return allOf(trio("s2")) })
	assert.Zero(t, scrape(t, base, "clerum_hcc_netpol_contextid_grants_withheld"))
}
