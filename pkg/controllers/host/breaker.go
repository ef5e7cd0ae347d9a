package host

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clerum/hcc/pkg/controlapi"
)

// Breaker settings: after breakerThreshold consecutive failures to reach the
// Control API, calls stop for breakerBase, doubling on every failed probe to
// breakerMax; one success closes it.
const (
	breakerThreshold = 3
	breakerBase      = 15 * time.Second
	breakerMax       = 5 * time.Minute
)

// errBreakerOpen is returned without a call while the breaker is open.
var errBreakerOpen = fmt.Errorf("not calling the Control API after repeated failures: %w", controlapi.ErrUnavailable)

// breaker stops calls to an unreachable Control API for a while. Only
// unavailability counts (transport errors, timeouts, 5xx, 429): a refusal
// is the Control API answering.
type breaker struct {
	mu        sync.Mutex
	failures  int
	pause     time.Duration
	openUntil time.Time
}

func (b *breaker) allow(now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Before(b.openUntil) {
		return errBreakerOpen
	}
	return nil
}

// tripped reports whether the breaker is open: breakerThreshold calls in a
// row found the Control API unavailable and none has succeeded or been
// refused since. It stays tripped while a probe is allowed, so its metric
// does not blink between pauses.
func (b *breaker) tripped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures >= breakerThreshold
}

func (b *breaker) record(now time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil || !errors.Is(err, controlapi.ErrUnavailable) {
		b.failures, b.pause, b.openUntil = 0, 0, time.Time{}
		return
	}
	b.failures++
	if b.failures < breakerThreshold {
		return
	}
	b.pause = min(max(2*b.pause, breakerBase), breakerMax)
	b.openUntil = now.Add(b.pause)
}
