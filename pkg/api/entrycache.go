package api

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// entryCache memoizes encoded v2 inventory entries, the costly part of an
// inventory answer (a MAC per credential, JSON encoding per server).
//
// An entry is a pure function of the McpServer, the Secret its auth names
// (nil if none), and the handler's fixed namespace and cluster domain. An
// object's UID and resourceVersion name one state of it: any write, the
// status included, yields a new resourceVersion, and a recreated object a
// new UID. So an entry stamped with the UID and resourceVersion of both
// objects is exact whenever both stamps match, whichever copy of the
// objects the informer holds (a relist delivers new copies of the same
// versions).
//
// There is one entry per server name: a new version replaces the entry of
// the old one, so the cache holds bytes and stamps, never old objects, and
// stays at about one entry per live server. Names of deleted servers
// linger until the map reaches max and is dropped all at once, which
// bounds it whatever the churn of names.
type entryCache struct {
	max     int
	mu      sync.Mutex
	entries map[string]cachedEntry
}

// cachedEntry is the encoded entry of the server and Secret versions in
// stamp.
type cachedEntry struct {
	stamp entryStamp
	body  []byte
}

type entryStamp struct {
	server, secret objectVersion
}

// objectVersion identifies one state of one object; the zero value stands
// for no object.
type objectVersion struct {
	uid             types.UID
	resourceVersion string
}

func newEntryCache(max int) *entryCache {
	return &entryCache{max: max, entries: make(map[string]cachedEntry)}
}

// get returns the entry of (server, secret), computing it with encode on a
// miss. encode runs outside the lock: two requests may both compute a new
// entry, and both get the same bytes.
func (c *entryCache) get(server *v1alpha1.McpServer, secret *corev1.Secret, encode func(*v1alpha1.McpServer, *corev1.Secret) []byte) []byte {
	stamp, ok := stampOf(server, secret)
	if !ok {
		return encode(server, secret)
	}
	c.mu.Lock()
	entry, ok := c.entries[server.Name]
	c.mu.Unlock()
	if ok && entry.stamp == stamp {
		return entry.body
	}
	body := encode(server, secret)
	c.mu.Lock()
	if _, replacing := c.entries[server.Name]; !replacing && len(c.entries) >= c.max {
		clear(c.entries)
	}
	c.entries[server.Name] = cachedEntry{stamp: stamp, body: body}
	c.mu.Unlock()
	return body
}

// stampOf returns the versions of server and secret, or false when either
// carries no resourceVersion: such an object did not come from the API
// server (a test fixture, a dev-mode object), nothing says two of its
// states differ, and it is encoded afresh every time.
func stampOf(server *v1alpha1.McpServer, secret *corev1.Secret) (entryStamp, bool) {
	stamp := entryStamp{server: objectVersion{server.UID, server.ResourceVersion}}
	if secret != nil {
		stamp.secret = objectVersion{secret.UID, secret.ResourceVersion}
		if secret.ResourceVersion == "" {
			return entryStamp{}, false
		}
	}
	return stamp, server.ResourceVersion != ""
}
