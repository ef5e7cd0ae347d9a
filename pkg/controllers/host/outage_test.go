package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// The Control API down for an hour (docs/host.md, "A Control API
// outage"), on a fake clock.
//
// Why a simulated queue: the workqueue's delays do run on the injected
// clock (kit.NewQueues), but its waiting loop is a goroutine, so a test
// stepping a fake clock cannot tell when a delayed key has reached the
// queue. simQueue is the same queue made deterministic: the real
// kit.Loop (its error policy: forget on success, AddAfter for
// RequeueAfter, AddRateLimited on error) runs one key at a time on the
// controller's own rate limiter (retryBase, retryMax), and the clock is
// stepped to the next key's ready time, or to the next periodic resync
// (the sweep, which queues every Host), whichever comes first. That is
// what one worker (HCC_HOST_WORKERS=1) would do. Informer events are not
// replayed: a write is shown to the caches before the next sync
// (SyncCaches), and what an event would queue, the resync queues too.
//
// The Control API is the real client (pkg/controlapi) against an
// httptest server that answers 503, or drops every connection, for the
// hour. Its retry waits step the fake clock.

const (
	outage = time.Hour
	// Short-lived credentials come due and expire during the outage;
	// long-lived ones come due during it and outlive it.
	shortLifetime = 40 * time.Minute
	longLifetime  = 75 * time.Minute
	// outageRefreshBefore is the refresh window: short credentials come due
	// at T0+10 min and expire at T0+40, long ones come due at T0+45 and
	// expire at T0+75, ten minutes after the Control API is back.
	outageRefreshBefore = 30 * time.Minute
	// outageStart is when the Control API goes down, after T0.
	outageStart = 5 * time.Minute
	// resyncEvery is CONTEXT_MAPPER_HOST_RESYNC_SEC's default.
	resyncEvery = 5 * time.Minute
)

// breakerBound is the most calls one worker sends an unreachable Control
// API in window: breakerThreshold before the breaker opens, then one probe
// each time a pause (breakerBase doubling to breakerMax) has run out. With
// W workers it is breakerThreshold + W − 1 + W × probes.
func breakerBound(window time.Duration) int {
	probes, pause, at := 0, time.Duration(0), time.Duration(0)
	for {
		pause = min(max(2*pause, breakerBase), breakerMax)
		if at += pause; at > window {
			return breakerThreshold + probes
		}
		probes++
	}
}

// syncBound is the most syncs of one Host in window while each fails: the
// first, the retries on the queue's backoff (retryBase doubling to
// retryMax), and for each resync the one it queues and the retry it
// overtakes, which still fires.
func syncBound(window time.Duration) int {
	retries, delay, at := 0, time.Duration(0), time.Duration(0)
	for {
		delay = min(max(2*delay, retryBase), retryMax)
		if at += delay; at > window {
			break
		}
		retries++
	}
	return 1 + retries + 2*int(window/resyncEvery+1)
}

func TestTheBoundsOfAnHourLongOutage(t *testing.T) {
	// 15 s, 30 s, 1, 2, 4 min, then 5 min: 15 probes in the hour.
	assert.Equal(t, 18, breakerBound(outage))
	// 1 s … 256 s (511 s), then ten of 5 min; 13 resyncs.
	assert.Equal(t, 1+19+2*13, syncBound(outage))
}

// simQueue is a deterministic workqueue.TypedRateLimitingInterface on a
// fake clock, with client-go's semantics: a key is queued at most once, a
// key added while it is processed is queued again when it is done, and a
// delayed add of a key already waiting keeps the earlier time.
type simQueue struct {
	clock   *clocktesting.FakeClock
	limiter workqueue.TypedRateLimiter[cache.ObjectName]

	ready      []cache.ObjectName
	dirty      map[cache.ObjectName]bool
	processing map[cache.ObjectName]bool
	waiting    map[cache.ObjectName]time.Time
}

var _ workqueue.TypedRateLimitingInterface[cache.ObjectName] = (*simQueue)(nil)

func newSimQueue(clk *clocktesting.FakeClock) *simQueue {
	return &simQueue{clock: clk, limiter: kit.Backoff[cache.ObjectName](retryBase, retryMax),
		dirty: map[cache.ObjectName]bool{}, processing: map[cache.ObjectName]bool{}, waiting: map[cache.ObjectName]time.Time{}}
}

func (q *simQueue) Add(k cache.ObjectName) {
	if q.dirty[k] {
		return
	}
	q.dirty[k] = true
	if !q.processing[k] {
		q.ready = append(q.ready, k)
	}
}

func (q *simQueue) Len() int { return len(q.ready) }

