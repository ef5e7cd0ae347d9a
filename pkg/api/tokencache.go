package api

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// cachingVerifier remembers tokens its next verifier accepted, so a Host
// polling with the same token pays for one RSA verification per token
// rather than per request. Only the signature and claim checks are cached:
// the authority check against live objects runs on every request anyway.
//
// An entry lives until the token's exp and no longer, which is never later
// than next would accept it (next allows clockSkew past exp). Failures are
// not cached, so a flood of garbage cannot evict good entries through
// this path; a flood of distinct valid tokens needs the issuer's key, since
// each token has one accepted spelling (base64url.DecodeCanonical).
type cachingVerifier struct {
	next   TokenVerifier
	cache  *tokenCache
	clock  clock.PassiveClock
	hits   prometheus.Counter
	misses prometheus.Counter
}

var _ TokenVerifier = (*cachingVerifier)(nil)

func (v *cachingVerifier) VerifyHostToken(raw string) (HostClaims, error) {
	if len(raw) > maxTokenBytes {
		return HostClaims{}, failOversized
	}
	// The key is a digest so the cache never holds usable tokens.
	key := sha256.Sum256([]byte(raw))
	now := v.clock.Now()
	if claims, ok := v.cache.get(key, now); ok {
		v.hits.Inc()
		return claims, nil
	}
	v.misses.Inc()
	claims, err := v.next.VerifyHostToken(raw)
	if err != nil {
		return HostClaims{}, err
	}
	v.cache.add(key, claims, now)
	return claims, nil
}

// tokenCache is a size-bounded LRU map from token digest to verified
// claims. Safe for concurrent use.
type tokenCache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // of *tokenEntry, most recently used first
	entries map[[sha256.Size]byte]*list.Element
}

type tokenEntry struct {
	key    [sha256.Size]byte
	claims HostClaims
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, order: list.New(), entries: make(map[[sha256.Size]byte]*list.Element, max)}
}

// get returns the claims cached under key if they have not expired at now.
func (c *tokenCache) get(key [sha256.Size]byte, now time.Time) (HostClaims, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return HostClaims{}, false
	}
	e := el.Value.(*tokenEntry)
	if !now.Before(e.claims.Expiry) {
		c.evict(el)
		return HostClaims{}, false
	}
	c.order.MoveToFront(el)
	return e.claims, true
}

// add caches claims under key unless they have already expired at now,
// evicting the least recently used entry when the cache is full.
func (c *tokenCache) add(key [sha256.Size]byte, claims HostClaims, now time.Time) {
	if !now.Before(claims.Expiry) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		el.Value.(*tokenEntry).claims = claims
		c.order.MoveToFront(el)
		return
	}
	if c.order.Len() >= c.max {
		c.evict(c.order.Back())
	}
	c.entries[key] = c.order.PushFront(&tokenEntry{key: key, claims: claims})
}

func (c *tokenCache) evict(el *list.Element) {
	c.order.Remove(el)
	delete(c.entries, el.Value.(*tokenEntry).key)
}
