package kittest

import (
	"context"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	core "k8s.io/client-go/testing"
)

// AssertWatchesOnlyName runs the reconciler's informers until synced
// reports true and asserts that each list and watch of the built-in
// resource (its plural, "configmaps") they sent selected the one object
// name by field selector, and that there was one. It proves an informer
// caches one named object rather than a namespace's every object of the
// kind. The informers have stopped when it returns.
func (f *Fixture) AssertWatchesOnlyName(resource, name string, synced func() bool) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.deps.Informers.Start(ctx.Done())
	defer f.deps.Informers.Shutdown() // after cancel: it waits for the informers to stop
	defer cancel()
	require.Eventually(f.t, synced, 5*time.Second, 10*time.Millisecond)
	var lists int
	for _, a := range f.Kube.Actions() {
		if a.GetResource().Resource != resource || (a.GetVerb() != "list" && a.GetVerb() != "watch") {
			continue
		}
		lists++
		var fs string
		switch a := a.(type) {
		case core.ListAction:
			fs = a.GetListRestrictions().Fields.String()
		case core.WatchAction:
			fs = a.GetWatchRestrictions().Fields.String()
		}
		assert.Equal(f.t, "metadata.name="+name, fs, "%s", a.GetVerb())
	}
	assert.NotZero(f.t, lists)
}
