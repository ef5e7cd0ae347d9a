package kit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// syncedBuffer is a log sink safe for the loop's goroutines.
type syncedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type loopFixture struct {
	loop     *Loop[cache.ObjectName]
	clock    *clocktesting.FakeClock
	registry *prometheus.Registry
	logs     *syncedBuffer
	errors   *prometheus.CounterVec
	result   Result
	err      error
	panics   bool
	calls    int
}

var key = cache.ObjectName{Namespace: "mcp-server", Name: "s1"}

func newLoopFixture() *loopFixture {
	f := &loopFixture{
		clock:    clocktesting.NewFakeClock(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)),
		registry: prometheus.NewRegistry(),
		logs:     &syncedBuffer{},
		errors:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "errors_total"}, []string{"controller"}),
	}
	queues := NewQueues(f.registry, f.clock)
	f.loop = &Loop[cache.ObjectName]{
		Name:     "test",
		Queue:    New(queues, "test", Backoff[cache.ObjectName](time.Second, time.Minute)),
		Log:      zerolog.New(f.logs),
		Resource: clerumv1alpha1.Resource("mcpservers"),
		Errors:   f.errors,
		Sync: func(context.Context, cache.ObjectName) (Result, error) {
			f.calls++
			if f.panics {
				panic("a bad object")
			}
			return f.result, f.err
		},
	}
	return f
}

// once adds the key and processes it.
func (f *loopFixture) once(t *testing.T) {
	t.Helper()
	f.loop.Queue.Add(key)
	require.True(t, f.loop.ProcessNext(context.Background()))
}

// stepUntilQueued moves the fake clock past d and keeps nudging it until
// the delayed key is back: the delaying queue arms its timer from its own
// goroutine, which may read the clock before or after a single step.
func (f *loopFixture) stepUntilQueued(t *testing.T, d time.Duration) {
	t.Helper()
	f.clock.Step(d)
	require.Eventually(t, func() bool {
		f.clock.Step(time.Millisecond)
		return f.loop.Queue.Len() == 1
	}, 5*time.Second, time.Millisecond)
}

func (f *loopFixture) errorCount(t *testing.T) float64 {
	var m dto.Metric
	require.NoError(t, f.errors.WithLabelValues("test").Write(&m))
	return m.GetCounter().GetValue()
}

func TestLoopErrorPolicy(t *testing.T) {
	gr := clerumv1alpha1.Resource("mcpservers")
	tests := []struct {
		name      string
		err       error
		panics    bool
		retried   bool // rate-limited requeue
		counted   bool // an error the metric counts
		wantLevel string
	}{
		{name: "success forgets the key, noted at debug", err: nil, wantLevel: "debug"},
		{name: "a NotFound of the key's own object is absorbed", err: apierrors.NewNotFound(gr, "s1"), wantLevel: "debug"},
		{name: "a lister NotFound (singular resource) is absorbed", err: apierrors.NewNotFound(clerumv1alpha1.Resource("mcpserver"), "s1"), wantLevel: "debug"},
		{name: "a NotFound of a child of the same name is an error", err: apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "s1"), retried: true, counted: true, wantLevel: "error"},
		{name: "a NotFound of a namespace is an error", err: apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "mcp-server"), retried: true, counted: true, wantLevel: "error"},
		{name: "a Conflict is retried at info", err: apierrors.NewConflict(gr, "s1", errors.New("changed")), retried: true, wantLevel: "info"},
		{name: "an AlreadyExists is retried at info", err: apierrors.NewAlreadyExists(schema.GroupResource{Resource: "services"}, "s1"), retried: true, wantLevel: "info"},
		{name: "a lagging cache is retried at info", err: fmt.Errorf("pass: %w", ErrCacheBehind), retried: true, wantLevel: "info"},
		{name: "a child being deleted is waited for at info", err: fmt.Errorf("deployment: %w", ErrBeingDeleted), retried: true, wantLevel: "info"},
		{name: "any other error is logged once, counted and rate limited", err: errors.New("etcd is sad"), retried: true, counted: true, wantLevel: "error"},
		{name: "a panic is recovered and retried as an error", panics: true, retried: true, counted: true, wantLevel: "error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newLoopFixture()
			f.err, f.panics = tc.err, tc.panics
			f.once(t)
			if tc.retried {
				assert.Equal(t, 1, f.loop.Queue.NumRequeues(key))
				assert.Zero(t, f.loop.Queue.Len(), "rate limited, not at once")
				f.stepUntilQueued(t, time.Second)
			} else {
				assert.Zero(t, f.loop.Queue.NumRequeues(key))
				assert.Zero(t, f.loop.Queue.Len())
			}
			if tc.counted {
				assert.Equal(t, 1.0, f.errorCount(t))
			} else {
				assert.Zero(t, f.errorCount(t))
			}
			logs := f.logs.String()
			if tc.wantLevel == "" {
				assert.Empty(t, logs)
				return
			}
			assert.Equal(t, 1, strings.Count(logs, "\n"), "one log line: %s", logs)
			assert.Contains(t, logs, `"level":"`+tc.wantLevel+`"`)
			assert.Contains(t, logs, `"object":"mcp-server/s1"`)
			assert.Contains(t, logs, `"controller":"test"`)
		})
	}
}

func TestLoopSuccessForgetsEarlierFailures(t *testing.T) {
	f := newLoopFixture()
	f.err = errors.New("boom")
	f.once(t)
	f.once(t)
	require.Equal(t, 2, f.loop.Queue.NumRequeues(key))
	f.err = nil
	f.once(t)
	assert.Zero(t, f.loop.Queue.NumRequeues(key))
}

func TestLoopRequeueAfter(t *testing.T) {
	f := newLoopFixture()
	f.result = Result{RequeueAfter: 10 * time.Minute}
	f.once(t)
	assert.Zero(t, f.loop.Queue.Len())
	assert.Zero(t, f.loop.Queue.NumRequeues(key), "a requeue-after is no failure")
	f.stepUntilQueued(t, 10*time.Minute)
}

func TestLoopRunJoinsItsWorkers(t *testing.T) {
	f := newLoopFixture()
	started := make(chan struct{})
	release := make(chan struct{})
	var finished bool
	f.loop.Sync = func(context.Context, cache.ObjectName) (Result, error) {
		close(started)
		<-release
		finished = true
		return Result{}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.loop.Run(ctx, 3); close(done) }()
	f.loop.Queue.Add(key)
	<-started
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while a sync was under way")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-done
	assert.True(t, finished)
	assert.True(t, f.loop.Queue.ShuttingDown())
}

func TestQueuesExportTheStandardSeries(t *testing.T) {
	f := newLoopFixture()
	f.once(t)
	families, err := f.registry.Gather()
	require.NoError(t, err)
	got := map[string]string{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					got[mf.GetName()] = l.GetValue()
				}
			}
		}
	}
	for _, name := range []string{
		"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds",
		"workqueue_work_duration_seconds", "workqueue_unfinished_work_seconds",
		"workqueue_longest_running_processor_seconds", "workqueue_retries_total",
	} {
		assert.Equal(t, "test", got[name], name)
	}
}
