package netpol

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// coldFleet is an empty cluster holding 2 Contexts of 2 servers each and
// a server no Context names, with the real planner.
func coldFleet(t *testing.T) (*fixture, *Controller, *[]string) {
	w := world{}
	w.contexts, w.servers = inventory(2, 2)
	w.servers = append(w.servers, &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "lonely"},
		Spec:       clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
	})
	f, c := newFixture(t, w)
	c.plan = nil
	// What happened, in order: each policy write and each server released.
	var seq []string
	f.Kube.PrependReactor("*", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "create":
			seq = append(seq, "create "+a.(core.CreateAction).GetObject().(*networkingv1.NetworkPolicy).Name)
		case "delete":
			seq = append(seq, "delete "+a.(core.DeleteAction).GetName())
		}
		return false, nil, nil
	})
	f.egress.onLanded = func(s string) { seq = append(seq, "release "+s) }
	return f, c, &seq
}

// position returns the index of the first entry of seq with prefix.
func position(t *testing.T, seq []string, prefix string) int {
	for i, s := range seq {
		if strings.HasPrefix(s, prefix) {
			return i
		}
	}
	t.Fatalf("no %q in %v", prefix, seq)
	return -1
}

// On a cold start each server is released as soon as its own policies
// land, after the namespace-wide layers and every revocation: not after
// the whole fleet's policies.
func TestServersAreReleasedAsTheirPoliciesLand(t *testing.T) {
	f, c, seq := coldFleet(t)
	require.NoError(t, fullPass(c))
	s := *seq
	lastDefault := 0
	for i, w := range s {
		if strings.HasPrefix(w, "create deny-all-") || strings.HasPrefix(w, "create allow-") {
			lastDefault = i
		}
	}
	assert.Less(t, lastDefault, position(t, s, "release "), "L0 and L1 land before any server is released")
	assert.Equal(t, "release lonely", s[position(t, s, "release ")], "a server with nothing to create goes first")
	for _, server := range []string{"s0000-00", "s0000-01", "s0001-00", "s0001-01"} {
		released := position(t, s, "release "+server)
		for i, w := range s {
			if strings.HasPrefix(w, "create ") && strings.Contains(w, server) {
				assert.Less(t, i, released, "%s is released after %s", server, w)
			}
		}
	}
	// The first server with allows is released before the last one's are
	// written.
	assert.Less(t, position(t, s, "release s0000-00"), position(t, s, "create ctx-c0001-s0001-01"))
	assert.Equal(t, []string{"lonely@7", "s0000-00@7", "s0000-01@7", "s0001-00@7", "s0001-01@7"}, f.egress.landed,
		"each once, with the snapshot the pass planned from")
}

// A server a write of the pass failed for is not released early; nor is
// any server while a revocation or a default deny has not landed.
func TestAServerWithAFailedWriteIsNotReleasedEarly(t *testing.T) {
	t.Run("its own create failed", func(t *testing.T) {
		f, c, _ := coldFleet(t)
		f.failingCreates("ctx-c0000-s0000-01")
		require.Error(t, fullPass(c))
		assert.Equal(t, []string{"lonely@7", "s0000-00@7", "s0001-00@7", "s0001-01@7"}, f.egress.landed)
		assert.True(t, f.egress.report.Failed.Has("s0000-01"), "the pass's report keeps its gate closed")
	})
	t.Run("a revocation failed", func(t *testing.T) {
		f, c, _ := coldFleet(t)
		stale := policy("mcp-server", "ctx-gone-s9", "context-allow", 3000)
		stale.Labels["clerum.io/context"], stale.Labels["clerum.io/mcpserver"] = "gone", "s9"
		_, err := f.Kube.NetworkingV1().NetworkPolicies("mcp-server").Create(t.Context(), stale, metav1.CreateOptions{})
		require.NoError(t, err)
		f.SyncCaches()
		c.observed.contextIDRetired("gone")
		f.Kube.PrependReactor("delete", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
			return true, nil, fmt.Errorf("the API server is down")
		})
		require.Error(t, fullPass(c))
		assert.Empty(t, f.egress.landed, "an old allow may survive: every server waits for the pass's report")
	})
	t.Run("the default deny failed", func(t *testing.T) {
		f, c, _ := coldFleet(t)
		f.failingCreates("deny-all-mcp-server")
		require.Error(t, fullPass(c))
		assert.Empty(t, f.egress.landed)
	})
}
