package kittest

import (
	"bytes"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/fakeapi"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
	hccscheme "github.com/clerum/hcc/pkg/generated/clientset/versioned/scheme"
)

// T0 is the time a Fixture's clock starts at.
var T0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// Fixture is a reconciler's world in a unit test: fake clientsets that
// act as the API server does where the kit relies on it, the kit.Deps to
// build the reconciler from, and caches filled through the reconciler's
// own informers and their transforms, without running them. A test calls
// the reconciler's sync directly and asserts the writes it sent, the
// events it recorded and the statuses it applied.
type Fixture struct {
	t testing.TB

	// Kube and HCC are the fake API server: built-in kinds in Kube,
	// clerum.io kinds in HCC.
	Kube *kubefake.Clientset
	HCC  *hccfake.Clientset
	// Clock starts at T0; Registry holds the reconciler's metrics;
	// Recorder its events (read them with Events).
	Clock    *clocktesting.FakeClock
	Registry *prometheus.Registry
	Recorder *record.FakeRecorder

	deps kit.Deps
	log  syncBuffer
	// api numbers the writes of both fakes, as of one etcd.
	api *fakeapi.Server

	mu      sync.Mutex
	applied map[appliedKey][]runtime.Object
}

type appliedKey struct {
	resource        schema.GroupVersionResource
	namespace, name string
}

// NewFixture returns a Fixture whose fake API server holds objs (built-in
// kinds in Kube, clerum.io kinds in HCC) as given. Its caches are empty
// until SyncCaches: build the reconciler from Deps first, which asks for
// the informers, then call SyncCaches.
func NewFixture(t testing.TB, objs ...runtime.Object) *Fixture {
	t.Helper()
	var kubeObjs, hccObjs []runtime.Object
	for _, o := range objs {
		if isHCC(kindOf(t, o)) {
			hccObjs = append(hccObjs, o)
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	clk := clocktesting.NewFakeClock(T0)
	f := &Fixture{
		t: t, Clock: clk, Registry: prometheus.NewRegistry(), Recorder: record.NewFakeRecorder(1000),
		Kube: kubefake.NewClientset(kubeObjs...),
		// Not NewClientset: its field-managed tracker has no schema for
		// the clerum.io kinds and refuses to create them. Their status
		// applies are applyStatus's.
		HCC:     hccfake.NewSimpleClientset(hccObjs...),
		applied: map[appliedKey][]runtime.Object{},
	}
	// Above any resourceVersion a test gives a seeded object.
	f.api = fakeapi.New(1000, "uid-created-")
	f.Kube.PrependReactor("*", "*", f.api.Serve(f.Kube.Tracker()))
	f.HCC.PrependReactor("*", "*", f.api.Serve(f.HCC.Tracker()))
	f.HCC.PrependReactor("patch", "*", f.api.ApplyStatus(f.HCC.Tracker(), f.recordApplied))
	f.deps = kit.Deps{
		Kube: f.Kube, HCC: f.HCC, Informers: kit.NewInformers(f.Kube, f.HCC), Recorder: f.Recorder,
		Registry: f.Registry, Queues: kit.NewQueues(f.Registry, clk), Clock: clk, Log: zerolog.New(&f.log),
	}
	return f
}

// Deps returns what to build the reconciler from. Every call returns the
// same informers, queues and clientsets; Config and Readiness are unset,
// for the test to fill in its copy.
func (f *Fixture) Deps() kit.Deps { return f.deps }

// SyncCaches makes every informer's cache show what the fake API server
// holds, exactly as a fresh list of the informer would: each cache is
// replaced with the objects its selection returns, through its transform
// (a Secret digested, managedFields dropped). Then it forgets the writes
// so far: a test calls it to seed the caches after building the
// reconciler, and after a sync to show the reconciler its own writes.
func (f *Fixture) SyncCaches() {
	f.t.Helper()
	for _, c := range f.deps.Informers.Caches() {
		list, err := f.tracker(c.Kind).List(c.Resource, c.Kind, c.Namespace)
		if err != nil {
			f.t.Fatalf("kittest: listing %s in %q: %v", c.Resource, c.Namespace, err)
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			f.t.Fatalf("kittest: listing %s in %q: %v", c.Resource, c.Namespace, err)
		}
		var items []any
		for _, o := range objs {
			if m, err := meta.Accessor(o); err == nil && c.Selects(m) {
				items = append(items, f.transform(c.Transform, o))
			}
		}
		if err := c.Indexer.Replace(items, ""); err != nil {
			f.t.Fatalf("kittest: %s in %q: %v", c.Resource, c.Namespace, err)
		}
	}
	f.ClearWrites()
}

// SyncChanges makes every cache of the kinds handlers has a handler for
// show what the fake API server holds, as its running informer would after
// a watch: each object added, changed (by resourceVersion) or gone is stored
// or removed through the informer's transform, and then the handler of its
// kind is called, in that order (an informer stores before it notifies).
// Caches of other kinds are left as they are. Unlike SyncCaches it keeps
// the writes so far.
func (f *Fixture) SyncChanges(handlers map[schema.GroupVersionKind]cache.ResourceEventHandler) {
	f.t.Helper()
	for _, c := range f.deps.Informers.Caches() {
		h, ok := handlers[c.Kind]
		if !ok {
			continue
		}
		list, err := f.tracker(c.Kind).List(c.Resource, c.Kind, c.Namespace)
		if err != nil {
			f.t.Fatalf("kittest: listing %s in %q: %v", c.Resource, c.Namespace, err)
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			f.t.Fatalf("kittest: listing %s in %q: %v", c.Resource, c.Namespace, err)
		}
		listed := map[string]bool{}
		for _, o := range objs {
			m := accessor(f.t, o)
			if !c.Selects(m) {
				continue
			}
			key := cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()}.String()
			listed[key] = true
			old, exists, err := c.Indexer.GetByKey(key)
			if err != nil {
				f.t.Fatalf("kittest: %s %s: %v", c.Resource, key, err)
			}
			if exists && accessor(f.t, old.(runtime.Object)).GetResourceVersion() == m.GetResourceVersion() {
				continue
			}
			cur := f.transform(c.Transform, o)
			if err := c.Indexer.Update(cur); err != nil {
				f.t.Fatalf("kittest: caching %s %s: %v", c.Resource, key, err)
			}
			if exists {
				h.OnUpdate(old, cur)
			} else {
				h.OnAdd(cur, false)
			}
		}
		for _, old := range c.Indexer.List() {
			m := accessor(f.t, old.(runtime.Object))
			if listed[cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()}.String()] {
				continue
			}
			if err := c.Indexer.Delete(old); err != nil {
				f.t.Fatalf("kittest: uncaching %s %s/%s: %v", c.Resource, m.GetNamespace(), m.GetName(), err)
			}
			h.OnDelete(old)
		}
	}
}

