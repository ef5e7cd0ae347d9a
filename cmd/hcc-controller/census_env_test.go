package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/pkg/config"
)

func controllerDeploymentWith(c corev1.Container) *appsv1.Deployment {
	c.Name = controllerContainer
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "control-plane", Name: controllerDeployment},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "sidecar", Env: []corev1.EnvVar{{Name: capVar, Value: "99"}}}, c},
		}}},
	}
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "control-plane", Name: name}, Data: data}
}

func resolveControllerEnv(t *testing.T, objs ...runtime.Object) (map[string]sourced, []string, error) {
	t.Helper()
	return deploymentEnv(context.Background(), fake.NewClientset(objs...), "control-plane", controllerDeployment)
}

// The kubelet's order: envFrom sources in turn, then env over them; a
// missing optional reference sets nothing, so what envFrom set stays.
func TestDeploymentEnvFollowsTheKubeletsPrecedence(t *testing.T) {
	dep := controllerDeploymentWith(corev1.Container{
		EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "first"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "second"}}},
			{Prefix: "CONTEXT_MAPPER_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "prefixed"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
		},
		Env: []corev1.EnvVar{
			{Name: "CONTEXT_MAPPER_RUNTIME_NAMESPACES", Value: "mcp-server,rpc-proxy"},
			{Name: capPercentVar, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "caps"}, Key: "percent"}}},
			{Name: "CONTEXT_MAPPER_HOST_NAMESPACE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "caps"}, Key: "absent", Optional: ptr.To(true)}}},
			{Name: "CONTEXT_MAPPER_CONTROL_PLANE_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "CONTEXT_MAPPER_RUNTIME_NAMESPACES", Value: "mcp-server,sandbox-ui"},
		},
	})
	env, notes, err := resolveControllerEnv(t, dep,
		configMap("first", map[string]string{capVar: "3", "CONTEXT_MAPPER_NAMESPACE": "tenants", "CONTEXT_MAPPER_RUNTIME_NAMESPACES": "mcp-server"}),
		configMap("second", map[string]string{capVar: "4", "CONTEXT_MAPPER_HOST_NAMESPACE": "hosts", "HCC_TARGET_NAMESPACE": "hosts"}),
		configMap("prefixed", map[string]string{"SANDBOX_NAMESPACE": "recipes"}),
		configMap("caps", map[string]string{"percent": "35"}))
	require.NoError(t, err)
	assert.Equal(t, map[string]sourced{
		capVar:                                   {"4", "envFrom ConfigMap second", true},
		"CONTEXT_MAPPER_NAMESPACE":               {"tenants", "envFrom ConfigMap first", true},
		"CONTEXT_MAPPER_HOST_NAMESPACE":          {"hosts", "envFrom ConfigMap second", true},
		"HCC_TARGET_NAMESPACE":                   {"hosts", "envFrom ConfigMap second", true},
		"CONTEXT_MAPPER_SANDBOX_NAMESPACE":       {"recipes", "envFrom ConfigMap prefixed", true},
		"CONTEXT_MAPPER_RUNTIME_NAMESPACES":      {"mcp-server,sandbox-ui", "env value", true},
		capPercentVar:                            {"35", "env from ConfigMap caps key percent", true},
		"CONTEXT_MAPPER_CONTROL_PLANE_NAMESPACE": {"control-plane", "env from the pod's namespace", true},
	}, env, "the sidecar's environment is not the controller's")
	assert.Equal(t, []string{"envFrom Secret creds not read: a census variable it sets is not seen"}, notes)

	// Unset variables take the compiled default, whatever this process's
	// environment says.
	t.Setenv("CONTEXT_MAPPER_RPC_PROXY_NAMESPACE", "elsewhere")
	cfg, err := config.LoadFrom(config.Render, withCensusVars(env))
	require.NoError(t, err)
	assert.Equal(t, 4, cfg.NetPol.OrphanDeleteCap)
	assert.Equal(t, 35, cfg.NetPol.OrphanDeleteCapPercent)
	assert.Equal(t, "rpc-proxy", cfg.Namespaces.RPCProxy)
	assert.Equal(t, []string{"mcp-server", "sandbox-ui"}, cfg.NetPol.RuntimeNamespaces)
	assert.Equal(t, "compiled default", sourceOf(env, "CONTEXT_MAPPER_RPC_PROXY_NAMESPACE"))
	assert.Equal(t, "from "+capVar+", envFrom ConfigMap second", capSource(env, capVar))
}

func TestDeploymentEnvRefusesWhatItCannotRead(t *testing.T) {
	ref := func(name, key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}
	}
	for name, tc := range map[string]struct {
		c    corev1.Container
		objs []runtime.Object
		err  string
	}{
		"a required ConfigMap that does not exist": {
			c:   corev1.Container{Env: []corev1.EnvVar{{Name: capVar, ValueFrom: ref("caps", "absolute")}}},
			err: "Deployment control-plane/hcc-controller: " + capVar + ": ConfigMap control-plane/caps has no key absolute",
		},
		"a required key that does not exist": {
			c:    corev1.Container{Env: []corev1.EnvVar{{Name: capVar, ValueFrom: ref("caps", "absolute")}}},
			objs: []runtime.Object{configMap("caps", nil)},
			err:  "ConfigMap control-plane/caps has no key absolute",
		},
		"a required envFrom ConfigMap that does not exist": {
			c:   corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "all"}}}}},
			err: "envFrom ConfigMap control-plane/all does not exist",
		},
		"a cap from a Secret": {
			c: corev1.Container{Env: []corev1.EnvVar{{Name: capVar, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}},
			err: capVar + ": set from a Secret or a pod field",
		},
		"a $(VAR) reference": {
			c:   corev1.Container{Env: []corev1.EnvVar{{Name: "CONTEXT_MAPPER_NAMESPACE", Value: "$(TENANT)"}}},
			err: "a $(VAR) reference",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := resolveControllerEnv(t, append(tc.objs, controllerDeploymentWith(tc.c))...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
	t.Run("no Deployment", func(t *testing.T) {
		_, _, err := resolveControllerEnv(t)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the controller's Deployment control-plane/hcc-controller does not exist")
	})
}
