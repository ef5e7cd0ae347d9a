package resources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// admitWith admits h1, naming secret as its spec.secretRef, under
// HCC_HOST_SECRET_REQUIRE_LABEL=requireLabel.
func admitWith(secret *corev1.Secret, requireLabel bool) resources.Admission {
	h := resourcestest.NewHost("h1", resourcestest.WithSecretRef("env"))
	c := &clerumv1alpha1.Context{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "c1", UID: "uid-c1"},
		Spec: clerumv1alpha1.ContextSpec{ContextID: "ctx-1"}}
	h.Spec.ContextRef = c.Name
	opts := resourcestest.Options
	opts.SecretRequireLabel = requireLabel
	return resources.Admit(h, c, []*clerumv1alpha1.Context{c}, func(name string) *corev1.Secret {
		if secret == nil || name != secret.Name {
			return nil
		}
		return secret
	}, "mcp-server", opts)
}

func envSecret(typ corev1.SecretType, labels map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "env", Labels: labels}, Type: typ}
}

// The spec.secretRef rule of docs/host.md in both modes of
// HCC_HOST_SECRET_REQUIRE_LABEL: the kinds no Host may read are refused in
// both, an unlabelled Secret only in the strict one.
func TestSecretRefRule(t *testing.T) {
	forH1 := map[string]string{resources.LabelSecretForHost: "h1"}
	tests := []struct {
		name   string
		secret *corev1.Secret
		// block and message under the default, then under the strict rule.
		block, strictBlock string
		message            string
	}{
		{name: "missing", block: reasons.SecretsMissing, strictBlock: reasons.SecretsMissing,
			message: "Secret env does not exist"},
		{name: "a service-account token", secret: envSecret(corev1.SecretTypeServiceAccountToken, forH1),
			block: reasons.InvalidSpec, strictBlock: reasons.InvalidSpec,
			message: "Secret env may not be a Host's: it is a service-account token"},
		{name: "a dockercfg registry credential", secret: envSecret(corev1.SecretTypeDockercfg, nil),
			block: reasons.InvalidSpec, strictBlock: reasons.InvalidSpec,
			message: "Secret env may not be a Host's: it is a registry credential (kubernetes.io/dockercfg)"},
		{name: "a dockerconfigjson registry credential", secret: envSecret(corev1.SecretTypeDockerConfigJson, forH1),
			block: reasons.InvalidSpec, strictBlock: reasons.InvalidSpec,
			message: "Secret env may not be a Host's: it is a registry credential (kubernetes.io/dockerconfigjson)"},
		{name: "one of HCC's", secret: envSecret(corev1.SecretTypeOpaque, map[string]string{names.LabelManagedBy: names.ManagedByValue, resources.LabelSecretForHost: "h1"}),
			block: reasons.InvalidSpec, strictBlock: reasons.InvalidSpec,
			message: "Secret env may not be a Host's: it is managed by HCC (label clerum.io/managed-by=host-context-controller)"},
		{name: "labelled for another Host", secret: envSecret(corev1.SecretTypeOpaque, map[string]string{resources.LabelSecretForHost: "h2"}),
			block: reasons.SecretsMissing, strictBlock: reasons.SecretsMissing,
			message: `Secret env is labelled clerum.io/secret-for-host="h2": it was made for another Host, which is refused whatever HCC_HOST_SECRET_REQUIRE_LABEL says`},
		{name: "labelled for no Host (an empty value)", secret: envSecret(corev1.SecretTypeOpaque, map[string]string{resources.LabelSecretForHost: ""}),
			block: reasons.SecretsMissing, strictBlock: reasons.SecretsMissing,
			message: `Secret env is labelled clerum.io/secret-for-host="": it was made for another Host, which is refused whatever HCC_HOST_SECRET_REQUIRE_LABEL says`},
		{name: "unlabelled", secret: envSecret(corev1.SecretTypeOpaque, nil), strictBlock: reasons.SecretsMissing,
			message: "Secret env exists and is labelled for no Host, which HCC_HOST_SECRET_REQUIRE_LABEL=false allows"},
		{name: "another manager's", secret: envSecret("", map[string]string{names.LabelManagedBy: "someone-else"}), strictBlock: reasons.SecretsMissing,
			message: "Secret env exists and is labelled for no Host, which HCC_HOST_SECRET_REQUIRE_LABEL=false allows"},
		{name: "labelled for the Host", secret: envSecret(corev1.SecretTypeOpaque, forH1),
			message: "Secret env exists and is labelled for this Host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := admitWith(tt.secret, false)
			assert.True(t, a.SecretsChecked)
			assert.Equal(t, tt.block, a.Block, "by default")
			assert.Equal(t, tt.block == "", a.SecretsOK)
			assert.Equal(t, tt.message, a.SecretsMessage)

			strict := admitWith(tt.secret, true)
			assert.Equal(t, tt.strictBlock, strict.Block, "under HCC_HOST_SECRET_REQUIRE_LABEL=true")
			assert.Equal(t, tt.strictBlock == "", strict.SecretsOK)
			if tt.strictBlock == reasons.SecretsMissing && tt.block == "" {
				assert.Equal(t, "Secret env is not labelled clerum.io/secret-for-host=h1, which HCC_HOST_SECRET_REQUIRE_LABEL=true requires of a Host's Secret", strict.SecretsMessage)
			}
		})
	}
}

// The Role grants spec.secretRef's Secret exactly when the rule admits it:
// Plan prints nothing for a refused Host, and MakeChildren's Role leaves out
// a Secret the admission did not pass.
func TestTheRoleGrantsTheSecretOnlyWhenAdmitted(t *testing.T) {
	h := resourcestest.NewHost("h1", resourcestest.WithSecretRef("env"))
	granted := func(a resources.Admission) []string {
		c, err := resources.MakeChildren(h, a, resourcestest.Options)
		require.NoError(t, err)
		return c.Role.Rules[1].ResourceNames
	}
	admitted := admitWith(envSecret(corev1.SecretTypeOpaque, nil), false)
	require.Empty(t, admitted.Block)
	assert.Equal(t, []string{"host-h1-mcp-host-runtime-tokens", "env"}, granted(admitted), "the default rule admits an unlabelled Secret")

	refused := admitWith(envSecret(corev1.SecretTypeOpaque, nil), true)
	require.Equal(t, reasons.SecretsMissing, refused.Block)
	assert.Equal(t, []string{"host-h1-mcp-host-runtime-tokens"}, granted(refused), "the strict rule refuses it")
	children, err := resources.Plan(h, refused, resourcestest.Options)
	require.NoError(t, err)
	assert.Empty(t, children)
}
