package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

// Both clientsets draw on one limiter: HCC_KUBE_API_QPS bounds the binary.
func TestEveryClientSharesOneRateBudget(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	cfg, err := RESTConfig(kubeconfig, "test", 7, 9)
	require.NoError(t, err)
	require.NotNil(t, cfg.RateLimiter)
	assert.InDelta(t, 7, cfg.RateLimiter.QPS(), 0.001)

	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	hcc, err := clientset.NewForConfig(cfg)
	require.NoError(t, err)
	assert.Same(t, cfg.RateLimiter, kube.CoreV1().RESTClient().GetRateLimiter())
	assert.Same(t, cfg.RateLimiter, kube.AppsV1().RESTClient().GetRateLimiter())
	assert.Same(t, cfg.RateLimiter, hcc.ClerumV1alpha1().RESTClient().GetRateLimiter())
}

// twoClusters is a kubeconfig with two contexts on two servers; prod is
// the current-context.
const twoClusters = `apiVersion: v1
kind: Config
clusters:
- {name: prod, cluster: {server: "https://prod.example:6443"}}
- {name: staging, cluster: {server: "https://staging.example:6443"}}
users: [{name: u, user: {token: t}}]
contexts:
- {name: prod, context: {cluster: prod, user: u}}
- {name: staging, context: {cluster: staging, user: u}}
current-context: prod
`

// The plugin finds its cluster as kubectl does: the kubeconfig's
// current-context, or the context --context names; --kubeconfig over
// $KUBECONFIG.
func TestKubectlRESTConfigFollowsTheKubeconfigContext(t *testing.T) {
	dir := t.TempDir()
	both := filepath.Join(dir, "both")
	require.NoError(t, os.WriteFile(both, []byte(twoClusters), 0o600))
	t.Setenv("KUBECONFIG", both)

	cfg, err := KubectlRESTConfig("", "", "kubectl-hcc/test", 7, 9)
	require.NoError(t, err)
	assert.Equal(t, "https://prod.example:6443", cfg.Host, "the current-context")
	assert.Equal(t, "kubectl-hcc/test", cfg.UserAgent)
	assert.InDelta(t, 7, cfg.RateLimiter.QPS(), 0.001, "the binary's budget, as RESTConfig gives it")

	cfg, err = KubectlRESTConfig("", "staging", "kubectl-hcc/test", 7, 9)
	require.NoError(t, err)
	assert.Equal(t, "https://staging.example:6443", cfg.Host, "--context staging")

	// --kubeconfig wins over $KUBECONFIG, and --context applies to it.
	other := filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(other, []byte(strings.ReplaceAll(twoClusters, "current-context: prod", "current-context: staging")), 0o600))
	cfg, err = KubectlRESTConfig(other, "", "kubectl-hcc/test", 7, 9)
	require.NoError(t, err)
	assert.Equal(t, "https://staging.example:6443", cfg.Host)
	cfg, err = KubectlRESTConfig(other, "prod", "kubectl-hcc/test", 7, 9)
	require.NoError(t, err)
	assert.Equal(t, "https://prod.example:6443", cfg.Host)

	// A context the kubeconfig does not hold is an error naming it, never
	// a quiet fall back to the current one.
	_, err = KubectlRESTConfig("", "dev", "kubectl-hcc/test", 7, 9)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "KUBECONFIG (--context dev)")
	assert.Contains(t, err.Error(), `"dev"`)

	_, err = KubectlRESTConfig(filepath.Join(dir, "absent"), "", "kubectl-hcc/test", 7, 9)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--kubeconfig "+filepath.Join(dir, "absent"))
}
