package kit

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeinformers "k8s.io/client-go/informers"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	hccscheme "github.com/clerum/hcc/pkg/generated/clientset/versioned/scheme"
)

// Transform is an informer transform and its name. Go functions cannot be
// compared, so the name is what tells two transforms apart: informers
// asked for with one name share one cache, and a reconciler asking with
// another gets its own or an error. The zero Transform is StripUnread,
// every informer's default.
type Transform struct {
	Name string
	Func cache.TransformFunc
}

// StripUnreadTransform is the default Transform.
var StripUnreadTransform = Transform{Name: "strip-unread", Func: StripUnread}

// orDefault returns t, or the default for the zero Transform; a function
// without a name is a wiring error.
func (t Transform) orDefault() Transform {
	switch {
	case t.Func == nil && t.Name == "":
		return StripUnreadTransform
	case t.Func == nil || t.Name == "":
		panic(fmt.Sprintf("kit: a Transform needs both a name and a function (name %q)", t.Name))
	}
	return t
}

// namedKey is one ConfigMap informer: a ConfigMap and a transform's name.
type namedKey struct{ namespace, name, transform string }

type namedConfigMap struct {
	factory   kubeinformers.SharedInformerFactory
	informer  cache.SharedIndexInformer
	transform cache.TransformFunc
}

// ConfigMap returns an informer that lists and watches only the ConfigMap
// name in namespace (a field selector), for a reconciler that reads one
// platform ConfigMap and must not cache every ConfigMap of the namespace.
// transform is its transform (the zero Transform: StripUnread). It is started
// and shut down with the other informers. It is a watch of its own, apart
// from the factories of Kube. Reconcilers asking for one ConfigMap with one
// transform share one informer; one that asks with another transform (the
// Host operator keeps only a ConfigMap's existence, the SharedFileSystem
// operator reads a key of the same ConfigMap) gets an informer of its own,
// so neither reads the other's idea of the object.
func (i *Informers) ConfigMap(namespace, name string, t Transform) cache.SharedIndexInformer {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.mustNotHaveStarted()
	t = t.orDefault()
	transform := t.Func
	k := namedKey{namespace, name, t.Name}
	if n, ok := i.named[k]; ok {
		return n.informer
	}
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	f := kubeinformers.NewSharedInformerFactoryWithOptions(i.kube, 0,
		kubeinformers.WithNamespace(namespace),
		kubeinformers.WithTransform(transform),
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	inf := f.Core().V1().ConfigMaps().Informer()
	i.named[k] = &namedConfigMap{factory: f, informer: inf, transform: transform}
	return inf
}

// Cache is one informer's cache as a test sees it: what a list of the
// informer returns and what it stores of each object. kittest seeds caches
// through it exactly as the informer's own list would, without running the
// informer.
type Cache struct {
	// Resource and Kind are the informer's kind.
	Resource schema.GroupVersionResource
	Kind     schema.GroupVersionKind
	// Namespace is the namespace it watches ("" for all).
	Namespace string
	// Name is the one object it watches (a field selector on
	// metadata.name), "" for all.
	Name string
	// Selects reports whether the informer's list returns obj: obj is in
	// Namespace and matches its label and field selectors.
	Selects func(obj metav1.Object) bool
	// Transform is the informer's transform as installed, applied to
	// every object it stores.
	Transform cache.TransformFunc
	// Indexer is the informer's cache.
	Indexer cache.Indexer
}

// Caches returns the cache of every informer asked for, ordered by
// namespace and resource, for tests (kittest); a process never calls it.
// The clerum.io factories do not say which kinds a reconciler took from
// them, so for each namespace HCC was asked for, Caches takes the informer
// of every clerum.io kind, making those no reconciler asked for: call it
// after every reconciler is built and do not Start afterwards.
func (i *Informers) Caches() []Cache {
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []Cache
	for k, selection := range i.claimed {
		gvk, gvr := kubeResource(k.resource)
		generic, err := i.kubeBy[kubeKey{k.namespace, selection}].ForResource(gvr)
		if err != nil {
			panic(fmt.Sprintf("kit: %s: %v", gvr, err))
		}
		transform := i.kubeTransform
		if t, ok := i.transforms[k]; ok {
			transform = t.Func
		}
		var selector labels.Selector = labels.Everything()
		if selection == ManagedObjects {
			selector = managedSelector
		}
		out = append(out, Cache{Resource: gvr, Kind: gvk, Namespace: k.namespace, Transform: transform,
			Indexer: generic.Informer().GetIndexer(), Selects: selects(k.namespace, selector, "")})
	}
	for namespace, f := range i.hccBy {
		for _, kind := range hccKinds() {
			gvr, _ := meta.UnsafeGuessKindToResource(kind)
			generic, err := f.ForResource(gvr)
			if err != nil {
				panic(fmt.Sprintf("kit: %s: %v", gvr, err))
			}
			out = append(out, Cache{Resource: gvr, Kind: kind, Namespace: namespace, Transform: i.hccTransform,
				Indexer: generic.Informer().GetIndexer(), Selects: selects(namespace, labels.Everything(), "")})
		}
	}
	for k, n := range i.named {
		out = append(out, Cache{Resource: corev1Resource("configmaps"), Kind: corev1Kind("ConfigMap"),
			Namespace: k.namespace, Name: k.name, Transform: n.transform, Indexer: n.informer.GetIndexer(),
			Selects: selects(k.namespace, labels.Everything(), k.name)})
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Namespace != out[b].Namespace {
			return out[a].Namespace < out[b].Namespace
		}
		return out[a].Resource.String() < out[b].Resource.String()
	})
	return out
}

