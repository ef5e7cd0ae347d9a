package api

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// uncached is a handler over the same world that builds every inventory
// afresh: what the cached handler must answer, byte for byte.
func uncached(o *Options) { o.Inventory = nil }

// TestInventoryCacheAnswersAsAFreshBuildAfterEveryChange edits a small
// world at random, every kind of change the inventory depends on, and
// after each edit asks every Host's inventory of a handler with the
// cache and of one without: the bodies must be identical. The world tells
// the cache of each change right after storing it, as the informers'
// event handlers do, so a body the cache serves after an edit reflects
// the edit, not a version before it.
func TestInventoryCacheAnswersAsAFreshBuildAfterEveryChange(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			w := newWorld()
			cached := newHarness(t, w)
			fresh := newHarness(t, w, uncached)
			const servers, secrets, contexts, hosts = 8, 4, 3, 5
			serverName := func(i int) string { return fmt.Sprintf("s%d", i) }
			secretName := func(i int) string { return fmt.Sprintf("k%d", i) }
			contextName := func(i int) string { return fmt.Sprintf("c%d", i) }
			uids := map[string]int{}
			uid := func(name string, renew bool) types.UID {
				if renew {
					uids[name]++
				}
				return types.UID(fmt.Sprintf("uid-%s-%d", name, uids[name]))
			}
			randomServer := func(name string, renew bool) *v1alpha1.McpServer {
				s := newServer(name, []v1alpha1.TransportType{v1alpha1.TransportSSE, v1alpha1.TransportStdio, v1alpha1.TransportStreamableHTTP}[rng.IntN(3)])
				s.UID = uid(name, renew)
				s.Spec.Transport.Port = ptr.To(int32(3000 + rng.IntN(3)))
				s.Spec.Transport.Path = []string{"", "/x", "/y"}[rng.IntN(3)]
				s.Spec.Enabled = ptr.To(rng.IntN(5) > 0)
				s.Generation = int64(1 + rng.IntN(2))
				s.Status = v1alpha1.McpServerStatus{ObservedGeneration: int64(rng.IntN(3)), Deployed: rng.IntN(2) == 0, Ready: rng.IntN(2) == 0}
				if rng.IntN(4) > 0 {
					withAuth(s, secretName(rng.IntN(secrets)), []string{"token", "other"}[rng.IntN(2)])
				}
				return s
			}
			randomSecret := func(name string, renew bool) *corev1.Secret {
				s := newSecret(name, uid(name, renew), map[string]string{"token": fmt.Sprint("v", rng.IntN(3)), "other": fmt.Sprint("o", rng.IntN(3))})
				if rng.IntN(3) == 0 {
					delete(s.Data, "other")
				}
				switch rng.IntN(8) {
				case 0:
					s.Type = corev1.SecretTypeServiceAccountToken
				case 1:
					s.Labels = map[string]string{names.LabelManagedBy: "host-context-controller"}
				}
				return s
			}
			randomContext := func(name string, renew bool) *v1alpha1.Context {
				var listed []string
				for range rng.IntN(5) {
					listed = append(listed, serverName(rng.IntN(servers+1))) // one that never exists
				}
				c := newContext(name, listed...)
				c.UID = uid(name, renew)
				return c
			}
			for i := range servers {
				put(t, w.servers, randomServer(serverName(i), false))
			}
			for i := range secrets {
				put(t, w.secrets, randomSecret(secretName(i), false))
			}
			for i := range contexts {
				put(t, w.contexts, randomContext(contextName(i), false))
			}
			tokens := make([]string, hosts)
			for i := range hosts {
				name := fmt.Sprintf("h%d", i)
				put(t, w.hosts, newHost(name, types.UID("uid-"+name), contextName(i%contexts)))
				tokens[i] = cached.token(name, types.UID("uid-"+name))
			}

			compare := func(step int, change string) {
				for i, tok := range tokens {
					got, want := cached.inventory(tok), fresh.inventory(tok)
					require.Equal(t, want.Code, got.Code, "step %d (%s), host %d", step, change, i)
					require.Equal(t, want.Body.String(), got.Body.String(), "step %d (%s), host %d", step, change, i)
				}
			}
			compare(0, "start")
			for step := 1; step <= 150; step++ {
				var change string
				switch rng.IntN(9) {
				case 0, 1:
					name := serverName(rng.IntN(servers))
					change = "update server " + name
					put(t, w.servers, randomServer(name, false))
				case 2:
					name := serverName(rng.IntN(servers))
					change = "delete or recreate server " + name
					if _, exists, _ := w.servers.GetByKey(serverNS + "/" + name); exists {
						remove(t, w.servers, newServer(name, v1alpha1.TransportSSE))
					} else {
						put(t, w.servers, randomServer(name, true))
					}
				case 3, 4:
					name := secretName(rng.IntN(secrets))
					change = "update Secret " + name
					put(t, w.secrets, randomSecret(name, false))
				case 5:
					name := secretName(rng.IntN(secrets))
					change = "delete or recreate Secret " + name
					if _, exists, _ := w.secrets.GetByKey(serverNS + "/" + name); exists {
						remove(t, w.secrets, newSecret(name, "", nil))
					} else {
						put(t, w.secrets, randomSecret(name, true))
					}
				case 6, 7:
					name := contextName(rng.IntN(contexts))
					change = "edit Context " + name
					put(t, w.contexts, randomContext(name, false))
				case 8:
					name := contextName(rng.IntN(contexts))
					change = "delete or recreate Context " + name
					if _, exists, _ := w.contexts.GetByKey(serverNS + "/" + name); exists {
						remove(t, w.contexts, newContext(name))
					} else {
						put(t, w.contexts, randomContext(name, true))
					}
				}
				compare(step, change)
			}
			hits := counterValue(t, cached.metrics.inventoryHits)
			misses := counterValue(t, cached.metrics.inventoryMisses)
			assert.Greater(t, hits, misses, "the cache served most answers (%v hits, %v misses)", hits, misses)
			assert.Zero(t, counterValue(t, fresh.metrics.inventoryHits)+counterValue(t, fresh.metrics.inventoryMisses), "the fresh handler has no cache")
		})
	}
}

