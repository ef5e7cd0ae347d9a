package deploy

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
)

// roleAllows evaluates rules as the RBAC authorizer does for one request on
// a namespaced resource: some rule matches its verb, group, resource and,
// when the rule names any, the object's name. name is empty for a create
// (and a list): a rule with resourceNames never matches it.
func roleAllows(rules []rbacv1.PolicyRule, verb, group, resource, name string) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if !has(r.Verbs, verb) || !has(r.APIGroups, group) || !has(r.Resources, resource) {
			continue
		}
		if len(r.ResourceNames) == 0 || (name != "" && slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// TestLeaderElectionRoleNamesItsLease: hcc-controller reads and renews the
// Lease hcc-controller only, never another component's; it can create the
// Lease on first start, which RBAC cannot restrict by name.
func TestLeaderElectionRoleNamesItsLease(t *testing.T) {
	for _, tree := range []string{productionTree, minikubeTree} {
		var role rbacv1.Role
		typed(t, find(t, build(t, tree), "Role", "hcc-controller-leader-election"), &role)
		assert.Equal(t, "control-plane", role.Namespace)
		lease := func(verb, name string) bool {
			return roleAllows(role.Rules, verb, "coordination.k8s.io", "leases", name)
		}
		for _, verb := range []string{"get", "update"} {
			assert.True(t, lease(verb, "hcc-controller"), "%s: %s the hcc-controller Lease", tree, verb)
			assert.False(t, lease(verb, "kube-scheduler"), "%s: %s another Lease", tree, verb)
		}
		assert.True(t, lease("create", ""), "%s: the first replica creates the Lease", tree)
		for _, verb := range []string{"list", "watch", "patch", "delete", "deletecollection"} {
			assert.False(t, lease(verb, ""), "%s: %s Leases", tree, verb)
			assert.False(t, lease(verb, "hcc-controller"), "%s: %s the Lease", tree, verb)
		}
	}
}

// TestNothingShippedWritesMcpHostConfig: mcp-host-config chooses the
// environment of every Host and the key every WFC trusts, so only the
// platform's deployer may write ConfigMaps in mcp-host. No Role the install
// ships grants that, HCC's included (the controller reads them), and so
// none can be handed on: RBAC lets a subject grant only what it holds.
func TestNothingShippedWritesMcpHostConfig(t *testing.T) {
	for _, tree := range []string{productionTree, minikubeTree} {
		objs := build(t, tree)
		assert.Empty(t, ofKind(objs, "ClusterRole"), tree)
		assert.Empty(t, ofKind(objs, "ClusterRoleBinding"), tree)
		for _, o := range ofKind(objs, "Role") {
			if o.GetNamespace() != "mcp-host" {
				continue
			}
			var role rbacv1.Role
			typed(t, o, &role)
			for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
				assert.False(t, roleAllows(role.Rules, verb, "", "configmaps", "mcp-host-config"),
					"%s: Role %s may %s mcp-host-config", tree, role.Name, verb)
				assert.False(t, roleAllows(role.Rules, verb, "", "configmaps", ""),
					"%s: Role %s may %s ConfigMaps in mcp-host", tree, role.Name, verb)
			}
		}
	}
}

// TestControllerReadsHostPodsOnly: the NetworkPolicy operator lists and
// watches the pods of mcp-host (it withholds a contextId's new allows while
// a pod of another holder carries it) and writes no pod anywhere; no other
// namespace's pods are read.
func TestControllerReadsHostPodsOnly(t *testing.T) {
	for _, tree := range []string{productionTree, minikubeTree} {
		reads := map[string]bool{}
		for _, o := range ofKind(build(t, tree), "Role") {
			var role rbacv1.Role
			typed(t, o, &role)
			for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
				assert.False(t, roleAllows(role.Rules, verb, "", "pods", ""), "%s: Role %s/%s may %s pods", tree, role.Namespace, role.Name, verb)
			}
			if roleAllows(role.Rules, "list", "", "pods", "") && roleAllows(role.Rules, "watch", "", "pods", "") {
				reads[role.Namespace] = true
			}
		}
		assert.Equal(t, map[string]bool{"mcp-host": true}, reads, "%s: namespaces whose pods a shipped Role lists and watches", tree)
	}
}
