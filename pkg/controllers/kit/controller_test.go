package kit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
	"github.com/clerum/hcc/pkg/names"
)

// controllerFixture is a Controller over fake clientsets whose Sync records
// the keys it is given.
type controllerFixture struct {
	kube  *kubefake.Clientset
	hcc   *hccfake.Clientset
	deps  Deps
	clock *clocktesting.FakeClock
	logs  *syncedBuffer

	mu     sync.Mutex
	synced []cache.ObjectName
}

func newControllerFixture(t *testing.T) *controllerFixture {
	t.Helper()
	f := &controllerFixture{kube: kubefake.NewClientset(), hcc: hccfake.NewClientset(),
		clock: clocktesting.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)), logs: &syncedBuffer{}}
	reg := prometheus.NewRegistry()
	f.deps = Deps{Kube: f.kube, HCC: f.hcc, Informers: NewInformers(f.kube, f.hcc), Registry: reg,
		Queues: NewQueues(reg, f.clock), Clock: f.clock, Log: zerolog.New(f.logs)}
	return f
}

func (f *controllerFixture) spec() Spec[cache.ObjectName] {
	return Spec[cache.ObjectName]{Name: "test", BaseDelay: time.Millisecond, MaxDelay: time.Second, ErrorsMetric: "test_errors_total",
		Sync: func(_ context.Context, key cache.ObjectName) (Result, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.synced = append(f.synced, key)
			return Result{}, nil
		}}
}

func (f *controllerFixture) keys() []cache.ObjectName {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cache.ObjectName(nil), f.synced...)
}

// run starts the informers and c, and returns a function that stops both
// and returns Run's error.
func (f *controllerFixture) run(t *testing.T, c *Controller[cache.ObjectName]) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.deps.Informers.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() error {
		cancel()
		err := <-done
		f.deps.Informers.Shutdown()
		return err
	}
}

func TestForQueuesTheObjectAndOwnsQueuesItsOwner(t *testing.T) {
	f := newControllerFixture(t)
	c := NewController(f.deps, f.spec())
	servers := f.deps.Informers.HCC("mcp-server").Clerum().V1alpha1().McpServers().Informer()
	deployments := f.deps.Informers.Kube("mcp-server", ManagedObjects, "deployments").Apps().V1().Deployments().Informer()
	c.For(servers)
	c.Owns(OwnerByRefOrLabel("clerum.io/v1alpha1", "McpServer", "mcp-server", names.LabelMcpServer), deployments)
	require.NoError(t, c.Err())
	stop := f.run(t, c)
	defer func() { require.NoError(t, stop()) }()

	ctx := context.Background()
	require.NoError(t, f.hcc.Tracker().Add(&clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1"}}))
	_, err := f.kube.AppsV1().Deployments("mcp-server").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "mcp-s2",
		Labels:          map[string]string{names.LabelManagedBy: names.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "clerum.io/v1alpha1", Kind: "McpServer", Name: "s2", UID: "u2", Controller: ptr.To(true)}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(f.keys()) == 2 }, 5*time.Second, time.Millisecond)
	assert.ElementsMatch(t, []cache.ObjectName{{Namespace: "mcp-server", Name: "s1"}, {Namespace: "mcp-server", Name: "s2"}}, f.keys(),
		"the McpServer queues itself, the Deployment its owner")
}

// A handler that cannot be added (the informer has stopped) fails Run at
// once, and is counted, instead of leaving the reconciler deaf to a kind.
func TestAWiringErrorFailsRun(t *testing.T) {
	f := newControllerFixture(t)
	c := NewController(f.deps, f.spec())
	stopped := cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.Deployment{}, 0, cache.Indexers{})
	stop := make(chan struct{})
	close(stop)
	stopped.Run(stop) // returns at once: the informer has stopped
	c.Watches(stopped, cache.ResourceEventHandlerFuncs{})
	require.Error(t, c.Err())
	err := c.Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "test: wiring")
	assert.True(t, c.Queue().ShuttingDown(), "the queue is shut down on the way out")
	var m dto.Metric
	require.NoError(t, c.Errors().WithLabelValues("test").Write(&m))
	assert.Equal(t, 1.0, m.GetCounter().GetValue())
	assert.Empty(t, f.keys())
}