// Index puts obj into every cache whose informer would list it, through
// the informer's transform, and not into the fake API server: for a test
// of a cache that differs from the server (one event behind, or an object
// whose status only the cache shows). It fails the test when no cache
// would hold obj.
func (f *Fixture) Index(obj runtime.Object) {
	f.t.Helper()
	gvk, m := kindOf(f.t, obj), accessor(f.t, obj)
	n := 0
	for _, c := range f.deps.Informers.Caches() {
		if c.Kind == gvk && c.Selects(m) {
			if err := c.Indexer.Update(f.transform(c.Transform, obj)); err != nil {
				f.t.Fatalf("kittest: caching %s %s/%s: %v", gvk.Kind, m.GetNamespace(), m.GetName(), err)
			}
			n++
		}
	}
	if n == 0 {
		f.t.Fatalf("kittest: no informer caches %s %s/%s (none asked for, or none selects it)", gvk.Kind, m.GetNamespace(), m.GetName())
	}
}

// Unindex removes obj from every cache of its kind and namespace, and not
// from the fake API server: a deletion the reconciler has not seen.
func (f *Fixture) Unindex(obj runtime.Object) {
	f.t.Helper()
	gvk, m := kindOf(f.t, obj), accessor(f.t, obj)
	for _, c := range f.deps.Informers.Caches() {
		if c.Kind == gvk && (c.Namespace == "" || c.Namespace == m.GetNamespace()) {
			if err := c.Indexer.Delete(obj); err != nil {
				f.t.Fatalf("kittest: uncaching %s %s/%s: %v", gvk.Kind, m.GetNamespace(), m.GetName(), err)
			}
		}
	}
}

