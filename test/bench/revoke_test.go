//go:build integration

package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/controlplane"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

// revokePoll is how often the revocation wait looks for the allows: the
// resolution of revoke-ms.
const revokePoll = 10 * time.Millisecond

// revokeTimeout bounds one revocation or restore; it is a hang detector,
// not a latency bound.
const revokeTimeout = 2 * time.Minute

// allowPolicy is one NetworkPolicy a Context's grant of a server holds
// (docs/names.md: context-allow and rpc-proxy-egress).
type allowPolicy struct{ namespace, name string }

func allowPolicies(contextID, server string) []allowPolicy {
	return []allowPolicy{
		{"mcp-server", "ctx-" + contextID + "-" + server},
		{"mcp-host", "ctx-" + contextID + "-" + server + "-egress"},
		{"rpc-proxy", "rpc-egress-" + contextID + "-" + server},
	}
}

// measureRevocations edits revocations Contexts of the converged fleet f,
// each to drop one server, and returns for each the time from the edit's
// answer to the last of that pair's allow policies gone; after each it puts
// the server back and waits for the allows to return, so the fleet ends as
// it was.
func measureRevocations(b *testing.B, cp *controlplane.ControlPlane, f fleet) []time.Duration {
	b.Helper()
	ctx := context.Background()
	admin := cp.Config()
	admin.QPS, admin.Burst = 2000, 4000
	hcc := clientset.NewForConfigOrDie(admin).ClerumV1alpha1().Contexts("mcp-server")
	kube := kubernetes.NewForConfigOrDie(admin)
	present := func(p allowPolicy) bool {
		_, err := kube.NetworkingV1().NetworkPolicies(p.namespace).Get(ctx, p.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false
		}
		require.NoError(b, err)
		return true
	}
	waitAll := func(what string, policies []allowPolicy, want bool) {
		err := wait.PollUntilContextTimeout(ctx, revokePoll, revokeTimeout, true, func(context.Context) (bool, error) {
			for _, p := range policies {
				if present(p) != want {
					return false, nil
				}
			}
			return true, nil
		})
		require.NoError(b, err, what)
	}

	latencies := make([]time.Duration, 0, revocations)
	for i := range revocations {
		c := i % f.contexts
		server := serverName(c*f.serversPerContext + (i/f.contexts)%f.serversPerContext)
		obj, err := hcc.Get(ctx, contextName(c), metav1.GetOptions{})
		require.NoError(b, err)
		policies := allowPolicies(obj.Spec.ContextID, server)
		for _, p := range policies {
			require.True(b, present(p), "converged: %s/%s allows %s", p.namespace, p.name, server)
		}

		obj.Spec.McpServers = slices.DeleteFunc(obj.Spec.McpServers, func(s string) bool { return s == server })
		obj, err = hcc.Update(ctx, obj, metav1.UpdateOptions{})
		require.NoError(b, err)
		edited := time.Now()
		waitAll("Context "+contextName(c)+" dropped "+server+": its allows are gone", policies, false)
		latencies = append(latencies, time.Since(edited))

		obj.Spec.McpServers = append(obj.Spec.McpServers, server)
		_, err = hcc.Update(ctx, obj, metav1.UpdateOptions{})
		require.NoError(b, err)
		waitAll("Context "+contextName(c)+" lists "+server+" again: its allows are back", policies, true)
	}
	return latencies
}
