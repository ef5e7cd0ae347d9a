package kit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	informers "github.com/clerum/hcc/pkg/generated/informers/externalversions"
	"github.com/clerum/hcc/pkg/names"
)

// Selection is the label selector of an informer, chosen explicitly at every
// call site so no informer is filtered by a selector meant for another.
type Selection int

const (
	// AllObjects watches every object of the kind in the namespace.
	AllObjects Selection = iota
	// ManagedObjects watches only objects labelled managed by HCC: the
	// children HCC writes, without caching everything else of the kind.
	ManagedObjects
)

// managedSelector is the label selector of ManagedObjects.
var managedSelector = labels.SelectorFromSet(labels.Set{names.LabelManagedBy: names.ManagedByValue})

func (s Selection) String() string {
	if s == ManagedObjects {
		return "managed"
	}
	return "all"
}

// Informers are the informer factories of one process: one per namespace
// and selection for built-in kinds, one per namespace for clerum.io kinds.
// Every reconciler takes its informers from here, so two reconcilers that
// watch a kind in a namespace share one watch and one cache. A kind may be
// watched in a namespace with one selection only: asking for it with the
// other is a wiring error (a second watch, or a cache that silently lacks
// objects a reconciler expects) and panics at startup.
type Informers struct {
	kube kubernetes.Interface
	hcc  clientset.Interface

	mu      sync.Mutex
	started bool
	kubeBy  map[kubeKey]kubeinformers.SharedInformerFactory
	hccBy   map[string]informers.SharedInformerFactory
	claimed map[claimKey]Selection
	// transforms records the transforms set with SetTransform (Secrets:
	// secretdigest.Digest), for Caches; every other informer's is
	// StripUnread.
	transforms map[claimKey]Transform
	// named are the one-ConfigMap informers from ConfigMap.
	named map[namedKey]*namedConfigMap
	// dropped are the annotations the transforms of the built-in kinds'
	// informers removed from HCC's children (Dropped); kubeTransform is
	// those informers' default, StripUnread recording them.
	dropped       *droppedAnnotations
	kubeTransform cache.TransformFunc
	// hccTransform is the clerum.io informers' transform.
	hccTransform cache.TransformFunc
}

type kubeKey struct {
	namespace string
	selection Selection
}

type claimKey struct{ namespace, resource string }

// NewInformers returns the factories over kube and hcc. They cache objects
// through StripUnread (or the transform a reconciler sets instead), and
// never resync: periodic work is each reconciler's own timer, so a resync
// never floods every queue at once.
func NewInformers(kube kubernetes.Interface, hcc clientset.Interface) *Informers {
	dropped := newDroppedAnnotations()
	return &Informers{
		kube:          kube,
		hcc:           hcc,
		kubeBy:        map[kubeKey]kubeinformers.SharedInformerFactory{},
		hccBy:         map[string]informers.SharedInformerFactory{},
		claimed:       map[claimKey]Selection{},
		named:         map[namedKey]*namedConfigMap{},
		dropped:       dropped,
		kubeTransform: dropped.track(StripUnread),
		// No reconciler updates a clerum.io object from its cached copy
		// (statuses are applied, a Host's finalizers merge-patched), so
		// nothing their transform drops is tracked.
		hccTransform: StripUnread,
	}
}

// Kube returns the factory for resource (e.g. "networkpolicies") in
// namespace with selection.
func (i *Informers) Kube(namespace string, selection Selection, resource string) kubeinformers.SharedInformerFactory {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.mustNotHaveStarted()
	i.claim(namespace, resource, selection)
	k := kubeKey{namespace, selection}
	f, ok := i.kubeBy[k]
	if !ok {
		opts := []kubeinformers.SharedInformerOption{
			kubeinformers.WithNamespace(namespace),
			kubeinformers.WithTransform(i.kubeTransform),
		}
		if selection == ManagedObjects {
			selector := managedSelector.String()
			opts = append(opts, kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = selector }))
		}
		f = kubeinformers.NewSharedInformerFactoryWithOptions(i.kube, 0, opts...)
		i.kubeBy[k] = f
	}
	return f
}

// HCC returns the factory for clerum.io kinds in namespace; they are always
// watched whole.
func (i *Informers) HCC(namespace string) informers.SharedInformerFactory {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.mustNotHaveStarted()
	f, ok := i.hccBy[namespace]
	if !ok {
		f = informers.NewSharedInformerFactoryWithOptions(i.hcc, 0,
			informers.WithNamespace(namespace), informers.WithTransform(i.hccTransform))
		i.hccBy[namespace] = f
	}
	return f
}