// For on a queue whose keys are not namespace/name, without a Spec.Key,
// is a wiring error, not a panic on the first event.
func TestForWithoutAKeyMappingIsAWiringError(t *testing.T) {
	f := newControllerFixture(t)
	c := NewController(f.deps, Spec[string]{Name: "strings", BaseDelay: time.Millisecond, MaxDelay: time.Second,
		Sync: func(context.Context, string) (Result, error) { return Result{}, nil }})
	c.For(f.deps.Informers.HCC("mcp-server").Clerum().V1alpha1().McpServers().Informer())
	require.Error(t, c.Err())

	keyed := NewController(f.deps, Spec[string]{Name: "names", BaseDelay: time.Millisecond, MaxDelay: time.Second,
		Key:  func(n cache.ObjectName) string { return n.Name },
		Sync: func(context.Context, string) (Result, error) { return Result{}, nil }})
	keyed.For(f.deps.Informers.HCC("mcp-server").Clerum().V1alpha1().Contexts().Informer())
	require.NoError(t, keyed.Err())
}

// Run syncs nothing before a WaitFor channel closes, and every declared
// cache has synced by then.
func TestRunWaitsForItsCachesAndWaitFor(t *testing.T) {
	f := newControllerFixture(t)
	require.NoError(t, f.hcc.Tracker().Add(&clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1"}}))
	c := NewController(f.deps, f.spec())
	servers := f.deps.Informers.HCC("mcp-server").Clerum().V1alpha1().McpServers().Informer()
	c.For(servers)
	ready := make(chan struct{})
	c.WaitFor(ready)
	var startedSynced bool
	c.OnStart(func(context.Context) error { startedSynced = servers.HasSynced(); return nil })
	stop := f.run(t, c)
	require.Eventually(t, servers.HasSynced, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // the add event is queued; no worker may run yet
	assert.Empty(t, f.keys(), "no sync before WaitFor's channel closes")
	close(ready)
	require.Eventually(t, func() bool { return len(f.keys()) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, stop())
	assert.True(t, startedSynced, "OnStart runs after the caches synced")
}

// Resync calls its function on the reconciler's clock, and Run returns
// only after every Beside function has.
func TestResyncTicksAndRunJoinsWhatRunsBeside(t *testing.T) {
	f := newControllerFixture(t)
	c := NewController(f.deps, f.spec())
	var mu sync.Mutex
	ticks := 0
	c.Resync(time.Minute, func() { mu.Lock(); ticks++; mu.Unlock() })
	var besideDone bool
	c.Beside(func(ctx context.Context) {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		besideDone = true
		mu.Unlock()
	})
	stop := f.run(t, c)
	// The ticker starts with Run, at a moment the test cannot see: step
	// the clock until it has ticked.
	require.Eventually(t, func() bool {
		f.clock.Step(time.Minute)
		mu.Lock()
		defer mu.Unlock()
		return ticks > 0
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, stop())
	mu.Lock()
	defer mu.Unlock()
	assert.True(t, besideDone, "Run returned before a Beside function did")
}

func TestLogForNamesTheReconcilerAndTheObject(t *testing.T) {
	f := newControllerFixture(t)
	c := NewController(f.deps, f.spec())
	log := c.LogFor(cache.ObjectName{Namespace: "mcp-server", Name: "s1"})
	log.Info().Msg("hello")
	assert.Contains(t, f.logs.String(), `"controller":"test"`)
	assert.Contains(t, f.logs.String(), `"object":"mcp-server/s1"`)
}

// Run never starts a reconciler whose declared caches have not synced: a
// watched informer that never syncs holds it until shutdown.
func TestRunWaitsForEveryDeclaredCache(t *testing.T) {
	for _, declare := range []string{"Watches", "Reads"} {
		t.Run(declare, func(t *testing.T) {
			f := newControllerFixture(t)
			c := NewController(f.deps, f.spec())
			never := cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.Deployment{}, 0, cache.Indexers{}) // never run
			if declare == "Watches" {
				c.Watches(never, cache.ResourceEventHandlerFuncs{})
			} else {
				c.Reads(never)
			}
			started := false
			c.OnStart(func(context.Context) error { started = true; return nil })
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := c.Run(ctx)
			require.ErrorIs(t, err, ErrStoppedBeforeSync)
			assert.False(t, started)
			assert.True(t, c.Queue().ShuttingDown(), "the queue is shut down on the way out")
		})
	}
}

// An OnStart function that fails fails Run, and no sync runs.
func TestAFailingStartFailsRun(t *testing.T) {
	f := newControllerFixture(t)
	require.NoError(t, f.hcc.Tracker().Add(&clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1"}}))
	c := NewController(f.deps, f.spec())
	c.For(f.deps.Informers.HCC("mcp-server").Clerum().V1alpha1().McpServers().Informer())
	c.OnStart(func(context.Context) error { return errors.New("no startup round") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.deps.Informers.Start(ctx.Done())
	defer f.deps.Informers.Shutdown()
	err := c.Run(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no startup round")
	assert.True(t, c.Queue().ShuttingDown(), "the queue is shut down on the way out")
	time.Sleep(20 * time.Millisecond)
	assert.Empty(t, f.keys())
}

// Two reconcilers naming one error counter share it, each under its label.
func TestReconcilersShareANamedErrorCounter(t *testing.T) {
	f := newControllerFixture(t)
	a := NewController(f.deps, f.spec())
	spec := f.spec()
	spec.Name = "other"
	b := NewController(f.deps, spec)
	require.NoError(t, a.Err())
	require.NoError(t, b.Err())
	assert.Same(t, a.Errors(), b.Errors())
}

// A shutdown while Run waits for a WaitFor channel is a clean stop: no
// sync, no error, the queue shut down.
func TestAShutdownDuringWaitForIsACleanStop(t *testing.T) {
	f := newControllerFixture(t)
	require.NoError(t, f.hcc.Tracker().Add(&clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1"}}))
	c := NewController(f.deps, f.spec())
	servers := f.deps.Informers.HCC("mcp-server").Clerum().V1alpha1().McpServers().Informer()
	c.For(servers)
	c.WaitFor(make(chan struct{})) // never closes
	ctx, cancel := context.WithCancel(context.Background())
	f.deps.Informers.Start(ctx.Done())
	defer f.deps.Informers.Shutdown()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	require.Eventually(t, servers.HasSynced, 5*time.Second, time.Millisecond)
	// WaitForSync polls every 100 ms: give Run time to pass it and reach
	// the WaitFor channel before the shutdown.
	time.Sleep(300 * time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	assert.True(t, c.Queue().ShuttingDown())
	assert.Empty(t, f.keys())
}

// A reconciler whose keys are not objects names them its own way.
func TestLogKeyNamesKeysThatAreNoObjects(t *testing.T) {
	f := newControllerFixture(t)
	c := NewController(f.deps, Spec[string]{Name: "passes", BaseDelay: time.Millisecond, MaxDelay: time.Second,
		LogKey: func(k string) (string, string) { return "pass", k },
		Sync:   func(context.Context, string) (Result, error) { return Result{}, errors.New("boom") }})
	log := c.LogFor("full")
	log.Info().Msg("hello")
	c.Add("full")
	c.Loop().ProcessNext(context.Background())
	logs := f.logs.String()
	assert.Equal(t, 2, strings.Count(logs, `"pass":"full"`), logs)
	assert.NotContains(t, logs, `"object"`)
}
