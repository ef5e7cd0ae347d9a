package api

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// The indexes the inventory cache finds dependents with. Each is added to
// the informer that holds the objects it indexes.
const (
	// indexContextsByServer indexes Contexts by each name in
	// spec.mcpServers: the Contexts whose inventory a server is part of.
	indexContextsByServer = "clerum.io/mcp-server"
	// indexServersBySecret indexes McpServers by spec.auth.secretRef.name:
	// the servers whose entry a Secret is part of.
	indexServersBySecret = "clerum.io/auth-secret"
)

func contextsByServer(obj any) ([]string, error) {
	c, ok := obj.(*v1alpha1.Context)
	if !ok {
		return nil, fmt.Errorf("indexing Contexts: got %T", obj)
	}
	return c.Spec.McpServers, nil
}

func serversBySecret(obj any) ([]string, error) {
	s, ok := obj.(*v1alpha1.McpServer)
	if !ok {
		return nil, fmt.Errorf("indexing McpServers: got %T", obj)
	}
	if s.Spec.Auth == nil {
		return nil, nil
	}
	return []string{s.Spec.Auth.SecretRef.Name}, nil
}

// InventoryCache holds each Context's encoded v2 inventory, so that a
// Host's request costs its authority and a copy of bytes rather than a
// read and an encoding of every server its Context lists
// (docs/http-api.md, "Caching").
//
// A Context's inventory is a function of the Context, each server it
// lists and each Secret those servers' spec.auth names (present or not),
// and of the handler's fixed configuration. The cache is exact for each:
//
//   - the Context: a body is kept with the UID and resourceVersion of the
//     Context it was built from, and served only to a request whose live
//     Context (read anyway, for the authority) is that version;
//   - a server or a Secret: the informers' event handlers (NewInventoryCache)
//     invalidate the body of every Context that lists the server, or a
//     server naming the Secret, found through indexes the informers keep.
//
// An invalidation drops the Context's body and advances its generation.
// A body is built from the caches after the generation was read, and
// stored only if no invalidation came in between: one built concurrently
// with a change may predate it, and is dropped.
//
// Staleness: an informer stores an object, then calls the event handlers
// on its own goroutine. Between the two, a request may still get the body
// built before the change; once the handler returned, none does. The
// handler is a few map lookups under one lock, so the window is the
// informer's hand-off to its handler goroutine, behind a change's own way
// from the API server to the informer.
type InventoryCache struct {
	mu       sync.Mutex
	contexts map[string]*contextInventory
	// max bounds contexts; see get.
	max int

	// contextsListing and serversNaming read the indexes above.
	contextsListing func(server string) ([]any, error)
	serversNaming   func(secret string) ([]any, error)
}

// contextInventory is one Context name's cache entry.
type contextInventory struct {
	// gen counts the invalidations of the Context's inventory.
	gen uint64
	// body, when set, is the current inventory of the Context of uid and
	// resourceVersion: built at generation gen, and dropped by the next
	// invalidation.
	uid             types.UID
	resourceVersion string
	body            []byte
}

// inventoryMaxContexts bounds the cache: far more Contexts than one
// namespace holds. Entries of deleted Contexts go with their delete
// events; the bound holds whatever the events.
const inventoryMaxContexts = 1 << 16

