package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// ImpersonatingKubeconfig writes a copy of the admin kubeconfig that acts
// as user in groups, for running a binary under the RBAC of a deploy
// manifest.
func (c *ControlPlane) ImpersonatingKubeconfig(user string, groups ...string) string {
	c.t.Helper()
	path, err := c.WriteImpersonatingKubeconfig(user, groups...)
	if err != nil {
		c.t.Fatalf("control plane: %v", err)
	}
	return path
}

// WriteImpersonatingKubeconfig is ImpersonatingKubeconfig outside a test.
func (c *ControlPlane) WriteImpersonatingKubeconfig(user string, groups ...string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		return "", err
	}
	for _, info := range cfg.AuthInfos {
		info.Impersonate = user
		info.ImpersonateGroups = groups
	}
	path := filepath.Join(c.dir, fmt.Sprintf("kubeconfig-%s", strings.NewReplacer(":", "-", "/", "-").Replace(user)))
	return path, clientcmd.WriteToFile(*cfg, path)
}

// ApplyRBAC creates the Roles, RoleBindings, ClusterRoles and
// ClusterRoleBindings of a manifest file (other kinds are an error) and
// returns the Roles, so tests can inspect what the manifest grants.
func ApplyRBAC(ctx context.Context, kube kubernetes.Interface, path string) ([]rbacv1.Role, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var roles []rbacv1.Role
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, err
		}
		switch meta.Kind {
		case "Role":
			var role rbacv1.Role
			if err = yaml.UnmarshalStrict([]byte(doc), &role); err == nil {
				_, err = kube.RbacV1().Roles(role.Namespace).Create(ctx, &role, metav1.CreateOptions{})
				roles = append(roles, role)
			}
		case "RoleBinding":
			var binding rbacv1.RoleBinding
			if err = yaml.UnmarshalStrict([]byte(doc), &binding); err == nil {
				_, err = kube.RbacV1().RoleBindings(binding.Namespace).Create(ctx, &binding, metav1.CreateOptions{})
			}
		case "":
			continue // a comment-only document
		default:
			err = fmt.Errorf("unexpected kind %q", meta.Kind)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return roles, nil
}
