package mcpserver

import (
	corev1 "k8s.io/api/core/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
)

// secretIndex indexes McpServers by the names of the Secrets they read
// (envSecret, unless it is ignored, and auth), so a Secret event re-queues
// exactly its dependents.
const secretIndex = "secret"

func referencedSecrets(obj any) ([]string, error) {
	s, ok := obj.(*clerumv1alpha1.McpServer)
	if !ok {
		return nil, nil
	}
	var out []string
	if es := resources.EnvSecretOf(s); es != nil {
		out = append(out, es.Name)
	}
	if s.Spec.Auth != nil && s.Spec.Auth.SecretRef.Name != "" {
		out = append(out, s.Spec.Auth.SecretRef.Name)
	}
	return out, nil
}

// checkSecrets validates s's envSecret and auth references against the
// digest cache: each Secret must exist and hold every key named.
func (c *Controller) checkSecrets(s *clerumv1alpha1.McpServer) (resources.SecretCheck, error) {
	return resources.CheckSecrets(s, c.cfg.Build.DigestKey, func(name string) (*corev1.Secret, error) { return c.secrets.Secrets(s.Namespace).Get(name) })
}
