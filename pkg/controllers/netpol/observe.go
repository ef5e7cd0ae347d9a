package netpol

import (
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/netpol"
)

// observations remembers the deletions this process saw (an McpServer
// deleted, a Context deleted or its contextId changed) until a full pass has
// revoked what they disowned. They are the evidence that lets a pass revoke
// the allows of an owner no longer in the inventory whatever the orphan
// caps; after a restart they are gone, and what was deleted while no
// controller ran counts against the caps (docs/networkpolicy.md).
//
// Each entry carries a sequence number, so settling a pass forgets only
// what that pass saw: a server deleted again while the pass ran stays
// remembered for the next one.
type observations struct {
	mu         sync.Mutex
	seq        uint64
	servers    map[string]uint64
	contextIDs map[string]uint64
}

func newObservations() *observations {
	return &observations{servers: map[string]uint64{}, contextIDs: map[string]uint64{}}
}

func (o *observations) serverDeleted(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	o.servers[name] = o.seq
}

func (o *observations) contextIDRetired(id string) {
	if id == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	o.contextIDs[id] = o.seq
}

// snapshot returns a copy of what is remembered and the sequence number it
// reaches.
func (o *observations) snapshot() (netpol.Observed, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := netpol.Observed{
		DeletedServers:    make(map[string]bool, len(o.servers)),
		RetiredContextIDs: make(map[string]bool, len(o.contextIDs)),
	}
	for s := range o.servers {
		out.DeletedServers[s] = true
	}
	for id := range o.contextIDs {
		out.RetiredContextIDs[id] = true
	}
	return out, o.seq
}

// settle forgets the entries up to seq: a pass that snapshot them has
// revoked everything they disowned.
func (o *observations) settle(seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for s, n := range o.servers {
		if n <= seq {
			delete(o.servers, s)
		}
	}
	for id, n := range o.contextIDs {
		if n <= seq {
			delete(o.contextIDs, id)
		}
	}
}

// createdPolicies remembers the policies this process created that its
// cache has not shown yet. Until the cache catches up, a pass cannot tell
// such a policy of a server deleted meanwhile from an unexplained orphan, so
// the observations that explain it are kept.
type createdPolicies struct {
	mu      sync.Mutex
	pending map[policyKey]time.Time
}

// createdTTL bounds how long a create waits for the cache: one deleted
// before the watch delivered it is never seen.
const createdTTL = 2 * time.Minute

func newCreatedPolicies() *createdPolicies {
	return &createdPolicies{pending: map[policyKey]time.Time{}}
}

func (p *createdPolicies) add(k policyKey, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending[k] = now
}

// seen is called when the cache shows k.
func (p *createdPolicies) seen(k policyKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pending, k)
}

// pendingFor reports whether k was created less than createdTTL ago and
// the cache has not shown it.
func (p *createdPolicies) pendingFor(k policyKey, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.pending[k]
	return ok && now.Sub(t) < createdTTL
}

// settled reports whether the cache has shown every create younger than
// createdTTL, forgetting older ones.
func (p *createdPolicies) settled(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, t := range p.pending {
		if now.Sub(t) >= createdTTL {
			delete(p.pending, k)
		}
	}
	return len(p.pending) == 0
}

// policyHandlers note the policies in this operator's scope that changed
// (drift: edited or deleted by hand, or a pass's own writes coming back)
// and signal a pass, and note the creates the cache has caught up with.
// Other writers' policies in the same namespaces signal nothing. An update
// that leaves the resourceVersion as it was (a relist's) changes nothing.
func (c *Controller) policyHandlers() cache.ResourceEventHandler {
	ours := func(obj any) bool {
		p, ok := kit.Unwrap(obj).(*networkingv1.NetworkPolicy)
		return !ok || owned(p) // an unreadable tombstone signals, to be safe
	}
	changed := func(obj any) {
		if key, ok := kit.KeyOf(obj); ok {
			c.dirty.policy(policyKey{key.Namespace, key.Name})
		} else {
			c.dirty.needFull(reasonUnreadableEvent)
		}
		c.Signal()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*networkingv1.NetworkPolicy); ok {
				c.created.seen(keyOf(p))
			}
			if ours(obj) {
				changed(obj)
			}
		},
		UpdateFunc: func(old, cur any) {
			if p, ok := cur.(*networkingv1.NetworkPolicy); ok {
				c.created.seen(keyOf(p))
			}
			if sameVersion(old, cur) {
				return
			}
			if ours(old) || ours(cur) {
				changed(cur)
			}
		},
		DeleteFunc: func(obj any) {
			// A deletion the cache shows ends any wait for the create: the
			// watch may deliver a create before the writer records it.
			if p, ok := kit.Unwrap(obj).(*networkingv1.NetworkPolicy); ok {
				c.created.seen(keyOf(p))
			}
			if ours(obj) {
				changed(obj)
			}
		},
	}
}

