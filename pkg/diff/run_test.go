package diff

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	core "k8s.io/client-go/testing"

	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/kit"
)

// lister is a reconciler that lists Secrets once, then reports a full
// NetworkPolicy pass (what settle waits for) and idles.
type lister struct{ deps kit.Deps }

func (l lister) Name() string { return "lister" }

func (l lister) Run(ctx context.Context) error {
	passes := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "clerum_hcc_netpol_pass_duration_seconds"}, []string{"kind"})
	l.deps.Registry.MustRegister(passes)
	_, _ = l.deps.Kube.CoreV1().Secrets("mcp-host").List(ctx, metav1.ListOptions{})
	passes.WithLabelValues("full").Observe(0)
	<-ctx.Done()
	return nil
}

func runWith(t *testing.T, live dynamic.Interface, timeout time.Duration) (*Report, error) {
	t.Helper()
	return Run(context.Background(), Options{
		Live:   live,
		Build:  func(deps kit.Deps) ([]kit.Reconciler, error) { return []kit.Reconciler{lister{deps}}, nil },
		Config: &config.Config{},
		Settle: 200 * time.Millisecond, Timeout: timeout,
	})
}

// A read the RBAC forbids voids the run (exit 2): a reconciler that could
// not read decided from less than a leader sees, though it went on.
func TestARunThatCouldNotReadIsAnError(t *testing.T) {
	live := dynamicfake.NewSimpleDynamicClient(scheme)
	live.PrependReactor("list", "secrets", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil)
	})
	report, err := runWith(t, live, 10*time.Second)
	require.Error(t, err, "a forbidden list is no empty report: %+v", report)
	assert.True(t, apierrors.IsForbidden(err), "the error is the read's: %v", err)

	report, err = runWith(t, dynamicfake.NewSimpleDynamicClient(scheme), 10*time.Second)
	require.NoError(t, err)
	assert.True(t, report.Empty())
}

// A live read the API server never answers ends with the run: diff
// returns at its timeout, not never.
func TestALiveReadEndsWithTheRun(t *testing.T) {
	var once sync.Once
	asked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(asked) })
		<-r.Context().Done()
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	live, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { _, err := runWith(t, live, time.Second); done <- err }()
	<-asked
	select {
	case err := <-done:
		assert.ErrorContains(t, err, "did not settle within 1s")
	case <-time.After(10 * time.Second):
		t.Fatal("diff is still waiting for the API server")
	}
}