func (i *Informers) claim(namespace, resource string, selection Selection) {
	k := claimKey{namespace, resource}
	if have, ok := i.claimed[k]; ok && have != selection {
		panic(fmt.Sprintf("kit: %s in namespace %s is watched with selection %s and %s; choose one", resource, namespace, have, selection))
	}
	i.claimed[k] = selection
}

// mustNotHaveStarted panics when a reconciler asks for an informer after
// Start: it would never be started, and its cache would never sync.
func (i *Informers) mustNotHaveStarted() {
	if i.started {
		panic("kit: an informer was asked for after Informers.Start; build every reconciler first")
	}
}

// Start starts every informer asked for; none may be asked for after it.
func (i *Informers) Start(stop <-chan struct{}) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.started {
		// Dropped forgets a child once its informer sees it deleted.
		for k, selection := range i.claimed {
			_, gvr := kubeResource(k.resource)
			generic, err := i.kubeBy[kubeKey{k.namespace, selection}].ForResource(gvr)
			if err != nil {
				panic(fmt.Sprintf("kit: %s: %v", gvr, err))
			}
			_, _ = generic.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: i.dropped.forget})
		}
	}
	i.started = true
	for _, f := range i.kubeBy {
		f.Start(stop)
	}
	for _, f := range i.hccBy {
		f.Start(stop)
	}
	for _, n := range i.named {
		n.factory.Start(stop)
	}
}

// Shutdown stops the informers and waits for their goroutines.
func (i *Informers) Shutdown() {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, f := range i.kubeBy {
		f.Shutdown()
	}
	for _, f := range i.hccBy {
		f.Shutdown()
	}
	for _, n := range i.named {
		n.factory.Shutdown()
	}
}

// StripUnread is the transform of every informer whose reconciler sets
// none of its own: it drops from the object what no reconciler reads and
// what is often most of it, metadata.managedFields and kubectl's
// last-applied-configuration annotation (the whole object again, as last
// applied). Informers call it on objects nobody else holds yet, so it
// changes them in place; it is idempotent, as client-go requires.
//
// Dropping an annotation from a cached copy is safe only if no update is
// ever built from that copy: an update replaces metadata.annotations whole
// and would erase it on the server. Ensure reads a child whose cached copy
// lost one before updating it (Dropped). A NetworkPolicy keeps the
// annotation: the NetworkPolicy operator updates its policies from their
// cached copies (pkg/controllers/netpol, updateFor) without that read.
// It then shares what the object carries alike with other cached objects
// (label sets, selectors, resource lists: sharedValues), which is safe
// only because no cached object is changed in place.
// docs/reconcilers.md, "What the caches keep".
func StripUnread(obj any) (any, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // a tombstone
	}
	accessor.SetManagedFields(nil)
	if _, policy := obj.(*networkingv1.NetworkPolicy); !policy {
		if a := accessor.GetAnnotations(); a != nil {
			if _, ok := a[LastAppliedAnnotation]; ok {
				delete(a, LastAppliedAnnotation)
				if len(a) == 0 {
					accessor.SetAnnotations(nil)
				}
			}
		}
	}
	cachedValues.share(obj)
	return obj, nil
}

// cachedValues are the label sets, selectors and resource lists the
// objects of every cache share (sharedValues).
var cachedValues = newSharedValues()

// LastAppliedAnnotation is kubectl's client-side apply record.
const LastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// ErrStoppedBeforeSync is what WaitForSync returns when it is stopped before
// the caches synced: a shutdown that came early (a SIGTERM while a loaded
// API server still serves the initial lists), not a failure. RunAll counts
// it as a clean stop.
var ErrStoppedBeforeSync = errors.New("stopped before the caches synced")

// WaitForSync waits until every informer in synced has synced, or stop.
// cache.WaitForNamedCacheSync polls until the caches sync or stop closes,
// so its false means only that stop closed.
func WaitForSync(name string, stop <-chan struct{}, synced ...cache.InformerSynced) error {
	if !cache.WaitForNamedCacheSync(name, stop, synced...) {
		return fmt.Errorf("%s: %w", name, ErrStoppedBeforeSync)
	}
	return nil
}

// RunAll runs every reconciler until ctx is done and returns once all of
// them have stopped; the first to fail stops the others and is returned. A
// reconciler stopped before its caches synced, because ctx ended, has
// stopped cleanly.
func RunAll(ctx context.Context, reconcilers []Reconciler) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range reconcilers {
		g.Go(func() error {
			err := r.Run(ctx)
			if err == nil || (errors.Is(err, ErrStoppedBeforeSync) && ctx.Err() != nil) {
				return nil
			}
			return fmt.Errorf("%s: %w", r.Name(), err)
		})
	}
	return g.Wait()
}
