//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/clerum/hcc/pkg/names"
)

// TestCensusReadsTheCapsOfTheDeployedController: the census judges the
// cluster with the caps and namespaces of the shipped controller
// Deployment as the API server holds it (envFrom a ConfigMap, env over it),
// not with the caller's environment, and says where each came from; with no
// Deployment it fails naming it, unless --from-deployment=false.
func TestCensusReadsTheCapsOfTheDeployedController(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "base", "controller", "deployment.yaml"))
	require.NoError(t, err)
	var dep appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict(raw, &dep))
	ctr := &dep.Spec.Template.Spec.Containers[0]
	require.Equal(t, controllerContainer, ctr.Name)
	ctr.EnvFrom = append(ctr.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "hcc-caps"}}})
	ctr.Env = append(ctr.Env, corev1.EnvVar{Name: capPercentVar, Value: "100"})
	_, err = c.kube.CoreV1().ConfigMaps("control-plane").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "hcc-caps"},
		Data:       map[string]string{capVar: "3", capPercentVar: "1"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.kube.AppsV1().Deployments("control-plane").Create(ctx, &dep, metav1.CreateOptions{})
	require.NoError(t, err)
	// Four allows of a Context that does not exist: orphans, one more than
	// the deployed cap allows.
	for i := range 4 {
		_, err := c.kube.NetworkingV1().NetworkPolicies("mcp-server").Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ctx-gone-s%d", i), Labels: map[string]string{
				names.LabelManagedBy: names.ManagedByValue, names.LabelPolicyType: names.PolicyTypeContextAllow}},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// The caller's environment would let every orphan go.
	t.Setenv(capVar, "100")
	t.Setenv("CONTEXT_MAPPER_RUNTIME_NAMESPACES", "mcp-server")

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"census", "--kubeconfig", c.cp.Kubeconfig()}, &stdout, &stderr), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "caps and namespaces from Deployment control-plane/hcc-controller, container hcc-controller:")
	assert.Regexp(t, `CONTEXT_MAPPER_RUNTIME_NAMESPACES +"mcp-server,sandbox-recipes,rpc-proxy,sandbox-ui" +env value`, out)
	assert.Regexp(t, `CONTEXT_MAPPER_NAMESPACE +\(unset\) +compiled default`, out)
	assert.Contains(t, out, "absolute 3 (from "+capVar+", envFrom ConfigMap hcc-caps), percent 100 (from "+capPercentVar+", env value)",
		"env overrides envFrom; the caller's environment counts for nothing")
	assert.Contains(t, out, "unexplained orphans (only these count against the caps): 4")
	assert.Contains(t, out, "cap would trip: yes, by the absolute rule")

	// Without the Deployment the census refuses to guess.
	require.NoError(t, c.kube.AppsV1().Deployments("control-plane").Delete(ctx, controllerDeployment, metav1.DeleteOptions{}))
	stdout.Reset()
	stderr.Reset()
	assert.Equal(t, 1, run(ctx, []string{"census", "--kubeconfig", c.cp.Kubeconfig()}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "the controller's Deployment control-plane/hcc-controller does not exist")
	assert.Empty(t, stdout.String())

	// Asked to, it judges with the caller's environment as before.
	stdout.Reset()
	stderr.Reset()
	require.Equal(t, 0, run(ctx, []string{"census", "--kubeconfig", c.cp.Kubeconfig(), "--from-deployment=false"}, &stdout, &stderr), stderr.String())
	assert.Contains(t, stdout.String(), "caps and namespaces from this process's environment:")
	assert.Contains(t, stdout.String(), "absolute 100 (from "+capVar+"), percent 20 (compiled default)")
	assert.Contains(t, stdout.String(), "cap would trip: no")
}
