package api

import (
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// entryCache memoizes encoded v2 inventory entries, the costly part of an
// inventory answer (a MAC per credential, JSON encoding per server).
//
// An entry is a pure function of the McpServer, the Secret its auth names
// (nil if none), and the handler's fixed namespace and cluster domain. An
// informer cache never mutates an object it stores: an update stores a new
// one. So an entry keyed by the identity of the two cached objects stays
// exact for as long as both are current, and is computed once per object
// version rather than once per request. Handlers must not mutate cached
// objects anyway (see sources.go); this cache depends on it.
//
// Keys of replaced objects are never looked up again. They are dropped all
// at once when the map reaches max, which bounds both its size and the old
// objects it keeps alive.
type entryCache struct {
	max     int
	mu      sync.Mutex
	entries map[entryKey][]byte
}

type entryKey struct {
	server *v1alpha1.McpServer
	secret *corev1.Secret
}

func newEntryCache(max int) *entryCache {
	return &entryCache{max: max, entries: make(map[entryKey][]byte)}
}

// get returns the entry of (server, secret), computing it with encode on a
// miss. encode runs outside the lock: two requests may both compute a new
// entry, and both get the same bytes.
func (c *entryCache) get(server *v1alpha1.McpServer, secret *corev1.Secret, encode func(*v1alpha1.McpServer, *corev1.Secret) []byte) []byte {
	key := entryKey{server: server, secret: secret}
	c.mu.Lock()
	entry, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return entry
	}
	entry = encode(server, secret)
	c.mu.Lock()
	if len(c.entries) >= c.max {
		clear(c.entries)
	}
	c.entries[key] = entry
	c.mu.Unlock()
	return entry
}
