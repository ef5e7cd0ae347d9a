package sharedfs

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources/resourcestest"
)

// TestStartup: Run's first full pass and every resync sync each
// SharedFileSystem the cache holds, one no event named among them.
func TestStartup(t *testing.T) {
	const resync = time.Minute
	kittest.StartupCheck{
		Kind:   "SharedFileSystem",
		Resync: resync,
		Fixture: func(f *kittest.Fixture) (func(context.Context) error, cache.InformerSynced) {
			cfg := testConfig
			cfg.Resync = resync
			c := New(f.Deps(), cfg)
			return c.Run, f.Deps().Informers.HCC(ns).Clerum().V1alpha1().SharedFileSystems().Informer().HasSynced
		},
		Owner: func(name string) runtime.Object { return resourcestest.NewFS(name) },
	}.Run(t)
}
