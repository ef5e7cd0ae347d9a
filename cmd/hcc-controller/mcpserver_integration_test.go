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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

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
	waitUntil := poller(t, 60*time.Second)

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

// TestEnforceModeSwitchedOnAndOff: a server deployed in audit mode (the
// shipped default) is stopped when enforce mode is switched on — scaled to
// zero, its template untouched, its Context allow revoked, hcc-api
// reporting it deployed and ready false and refusing its credential — and
// switching back scales the same template up again: no new rollout.
func TestEnforceModeSwitchedOnAndOff(t *testing.T) {
	apiBinary := apitest.Build(t)
	c := startCluster(t)
	kube := c.kube
	hcc := clientset.NewForConfigOrDie(c.cp.Config())
	ctx := context.Background()
	waitUntil := poller(t, 60*time.Second)
	_, err := kube.CoreV1().Secrets("mcp-server").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"token": "s3cret"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Name: "rogue"},
		Spec: clerumv1alpha1.McpServerSpec{
			Image:     "evil.io/rogue:1",
			Replicas:  ptr.To[int32](2),
			Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE},
			Auth:      &clerumv1alpha1.Auth{SecretRef: clerumv1alpha1.SecretKeyReference{Name: "creds", Key: "token"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: "tenant", McpServers: []string{"rogue"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	host, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Create(ctx, &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Name: "h1"}, Spec: clerumv1alpha1.HostSpec{ContextRef: "tenant"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	getServer := func() *clerumv1alpha1.McpServer {
		s, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Get(ctx, "rogue", metav1.GetOptions{})
		require.NoError(t, err)
		return s
	}
	getDeployment := func() *appsv1.Deployment {
		d, err := kube.AppsV1().Deployments("mcp-server").Get(ctx, "rogue", metav1.GetOptions{})
		require.NoError(t, err)
		return d
	}
	allowExists := func() bool {
		_, err := kube.NetworkingV1().NetworkPolicies("mcp-server").Get(ctx, "ctx-tenant-rogue", metav1.GetOptions{})
		return err == nil
	}
	markAvailable := func() {
		d := getDeployment()
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: *d.Spec.Replicas, ReadyReplicas: *d.Spec.Replicas,
			AvailableReplicas: *d.Spec.Replicas, UpdatedReplicas: *d.Spec.Replicas}
		_, err := kube.AppsV1().Deployments("mcp-server").UpdateStatus(ctx, d, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	env := func(enforce string) map[string]string {
		return map[string]string{"HCC_LEADER_ELECT": "false", "CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST": enforce}
	}

	// Audit mode: it deploys, its allow is planned.
	ctrl := startController(t, c, env("false"))
	waitUntil("audit mode deploys the refused image", func() bool {
		d, err := kube.AppsV1().Deployments("mcp-server").Get(ctx, "rogue", metav1.GetOptions{})
		return err == nil && ptr.Deref(d.Spec.Replicas, 0) == 2
	})
	waitUntil("its Context allow exists", allowExists)
	markAvailable()
	waitUntil("status says ready", func() bool { return getServer().Status.Ready })
	template := getDeployment().Spec.Template.DeepCopy()
	generation := getDeployment().Generation
	ctrl.stop(t) // a restart with another configuration; its exit code is not under test

	// Enforce mode switched on.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	_, err = controlplane.ApplyRBAC(ctx, kube, filepath.Join("..", "..", "deploy", "base", "api", "rbac.yaml"))
	require.NoError(t, err)
	ctrl = startController(t, c, env("true"))
	waitUntil("the Deployment is scaled to zero", func() bool { return ptr.Deref(getDeployment().Spec.Replicas, 1) == 0 })
	assert.Equal(t, *template, getDeployment().Spec.Template, "the pod template is untouched")
	waitUntil("status says not deployed, not ready, ImageNotAllowed", func() bool {
		s := getServer()
		ready := meta.FindStatusCondition(s.Status.Conditions, clerumv1alpha1.ConditionReady)
		return !s.Status.Deployed && !s.Status.Ready && ready != nil && ready.Reason == "ImageNotAllowed"
	})
	waitUntil("its Context allow is revoked", func() bool { return !allowExists() })

	api := apitest.Start(t, apiBinary, c.cp.ImpersonatingKubeconfig("system:serviceaccount:control-plane:hcc-api",
		"system:serviceaccounts", "system:serviceaccounts:control-plane"), apitest.PublicKeyPEM(t, key),
		"CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST=true")
	api.WaitReady(t)
	token := apitest.HostToken(t, key, "h1", host.UID)
	code, body := api.Do(t, http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", token, `{"serverName":"rogue"}`)
	assert.Equal(t, http.StatusNotFound, code)
	assert.NotContains(t, body, "s3cret")
	code, body = api.Do(t, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
	require.Equal(t, http.StatusOK, code)
	inventory := apitest.DecodeInventory(t, body)
	require.Len(t, inventory.Servers, 1)
	assert.Equal(t, map[string]any{"deployed": false, "ready": false}, inventory.Servers[0]["status"])
	api.Stop(t)
	ctrl.stop(t) // a restart with another configuration; its exit code is not under test

	// Back to audit mode: the same template scales back up.
	startController(t, c, env("false"))
	waitUntil("the Deployment is scaled back up", func() bool { return ptr.Deref(getDeployment().Spec.Replicas, 0) == 2 })
	d := getDeployment()
	assert.Equal(t, *template, d.Spec.Template, "restored without a rollout: the pod template is the one it had")
	assert.Equal(t, generation+2, d.Generation, "two writes, both to replicas")
	waitUntil("its Context allow is back", allowExists)
}

// TestMcpServerCRDRules: the API server refuses a platform app value as a
// name, more than 20 replicas and resources beyond 16 CPUs or 64Gi, and a
// server created before the name rule stays writable.
func TestMcpServerCRDRules(t *testing.T) {
	c := startCluster(t)
	hcc := clientset.NewForConfigOrDie(c.cp.Config())
	ctx := context.Background()
	servers := hcc.ClerumV1alpha1().McpServers("mcp-server")
	server := func(name string, change func(*clerumv1alpha1.McpServerSpec)) *clerumv1alpha1.McpServer {
		s := &clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clerumv1alpha1.McpServerSpec{
			Image: "mongodb/x:1", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}}}
		if change != nil {
			change(&s.Spec)
		}
		return s
	}
	for _, name := range names.ReservedMcpServerNames {
		_, err := servers.Create(ctx, server(name, nil), metav1.CreateOptions{})
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", name, err)
		if err != nil {
			assert.Contains(t, err.Error(), "reserved for a platform workload")
		}
	}
	limits := func(cpu, memory string) func(*clerumv1alpha1.McpServerSpec) {
		return func(s *clerumv1alpha1.McpServerSpec) {
			s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
			if cpu != "" {
				s.Resources.Limits[corev1.ResourceCPU] = resource.MustParse(cpu)
				s.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
			}
			if memory != "" {
				s.Resources.Limits[corev1.ResourceMemory] = resource.MustParse(memory)
			}
		}
	}
	for name, tc := range map[string]struct {
		change func(*clerumv1alpha1.McpServerSpec)
		ok     bool
	}{
		"replicas-20":     {func(s *clerumv1alpha1.McpServerSpec) { s.Replicas = ptr.To[int32](20) }, true},
		"replicas-21":     {func(s *clerumv1alpha1.McpServerSpec) { s.Replicas = ptr.To[int32](21) }, false},
		"at-the-bounds":   {limits("16", "64Gi"), true},
		"millicores":      {limits("500m", "512Mi"), true},
		"cpu-over":        {limits("16500m", ""), false},
		"memory-over":     {limits("", "65Gi"), false},
		"memory-in-bytes": {limits("", "68719476737"), false},
	} {
		_, err := servers.Create(ctx, server(name, tc.change), metav1.CreateOptions{})
		if tc.ok {
			assert.NoError(t, err, name)
		} else {
			assert.True(t, apierrors.IsInvalid(err), "%s: %v", name, err)
		}
	}

	// A server named before the rule existed: install the CRD without it,
	// create the server, put the rule back. The server stays writable.
	dyn := dynamic.NewForConfigOrDie(c.cp.Config())
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd, err := crds.Get(ctx, "mcpservers.clerum.io", metav1.GetOptions{})
	require.NoError(t, err)
	original := crd.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	rules, _, _ := unstructured.NestedSlice(v, "schema", "openAPIV3Schema", "x-kubernetes-validations")
	var kept []any
	for _, r := range rules {
		if _, ok := r.(map[string]any)["optionalOldSelf"]; !ok {
			kept = append(kept, r)
		}
	}
	require.Len(t, kept, len(rules)-1, "the name rule is the one with optionalOldSelf")
	require.NoError(t, unstructured.SetNestedSlice(v, kept, "schema", "openAPIV3Schema", "x-kubernetes-validations"))
	versions[0] = v
	require.NoError(t, unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"))
	_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := servers.Create(ctx, server("mcp-proxy", nil), metav1.CreateOptions{})
		return err == nil, nil
	}), "the old CRD admits the name")
	now, err := crds.Get(ctx, "mcpservers.clerum.io", metav1.GetOptions{})
	require.NoError(t, err)
	original.SetResourceVersion(now.GetResourceVersion())
	_, err = crds.Update(ctx, original, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := servers.Create(ctx, server("rpc-proxy", nil), metav1.CreateOptions{})
		return apierrors.IsInvalid(err), nil
	}), "the rule is back")
	old, err := servers.Get(ctx, "mcp-proxy", metav1.GetOptions{})
	require.NoError(t, err)
	old.Spec.Description = "edited after the rule"
	_, err = servers.Update(ctx, old, metav1.UpdateOptions{})
	assert.NoError(t, err, "an existing server keeps its name and stays writable")
}