func (q *simQueue) Get() (cache.ObjectName, bool) {
	k := q.ready[0]
	q.ready = q.ready[1:]
	q.processing[k] = true
	delete(q.dirty, k)
	return k, false
}

func (q *simQueue) Done(k cache.ObjectName) {
	delete(q.processing, k)
	if q.dirty[k] {
		q.ready = append(q.ready, k)
	}
}

func (q *simQueue) ShutDown()          {}
func (q *simQueue) ShutDownWithDrain() {}
func (q *simQueue) ShuttingDown() bool { return false }

func (q *simQueue) AddAfter(k cache.ObjectName, d time.Duration) {
	if d <= 0 {
		q.Add(k)
		return
	}
	at := q.clock.Now().Add(d)
	if w, ok := q.waiting[k]; ok && !at.Before(w) {
		return
	}
	q.waiting[k] = at
}

func (q *simQueue) AddRateLimited(k cache.ObjectName) { q.AddAfter(k, q.limiter.When(k)) }
func (q *simQueue) Forget(k cache.ObjectName)         { q.limiter.Forget(k) }
func (q *simQueue) NumRequeues(k cache.ObjectName) int {
	return q.limiter.NumRequeues(k)
}

// promote queues the waiting keys that are due, soonest first.
func (q *simQueue) promote() {
	now := q.clock.Now()
	var due []cache.ObjectName
	for k, at := range q.waiting {
		if !at.After(now) {
			due = append(due, k)
		}
	}
	slices.SortFunc(due, func(a, b cache.ObjectName) int {
		if c := q.waiting[a].Compare(q.waiting[b]); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, k := range due {
		delete(q.waiting, k)
		q.Add(k)
	}
}

// next is the soonest time a waiting key is due, or zero.
func (q *simQueue) next() time.Time {
	var next time.Time
	for _, at := range q.waiting {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// controlAPI is the Control API of the test: it issues a credential per
// Host with that Host's lifetime, or, while down, answers 503 or drops the
// connection. It counts requests (attempts) and issuances per Host.
type controlAPI struct {
	clock  *clocktesting.FakeClock
	secret []byte
	drop   bool // down: drop connections instead of answering 503

	mu       sync.Mutex
	down     bool
	requests map[string]int
	issued   map[string]int
}

func (a *controlAPI) setDown(down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = down
}

func (a *controlAPI) counts() (requests, issued map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return clone(a.requests), clone(a.issued)
}

func clone(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (a *controlAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct{ Namespace, HostRef, HostUID string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	if _, err := controlapi.VerifyInternalToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), a.secret, a.clock.Now()); err != nil {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	a.mu.Lock()
	a.requests[req.HostRef]++
	down := a.down
	if !down {
		a.issued[req.HostRef]++
	}
	n := a.issued[req.HostRef]
	a.mu.Unlock()
	switch {
	case down && a.drop:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	case down:
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	lifetime := longLifetime
	if strings.HasPrefix(req.HostRef, "short") {
		lifetime = shortLifetime
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"credential": fmt.Sprintf("credential-%s-%d", req.HostRef, n),
		"expiresAt":  a.clock.Now().Add(lifetime).UTC().Format(time.RFC3339),
	})
}

// callLog is the Control API as the controller sees it: every
// BootstrapCredential call, with its time and outcome.
type callLog struct {
	issuer controlapi.CredentialIssuer
	clock  *clocktesting.FakeClock
	mu     sync.Mutex
	calls  []call
}

type call struct {
	host string
	at   time.Time
	err  error
}

func (l *callLog) BootstrapCredential(ctx context.Context, req controlapi.BootstrapRequest) (controlapi.Credential, error) {
	cred, err := l.issuer.BootstrapCredential(ctx, req)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, call{host: req.HostRef, at: l.clock.Now(), err: err})
	return cred, err
}

// between returns the calls made in [from, to), by Host, and how many.
func (l *callLog) between(from, to time.Time) (map[string]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	by, n := map[string]int{}, 0
	for _, c := range l.calls {
		if !c.at.Before(from) && c.at.Before(to) {
			by[c.host]++
			n++
		}
	}
	return by, n
}

// outageSim is the operator, its queue and its Control API.
type outageSim struct {
	*fixture
	q      *simQueue
	loop   *kit.Loop[cache.ObjectName]
	api    *controlAPI
	calls  *callLog
	resync time.Time
	// syncs counts the syncs per Host; writes are the writes sent, in
	// order, with the time.
	syncs  map[string]int
	writes []string
}

var outageHosts = []string{"short-1", "short-2", "short-3", "long-1", "long-2"}

func newOutageSim(t *testing.T, drop bool) *outageSim {
	objs := []runtime.Object{hostConfigMap(), context1()}
	for _, h := range outageHosts {
		objs = append(objs, resourcestest.NewHost(h))
	}
	kf := kittest.NewFixture(t, objs...)
	api := &controlAPI{clock: kf.Clock, secret: []byte("hmac-secret"), drop: drop, requests: map[string]int{}, issued: map[string]int{}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client, err := controlapi.New(controlapi.Options{
		BaseURL: srv.URL, HMACSecret: api.secret, HTTPClient: srv.Client(), Clock: kf.Clock,
		// As cmd/hcc-controller passes them.
		MinLifetime: outageRefreshBefore + MinCredentialMargin, RetryAfterCap: outageRefreshBefore,
		// The retry waits pass on the fake clock.
		Sleep: func(ctx context.Context, d time.Duration) error { kf.Clock.Step(d); return ctx.Err() },
	})
	require.NoError(t, err)
	calls := &callLog{issuer: client, clock: kf.Clock}
	cfg := Config{
		ContextNamespace: contextNS, TargetNamespace: targetNS, Build: resourcestest.Options,
		RefreshBefore: outageRefreshBefore, Resync: resyncEvery, Caps: kit.Caps{Absolute: 10, Percent: 20}, Workers: 1,
	}
	c := New(kf.Deps(), calls, cfg)
	q := newSimQueue(kf.Clock)
	c.queue = q // what the sweep and the handlers queue
	kf.SyncCaches()
	s := &outageSim{
		fixture: &fixture{Fixture: kf, t: t, c: c},
		q:       q, api: api, calls: calls, resync: kf.Clock.Now(), syncs: map[string]int{},
		loop: &kit.Loop[cache.ObjectName]{Name: "host", Queue: q, Sync: func(ctx context.Context, k cache.ObjectName) (kit.Result, error) {
			return c.syncHost(ctx, k)
		}, Log: kf.Deps().Log, Resource: clerumv1alpha1.Resource("hosts"), Errors: c.base.Errors()},
	}
	return s
}

// run drives the operator until the clock reaches until, calling check
// after every sync.
func (s *outageSim) run(until time.Time, check func()) {
	ctx := context.Background()
	for {
		s.q.promote()
		if s.q.Len() > 0 {
			k := s.q.ready[0]
			s.syncs[k.Name]++
			s.loop.ProcessNext(ctx)
			for _, w := range s.Writes() {
				s.writes = append(s.writes, s.Clock.Now().Sub(kittest.T0).String()+" "+w)
			}
			s.SyncCaches() // the informers show the writes
			if check != nil {
				check()
			}
			continue
		}
		next := s.resync
		if w := s.q.next(); !w.IsZero() && w.Before(next) {
			next = w
		}
		if next.After(until) {
			if until.After(s.Clock.Now()) {
				s.Clock.SetTime(until)
			}
			return
		}
		if next.After(s.Clock.Now()) {
			s.Clock.SetTime(next)
		}
		if !s.Clock.Now().Before(s.resync) {
			_, err := s.c.sweep(ctx, sweepKey)
			require.NoError(s.t, err)
			s.resync = s.resync.Add(resyncEvery)
		}
	}
}

// secretsAndDeployments are the writes among writes to Secrets and
// Deployments.
func (s *outageSim) secretsAndDeployments(writes []string) []string {
	var out []string
	for _, w := range writes {
		if strings.Contains(w, " secrets/") || strings.Contains(w, " deployments/") {
			out = append(out, w)
		}
	}
	return out
}

func (s *outageSim) expiryGauge() float64 {
	return counter(s.t, s.Registry, "clerum_hcc_host_credential_expiry_seconds", nil)
}

func TestAnHourLongControlAPIOutage(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop bool
	}{{"503", false}, {"connections dropped", true}} {
		t.Run(tc.name, func(t *testing.T) { testOutage(t, tc.drop) })
	}
}

func testOutage(t *testing.T, drop bool) {
	s := newOutageSim(t, drop)
	t0 := kittest.T0
	down, up := t0.Add(outageStart), t0.Add(outageStart+outage)

	// Before: every Host deployed with a credential, issued at T0.
	s.run(down, nil)
	_, issued := s.api.counts()
	for _, h := range outageHosts {
		require.Equal(t, 1, issued[h], "%s: one credential before the outage", h)
	}
	kept := map[string]*corev1.Secret{}
	for _, h := range outageHosts {
		kept[h] = s.secret(names.HostRuntimeTokens(h))
		require.NotEmpty(t, kept[h].Data[resources.KeyBootstrapCredential])
	}
	expiry := func(h string) time.Time {
		if strings.HasPrefix(h, "short") {
			return t0.Add(shortLifetime)
		}
		return t0.Add(longLifetime)
	}

	// The hour. After every sync: each Secret is as it was, its credential
	// neither deleted nor emptied, expired or not.
	s.api.setDown(true)
	before := len(s.writes)
	unchanged := func() {
		for _, h := range outageHosts {
			live, err := s.Kube.CoreV1().Secrets(hostNS).Get(context.Background(), names.HostRuntimeTokens(h), metav1.GetOptions{})
			require.NoError(t, err, "%s's runtime-token Secret is kept at %s", h, s.Clock.Now().Sub(t0))
			require.Equal(t, kept[h].ResourceVersion, live.ResourceVersion, "%s's runtime-token Secret is not written at %s", h, s.Clock.Now().Sub(t0))
			require.Equal(t, kept[h].Data, live.Data, "%s's credential is kept", h)
		}
		_, n := s.calls.between(down, up)
		require.LessOrEqual(t, n, breakerBound(outage), "calls at %s", s.Clock.Now().Sub(t0))
		for _, h := range outageHosts {
			require.LessOrEqual(t, s.syncs[h], 2+syncBound(outage), "%s's syncs at %s", h, s.Clock.Now().Sub(t0))
		}
	}

	// Halfway through the short credentials' window: due, not expired.
	midway := t0.Add(shortLifetime - 2*time.Minute)
	s.run(midway, unchanged)
	for _, h := range outageHosts[:3] {
		auth := s.condition(h, clerumv1alpha1.ConditionAuthReady)
		assert.Equal(t, metav1.ConditionTrue, auth.Status, "%s: degraded, not down: %s", h, auth.Message)
		assert.Equal(t, reasons.ControlAPIUnavailable, auth.Reason, h)
		assert.Contains(t, auth.Message, "valid until "+expiry(h).Format(time.RFC3339), h)
	}
	assert.Equal(t, expiry("short-1").Sub(s.Clock.Now()).Seconds(), s.expiryGauge(), "the soonest credential")
	assert.Less(t, s.expiryGauge(), (outageRefreshBefore / 2).Seconds(), "the documented alert fires")

	s.run(up, unchanged)
	assert.Empty(t, s.secretsAndDeployments(s.writes[before:]), "no Secret or Deployment written while the Control API is down")
	statusWrites := 0
	for _, w := range s.writes[before:] {
		if strings.HasSuffix(w, "/status") {
			statusWrites++
		}
	}
	t.Logf("in the hour: %d writes, %d of them status applies", len(s.writes)-before, statusWrites)
	by, n := s.calls.between(down, up)
	requests, _ := s.api.counts()
	totalRequests := 0
	for _, h := range outageHosts {
		totalRequests += requests[h]
	}
	totalRequests -= len(outageHosts) // the issuances before
	t.Logf("in the hour: %d calls (bound %d) by Host %v, %d requests (bound %d), syncs %v",
		n, breakerBound(outage), by, totalRequests, controlapi.DefaultMaxAttempts*breakerBound(outage), s.syncs)
	assert.LessOrEqual(t, n, breakerBound(outage), "no storm: calls bounded by the breaker")
	assert.LessOrEqual(t, totalRequests, controlapi.DefaultMaxAttempts*n, "each call at most MaxAttempts requests")
	// The breaker is the fleet's, not each Host's: once open, its probe
	// goes to whichever Host syncs first after the pause, so a Host may
	// spend the hour held back by it (AuthReady says so, below). What must
	// hold is that the fleet keeps probing: no gap between calls, or from
	// the last call to the end, longer than the breaker's longest pause
	// plus the queue's longest backoff.
	assert.GreaterOrEqual(t, n, breakerThreshold+1, "the breaker opened and was probed")
	last := time.Time{}
	for _, c := range s.calls.calls {
		if c.at.Before(down) || !c.at.Before(up) {
			continue
		}
		if !last.IsZero() {
			assert.LessOrEqual(t, c.at.Sub(last), breakerMax+retryMax, "a gap between probes at %s", c.at.Sub(t0))
		}
		last = c.at
	}
	assert.LessOrEqual(t, up.Sub(last), breakerMax+retryMax, "probing until the end")

	// At the end of the hour: the short credentials expired while it was
	// down, the long ones are still valid; AuthReady and the gauge say so.
	for _, h := range outageHosts {
		auth := s.condition(h, clerumv1alpha1.ConditionAuthReady)
		assert.Equal(t, reasons.ControlAPIUnavailable, auth.Reason, h)
		st := s.status(h)
		require.NotNil(t, st.CredentialExpiresAt, "%s: the status shows the expiry of the credential its pods mount", h)
		assert.True(t, st.CredentialExpiresAt.Time.Equal(expiry(h)), "%s: %s", h, st.CredentialExpiresAt)
		if strings.HasPrefix(h, "short") {
			assert.Equal(t, metav1.ConditionFalse, auth.Status, "%s: expired while down: %s", h, auth.Message)
			assert.Contains(t, auth.Message, "the credential has expired", h)
			// Said within one backoff step of the expiry (and the retry
			// waits of one call).
			assert.False(t, auth.LastTransitionTime.Time.Before(expiry(h)), "%s: not before it expired", h)
			assert.LessOrEqual(t, auth.LastTransitionTime.Time.Sub(expiry(h)), retryMax+10*time.Second, h)
		} else {
			assert.Equal(t, metav1.ConditionTrue, auth.Status, "%s: still valid: %s", h, auth.Message)
			assert.Contains(t, auth.Message, "valid until "+expiry(h).Format(time.RFC3339), h)
		}
	}
	assert.Equal(t, expiry("short-1").Sub(s.Clock.Now()).Seconds(), s.expiryGauge(),
		"the gauge shows the expired credentials (negative), not the soonest still valid")
	assert.Negative(t, s.expiryGauge())

	// The Control API returns: each Host gets exactly one credential, within
	// the breaker's longest pause and the queue's longest backoff.
	s.api.setDown(false)
	before = len(s.writes)
	s.run(up.Add(breakerMax+retryMax), nil)
	by, n = s.calls.between(up, s.Clock.Now())
	_, issued = s.api.counts()
	var recovered time.Time
	for _, h := range outageHosts {
		assert.Equal(t, 1, by[h], "%s: one call after the outage", h)
		assert.Equal(t, 2, issued[h], "%s: one credential issued after the outage", h)
		auth := s.condition(h, clerumv1alpha1.ConditionAuthReady)
		assert.Equal(t, metav1.ConditionTrue, auth.Status, h)
		assert.Equal(t, reasons.CredentialIssued, auth.Reason, h)
		if auth.LastTransitionTime.After(recovered) {
			recovered = auth.LastTransitionTime.Time
		}
	}
	assert.Equal(t, len(outageHosts), n, "issuance resumes with one call per Host")
	t.Logf("after the outage: %d calls, every Host issued by +%s; writes %v", n, recovered.Sub(up), s.secretsAndDeployments(s.writes[before:]))
	assert.Positive(t, s.expiryGauge())

	// And stays at one: nothing more is asked for before a credential is
	// next due.
	var due time.Time
	for _, h := range outageHosts {
		at, err := time.Parse(time.RFC3339, s.secret(names.HostRuntimeTokens(h)).Annotations[resources.AnnotationExpiresAt])
		require.NoError(t, err)
		if at = at.Add(-outageRefreshBefore); due.IsZero() || at.Before(due) {
			due = at
		}
	}
	require.True(t, due.After(s.Clock.Now()))
	s.run(due.Add(-time.Second), nil)
	_, issued = s.api.counts()
	for _, h := range outageHosts {
		assert.Equal(t, 2, issued[h], "%s: no second issuance", h)
	}
}

// An expired credential is still the one the pods mount: while the Control
// API cannot replace it, the status and the expiry gauge keep its expiry
// (the gauge negative) instead of dropping it.
func TestAnExpiredCredentialStaysInTheGaugeWhileTheControlAPIFails(t *testing.T) {
	f := deployed(t)
	f.SyncCaches()
	f.Clock.Step(2 * lifetime)
	f.issuer.fail(fmt.Errorf("control API POST /bootstrap: HTTP 503 after 3 attempts: %w", controlapi.ErrUnavailable))
	_, err := f.sync("h1")
	require.Error(t, err, "retried by the loop")
	auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
	assert.Equal(t, metav1.ConditionFalse, auth.Status)
	assert.Equal(t, reasons.ControlAPIUnavailable, auth.Reason)
	st := f.status("h1")
	require.NotNil(t, st.CredentialExpiresAt)
	assert.True(t, st.CredentialExpiresAt.Time.Equal(t0.Add(lifetime)), "%s", st.CredentialExpiresAt)
	assert.Equal(t, -lifetime.Seconds(), counter(t, f.Registry, "clerum_hcc_host_credential_expiry_seconds", nil))
	assert.NotContains(t, f.Writes(), "delete secrets/host-h1-mcp-host-runtime-tokens")
}