// NewInventoryCache returns a cache that the informers keep exact: it adds
// its indexes to the McpServer and Context informers and event handlers
// to all three. It must be called before the informers start.
func NewInventoryCache(servers, contexts, secrets cache.SharedIndexInformer) (*InventoryCache, error) {
	if err := contexts.AddIndexers(cache.Indexers{indexContextsByServer: contextsByServer}); err != nil {
		return nil, err
	}
	if err := servers.AddIndexers(cache.Indexers{indexServersBySecret: serversBySecret}); err != nil {
		return nil, err
	}
	c := newInventoryCache(contexts.GetIndexer(), servers.GetIndexer())
	handlers := []struct {
		informer cache.SharedIndexInformer
		changed  func(name string)
	}{
		{servers, c.serverChanged},
		{secrets, c.secretChanged},
		{contexts, c.contextChanged},
	}
	for _, h := range handlers {
		changed := h.changed
		if _, err := h.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { changed(objectName(obj)) },
			UpdateFunc: func(_, obj any) { changed(objectName(obj)) },
			DeleteFunc: func(obj any) { changed(objectName(obj)) },
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// newInventoryCache reads dependents from a Context indexer holding
// indexContextsByServer and an McpServer indexer holding
// indexServersBySecret.
func newInventoryCache(contexts, servers cache.Indexer) *InventoryCache {
	return &InventoryCache{
		contexts:        map[string]*contextInventory{},
		max:             inventoryMaxContexts,
		contextsListing: func(server string) ([]any, error) { return contexts.ByIndex(indexContextsByServer, server) },
		serversNaming:   func(secret string) ([]any, error) { return servers.ByIndex(indexServersBySecret, secret) },
	}
}

// objectName is the name of an informer's object or of a deletion
// tombstone's; namespaces are fixed per informer.
func objectName(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		_, name, _ := cache.SplitMetaNamespaceKey(tomb.Key)
		return name
	}
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	_, name, _ := cache.SplitMetaNamespaceKey(key)
	return name
}

// serverChanged invalidates the Contexts that list the server: it was
// added, updated or deleted.
func (c *InventoryCache) serverChanged(name string) {
	contexts, _ := c.contextsListing(name)
	if len(contexts) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, obj := range contexts {
		c.invalidateLocked(obj.(*v1alpha1.Context).Name)
	}
}

// secretChanged invalidates the Contexts that list a server whose auth
// names the Secret.
func (c *InventoryCache) secretChanged(name string) {
	servers, _ := c.serversNaming(name)
	for _, obj := range servers {
		c.serverChanged(obj.(*v1alpha1.McpServer).Name)
	}
}

// contextChanged drops the Context's entry. Its body would not be served
// to a request that reads another version of the Context anyway; dropping
// it frees it at once, and a deleted Context's entry goes with it.
func (c *InventoryCache) contextChanged(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.contexts, name)
}

func (c *InventoryCache) invalidateLocked(context string) {
	if e, ok := c.contexts[context]; ok {
		e.gen++
		e.body = nil
	}
}

// inventoryTicket is a miss: the entry and generation a body built now
// is stored under.
type inventoryTicket struct {
	entry *contextInventory
	gen   uint64
}

// get returns the cached body of ctx, or a ticket to store one under. A
// Context without a resourceVersion did not come from the API server
// (a test fixture): it is never cached.
func (c *InventoryCache) get(ctx *v1alpha1.Context) ([]byte, inventoryTicket, bool) {
	if ctx.ResourceVersion == "" {
		return nil, inventoryTicket{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.contexts[ctx.Name]
	if !ok {
		if len(c.contexts) >= c.max {
			// Every entry dropped is rebuilt on its next request; a ticket
			// taken before holds an entry no longer in the map, and its
			// body is not stored.
			clear(c.contexts)
		}
		e = &contextInventory{}
		c.contexts[ctx.Name] = e
	}
	if e.body != nil && e.uid == ctx.UID && e.resourceVersion == ctx.ResourceVersion {
		return e.body, inventoryTicket{}, true
	}
	return nil, inventoryTicket{entry: e, gen: e.gen}, false
}

// put stores body, built for ctx after t was taken, unless the entry was
// invalidated since: the body may predate the change. An entry dropped
// since the ticket (its Context deleted, the cache cleared) is no longer
// in the map, and storing into it is harmless.
func (c *InventoryCache) put(t inventoryTicket, ctx *v1alpha1.Context, body []byte) {
	if t.entry == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.entry.gen != t.gen {
		return
	}
	t.entry.uid, t.entry.resourceVersion, t.entry.body = ctx.UID, ctx.ResourceVersion, body
}
