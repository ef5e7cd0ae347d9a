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
package leaderfence

import (
	"context"
	"errors"
	"fmt"
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
	renewed, released := f.renewed, f.released
	f.mu.Unlock()
	if released {
		return fmt.Errorf("%w: released", ErrLeaseStale)
	}
	if renewed.IsZero() {
		return fmt.Errorf("%w: not acquired", ErrLeaseStale)
	}
	if age := f.clock.Since(renewed); age >= f.window {
		return fmt.Errorf("%w: last renewed %s ago, lease %s (less a %s margin)", ErrLeaseStale, age.Round(time.Millisecond), f.lease, Margin)
	}
	return nil
}

// WrapTransport gates rt for a rest.Config's WrapTransport: POST, PUT,
// PATCH and DELETE are refused with ErrLeaseStale unless Check passes;
// reads always pass. The first refusal logs an error and closes Lost.
func (f *Fence) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			if err := f.Check(); err != nil {
				f.refused(req, err)
				return nil, err
			}
		}
		return rt.RoundTrip(req)
	})
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
// closes before it is sent (the standby may take over the moment it lands),
// and a release of a lease not known to be held is not sent at all — after
// a pause the elector may still believe it leads, and releasing would
// overwrite the new leader's record.
func (l *lock) write(ctx context.Context, ler resourcelock.LeaderElectionRecord, send func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	f := l.fence
	if ler.HolderIdentity != l.Identity() {
		if err := f.Check(); err != nil {
			return fmt.Errorf("not releasing the lease: %w", err)
		}
		f.mu.Lock()
		f.released = true
		f.mu.Unlock()
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