// TestInventoryCacheServesRepeatsFromTheCache: a Host asking again with
// nothing changed reads no Secret, and the answer differs only by its
// timestamp.
func TestInventoryCacheServesRepeatsFromTheCache(t *testing.T) {
	w := standardWorld(t)
	h := newHarness(t, w)
	tok := h.token("host-a", "uid-a")
	first := h.inventory(tok)
	require.Equal(t, http.StatusOK, first.Code)
	reads := w.secretReads.Load()
	second := h.inventory(tok)
	assert.Equal(t, first.Body.String(), second.Body.String())
	assert.Equal(t, reads, w.secretReads.Load(), "served from the cache")
	assert.Equal(t, 1.0, counterValue(t, h.metrics.inventoryHits))
	assert.Equal(t, 1.0, counterValue(t, h.metrics.inventoryMisses))
	assert.Equal(t, first.Header(), second.Header())
}

// A Secret update changes the credentialRevision in the cached inventory
// as soon as the informer has delivered it, and a Context edit changes
// which servers its Hosts see.
func TestInventoryCacheFollowsSecretAndContextEdits(t *testing.T) {
	w := standardWorld(t)
	h := newHarness(t, w)
	tok := h.token("host-a", "uid-a")
	inventory := func() hostInventory { return decode[hostInventory](t, h.inventory(tok)) }
	before := inventory()
	require.Equal(t, []string{"alpha", "beta"}, serverNames(before))

	put(t, w.secrets, newSecret("alpha-creds", "uid-secret-alpha", map[string]string{"token": "rotated"}))
	after := inventory()
	assert.NotEqual(t, before.Servers[0].CredentialRevision, after.Servers[0].CredentialRevision)
	assert.Equal(t, decode[credentialResponse](t, h.credential(tok, "alpha")).CredentialRevision, after.Servers[0].CredentialRevision,
		"the inventory and the credential route agree")

	put(t, w.contexts, newContext("ctx-a", "beta", "gamma"))
	assert.Equal(t, []string{"beta", "gamma"}, serverNames(inventory()))
	put(t, w.hosts, newHost("host-a", "uid-a", "ctx-b"))
	assert.Equal(t, []string{"gamma"}, serverNames(inventory()), "the Host's own Context, read live")

	// A Secret shared by two servers of one Context: both entries change.
	put(t, w.contexts, newContext("ctx-b", "gamma", "delta"))
	put(t, w.servers, withAuth(newServer("gamma", v1alpha1.TransportSSE), "alpha-creds", "token"))
	shared := inventory()
	put(t, w.secrets, newSecret("alpha-creds", "uid-secret-alpha", map[string]string{"token": "rotated-again"}))
	again := inventory()
	for i := range again.Servers {
		assert.NotEqual(t, shared.Servers[i].CredentialRevision, again.Servers[i].CredentialRevision, again.Servers[i].Name)
	}
}

func serverNames(inv hostInventory) []string {
	var out []string
	for _, s := range inv.Servers {
		out = append(out, s.Name)
	}
	return out
}

// context returns a Context as the API server stores it: with a UID and
// resourceVersion rv.
func storedContext(name, rv string, servers ...string) *v1alpha1.Context {
	c := newContext(name, servers...)
	c.UID, c.ResourceVersion = types.UID("uid-"+name), rv
	return c
}

