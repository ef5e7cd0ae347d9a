package kit

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Result is what a sync asks of the queue besides success or failure.
type Result struct {
	// RequeueAfter, when positive, brings the key back after that long
	// (a credential to refresh, a DNS answer to renew).
	RequeueAfter time.Duration
}

// ErrCacheBehind marks a sync that met the API server ahead of the informer
// cache (it is retried quietly, like a Conflict or an AlreadyExists).
var ErrCacheBehind = errors.New("the cache is behind the API server")

// Loop runs one reconciler's workers over its queue with one error policy
// (docs/reconcilers.md):
//
//   - success forgets the key's failures, and a Result.RequeueAfter adds it
//     back after that long;
//   - a NotFound of the key's own object (Resource, the reconciler's kind)
//     is absorbed: the object is gone, and its deletion was the last event;
//   - an optimistic-lock Conflict, an AlreadyExists or ErrCacheBehind — the
//     cache lagging the API server — and ErrBeingDeleted (a child still on
//     its way out) are logged at info and retried on the rate limiter;
//   - any other error is logged once, counted, and retried on the rate
//     limiter;
//   - a panic in Sync is recovered, logged with its stack and retried like
//     an error: one bad object must not take the process down.
type Loop[K comparable] struct {
	// Name names the reconciler in logs and in the Errors metric.
	Name  string
	Queue workqueue.TypedRateLimitingInterface[K]
	Sync  func(ctx context.Context, key K) (Result, error)
	Log   zerolog.Logger
	// Resource is the kind the keys name. A NotFound of it under the key's
	// name is absorbed; a NotFound of anything else (a child of the same
	// name, a namespace) is an error. Zero: no NotFound is absorbed.
	Resource schema.GroupResource
	// Errors, when set, counts failed syncs by reconciler name.
	Errors *prometheus.CounterVec
	// LogKey, when set, is the log field and value naming a key; nil: the
	// key as namespace/name under LogObject.
	LogKey func(K) (field, value string)
}

// logKey returns the log field and value naming key.
func (l *Loop[K]) logKey(key K) (string, string) {
	if l.LogKey != nil {
		return l.LogKey(key)
	}
	return LogObject, keyString(key)
}

// Run starts workers goroutines and blocks until ctx is done and every one
// of them has returned; the queue is shut down on the way out, so a sync in
// progress finishes and no new one starts.
func (l *Loop[K]) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for l.ProcessNext(ctx) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	l.Queue.ShutDown()
	wg.Wait()
}

// ProcessNext syncs the next key and reports false once the queue is shut
// down.
func (l *Loop[K]) ProcessNext(ctx context.Context) bool {
	key, shutdown := l.Queue.Get()
	if shutdown {
		return false
	}
	defer l.Queue.Done(key)
	start := time.Now()
	res, err := l.sync(ctx, key)
	if err != nil && ctx.Err() != nil {
		// Shutting down: the sync was cut short, not failed. The key stays
		// for the next leader's resync.
		l.Queue.Forget(key)
		return true
	}
	l.handle(key, res, err, time.Since(start))
	return true
}

// sync calls Sync, turning a panic into an error.
func (l *Loop[K]) sync(ctx context.Context, key K) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return l.Sync(ctx, key)
}

func (l *Loop[K]) handle(key K, res Result, err error, took time.Duration) {
	field, value := l.logKey(key)
	log := l.Log.With().Str(LogController, l.Name).Str(field, value).Logger()
	switch {
	case err == nil:
		log.Debug().Dur("took", took).Dur("requeueAfter", res.RequeueAfter).Msg("synced")
		l.Queue.Forget(key)
		if res.RequeueAfter > 0 {
			l.Queue.AddAfter(key, res.RequeueAfter)
		}
	case l.isGone(key, err):
		log.Debug().Msg("object is gone")
		l.Queue.Forget(key)
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), errors.Is(err, ErrCacheBehind):
		log.Info().Err(err).Msg("cache behind the API server; retrying")
		l.Queue.AddRateLimited(key)
	case errors.Is(err, ErrBeingDeleted):
		// A child on its way out is waited for, not failed on: its
		// deletion event brings the key back.
		log.Info().Err(err).Msg("waiting for a child to be deleted")
		l.Queue.AddRateLimited(key)
	default:
		if l.Errors != nil {
			l.Errors.WithLabelValues(l.Name).Inc()
		}
		log.Error().Err(err).Int("retries", l.Queue.NumRequeues(key)).Msg("sync failed; retrying with backoff")
		l.Queue.AddRateLimited(key)
	}
}

// isGone reports whether err is a NotFound of the key's own object. The
// generated listers name the resource in the singular, the API server in the
// plural.
func (l *Loop[K]) isGone(key any, err error) bool {
	var status apierrors.APIStatus
	if l.Resource.Resource == "" || !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name != "" && d.Name == keyName(key) && d.Group == l.Resource.Group &&
		(d.Kind == l.Resource.Resource || d.Kind+"s" == l.Resource.Resource)
}

func keyName(key any) string {
	switch k := key.(type) {
	case cache.ObjectName:
		return k.Name
	case string:
		return k
	case fmt.Stringer:
		return k.String()
	}
	return ""
}

func keyString(key any) string {
	if s, ok := key.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprint(key)
}
