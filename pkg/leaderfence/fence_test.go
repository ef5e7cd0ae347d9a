package leaderfence

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	clocktesting "k8s.io/utils/clock/testing"
)

const lease = 10 * time.Second

// fakeLock is the elector's lock: each write takes took on the fake clock
// and fails with err.
type fakeLock struct {
	resourcelock.Interface
	clock *clocktesting.FakeClock
	took  time.Duration
	err   error
	sent  []resourcelock.LeaderElectionRecord
}

func (l *fakeLock) Identity() string { return "replica-a" }

func (l *fakeLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.clock.Step(l.took)
	l.sent = append(l.sent, ler)
	return l.err
}

func (l *fakeLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, ler)
}

var held = resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a"}

// fixture is a fence, the lock it observes and a client whose writes it
// gates, against a server that answers 200 to everything.
type fixture struct {
	clock  *clocktesting.FakeClock
	fence  *Fence
	lock   *fakeLock
	locked resourcelock.Interface
	client *http.Client
	url    string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	f := New(clk, lease, zerolog.Nop())
	l := &fakeLock{clock: clk}
	return &fixture{clock: clk, fence: f, lock: l, locked: f.Lock(l),
		client: &http.Client{Transport: f.WrapTransport(http.DefaultTransport)}, url: srv.URL}
}

// do sends method and returns the transport's error.
func (x *fixture) do(t *testing.T, method string) error {
	t.Helper()
	req, err := http.NewRequest(method, x.url, nil)
	require.NoError(t, err)
	resp, err := x.client.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func lost(f *Fence) bool {
	select {
	case <-f.Lost():
		return true
	default:
		return false
	}
}

func TestWritesPassOnlyWithinTheLease(t *testing.T) {
	x := newFixture(t)
	assert.ErrorIs(t, x.do(t, http.MethodPost), ErrLeaseStale, "no write before the lease is acquired")
	assert.NoError(t, x.do(t, http.MethodGet), "reads are never gated")

	require.NoError(t, x.locked.Create(context.Background(), held))
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet} {
		assert.NoError(t, x.do(t, m), m+" while the lease is held")
	}

	x.clock.Step(lease - Margin - time.Millisecond)
	assert.NoError(t, x.do(t, http.MethodPatch), "just inside the window")
	assert.False(t, lost(x.fence))

	x.clock.Step(time.Millisecond)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		err := x.do(t, m)
		assert.ErrorIs(t, err, ErrLeaseStale, m+" once the lease may have passed")
	}
	assert.NoError(t, x.do(t, http.MethodGet), "reads still pass")
	assert.True(t, lost(x.fence), "a refused write tells the process to stop")

	// A renewal reopens it (the process is stopping anyway, but the
	// fence's own rule is the last renewal's age).
	require.NoError(t, x.locked.Update(context.Background(), held))
	assert.NoError(t, x.do(t, http.MethodPost))
}

// A renewal counts from when its request started: a slow renewal buys the
// lease from the moment the record was sent, not from its answer.
func TestARenewalCountsFromItsStart(t *testing.T) {
	x := newFixture(t)
	x.lock.took = 4 * time.Second
	require.NoError(t, x.locked.Update(context.Background(), held))
	x.clock.Step(lease - Margin - x.lock.took) // window after the start
	assert.ErrorIs(t, x.do(t, http.MethodPost), ErrLeaseStale)
}

// A failed renewal buys nothing.
func TestAFailedRenewalDoesNotOpenTheFence(t *testing.T) {
	x := newFixture(t)
	require.NoError(t, x.locked.Update(context.Background(), held))
	x.clock.Step(lease / 2)
	x.lock.err = errors.New("conflict")
	require.Error(t, x.locked.Update(context.Background(), held))
	x.clock.Step(lease/2 - Margin)
	assert.ErrorIs(t, x.do(t, http.MethodPost), ErrLeaseStale)
}

// The elector's release (a record with no holder) closes the fence before
// it is sent, and without stopping the process: shutting down is not
// losing the lease.
func TestAReleaseClosesTheFence(t *testing.T) {
	x := newFixture(t)
	require.NoError(t, x.locked.Update(context.Background(), held))
	require.NoError(t, x.locked.Update(context.Background(), resourcelock.LeaderElectionRecord{}))
	assert.Len(t, x.lock.sent, 2)
	assert.ErrorIs(t, x.do(t, http.MethodPost), ErrLeaseStale)
	assert.False(t, lost(x.fence))
}

// After a pause the elector may still believe it leads and release the
// lease: that would overwrite the new leader's record, so it is not sent.
func TestAStaleReleaseIsNotSent(t *testing.T) {
	x := newFixture(t)
	require.NoError(t, x.locked.Update(context.Background(), held))
	x.clock.Step(lease)
	err := x.locked.Update(context.Background(), resourcelock.LeaderElectionRecord{})
	assert.ErrorIs(t, err, ErrLeaseStale)
	assert.Len(t, x.lock.sent, 1, "only the renewal was sent")
}

// blockingServer answers a request only once release is closed, and tells
// arrived when one is waiting; gone is closed when a request's context
// ends before its answer (the client gave it up).
type blockingServer struct {
	arrived chan struct{}
	release chan struct{}
	gone    chan struct{}
}

