// Package leaderfence refuses a leader's writes once its lease may have
// passed to another replica.
//
// client-go's leader election has no fencing: a leader that is paused (a
// stopped process, a frozen VM, a long GC or a starved node) past its lease
// resumes believing it still leads, and every request it had in hand goes
// out — after a standby has taken over and started writing. The Kubernetes
// API has no fencing token to reject those writes, so the leader must refuse
// them itself.
//
// A Fence watches the renewals of the lease (Lock wraps the
// resourcelock.Interface the elector uses) and gates every mutating request
// of the controller's clients (WrapTransport) on the last successful renewal
// being younger than the lease duration less a margin. A renewal counts
// from the moment its request started, not from its answer: a standby
// counts the lease from when it saw the renewed record, which is later, so
// the fence closes no later than a standby can take over. The check runs
// as the request leaves the process, after client-side rate limiting; what
// it cannot stop is a request already past the check when the process is
// paused — the window narrows to one in-flight request per client.
//
// A graceful handover closes that window: the elector releases the lease
// the moment the leader's context ends, while the reconcilers' writes may
// still be on their way. The fence closes first, then waits until the API
// server has answered every write that passed it, and only then lets the
// release go out. So that "answered" means the server is done with the
// write, a write that passed the fence is not cancelled with its caller's
// context (the caller stopping would only abandon it, not stop the server
// from applying it): it runs to its answer, within WriteTimeout.
package leaderfence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// Margin is taken off the lease duration before a write is refused: the
// time a request may take from the check to the API server. A write that
// passes the check at most Margin before the lease runs out arrives while
// it is still held.
const Margin = time.Second

// WriteTimeout bounds a write that passed the fence and whose caller has
// no deadline of its own: kube-apiserver's default request timeout.
const WriteTimeout = time.Minute

// ErrLeaseStale is the error of a write the fence refused.
var ErrLeaseStale = errors.New("the leader lease is not known to be held")

// Fence tracks the renewals of one lease and gates writes on it.
type Fence struct {
	clock clock.PassiveClock
	// window is how long a renewal keeps the fence open: the lease
	// duration less Margin.
	window time.Duration
	lease  time.Duration
	log    zerolog.Logger

	mu sync.Mutex
	// renewed is when the last successful acquire or renewal started; zero
	// before the first.
	renewed time.Time
	// released is set once the elector gives the lease up: writes are
	// refused from then on, as the shutdown they belong to expects.
	released bool
	// writes is how many writes passed the fence and are not answered
	// yet; idle is closed each time that number falls to zero.
	writes int
	idle   chan struct{}

	lostOnce sync.Once
	lost     chan struct{}
}

// New returns a Fence for a lease of duration lease. It is closed until the
// lease is first acquired through Lock.
func New(clk clock.PassiveClock, lease time.Duration, log zerolog.Logger) *Fence {
	return &Fence{clock: clk, window: lease - Margin, lease: lease, log: log, lost: make(chan struct{})}
}

// Lost is closed the first time the fence refuses a write after the lease
// was acquired and before it was released: the process must stop, another
// replica may lead.
func (f *Fence) Lost() <-chan struct{} { return f.lost }

// Check returns nil while the lease is known to be held: its last renewal
// started less than the lease duration less Margin ago.
func (f *Fence) Check() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.released {
		return fmt.Errorf("%w: released", ErrLeaseStale)
	}
	return f.heldLocked()
}

// heldLocked returns nil while the last renewal is younger than the window;
// f.mu is held.
func (f *Fence) heldLocked() error {
	if f.renewed.IsZero() {
		return fmt.Errorf("%w: not acquired", ErrLeaseStale)
	}
	if age := f.clock.Since(f.renewed); age >= f.window {
		return fmt.Errorf("%w: last renewed %s ago, lease %s (less a %s margin)", ErrLeaseStale, age.Round(time.Millisecond), f.lease, Margin)
	}
	return nil
}

// admit checks the fence for one write and, when it passes, counts the
// write as in flight until done is called. The check and the count are
// one step, so a release that closed the fence waits for every write that
// passed it.
func (f *Fence) admit() (done func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.released {
		return nil, fmt.Errorf("%w: released", ErrLeaseStale)
	}
	if err := f.heldLocked(); err != nil {
		return nil, err
	}
	if f.writes == 0 {
		f.idle = make(chan struct{})
	}
	f.writes++
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.writes--; f.writes == 0 {
				close(f.idle)
			}
		})
	}, nil
}

// closeForRelease closes the fence for good and returns a channel closed
// once no write that passed it is in flight, and how many are.
func (f *Fence) closeForRelease() (<-chan struct{}, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.heldLocked(); err != nil {
		return nil, 0, err
	}
	f.released = true
	if f.writes == 0 {
		done := make(chan struct{})
		close(done)
		return done, 0, nil
	}
	return f.idle, f.writes, nil
}