// selects is what a list in namespace with selector returns, and only the
// object name when name is set (a field selector on metadata.name).
func selects(namespace string, selector labels.Selector, name string) func(metav1.Object) bool {
	return func(obj metav1.Object) bool {
		return (namespace == "" || obj.GetNamespace() == namespace) &&
			(name == "" || obj.GetName() == name) &&
			selector.Matches(labels.Set(obj.GetLabels()))
	}
}

func corev1Resource(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Version: "v1", Resource: resource}
}

func corev1Kind(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Version: "v1", Kind: kind}
}

// stableVersion matches a Kubernetes API version that is neither alpha nor
// beta.
var stableVersion = regexp.MustCompile(`^v[0-9]+$`)

var kubeKinds = sync.OnceValue(func() map[string][]schema.GroupVersionKind {
	return kindsByResource(kubescheme.Scheme, func(gvk schema.GroupVersionKind) bool {
		return stableVersion.MatchString(gvk.Version)
	})
})

// kubeResource returns the kind and resource a built-in informer of
// resource (as Kube was asked for it, e.g. "deployments") watches: the one
// stable API version of the kind, which is what every typed informer HCC
// takes (AppsV1, CoreV1, ...) serves. A resource of no stable version, or
// of two (events), panics: a wiring error Caches cannot resolve.
func kubeResource(resource string) (schema.GroupVersionKind, schema.GroupVersionResource) {
	kinds := kubeKinds()[resource]
	if len(kinds) != 1 {
		panic(fmt.Sprintf("kit: resource %q has %d stable built-in kinds %v; Caches needs exactly one", resource, len(kinds), kinds))
	}
	gvr, _ := meta.UnsafeGuessKindToResource(kinds[0])
	return kinds[0], gvr
}

// hccKinds are the clerum.io kinds, sorted.
var hccKinds = sync.OnceValue(func() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, kinds := range kindsByResource(hccscheme.Scheme, func(gvk schema.GroupVersionKind) bool {
		return gvk.GroupVersion() == schema.GroupVersion(clerumv1alpha1.GroupVersion)
	}) {
		out = append(out, kinds...)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Kind < out[b].Kind })
	return out
})

// kindsByResource indexes the object kinds of scheme that keep by resource.
func kindsByResource(scheme *runtime.Scheme, keep func(schema.GroupVersionKind) bool) map[string][]schema.GroupVersionKind {
	out := map[string][]schema.GroupVersionKind{}
	for gvk := range scheme.AllKnownTypes() {
		if !keep(gvk) || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		obj, err := scheme.New(gvk)
		if err != nil {
			continue
		}
		if _, err := meta.Accessor(obj); err != nil {
			continue // an options type, not an object
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		out[gvr.Resource] = append(out[gvr.Resource], gvk)
	}
	return out
}
