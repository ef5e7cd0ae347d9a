//go:build integration

package netpol

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// TestAPIServerAcceptsThePlanUnchanged creates every planned policy in a real
// kube-apiserver: the plan must pass its validation (strict CIDR rules
// included) and come back exactly as planned after defaulting, which is what
// lets the applier compare desired and live objects without writing.
func TestAPIServerAcceptsThePlanUnchanged(t *testing.T) {
	cp := controlplane.Start(t, controlplane.Options{})
	client := kubernetes.NewForConfigOrDie(cp.Config())
	ctx := context.Background()

	opts := defaultOptions(t)
	opts.NodeLocalDNSCIDR = netip.MustParsePrefix("169.254.20.10/32")
	opts.K8sAPICIDRs = append(opts.K8sAPICIDRs, netip.MustParsePrefix("fd00:10:96::1/128"))
	plan := Compute(richInventory(), opts)
	require.Empty(t, plan.Rejections)

	namespaces := map[string]bool{}
	for _, p := range plan.Policies {
		namespaces[p.Namespace] = true
	}
	for ns := range namespaces {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	for _, want := range plan.Policies {
		policies := client.NetworkingV1().NetworkPolicies(want.Namespace)
		_, err := policies.Create(ctx, want.DeepCopy(), metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		require.NoError(t, err, "%s/%s", want.Namespace, want.Name)

		got, err := policies.Get(ctx, want.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want.Labels, got.Labels, want.Name)
		assert.True(t, apiequality.Semantic.DeepEqual(want.Spec, got.Spec), "%s/%s changed on the way in:\nwant %+v\ngot  %+v", want.Namespace, want.Name, want.Spec, got.Spec)
	}
}
