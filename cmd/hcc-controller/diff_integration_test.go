//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/diff"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// writesPolicy logs every write, whoever sends it and however it is
// answered, at Metadata level (who, what, which object); events and leases
// are left out, as diff lists neither.
const writesPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    resources:
      - group: ""
        resources: [events]
      - group: events.k8s.io
        resources: [events]
      - group: coordination.k8s.io
        resources: [leases]
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
`

const (
	controllerIdentity = "system:serviceaccount:control-plane:hcc-controller"
	diffUser           = "diff-operator"
)

// TestDiffSaysWhatTheLeaderWrites runs diff, under deploy/examples/diff-rbac.yaml
// only (get, list, watch), on a cluster with pending work; then the
// controller; then diff again. diff writes nothing; the controller's
// writes, counted from the API server's audit log whatever their answer
// (a write refused again as before counted once, as diff lists it),
// are exactly the writes diff listed, verb by verb and object by object;
// the blocked server diff named is the one the controller blocks; and on
// the converged cluster diff prints nothing and exits 0.
func TestDiffSaysWhatTheLeaderWrites(t *testing.T) {
	c := startClusterWith(t, controlplane.Options{AuditPolicy: writesPolicy})
	ctx := context.Background()
	hcc := clientset.NewForConfigOrDie(c.cp.Config())
	require.NoError(t, controlplane.ApplyFiles(ctx, c.cp.Config(), filepath.Join("..", "..", "deploy", "examples", "diff-rbac.yaml")))
	diffKubeconfig := c.cp.ImpersonatingKubeconfig(diffUser, "hcc-diff", "system:authenticated")

	for _, s := range []*clerumv1alpha1.McpServer{
		{ObjectMeta: metav1.ObjectMeta{Name: "alpha"}, Spec: clerumv1alpha1.McpServerSpec{
			Image: "mongodb/alpha:1", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}}},
		// The bridge needs a command: blocked.
		{ObjectMeta: metav1.ObjectMeta{Name: "beta"}, Spec: clerumv1alpha1.McpServerSpec{
			Image: "mongodb/beta:1", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportStdio}}},
	} {
		_, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: "tenant", McpServers: []string{"alpha", "beta"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// A Host of the Context, whose credential the Control API issues.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	controlAPI := &fakeControlAPI{t: t, secret: []byte("integration-secret"), key: key, issued: map[string]issuedCredential{}}
	controlAPIServer := httptest.NewServer(controlAPI)
	t.Cleanup(controlAPIServer.Close)
	_, err = c.kube.CoreV1().ConfigMaps("mcp-host").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-host-config"}, Data: map[string]string{"CLERUM_AUTH_JWT_PUBLIC_KEY": "k"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = hcc.ClerumV1alpha1().Hosts("mcp-host").Create(ctx, &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: "h1"}, Spec: clerumv1alpha1.HostSpec{ContextRef: "tenant"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// An object of someone else's holds a name HCC needs: refused.
	_, err = c.kube.CoreV1().Services("mcp-server").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	env := map[string]string{
		"HCC_LEADER_ELECT":                            "false",
		"CONTROL_API_BASE_URL":                        controlAPIServer.URL,
		"MCP_HOST_GATEWAY_URL":                        controlAPIServer.URL,
		"CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS": "",
	}
	offset := auditSize(t, c)
	code, out, stderr := runDiffAs(t, diffKubeconfig, env, "-o", "json")
	require.Equal(t, diffChanges, code, "stderr: %s", stderr)
	var report diff.Report
	require.NoError(t, json.Unmarshal([]byte(out), &report), out)
	assert.Empty(t, auditWrites(t, c, offset, diffUser), "diff sent writes")

	listed := map[string]bool{}
	for _, w := range report.Writes {
		listed[w.Verb+" "+w.Resource+" "+w.Namespace+"/"+w.Name] = true
	}
	assert.True(t, listed["create deployments mcp-server/alpha"], "diff lists alpha's Deployment: %v", report.Writes)
	assert.False(t, listed["create deployments mcp-server/beta"], "a blocked server gets no Deployment")
	assert.True(t, listed["create networkpolicies mcp-server/deny-all-mcp-server"], "diff lists the default deny")
	for _, w := range []string{"create deployments mcp-host/h1", "create secrets mcp-host/host-h1-mcp-host-runtime-tokens",
		"create persistentvolumeclaims mcp-host/h1-workspace", "create deployments channels/channel-reader-h1"} {
		assert.True(t, listed[w], "diff lists the Host's %s", w)
	}
	assert.Equal(t, 1, report.CredentialsIssued, "the Host's credential would be asked for")
	assert.Zero(t, controlAPI.bootstrapCalls(), "diff never calls the Control API")
	assert.Contains(t, report.Refusals, diff.Refusal{Controller: "mcpserver", Type: "block", Kind: "McpServer",
		Namespace: "mcp-server", Name: "beta", Reason: reasons.InvalidSpec, Message: "a stdio server needs spec.command: the stdio shim starts it, so the image's entrypoint cannot be used"})
	assert.True(t, hasRefusal(report, "Service", "alpha", reasons.EventUnmanagedConflict), "the foreign Service is refused: %v", report.Refusals)
	assert.True(t, report.NetworkPolicy.Certified, report.NetworkPolicy.Message)

	// The table says the same, one line a write and a refusal.
	code, table, stderr := runDiffAs(t, diffKubeconfig, env)
	require.Equal(t, diffChanges, code, "stderr: %s", stderr)
	assert.Equal(t, 1+len(report.Writes)+len(report.Refusals), lines(table), table)
	t.Logf("diff before the controller starts:\n%s", table)

	// The leader does exactly that.
	offset = auditSize(t, c)
	ctrl := startController(t, c, env)
	require.Equal(t, http.StatusOK, testenv.WaitHTTP(ctrl.base+"/ready", http.StatusOK, 60*time.Second))
	waitUntil := poller(t, 60*time.Second)
	waitUntil("h1's credential stored", func() bool { return controlAPI.bootstrapCalls() == 1 })
	waitUntil("beta blocked", func() bool {
		s, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Get(ctx, "beta", metav1.GetOptions{})
		return err == nil && hasConditionReason(s.Status.Conditions, reasons.InvalidSpec)
	})
	assert.Equal(t, diffWrites(report), leaderWrites(t, c, ctrl, offset),
		"the controller's writes (status apart) are exactly diff's")
	// Folding a refused write's repeats must not hide a loop: the first
	// passes retry it when its owner is synced again, a few times at most.
	for w, n := range refusals(auditWrites(t, c, offset, controllerIdentity)) {
		t.Logf("refused %d times: %s", n, w)
		assert.LessOrEqual(t, n, 5, "%s: refused %d times in the first passes, a loop rather than a retry", w, n)
	}

	// Converged: nothing to say, in either format.
	code, _, stderr = runDiffAs(t, diffKubeconfig, env)
	assert.Equal(t, diffChanges, code, "the foreign Service is still refused; stderr: %s", stderr)
	require.NoError(t, c.kube.CoreV1().Services("mcp-server").Delete(ctx, "alpha", metav1.DeleteOptions{}))
	ctrl = startController(t, c, env)
	waitUntil("alpha's Service", func() bool {
		_, err := c.kube.CoreV1().Services("mcp-server").Get(ctx, "alpha", metav1.GetOptions{})
		return err == nil
	})
	require.Equal(t, 0, ctrl.stop(t))
	code, table, stderr = runDiffAs(t, diffKubeconfig, env)
	assert.Equal(t, diffNothing, code, "stderr: %s\n%s", stderr, table)
	assert.Empty(t, table)
	code, out, _ = runDiffAs(t, diffKubeconfig, env, "-o", "json")
	assert.Equal(t, diffNothing, code, out)
	assert.Equal(t, 1, controlAPI.bootstrapCalls(), "the stored credential is believed: nothing to re-issue")
}

// TestDiffSaysWhatTheCapsHoldBack: unexplained orphans above the delete
// cap are listed as held back, with the rule; none is deleted by diff, and
// the controller started next deletes none either (its writes are diff's).
func TestDiffSaysWhatTheCapsHoldBack(t *testing.T) {
	c := startClusterWith(t, controlplane.Options{AuditPolicy: writesPolicy})
	ctx := context.Background()
	require.NoError(t, controlplane.ApplyFiles(ctx, c.cp.Config(), filepath.Join("..", "..", "deploy", "examples", "diff-rbac.yaml")))
	diffKubeconfig := c.cp.ImpersonatingKubeconfig(diffUser, "hcc-diff", "system:authenticated")
	// Allows of a Context nobody knows, left while no controller ran.
	var orphans []string
	for i := range 4 {
		name := fmt.Sprintf("ctx-gone-s%d", i)
		orphans = append(orphans, name)
		_, err := c.kube.NetworkingV1().NetworkPolicies("mcp-server").Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				names.LabelManagedBy: names.ManagedByValue, names.LabelPolicyType: "context-allow",
				names.LabelContext: "gone", names.LabelMcpServer: fmt.Sprintf("s%d", i)}},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	env := map[string]string{"HCC_LEADER_ELECT": "false", "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP": "3"}
	code, out, stderr := runDiffAs(t, diffKubeconfig, env, "-o", "json")
	require.Equal(t, diffChanges, code, "stderr: %s", stderr)
	var report diff.Report
	require.NoError(t, json.Unmarshal([]byte(out), &report), out)
	var held []string
	for _, h := range report.NetworkPolicy.HeldBack {
		held = append(held, h.Name)
	}
	assert.ElementsMatch(t, orphans, held)
	assert.NotEmpty(t, report.NetworkPolicy.CapRule)
	for _, w := range report.Writes {
		assert.NotEqual(t, "delete", w.Verb, "a tripped cap deletes no unexplained orphan: %v", w)
	}
	code, table, _ := runDiffAs(t, diffKubeconfig, env)
	require.Equal(t, diffChanges, code)
	assert.Contains(t, table, "would hold back 4 unexplained policies")

	offset := auditSize(t, c)
	ctrl := startController(t, c, env)
	require.Equal(t, http.StatusOK, testenv.WaitHTTP(ctrl.base+"/ready", http.StatusOK, 60*time.Second))
	assert.Equal(t, diffWrites(report), leaderWrites(t, c, ctrl, offset))
	for _, name := range orphans {
		_, err := c.kube.NetworkingV1().NetworkPolicies("mcp-server").Get(ctx, name, metav1.GetOptions{})
		assert.NoError(t, err, "the cap kept %s", name)
	}
}

// leaderWrites waits until ctrl has written nothing for three seconds,
// stops it, and returns its writes to objects since offset, status apart,
// as objectWrites lists them.
func leaderWrites(t *testing.T, c *cluster, ctrl *controller, offset int64) []string {
	t.Helper()
	stable, last := 0, -1
	poller(t, 60*time.Second)("the controller's writes settle", func() bool {
		n := len(auditWrites(t, c, offset, controllerIdentity))
		if n == last {
			stable++
		} else {
			stable, last = 0, n
		}
		return stable >= 30
	})
	require.Equal(t, 0, ctrl.stop(t))
	return objectWrites(auditWrites(t, c, offset, controllerIdentity))
}

// diffWrites are the report's writes as objectWrites lists the audit
// log's.
func diffWrites(r diff.Report) []string {
	var out []string
	for _, w := range r.Writes {
		out = append(out, w.Verb+" "+w.Resource+" "+w.Namespace+"/"+w.Name)
	}
	sort.Strings(out)
	return out
}

// runDiffAs runs diff with kubeconfig and env and returns its exit code,
// stdout and stderr.
func runDiffAs(t *testing.T, kubeconfig string, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "integration-secret")
	for k, v := range env {
		t.Setenv(k, v)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"diff", "--kubeconfig", kubeconfig, "--settle", "1s"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func hasRefusal(r diff.Report, kind, name, reason string) bool {
	for _, x := range r.Refusals {
		if x.Kind == kind && x.Name == name && x.Reason == reason {
			return true
		}
	}
	return false
}

func hasConditionReason(conditions []metav1.Condition, reason string) bool {
	for _, c := range conditions {
		if c.Reason == reason {
			return true
		}
	}
	return false
}

func lines(s string) int { return bytes.Count([]byte(s), []byte("\n")) }

// auditRecord is what the tests read of an audit event.
type auditRecord struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
}

func auditSize(t *testing.T, c *cluster) int64 {
	t.Helper()
	info, err := os.Stat(c.cp.AuditLog())
	require.NoError(t, err)
	return info.Size()
}

// auditWrites returns every write user sent after offset, whatever its
// answer.
func auditWrites(t *testing.T, c *cluster, offset int64, user string) []auditRecord {
	t.Helper()
	f, err := os.Open(c.cp.AuditLog())
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(offset, 0)
	require.NoError(t, err)
	var out []auditRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r auditRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		who := r.User.Username
		if r.ImpersonatedUser != nil {
			who = r.ImpersonatedUser.Username
		}
		if who == user && r.ObjectRef != nil {
			out = append(out, r)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// objectWrites are the writes to objects, status apart, as "verb resource
// namespace/name", sorted; a write refused as an earlier one of the same
// verb and object was (the same code and message) is listed once, as diff
// lists it.
func objectWrites(records []auditRecord) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range records {
		if r.ObjectRef.Subresource != "" {
			continue
		}
		if key := refusalKey(r); key != "" {
			if seen[key] {
				continue
			}
			seen[key] = true
		}
		out = append(out, objectWrite(r))
	}
	sort.Strings(out)
	return out
}

// objectWrite is r as "verb resource namespace/name".
func objectWrite(r auditRecord) string {
	return r.Verb + " " + r.ObjectRef.Resource + " " + r.ObjectRef.Namespace + "/" + r.ObjectRef.Name
}

// refusalKey names how r was refused — its write, code and message — and
// is "" for a write that succeeded.
func refusalKey(r auditRecord) string {
	if r.ResponseStatus == nil || r.ResponseStatus.Code < 400 {
		return ""
	}
	return fmt.Sprintf("%s: %d %s", objectWrite(r), r.ResponseStatus.Code, r.ResponseStatus.Message)
}

// refusals counts how often each write to an object (status apart) was
// refused the same way.
func refusals(records []auditRecord) map[string]int {
	out := map[string]int{}
	for _, r := range records {
		if key := refusalKey(r); key != "" && r.ObjectRef.Subresource == "" {
			out[key]++
		}
	}
	return out
}
