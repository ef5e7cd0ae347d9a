package api

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// w0 is the start of the fake clock's rate-limit window.
var w0 = t0.Truncate(rateLimitWindow)

func TestRateLimitPerVerifiedHostAndAction(t *testing.T) {
	w := standardWorld(t)
	h := newHarness(t, w, func(o *Options) { o.HostAuth.RateLimitPerMinute = 3 })
	h.clock.SetTime(w0.Add(15 * time.Second)) // 45 s left in the window
	tokA := h.token("host-a", "uid-a")

	for i := range 3 {
		require.Equal(t, http.StatusOK, h.inventory(tokA).Code, "request %d", i)
	}
	rec := h.inventory(tokA)
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, `{"error":"rate_limited"}`, rec.Body.String())
	assert.Equal(t, "45", rec.Header().Get("Retry-After"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.Equal(t, 1.0, counterValue(t, h.metrics.rateLimited.WithLabelValues("inventory")))

	// The credential action has its own budget, and so has another Host.
	assert.Equal(t, http.StatusOK, h.credential(tokA, "alpha").Code)
	assert.Equal(t, http.StatusOK, h.inventory(h.token("host-b", "uid-b")).Code)

	// The window ends; the budget is back.
	h.clock.SetTime(w0.Add(time.Minute))
	assert.Equal(t, http.StatusOK, h.inventory(h.token("host-a", "uid-a")).Code)
}

func TestUnauthenticatedTrafficNeverSpendsAHostsBudget(t *testing.T) {
	w := standardWorld(t)
	h := newHarness(t, w, func(o *Options) { o.HostAuth.RateLimitPerMinute = 2 })
	_, attacker := keys(t)
	forged := signCompact(t, mustJSON(t, rs256Header()), mustJSON(t, claimsFor("host-a", "uid-a", t0)), "RS256", attacker, nil)
	wrongUID := sign(t, rs256Header(), claimsFor("host-a", "uid-stale", t0))
	for range 50 {
		require.Equal(t, http.StatusUnauthorized, h.inventory(forged).Code)
		require.Equal(t, http.StatusUnauthorized, h.inventory(wrongUID).Code)
		require.Equal(t, http.StatusUnauthorized, h.inventory("").Code)
	}
	tok := h.token("host-a", "uid-a")
	assert.Equal(t, http.StatusOK, h.inventory(tok).Code)
	assert.Equal(t, http.StatusOK, h.inventory(tok).Code)
	assert.Equal(t, http.StatusTooManyRequests, h.inventory(tok).Code)
}

func TestRateLimitMalformedBodiesStillCount(t *testing.T) {
	h := newHarness(t, standardWorld(t), func(o *Options) { o.HostAuth.RateLimitPerMinute = 1 })
	tok := h.token("host-a", "uid-a")
	assert.Equal(t, http.StatusBadRequest, h.do(http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", tok, `{}`).Code)
	assert.Equal(t, http.StatusTooManyRequests, h.credential(tok, "alpha").Code)
}

func TestFixedWindowLimiter(t *testing.T) {
	key := func(i int) limitKey { return limitKey{hostUID: types.UID(strconv.Itoa(i)), action: actionInventory} }

	t.Run("Retry-After ends with the window", func(t *testing.T) {
		l := newFixedWindowLimiter(1, time.Minute, 10)
		ok, _ := l.allow(key(1), w0.Add(59*time.Second+500*time.Millisecond))
		require.True(t, ok)
		ok, retry := l.allow(key(1), w0.Add(59*time.Second+500*time.Millisecond))
		assert.False(t, ok)
		assert.Equal(t, 500*time.Millisecond, retry)
		ok, _ = l.allow(key(1), w0.Add(time.Minute))
		assert.True(t, ok)
	})

	t.Run("memory stays bounded under a flood of identities", func(t *testing.T) {
		const maxKeys = 100
		l := newFixedWindowLimiter(5, time.Minute, maxKeys)
		for i := range maxKeys {
			ok, _ := l.allow(key(i), w0)
			require.True(t, ok)
		}
		// Full within the window: new identities are refused, known ones
		// keep their budget, and the map does not grow.
		for i := maxKeys; i < 10*maxKeys; i++ {
			ok, retry := l.allow(key(i), w0.Add(time.Second))
			require.False(t, ok)
			require.Equal(t, 59*time.Second, retry)
		}
		ok, _ := l.allow(key(0), w0.Add(time.Second))
		assert.True(t, ok)
		assert.Len(t, l.counts, maxKeys)

		// In the next window the expired counts are swept and new
		// identities fit again.
		ok, _ = l.allow(key(10*maxKeys), w0.Add(time.Minute))
		assert.True(t, ok)
		assert.Len(t, l.counts, 1)
	})

	t.Run("a full map of live windows is swept at most once per window", func(t *testing.T) {
		l := newFixedWindowLimiter(5, time.Minute, 2)
		now := w0.Add(time.Minute)
		l.allow(key(1), now)
		l.allow(key(2), now)
		ok, _ := l.allow(key(3), now)
		assert.False(t, ok)
		assert.Equal(t, now, l.lastSweep)
		l.counts[key(1)].start = w0 // expired, but the sweep already ran
		ok, _ = l.allow(key(4), now)
		assert.False(t, ok, fmt.Sprint(l.counts))
	})
}
