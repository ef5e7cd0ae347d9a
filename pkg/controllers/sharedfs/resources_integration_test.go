//go:build integration

package sharedfs

import (
	"fmt"
	"strings"
	"testing"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources/resourcestest"
)

// TestBuildersEmitWhatTheAPIServerKeeps creates every object the builders
// make and proves that a second ensure writes nothing: the builders emit
// the API server's defaults. It tests package resources, but lives here to
// share the control plane and world of TestControllerConverges.
func TestBuildersEmitWhatTheAPIServerKeeps(t *testing.T) {
	cases := map[string]struct {
		fs   *clerumv1alpha1.SharedFileSystem
		opts func(*resources.Options)
	}{
		"full":      {fs: resourcestest.NewFS("full", resourcestest.WithHosts("bob", "alice"), resourcestest.WithDirs("a/b", "c"), resourcestest.WithSize("20Gi"))},
		"bare":      {fs: resourcestest.NewFS("bare"), opts: func(o *resources.Options) { o.ImagePullSecret, o.DefaultStorageClass = "", "" }},
		"long name": {fs: resourcestest.NewFS(strings.Repeat("l", 63), resourcestest.WithHosts(strings.Repeat("h", 63)))},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, fmt.Sprint("rt-", i))
			if tc.opts != nil {
				tc.opts(&w.opts)
			}
			live, owner := w.createFS(t, tc.fs)
			kittest.RoundTrip(t, cp.Config(), kit.Deployments, owner, resources.BuildDeployment(live, resources.KeyDigest("k"), w.opts))
			kittest.RoundTrip(t, cp.Config(), kit.Services, owner, resources.BuildService(live, w.opts))
			kittest.RoundTrip(t, cp.Config(), kit.PersistentVolumeClaims, owner, resources.BuildClaim(live, w.opts))
			kittest.RoundTrip(t, cp.Config(), kit.NetworkPolicies, owner, resources.BuildIngressPolicy(live, w.opts))
			if p := resources.BuildEgressPolicy(live, w.opts); p != nil {
				kittest.RoundTrip(t, cp.Config(), kit.NetworkPolicies, owner, p)
			}
		})
	}
}