func TestInventoryCacheEntries(t *testing.T) {
	newCache := func() (*InventoryCache, cache.Indexer, cache.Indexer) {
		w := newWorld()
		return w.inventory, w.contexts, w.servers
	}

	t.Run("a body built across an invalidation is not stored", func(t *testing.T) {
		c, contexts, _ := newCache()
		ctx := storedContext("c", "1", "s")
		require.NoError(t, contexts.Add(ctx))
		_, ticket, ok := c.get(ctx)
		require.False(t, ok)
		c.serverChanged("s") // while the body is built
		c.put(ticket, ctx, []byte("stale"))
		_, _, ok = c.get(ctx)
		assert.False(t, ok, "the body may predate the change")
	})
	t.Run("a late store of an older build does not displace a current body", func(t *testing.T) {
		c, contexts, _ := newCache()
		ctx := storedContext("c", "1", "s")
		require.NoError(t, contexts.Add(ctx))
		_, older, _ := c.get(ctx)
		c.serverChanged("s")
		_, newer, _ := c.get(ctx)
		c.put(newer, ctx, []byte("current"))
		c.put(older, ctx, []byte("stale"))
		body, _, ok := c.get(ctx)
		require.True(t, ok)
		assert.Equal(t, "current", string(body))
	})
	t.Run("a body built across a Secret's change is not stored", func(t *testing.T) {
		c, contexts, servers := newCache()
		ctx := storedContext("c", "1", "s")
		require.NoError(t, contexts.Add(ctx))
		require.NoError(t, servers.Add(withAuth(newServer("s", v1alpha1.TransportSSE), "k", "token")))
		_, ticket, _ := c.get(ctx)
		c.secretChanged("k")
		c.put(ticket, ctx, []byte("stale"))
		_, _, ok := c.get(ctx)
		assert.False(t, ok)
	})
	t.Run("a body is served to its Context version only", func(t *testing.T) {
		c, contexts, _ := newCache()
		ctx := storedContext("c", "1", "s")
		require.NoError(t, contexts.Add(ctx))
		_, ticket, _ := c.get(ctx)
		c.put(ticket, ctx, []byte("body"))
		body, _, ok := c.get(ctx.DeepCopy())
		require.True(t, ok, "a copy of the same version")
		assert.Equal(t, "body", string(body))
		_, _, ok = c.get(storedContext("c", "2", "s"))
		assert.False(t, ok, "another resourceVersion")
		recreated := storedContext("c", "1", "s")
		recreated.UID = "uid-c-2"
		_, _, ok = c.get(recreated)
		assert.False(t, ok, "another UID")
	})
	t.Run("a change of a server or Secret the Context does not depend on keeps its body", func(t *testing.T) {
		c, contexts, servers := newCache()
		ctx := storedContext("c", "1", "s")
		require.NoError(t, contexts.Add(ctx))
		require.NoError(t, servers.Add(withAuth(newServer("other", v1alpha1.TransportSSE), "k", "token")))
		_, ticket, _ := c.get(ctx)
		c.put(ticket, ctx, []byte("body"))
		c.serverChanged("other")
		c.secretChanged("k")
		c.secretChanged("unused")
		_, _, ok := c.get(ctx)
		assert.True(t, ok)
	})
	t.Run("a deleted Context's entry goes, and a build racing the delete is not stored", func(t *testing.T) {
		c, contexts, _ := newCache()
		ctx := storedContext("c", "1", "s")
		require.NoError(t, contexts.Add(ctx))
		_, ticket, _ := c.get(ctx)
		require.NoError(t, contexts.Delete(ctx))
		assert.Empty(t, c.contexts)
		c.put(ticket, ctx, []byte("body"))
		assert.Empty(t, c.contexts)
	})
	t.Run("a Context without a resourceVersion is never cached", func(t *testing.T) {
		c, _, _ := newCache()
		ctx := newContext("fixture", "s")
		_, ticket, ok := c.get(ctx)
		assert.False(t, ok)
		c.put(ticket, ctx, []byte("body"))
		_, _, ok = c.get(ctx)
		assert.False(t, ok)
		assert.Empty(t, c.contexts)
	})
	t.Run("bounded", func(t *testing.T) {
		c, _, _ := newCache()
		c.max = 3
		var tickets []inventoryTicket
		for i := range 4 {
			ctx := storedContext("c"+strconv.Itoa(i), "1")
			_, ticket, _ := c.get(ctx)
			tickets = append(tickets, ticket)
			assert.LessOrEqual(t, len(c.contexts), 3)
		}
		c.put(tickets[0], storedContext("c0", "1"), []byte("dropped"))
		_, _, ok := c.get(storedContext("c0", "1"))
		assert.False(t, ok, "a ticket from before the cache was cleared stores nothing")
	})
}

func TestObjectNameOfATombstone(t *testing.T) {
	assert.Equal(t, "s", objectName(&v1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: serverNS, Name: "s"}}))
	assert.Equal(t, "s", objectName(cache.DeletedFinalStateUnknown{Key: serverNS + "/s"}))
}
