package api

import (
	"crypto/sha256"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingVerifier counts the verifications that reach it.
type countingVerifier struct {
	next  TokenVerifier
	calls atomic.Int32
}

var _ TokenVerifier = (*countingVerifier)(nil)

func (c *countingVerifier) VerifyHostToken(raw string) (HostClaims, error) {
	c.calls.Add(1)
	return c.next.VerifyHostToken(raw)
}

func newCachingVerifier(t *testing.T, size int) (*cachingVerifier, *countingVerifier, *clocktesting.FakePassiveClock) {
	clk := clocktesting.NewFakePassiveClock(t0)
	counting := &countingVerifier{next: &rs256Verifier{rules: newTokenRules(hostAuth(t)), clock: clk}}
	return &cachingVerifier{
		next:   counting,
		cache:  newTokenCache(size),
		clock:  clk,
		hits:   prometheus.NewCounter(prometheus.CounterOpts{Name: "hits"}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{Name: "misses"}),
	}, counting, clk
}

func TestTokenCacheSkipsRepeatedVerification(t *testing.T) {
	v, counting, _ := newCachingVerifier(t, 8)
	tok := sign(t, rs256Header(), claimsFor("host-a", "uid-a", t0))
	for range 5 {
		claims, err := v.VerifyHostToken(tok)
		require.NoError(t, err)
		assert.Equal(t, "host-a", claims.HostRef)
	}
	assert.Equal(t, int32(1), counting.calls.Load())
	assert.Equal(t, 4.0, counterValue(t, v.hits))
	assert.Equal(t, 1.0, counterValue(t, v.misses))
}

func TestTokenCacheDoesNotCacheFailures(t *testing.T) {
	v, counting, _ := newCachingVerifier(t, 8)
	bad := sign(t, rs256Header(), claimsFor("host-a", "uid-a", t0)) + "x"
	for range 3 {
		_, err := v.VerifyHostToken(bad)
		require.Error(t, err)
	}
	assert.Equal(t, int32(3), counting.calls.Load())
	assert.Zero(t, v.cache.order.Len())
}

func TestTokenCacheNeverExtendsValidity(t *testing.T) {
	v, counting, clk := newCachingVerifier(t, 8)
	c := claimsFor("host-a", "uid-a", t0)
	exp := t0.Add(time.Minute)
	c["exp"] = exp.Unix()
	tok := sign(t, rs256Header(), c)
	_, err := v.VerifyHostToken(tok)
	require.NoError(t, err)

	// Up to exp the entry answers.
	clk.SetTime(exp.Add(-time.Millisecond))
	_, err = v.VerifyHostToken(tok)
	require.NoError(t, err)
	assert.Equal(t, int32(1), counting.calls.Load())

	// At exp the entry is gone: the full verifier decides, within its
	// skew, and the late acceptance is not cached.
	clk.SetTime(exp)
	_, err = v.VerifyHostToken(tok)
	require.NoError(t, err)
	assert.Equal(t, int32(2), counting.calls.Load())
	assert.Zero(t, v.cache.order.Len())

	// Past the skew the token is refused, cached or not.
	clk.SetTime(exp.Add(clockSkew))
	_, err = v.VerifyHostToken(tok)
	assert.ErrorIs(t, err, failExpired)
}

func TestTokenCacheIsBoundedAndEvictsTheLeastRecentlyUsed(t *testing.T) {
	c := newTokenCache(3)
	key := func(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }
	claims := HostClaims{Expiry: t0.Add(time.Hour)}
	for _, k := range []string{"a", "b", "c"} {
		c.add(key(k), claims, t0)
	}
	_, ok := c.get(key("a"), t0) // a is now the most recently used
	require.True(t, ok)
	c.add(key("d"), claims, t0)
	assert.Equal(t, 3, c.order.Len())
	assert.Len(t, c.entries, 3)
	_, ok = c.get(key("b"), t0)
	assert.False(t, ok, "b was least recently used")
	for _, k := range []string{"a", "c", "d"} {
		_, ok = c.get(key(k), t0)
		assert.True(t, ok, k)
	}
	c.add(key("expired"), HostClaims{Expiry: t0}, t0)
	_, ok = c.get(key("expired"), t0)
	assert.False(t, ok, "an already expired token is not cached")
}

func TestCachedTokensStillPassTheAuthorityCheck(t *testing.T) {
	w := standardWorld(t)
	h := newHarness(t, w)
	tok := h.token("host-a", "uid-a")
	require.Equal(t, http.StatusOK, h.inventory(tok).Code)
	require.Equal(t, http.StatusOK, h.inventory(tok).Code)
	hits := counterValue(t, h.metrics.tokenCache.WithLabelValues("hit"))
	assert.Equal(t, 1.0, hits)

	remove(t, w.contexts, newContext("ctx-a"))
	assert.Equal(t, http.StatusUnauthorized, h.inventory(tok).Code)
	assert.Equal(t, 1.0, h.authFailures(failContextMissing))
	assert.Equal(t, 2.0, counterValue(t, h.metrics.tokenCache.WithLabelValues("hit")), "refused on the cached path")

	// Past exp+skew the cached token is refused like any other.
	put(t, w.contexts, newContext("ctx-a", "alpha"))
	require.Equal(t, http.StatusOK, h.inventory(tok).Code)
	h.clock.SetTime(t0.Add(5*time.Minute + clockSkew))
	assert.Equal(t, http.StatusUnauthorized, h.inventory(tok).Code)
	assert.Equal(t, 1.0, h.authFailures(failExpired))
}