// sameVersion reports whether old and cur are one version of an object, as
// a relist delivers every object it finds unchanged.
func sameVersion(old, cur any) bool {
	o, errOld := meta.Accessor(old)
	n, errNew := meta.Accessor(cur)
	return errOld == nil && errNew == nil && o.GetResourceVersion() != "" && o.GetResourceVersion() == n.GetResourceVersion()
}

// serverHandlers note every McpServer change but one that only touches
// status (the coordinator and the McpServer operator write status often;
// the planner never reads it) and signal a pass, and remember deletions.
// A deletion is remembered before it is noted, so a pass that plans the
// server away judges its allows with the deletion in view.
func (c *Controller) serverHandlers() cache.ResourceEventHandler {
	changed := func(obj any) {
		if key, ok := kit.KeyOf(obj); ok {
			c.dirty.server(key.Name)
		} else {
			c.dirty.needFull(reasonUnreadableEvent)
		}
		c.Signal()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, cur any) {
			if !kit.StatusOnly(old, cur) {
				changed(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if key, ok := kit.KeyOf(obj); ok {
				c.observed.serverDeleted(key.Name)
			}
			changed(obj)
		},
	}
}

// contextHandlers are serverHandlers for Contexts; a changed contextId
// retires the old one.
func (c *Controller) contextHandlers() cache.ResourceEventHandler {
	changed := func(obj any) {
		if key, ok := kit.KeyOf(obj); ok {
			c.dirty.context(key.Name)
		} else {
			c.dirty.needFull(reasonUnreadableEvent)
		}
		c.Signal()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(old, cur any) {
			o, okOld := old.(*clerumv1alpha1.Context)
			n, okNew := cur.(*clerumv1alpha1.Context)
			if okOld && okNew && o.Spec.ContextID != n.Spec.ContextID && c.held(o) {
				c.observed.contextIDRetired(o.Spec.ContextID)
			}
			if !kit.StatusOnly(old, cur) {
				changed(cur)
			}
		},
		DeleteFunc: func(obj any) {
			// A tombstone without the object cannot say which contextId
			// went; its allows then count against the caps.
			if ctx, ok := kit.Unwrap(obj).(*clerumv1alpha1.Context); ok && c.held(ctx) {
				c.observed.contextIDRetired(ctx.Spec.ContextID)
			}
			changed(obj)
		},
	}
}

// held reports whether gone — a Context just deleted, or as it was before
// its contextId changed — held its contextId by the planner's rule, judged
// against the Contexts the cache holds now (which no longer show gone with
// that id). Only the holder's going retires an id: a younger duplicate
// created and deleted must not make every allow of the id disowned, and so
// revoked outside the caps while the inventory lacks the real holder.
// Should the cache not list, the id is retired: the closing direction.
func (c *Controller) held(gone *clerumv1alpha1.Context) bool {
	all, err := c.contextLister.Contexts(gone.Namespace).List(labels.Everything())
	if err != nil {
		return true
	}
	candidates := []*clerumv1alpha1.Context{gone}
	for _, other := range all {
		if other.Spec.ContextID == gone.Spec.ContextID && other.UID != gone.UID {
			candidates = append(candidates, other)
		}
	}
	holder := netpol.ContextIDHolder(candidates, gone.Spec.ContextID)
	return holder != nil && holder.UID == gone.UID
}
