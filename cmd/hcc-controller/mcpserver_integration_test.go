//go:build integration

package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/clerum/hcc/internal/testing/apitest"
	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/names"
)

// TestMcpServerOperator runs the controller, under the shipped RBAC,
// against a real API server: a server waits for its Secret, converges to a
// Deployment and a Service, reports ready once its Deployment is available,
// and its children go with it. No controller-manager runs here, so the
// test writes the Deployment's status itself.
func TestMcpServerOperator(t *testing.T) {
	apiBinary := apitest.Build(t)
	c := startCluster(t)
	kube := c.kube
	hcc := clientset.NewForConfigOrDie(c.cp.Config())
	ctx := context.Background()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }), what)
	}

	server := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Name: "mongodb"},
		Spec: clerumv1alpha1.McpServerSpec{
			Image:     "mongodb/mongodb-mcp-server:1.0",
			Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE},
			EnvSecret: &clerumv1alpha1.EnvSecret{Name: "atlas", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "uri", EnvName: "MDB_URI"}}},
		},
	}
	_, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, server, metav1.CreateOptions{})
	require.NoError(t, err)
	startController(t, c, map[string]string{"HCC_LEADER_ELECT": "false"})

	get := func() *clerumv1alpha1.McpServer {
		s, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Get(ctx, "mongodb", metav1.GetOptions{})
		require.NoError(t, err)
		return s
	}
	waitUntil("the missing Secret is reported", func() bool {
		cond := meta.FindStatusCondition(get().Status.Conditions, clerumv1alpha1.ConditionSecretsResolved)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Message == "Secret atlas does not exist"
	})
	_, err = kube.AppsV1().Deployments("mcp-server").Get(ctx, "mongodb", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Deployment before its Secret exists")

	_, err = kube.CoreV1().Secrets("mcp-server").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "atlas"}, StringData: map[string]string{"uri": "mongodb+srv://secret"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var deployment *appsv1.Deployment
	waitUntil("the Deployment and the Service exist", func() bool {
		deployment, err = kube.AppsV1().Deployments("mcp-server").Get(ctx, "mongodb", metav1.GetOptions{})
		_, svcErr := kube.CoreV1().Services("mcp-server").Get(ctx, "mongodb", metav1.GetOptions{})
		return err == nil && svcErr == nil
	})
	assert.Equal(t, "mongodb", deployment.Spec.Template.Labels[names.LabelMcpServer])
	waitUntil("status says deployed, not ready", func() bool {
		s := get()
		return s.Status.Deployed && !s.Status.Ready && s.Status.ObservedGeneration == s.Generation
	})

	// The Deployment becomes available: readiness flows back to status.
	deployment.Status = appsv1.DeploymentStatus{ObservedGeneration: deployment.Generation, Replicas: 1, ReadyReplicas: 1,
		AvailableReplicas: 1, UpdatedReplicas: 1}
	_, err = kube.AppsV1().Deployments("mcp-server").UpdateStatus(ctx, deployment, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitUntil("status says ready", func() bool {
		s := get()
		cond := meta.FindStatusCondition(s.Status.Conditions, clerumv1alpha1.ConditionReady)
		return s.Status.Ready && cond != nil && cond.Status == metav1.ConditionTrue
	})

	// From status to the hcc-api inventory: a Host whose Context grants the
	// server is told it is deployed and ready, authoritatively (the field
	// "authoritative" is present only as false, docs/http-api.md).
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	_, err = controlplane.ApplyRBAC(ctx, kube, filepath.Join("..", "..", "deploy", "base", "api", "rbac.yaml"))
	require.NoError(t, err)
	_, err = hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: "tenant", McpServers: []string{"mongodb"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	host, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Create(ctx, &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: "h1"}, Spec: clerumv1alpha1.HostSpec{ContextRef: "tenant"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	api := apitest.Start(t, apiBinary, c.cp.ImpersonatingKubeconfig("system:serviceaccount:control-plane:hcc-api",
		"system:serviceaccounts", "system:serviceaccounts:control-plane"), apitest.PublicKeyPEM(t, key))
	api.WaitReady(t)
	token := apitest.HostToken(t, key, "h1", host.UID)
	var inventory apitest.Inventory
	waitUntil("the hcc-api inventory reports the server ready", func() bool {
		code, body := api.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
		if code != http.StatusOK {
			return false
		}
		inventory = apitest.DecodeInventory(t, body)
		return len(inventory.Servers) == 1 && inventory.Servers[0]["status"].(map[string]any)["ready"] == true
	})
	assert.Equal(t, map[string]any{"deployed": true, "ready": true}, inventory.Servers[0]["status"])

	// A converged server is left alone: its Deployment is not written again.
	rv := deployment.ResourceVersion
	time.Sleep(2 * time.Second)
	now, err := kube.AppsV1().Deployments("mcp-server").Get(ctx, "mongodb", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, now.Generation, deployment.Generation, "no spec write after convergence (rv %s → %s)", rv, now.ResourceVersion)

	// The server goes: its children go with it (HCC's own deletes; no
	// garbage collector runs here).
	require.NoError(t, hcc.ClerumV1alpha1().McpServers("mcp-server").Delete(ctx, "mongodb", metav1.DeleteOptions{}))
	waitUntil("the children are deleted", func() bool {
		_, dErr := kube.AppsV1().Deployments("mcp-server").Get(ctx, "mongodb", metav1.GetOptions{})
		_, sErr := kube.CoreV1().Services("mcp-server").Get(ctx, "mongodb", metav1.GetOptions{})
		return apierrors.IsNotFound(dErr) && apierrors.IsNotFound(sErr)
	})
}