func newBlockingServer(t *testing.T) (*blockingServer, string) {
	t.Helper()
	b := &blockingServer{arrived: make(chan struct{}, 1), release: make(chan struct{}), gone: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.arrived <- struct{}{}
		select {
		case <-b.release:
		case <-r.Context().Done():
			b.gone <- struct{}{}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
	})
	return b, srv.URL
}

// A graceful handover: the release waits until the API server has
// answered the write that passed the fence before it, and that write is
// not abandoned when its caller's context ends (the reconcilers stop as
// the release goes out).
func TestAReleaseWaitsForTheWritesInFlight(t *testing.T) {
	x := newFixture(t)
	require.NoError(t, x.locked.Update(context.Background(), held))
	srv, url := newBlockingServer(t)

	callerCtx, stopCaller := context.WithCancel(context.Background())
	written := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(callerCtx, http.MethodPost, url, nil)
		if err != nil {
			written <- err
			return
		}
		resp, err := x.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		written <- err
	}()
	<-srv.arrived
	stopCaller() // the leader's context ends

	released := make(chan error, 1)
	go func() { released <- x.locked.Update(context.Background(), resourcelock.LeaderElectionRecord{}) }()
	select {
	case err := <-released:
		t.Fatalf("the release went out while a write was in flight: %v", err)
	case <-srv.gone:
		t.Fatal("the write was abandoned with its caller's context")
	case <-time.After(200 * time.Millisecond):
	}
	assert.ErrorIs(t, x.do(t, http.MethodPost), ErrLeaseStale, "the fence is closed while the release waits")
	assert.Len(t, x.lock.sent, 1, "only the renewal was sent")

	close(srv.release)
	require.NoError(t, <-written, "the write ran to its answer")
	require.NoError(t, <-released)
	assert.Len(t, x.lock.sent, 2, "the release went out after the answer")
	assert.False(t, lost(x.fence))
}

// A write still in flight when the elector's release deadline passes
// keeps the release from being sent: the lease runs out instead, as after
// a crash.
func TestAReleaseIsNotSentWhileAWriteIsInFlight(t *testing.T) {
	x := newFixture(t)
	require.NoError(t, x.locked.Update(context.Background(), held))
	srv, url := newBlockingServer(t)
	go func() {
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		if resp, err := x.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-srv.arrived
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := x.locked.Update(ctx, resourcelock.LeaderElectionRecord{})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "1 writes still in flight")
	assert.Len(t, x.lock.sent, 1, "the release was not sent")
}

// The lease may run out while the release waits for a write: it is then
// not sent either.
func TestAReleaseAfterALongWaitIsNotSent(t *testing.T) {
	x := newFixture(t)
	require.NoError(t, x.locked.Update(context.Background(), held))
	srv, url := newBlockingServer(t)
	go func() {
		req, _ := http.NewRequest(http.MethodPut, url, nil)
		if resp, err := x.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-srv.arrived
	released := make(chan error, 1)
	go func() { released <- x.locked.Update(context.Background(), resourcelock.LeaderElectionRecord{}) }()
	time.Sleep(50 * time.Millisecond) // the release is waiting
	x.clock.Step(lease)
	close(srv.release)
	assert.ErrorIs(t, <-released, ErrLeaseStale)
	assert.Len(t, x.lock.sent, 1, "the release was not sent")
}

// A Hold is one write for the release: the writes made under it pass the
// fence after a release has closed it, the release waits until the hold is
// done, and a write outside it is refused meanwhile.
func TestAHoldKeepsItsWritesTogetherAcrossARelease(t *testing.T) {
	x := newFixture(t)
	require.NoError(t, x.locked.Update(context.Background(), held))
	caller, stop := context.WithCancel(context.Background())
	ctx, done, err := x.fence.Hold(caller)
	require.NoError(t, err)
	stop() // the leader's context ends: the group is finished, not abandoned

	released := make(chan error, 1)
	go func() { released <- x.locked.Update(context.Background(), resourcelock.LeaderElectionRecord{}) }()
	require.Eventually(t, func() bool { return errors.Is(x.do(t, http.MethodPost), ErrLeaseStale) }, time.Second, time.Millisecond,
		"a write outside the hold is refused once the release closed the fence")

	req, err := http.NewRequestWithContext(ctx, http.MethodPut, x.url, nil)
	require.NoError(t, err)
	resp, err := x.client.Do(req)
	require.NoError(t, err, "the hold's second write (the mark) passes")
	resp.Body.Close()
	select {
	case err := <-released:
		t.Fatalf("the release went out while the hold was open: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	assert.Len(t, x.lock.sent, 1)

	done()
	require.NoError(t, <-released)
	assert.Len(t, x.lock.sent, 2, "the release went out once the hold was done")
	assert.False(t, lost(x.fence))
}

// A hold does not outlive the lease: its writes are refused once the lease
// may have passed, and no hold is given on a fence already closed.
func TestAHoldEndsWithTheLease(t *testing.T) {
	x := newFixture(t)
	_, _, err := x.fence.Hold(context.Background())
	assert.ErrorIs(t, err, ErrLeaseStale, "not acquired")

	require.NoError(t, x.locked.Update(context.Background(), held))
	ctx, done, err := x.fence.Hold(context.Background())
	require.NoError(t, err)
	defer done()
	x.clock.Step(lease)
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, x.url, nil)
	require.NoError(t, err)
	_, err = x.client.Do(req)
	assert.ErrorIs(t, err, ErrLeaseStale)
	assert.True(t, lost(x.fence))
}
