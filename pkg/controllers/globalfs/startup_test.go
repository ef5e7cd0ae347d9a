package globalfs

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/controllers/globalfs/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
)

// TestStartup: Run's first full pass and every resync sync each
// GlobalFileSystem the cache holds, one no event named among them.
func TestStartup(t *testing.T) {
	const resync = time.Minute
	kittest.StartupCheck{
		Kind:   "GlobalFileSystem",
		Resync: resync,
		Fixture: func(f *kittest.Fixture) (func(context.Context) error, cache.InformerSynced) {
			c := New(f.Deps(), Config{Namespace: resourcestest.Namespace, Build: resourcestest.Options, Resync: resync, Workers: 1, SeedKey: testSeedKey})
			return c.Run, f.Deps().Informers.HCC(resourcestest.Namespace).Clerum().V1alpha1().GlobalFileSystems().Informer().HasSynced
		},
		Owner: func(name string) runtime.Object { return resourcestest.NewGFS(name) },
	}.Run(t)
}