// Writes lists the writes sent to either fake since the last ClearWrites
// or SyncCaches, as "verb resource/name", with "/subresource" after the
// name when there is one ("patch hosts/h1/status"), sorted. A write the
// fake refused (a create that found the name taken) is listed: it was
// sent.
func (f *Fixture) Writes() []string {
	return f.writes(func(core.Action) bool { return true })
}

// WritesIn is Writes of the writes to objects in namespace only, in the
// same form: for a reconciler that writes one name in several namespaces.
// Writes to cluster-scoped objects are WritesIn("").
func (f *Fixture) WritesIn(namespace string) []string {
	return f.writes(func(a core.Action) bool { return a.GetNamespace() == namespace })
}

func (f *Fixture) writes(keep func(core.Action) bool) []string {
	var out []string
	for _, a := range append(f.Kube.Actions(), f.HCC.Actions()...) {
		if !keep(a) {
			continue
		}
		switch a.GetVerb() {
		case "create", "update", "patch", "delete", "delete-collection":
		default:
			continue
		}
		name := ""
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok && o.GetObject() != nil {
			if m, err := meta.Accessor(o.GetObject()); err == nil {
				name = m.GetName()
			}
		} else if n, ok := a.(interface{ GetName() string }); ok {
			name = n.GetName()
		}
		w := a.GetVerb() + " " + a.GetResource().Resource + "/" + name
		if s := a.GetSubresource(); s != "" {
			w += "/" + s
		}
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

// ClearWrites forgets the writes sent so far.
func (f *Fixture) ClearWrites() {
	f.Kube.ClearActions()
	f.HCC.ClearActions()
}

// Events returns the events recorded since the last call, in order
// ("Warning Reason message", as record.FakeRecorder formats them), and
// does not wait for more.
func (f *Fixture) Events() []string {
	var out []string
	for {
		select {
		case e := <-f.Recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Log returns what the reconciler logged, one JSON object a line.
func (f *Fixture) Log() string { return f.log.String() }

// Applied returns the statuses applied to the clerum.io object
// namespace/name of T's kind, in order, each the object its apply
// configuration decodes to (its Status as applied). An apply the fake
// refused (the object was gone) is not among them.
//
//	st := kittest.Applied[*clerumv1alpha1.Host](f, "mcp-host", "h1")
//	require.NotEmpty(t, st)
//	last := st[len(st)-1].Status
func Applied[T runtime.Object](f *Fixture, namespace, name string) []T {
	f.t.Helper()
	var zero T
	gvk := kindOf(f.t, reflect.New(reflect.TypeOf(zero).Elem()).Interface().(runtime.Object))
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, o := range f.applied[appliedKey{gvr, namespace, name}] {
		out = append(out, o.DeepCopyObject().(T))
	}
	return out
}

// recordApplied records a status apply for Applied.
func (f *Fixture) recordApplied(p core.PatchActionImpl, applied runtime.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := appliedKey{p.Resource, p.Namespace, p.Name}
	f.applied[k] = append(f.applied[k], applied)
}

// transform is what an informer with transform stores of obj: never obj
// itself, which the tracker or the test holds.
func (f *Fixture) transform(transform func(any) (any, error), obj runtime.Object) any {
	f.t.Helper()
	out, err := transform(obj.DeepCopyObject())
	if err != nil {
		f.t.Fatalf("kittest: transform: %v", err)
	}
	return out
}

func (f *Fixture) tracker(gvk schema.GroupVersionKind) core.ObjectTracker {
	if isHCC(gvk) {
		return f.HCC.Tracker()
	}
	return f.Kube.Tracker()
}

func isHCC(gvk schema.GroupVersionKind) bool {
	return gvk.Group == clerumv1alpha1.GroupName
}

// kindOf is obj's kind, from its Go type.
func kindOf(t testing.TB, obj runtime.Object) schema.GroupVersionKind {
	t.Helper()
	for _, s := range []*runtime.Scheme{kubescheme.Scheme, hccscheme.Scheme} {
		if kinds, _, err := s.ObjectKinds(obj); err == nil {
			return kinds[0]
		}
	}
	t.Fatalf("kittest: %T is neither a built-in nor a clerum.io kind", obj)
	return schema.GroupVersionKind{}
}

func accessor(t testing.TB, obj runtime.Object) metav1.Object {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("kittest: %T: %v", obj, err)
	}
	return m
}

// syncBuffer is a bytes.Buffer safe for the reconciler's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
