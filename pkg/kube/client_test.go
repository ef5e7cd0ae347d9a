package kube

import (
	"os"
	"path/filepath"
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
