package api

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// action is what a rate-limited request does; each has its own budget.
type action string

const (
	actionInventory  action = "inventory"
	actionCredential action = "credential"
)

// rateLimitWindow is the fixed window of HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE.
const rateLimitWindow = time.Minute

type limitKey struct {
	hostUID types.UID
	action  action
}

type windowCount struct {
	start time.Time
	count int
}

// fixedWindowLimiter allows limit requests per key in each window. Windows
// are aligned to the clock (start = now truncated to the window), so every
// key's window ends at the same instant and expired counts are easy to
// find. Budgets are per replica: N replicas behind a Service allow up to N
// times the limit.
//
// Keys are verified Host UIDs that named a live Host, so their number is
// bounded by the Hosts in the cluster, and unauthenticated traffic never
// reaches the limiter. The map is capped at maxKeys regardless: a full map
// is swept of expired windows at most once per window, and if it is still
// full a new key is refused (fail closed, the caller gets 429 until the
// window ends) rather than letting the map grow.
type fixedWindowLimiter struct {
	limit   int
	window  time.Duration
	maxKeys int

	mu        sync.Mutex
	counts    map[limitKey]*windowCount
	lastSweep time.Time
}

func newFixedWindowLimiter(limit int, window time.Duration, maxKeys int) *fixedWindowLimiter {
	return &fixedWindowLimiter{limit: limit, window: window, maxKeys: maxKeys, counts: make(map[limitKey]*windowCount)}
}

// allow counts one request for key at now. When the budget is spent it
// returns false and how long until the window ends.
func (l *fixedWindowLimiter) allow(key limitKey, now time.Time) (bool, time.Duration) {
	start := now.Truncate(l.window)
	retryAfter := start.Add(l.window).Sub(now)

	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.counts[key]
	if !ok {
		if len(l.counts) >= l.maxKeys && !l.sweep(start) {
			return false, retryAfter
		}
		c = &windowCount{start: start}
		l.counts[key] = c
	}
	if c.start.Before(start) {
		c.start, c.count = start, 0
	}
	if c.count >= l.limit {
		return false, retryAfter
	}
	c.count++
	return true, 0
}

// sweep drops the counts of past windows, once per window, and reports
// whether there is room for a new key.
func (l *fixedWindowLimiter) sweep(current time.Time) bool {
	if l.lastSweep.Before(current) {
		l.lastSweep = current
		for k, c := range l.counts {
			if c.start.Before(current) {
				delete(l.counts, k)
			}
		}
	}
	return len(l.counts) < l.maxKeys
}
