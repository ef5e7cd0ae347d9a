package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The manifests in deploy/ set some variables as literal env entries. These
// tests load them through the same table as the binaries, so a shipped value
// that a binary would refuse, or a misspelt name it would ignore, fails here
// rather than in a cluster.

func deployFile(t *testing.T, parts ...string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(append([]string{"..", "..", "deploy"}, parts...)...))
	require.NoError(t, err)
	return raw
}

// deploymentEnv returns the env of the named container of the Deployment in
// file.
func deploymentEnv(t *testing.T, file, container string) []corev1.EnvVar {
	t.Helper()
	var d appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict(deployFile(t, file), &d))
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == container {
			return c.Env
		}
	}
	require.Failf(t, "no container", "%s has no container %q", file, container)
	return nil
}

// literalEnv returns the env entries with a literal value, and checks that
// every entry names a declared variable.
func literalEnv(t *testing.T, vars []corev1.EnvVar) env {
	t.Helper()
	e := env{}
	for _, v := range vars {
		assert.Contains(t, declared, v.Name, "%s is not a variable HCC reads", v.Name)
		if v.ValueFrom == nil {
			e[v.Name] = v.Value
		}
	}
	return e
}

func TestShippedControllerEnvironment(t *testing.T) {
	vars := deploymentEnv(t, "base/controller/deployment.yaml", "hcc-controller")
	cfg := mustLoad(t, Controller, literalEnv(t, vars))

	assert.Equal(t, []string{"mcp-server", "sandbox-recipes", "rpc-proxy", "sandbox-ui"}, cfg.NetPol.RuntimeNamespaces)
	assert.NotContains(t, cfg.NetPol.RuntimeNamespaces, cfg.Namespaces.Host,
		"a deny-all in the host namespace would cut mcp-host off its LLM APIs")
	assert.Equal(t, []string{"sandbox-ui"}, cfg.NetPol.MinimalInfraNamespaces)
	assert.Equal(t, []string{"ghcr.io/evenfire-ai/", "mongodb/", "mcr.microsoft.com/", "clerum/"}, cfg.ImagePolicy.AllowedPrefixes)
	assert.False(t, cfg.ImagePolicy.Enforce, "the shipped allowlist runs in audit mode")
	assert.NotContains(t, warnedVars(cfg), "CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES")

	t.Run("render accepts the same values", func(t *testing.T) {
		mustLoad(t, Render, literalEnv(t, vars))
	})
}

// TestShippedControllerRBACCoversEveryPolicyNamespace: the controller writes
// NetworkPolicies in each runtime namespace and in the host namespace (the
// egress side of the context pairs), so each needs the writer Role, bound to
// the controller's service account.
func TestShippedControllerRBACCoversEveryPolicyNamespace(t *testing.T) {
	cfg := mustLoad(t, Controller, literalEnv(t, deploymentEnv(t, "base/controller/deployment.yaml", "hcc-controller")))

	roles := map[string][]rbacv1.Role{}
	bound := map[string][]string{} // namespace -> Role names bound to hcc-controller
	for _, doc := range strings.Split(string(deployFile(t, "base", "controller", "rbac.yaml")), "\n---\n") {
		var meta struct{ Kind string }
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "Role":
			var r rbacv1.Role
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &r))
			roles[r.Namespace] = append(roles[r.Namespace], r)
		case "RoleBinding":
			var b rbacv1.RoleBinding
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &b))
			for _, s := range b.Subjects {
				if s.Kind == "ServiceAccount" && s.Name == "hcc-controller" && s.Namespace == "control-plane" {
					bound[b.Namespace] = append(bound[b.Namespace], b.RoleRef.Name)
				}
			}
		}
	}
	writes := func(r rbacv1.Role) bool {
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, "networking.k8s.io") && slices.Contains(rule.Resources, "networkpolicies") &&
				slices.Contains(rule.Verbs, "create") && slices.Contains(rule.Verbs, "update") && slices.Contains(rule.Verbs, "delete") {
				return true
			}
		}
		return false
	}
	for _, ns := range append(slices.Clone(cfg.NetPol.RuntimeNamespaces), cfg.Namespaces.Host) {
		ok := false
		for _, r := range roles[ns] {
			ok = ok || (writes(r) && slices.Contains(bound[ns], r.Name))
		}
		assert.True(t, ok, "deploy/base/controller/rbac.yaml lets hcc-controller write no NetworkPolicy in %s", ns)
	}
}

func TestShippedAPIEnvironment(t *testing.T) {
	vars := deploymentEnv(t, "base/api/deployment.yaml", "hcc-api")
	literalEnv(t, vars)
	refs := map[string]*corev1.EnvVarSource{}
	for _, v := range vars {
		refs[v.Name] = v.ValueFrom
	}
	// hcc-api refuses to start without the key; the desktop route would be
	// unauthenticated without the token, so neither reference is optional.
	key := refs["HCC_MCP_HOST_JWT_PUBLIC_KEY"]
	require.NotNil(t, key)
	require.NotNil(t, key.ConfigMapKeyRef)
	assert.False(t, ptrTrue(key.ConfigMapKeyRef.Optional), "the public key ConfigMap is optional")
	token := refs["CONTEXT_MAPPER_DESKTOP_API_TOKEN"]
	require.NotNil(t, token)
	require.NotNil(t, token.SecretKeyRef)
	assert.Equal(t, "hcc-desktop-api-token", token.SecretKeyRef.Name)
	assert.Equal(t, "token", token.SecretKeyRef.Key)
	assert.False(t, ptrTrue(token.SecretKeyRef.Optional), "the desktop token Secret is optional")
}

func ptrTrue(b *bool) bool { return b != nil && *b }