// WrapTransport gates rt for a rest.Config's WrapTransport: POST, PUT,
// PATCH and DELETE are refused with ErrLeaseStale unless Check passes;
// reads always pass. The first refusal logs an error and closes Lost. A
// write that passes is counted in flight until its answer arrives, and is
// not cancelled with its caller's context: it ends at its caller's
// deadline, or after WriteTimeout when there is none.
func (f *Fence) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return rt.RoundTrip(req)
		}
		admit := f.admit
		if req.Context().Value(holdKey{}) == f {
			admit = f.admitHeld
		}
		done, err := admit()
		if err != nil {
			f.refused(req, err)
			return nil, err
		}
		defer done()
		// Context deadlines are wall-clock time, whatever f's clock.
		deadline, ok := req.Context().Deadline()
		if !ok {
			deadline = time.Now().Add(WriteTimeout)
		}
		ctx, cancel := context.WithDeadline(context.WithoutCancel(req.Context()), deadline)
		resp, err := rt.RoundTrip(req.WithContext(ctx))
		if err != nil {
			cancel()
			return nil, err
		}
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		return resp, nil
	})
}

// holdKey marks a context whose writes belong to a Hold.
type holdKey struct{}

// Hold admits a group of writes that must land together or not at all from
// this process — a create and the update that marks the object it created
// (kit.Ensure) — as one write: it passes the fence now or returns
// ErrLeaseStale, and a release waits until done is called. The writes made
// with the returned context pass the fence even once a release has closed
// it, as long as the lease is still held; the context is not cancelled with
// ctx (the group is finished, not abandoned, when the leader stops) and
// ends after WriteTimeout or at done.
func (f *Fence) Hold(ctx context.Context) (context.Context, func(), error) {
	admitted, err := f.admit()
	if err != nil {
		return ctx, func() {}, err
	}
	held, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), holdKey{}, f), WriteTimeout)
	return held, func() { cancel(); admitted() }, nil
}

// admitHeld checks a write of a Hold: only that the lease is still held.
func (f *Fence) admitHeld() (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.heldLocked(); err != nil {
		return nil, err
	}
	return func() {}, nil
}

// cancelOnClose ends a write's context once its caller has read the
// answer.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (f *Fence) refused(req *http.Request, err error) {
	f.mu.Lock()
	released, acquired := f.released, !f.renewed.IsZero()
	f.mu.Unlock()
	if released || !acquired {
		return // shutting down, or not leading yet: nothing was lost
	}
	f.lostOnce.Do(func() {
		f.log.Error().Err(err).Str("method", req.Method).Str("path", req.URL.Path).
			Msg("refusing a write: another replica may hold the leader lease; stopping")
		close(f.lost)
	})
}

// Lock returns inner with its renewals observed by f. Give the elector the
// returned lock; its client must not be gated by f.
func (f *Fence) Lock(inner resourcelock.Interface) resourcelock.Interface {
	return &lock{Interface: inner, fence: f}
}

type lock struct {
	resourcelock.Interface
	fence *Fence
}

func (l *lock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, ler, l.Interface.Create)
}

func (l *lock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, ler, l.Interface.Update)
}

// write records a successful acquire or renewal at the time its request
// started. A record naming no holder is the elector's release: the fence
// closes before it is sent (the standby may take over the moment it lands)
// and the release waits until every write that passed the fence has been
// answered. A release of a lease not known to be held is not sent at all —
// after a pause the elector may still believe it leads, and releasing would
// overwrite the new leader's record — and neither is one whose writes are
// still in flight when ctx ends: the lease then runs out instead.
func (l *lock) write(ctx context.Context, ler resourcelock.LeaderElectionRecord, send func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	f := l.fence
	if ler.HolderIdentity != l.Identity() {
		idle, writes, err := f.closeForRelease()
		if err != nil {
			return fmt.Errorf("not releasing the lease: %w", err)
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("not releasing the lease: %d writes still in flight: %w", writes, ctx.Err())
		}
		// Waiting took time: the lease must still be held.
		f.mu.Lock()
		err = f.heldLocked()
		f.mu.Unlock()
		if err != nil {
			return fmt.Errorf("not releasing the lease: %w", err)
		}
		return send(ctx, ler)
	}
	started := f.clock.Now()
	if err := send(ctx, ler); err != nil {
		return err
	}
	f.mu.Lock()
	if started.After(f.renewed) {
		f.renewed = started
	}
	f.mu.Unlock()
	return nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (fn roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return fn(req) }
