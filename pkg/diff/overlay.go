package diff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit/fakeapi"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
)

// overlay is the cluster the reconcilers of a diff run against: the live
// cluster, read lazily and never written, under the reconcilers' own
// writes, which stay in the overlay. A list, get or create first reads the
// live cluster for what it asks (the same selectors, the same name), once;
// from then on the object is the overlay's, and an object the overlay
// deleted is never read from the live cluster again. Writes are served as
// the API server serves them (fakeapi) and recorded.
type overlay struct {
	// ctx bounds the live reads: they end with the run, however the API
	// server answers (the client sets no timeout of its own).
	ctx  context.Context
	live dynamic.Interface
	api  *fakeapi.Server
	kube *kubefake.Clientset
	hcc  *hccfake.Clientset

	mu     sync.Mutex
	listed map[listKey]bool
	// listRVs maps, by resource, the resourceVersion a list returned to
	// the tracker's own at that list (see list), the smallest when
	// several lists returned one.
	listRVs map[schema.GroupVersionResource]map[string]int64
	gone    map[objectKey]bool
	writes  []write
	// shown are the status conditions of the clerum.io objects as first
	// read from the live cluster: what is already reported.
	shown map[shownKey][]metav1.Condition
	// err is the first failure to read the live cluster: the run is void,
	// since a reconciler that could not read would decide from less than a
	// leader sees.
	err error
}

type listKey struct {
	resource       schema.GroupVersionResource
	namespace      string
	labels, fields string
}

type objectKey struct {
	resource        schema.GroupVersionResource
	namespace, name string
}

// write is one write a reconciler sent, with the object before it (nil
// for a create) and after it (nil for a delete or a refused write).
type write struct {
	verb, subresource string
	resource          schema.GroupVersionResource
	namespace, name   string
	before, after     runtime.Object
	err               error
}

// overlayResourceVersion is where the overlay's resourceVersions start:
// above any etcd revision a live cluster serves, so a watch from a list's
// resourceVersion sees exactly the overlay's later writes.
const overlayResourceVersion = 1 << 52

func newOverlay(ctx context.Context, live dynamic.Interface) *overlay {
	o := &overlay{
		ctx:     ctx,
		live:    live,
		api:     fakeapi.New(overlayResourceVersion, "diff-created-"),
		kube:    kubefake.NewClientset(),
		hcc:     hccfake.NewSimpleClientset(),
		listed:  map[listKey]bool{},
		listRVs: map[schema.GroupVersionResource]map[string]int64{},
		gone:    map[objectKey]bool{},
		shown:   map[shownKey][]metav1.Condition{},
	}
	o.serve(&o.kube.Fake, o.kube.Tracker())
	o.serve(&o.hcc.Fake, o.hcc.Tracker())
	return o
}

// serve puts the overlay in front of fake's own reactors.
func (o *overlay) serve(fake *core.Fake, tracker core.ObjectTracker) {
	serveWrite := o.api.Serve(tracker)
	applyStatus := o.api.ApplyStatus(tracker, nil)
	fallback := core.ObjectReaction(tracker)
	fake.PrependReactor("*", "*", func(action core.Action) (bool, runtime.Object, error) {
		switch a := action.(type) {
		case core.ListActionImpl:
			return o.list(tracker, a)
		case core.GetActionImpl:
			o.readThrough(tracker, key(a.Resource, a.Namespace, a.Name))
			return false, nil, nil
		}
		k, ok := writeKey(action)
		if !ok {
			return false, nil, nil
		}
		o.readThrough(tracker, k)
		before, _ := tracker.Get(k.resource, k.namespace, k.name)
		handled, obj, err := true, runtime.Object(nil), precondition(action, before)
		_, deleting := action.(core.DeleteActionImpl)
		switch {
		case err != nil:
		case deleting && len(finalizersOf(before)) > 0:
			obj, err = o.markDeleted(tracker, k.resource, before)
		default:
			action = o.withNewResourceVersion(action)
			handled, obj, err = serveWrite(action)
			if !handled {
				handled, obj, err = applyStatus(action)
			}
			if !handled {
				handled, obj, err = fallback(action)
			}
		}
		w := write{verb: action.GetVerb(), subresource: action.GetSubresource(), resource: k.resource,
			namespace: k.namespace, name: k.name, before: before, err: err}
		if err == nil && !deleting {
			w.after, _ = tracker.Get(k.resource, k.namespace, k.name)
			finish(tracker, k)
		}
		o.mu.Lock()
		if _, getErr := tracker.Get(k.resource, k.namespace, k.name); err == nil && apierrors.IsNotFound(getErr) {
			o.gone[k] = true
		}
		o.writes = append(o.writes, w)
		o.mu.Unlock()
		return handled, obj, err
	})
	fake.PrependWatchReactor("*", func(action core.Action) (bool, watch.Interface, error) {
		a, ok := action.(core.WatchActionImpl)
		if !ok {
			return false, nil, nil
		}
		// A watch from a list's resourceVersion starts where that list
		// ended: the tracker replays what was written after it, counted
		// in the tracker's own resourceVersions.
		opts := a.ListOptions
		if rv, ok := o.trackerResourceVersion(a.Resource, opts.ResourceVersion); ok {
			opts.ResourceVersion = strconv.FormatInt(rv, 10)
		}
		w, err := tracker.Watch(a.Resource, a.Namespace, opts)
		if err != nil {
			return true, nil, err
		}
		sel, err := selectorsOf(a.ListOptions)
		if err != nil {
			return true, nil, err
		}
		// The tracker tells every watcher of the resource; the API server
		// tells only those whose selectors match, and an object that stops
		// matching leaves the watch as a deletion.
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			if m, err := meta.Accessor(e.Object); err == nil && !sel.matches(m) {
				if e.Type != watch.Modified {
					return e, false
				}
				e.Type = watch.Deleted
			}
			return e, true
		}), nil
	})
}

// markDeleted serves the delete of current, an object with finalizers, as
// the API server does: the object stays, being deleted (a
// deletionTimestamp, a new resourceVersion), until its last finalizer is
// removed. A reconciler sees it go only then (a claim's
// kubernetes.io/pvc-protection, a Host's own finalizer).
func (o *overlay) markDeleted(tracker core.ObjectTracker, gvr schema.GroupVersionResource, current runtime.Object) (runtime.Object, error) {
	obj := current.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if m.GetDeletionTimestamp() != nil {
		return obj, nil // already being deleted
	}
	now, grace := metav1.Now(), int64(0)
	m.SetDeletionTimestamp(&now)
	m.SetDeletionGracePeriodSeconds(&grace)
	m.SetResourceVersion(o.api.NextResourceVersion())
	if err := tracker.Update(gvr, obj, m.GetNamespace()); err != nil {
		return nil, err
	}
	return obj, nil
}

// finish deletes k once it is being deleted and a write removed its last
// finalizer, as the API server does.
func finish(tracker core.ObjectTracker, k objectKey) {
	obj, err := tracker.Get(k.resource, k.namespace, k.name)
	if err != nil {
		return
	}
	if m, err := meta.Accessor(obj); err == nil && m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
		_ = tracker.Delete(k.resource, k.namespace, k.name)
	}
}

func finalizersOf(obj runtime.Object) []string {
	if obj == nil {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return m.GetFinalizers()
}

// optimisticLockErrorMsg is the API server's message for a stale write.
const optimisticLockErrorMsg = "the object has been modified; please apply your changes to the latest version and try again"

// precondition is the API server's optimistic concurrency for what
// fakeapi does not serve: a patch that carries a resourceVersion, or a
// delete with preconditions, is refused with a Conflict
// unless they match the object as it is now. The reconcilers rely on it:
// a write computed from a cache one write behind must fail and be
// retried, not overwrite what it did not see.
func precondition(action core.Action, current runtime.Object) error {
	if current == nil {
		return nil // the tracker answers NotFound, or creates
	}
	m, err := meta.Accessor(current)
	if err != nil {
		return nil
	}
	gr := action.GetResource().GroupResource()
	stale := func() error {
		return apierrors.NewConflict(gr, m.GetName(),
			errors.New(optimisticLockErrorMsg))
	}
	switch a := action.(type) {
	// An update from a stale copy is fakeapi's to refuse (Serve).
	case core.PatchActionImpl:
		if a.PatchType == types.JSONPatchType {
			return nil
		}
		var patch struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if json.Unmarshal(a.Patch, &patch) == nil && patch.Metadata.ResourceVersion != "" && patch.Metadata.ResourceVersion != m.GetResourceVersion() {
			return stale()
		}
	case core.DeleteActionImpl:
		p := a.DeleteOptions.Preconditions
		if p == nil {
			return nil
		}
		if p.UID != nil && *p.UID != m.GetUID() {
			return apierrors.NewConflict(gr, m.GetName(),
				fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
			return apierrors.NewConflict(gr, m.GetName(),
				fmt.Errorf("precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, m.GetResourceVersion()))
		}
	}
	return nil
}

// withNewResourceVersion makes a patch of the main resource (not an apply,
// which fakeapi serves) set the object's next resourceVersion, as the API
// server gives one to every write: the fake's patch keeps the old one.
func (o *overlay) withNewResourceVersion(action core.Action) core.Action {
	a, ok := action.(core.PatchActionImpl)
	if !ok || a.PatchType == types.ApplyPatchType {
		return action
	}
	rv := o.api.NextResourceVersion()
	switch a.PatchType {
	case types.JSONPatchType:
		var ops []any
		if json.Unmarshal(a.Patch, &ops) != nil {
			return action
		}
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/resourceVersion", "value": rv})
		a.Patch, _ = json.Marshal(ops)
	case types.MergePatchType, types.StrategicMergePatchType:
		var patch map[string]any
		if json.Unmarshal(a.Patch, &patch) != nil || patch == nil {
			return action
		}
		md, _ := patch["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
		}
		md["resourceVersion"] = rv
		patch["metadata"] = md
		a.Patch, _ = json.Marshal(patch)
	}
	return a
}

// list answers a list from the overlay, filling it from the live cluster
// first for the selectors asked, as the API server filters it.
func (o *overlay) list(tracker core.ObjectTracker, a core.ListActionImpl) (bool, runtime.Object, error) {
	sel, err := selectorsOf(a.ListOptions)
	if err != nil {
		return true, nil, err
	}
	o.fill(tracker, a.Resource, a.Namespace, a.ListOptions)
	obj, err := tracker.List(a.Resource, a.Kind, a.Namespace)
	if err != nil {
		return true, nil, err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return true, nil, err
	}
	kept := items[:0]
	// The list is current as of its newest item: a cache that has shown
	// that item has everything the list saw (the NetworkPolicy operator
	// compares the two before it reads its caches).
	var newest uint64
	for _, item := range items {
		if m, err := meta.Accessor(item); err == nil && sel.matches(m) {
			kept = append(kept, item)
			if rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64); err == nil && rv > newest {
				newest = rv
			}
		}
	}
	if err := meta.SetList(obj, kept); err != nil {
		return true, nil, err
	}
	if l, err := meta.ListAccessor(obj); err == nil {
		// The tracker numbers its writes apart from the objects'
		// resourceVersions; a watch from this list's asks it for what
		// came after its own number at this list.
		if at, err := strconv.ParseInt(l.GetResourceVersion(), 10, 64); err == nil {
			o.rememberList(a.Resource, strconv.FormatUint(newest, 10), at)
		}
		l.SetResourceVersion(strconv.FormatUint(newest, 10))
	}
	return true, obj, nil
}

func (o *overlay) rememberList(gvr schema.GroupVersionResource, rv string, at int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	byRV := o.listRVs[gvr]
	if byRV == nil {
		byRV = map[string]int64{}
		o.listRVs[gvr] = byRV
	}
	if have, ok := byRV[rv]; !ok || at < have {
		byRV[rv] = at
	}
}

// trackerResourceVersion is the tracker's resourceVersion at the list that
// returned rv.
func (o *overlay) trackerResourceVersion(gvr schema.GroupVersionResource, rv string) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.listRVs[gvr][rv]
	return at, ok
}

// fill copies into the overlay, once per resource, namespace and
// selectors, the live objects a list with opts returns that the overlay
// does not hold or has not deleted.
func (o *overlay) fill(tracker core.ObjectTracker, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) {
	k := listKey{gvr, namespace, opts.LabelSelector, opts.FieldSelector}
	o.mu.Lock()
	done := o.listed[k]
	o.listed[k] = true
	o.mu.Unlock()
	if done {
		return
	}
	live := metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector, Limit: 500}
	for {
		list, err := o.live.Resource(gvr).Namespace(namespace).List(o.ctx, live)
		if err != nil {
			o.fail(fmt.Errorf("listing %s in %q: %w", gvr.GroupResource(), namespace, err))
			return
		}
		for i := range list.Items {
			o.adopt(tracker, gvr, &list.Items[i])
		}
		if live.Continue = list.GetContinue(); live.Continue == "" {
			return
		}
	}
}

// readThrough copies k from the live cluster into the overlay when the
// overlay neither holds it nor deleted it.
func (o *overlay) readThrough(tracker core.ObjectTracker, k objectKey) {
	if k.name == "" {
		return
	}
	if _, err := tracker.Get(k.resource, k.namespace, k.name); err == nil {
		return
	}
	o.mu.Lock()
	gone := o.gone[k]
	o.mu.Unlock()
	if gone {
		return
	}
	u, err := o.live.Resource(k.resource).Namespace(k.namespace).Get(o.ctx, k.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		o.fail(fmt.Errorf("reading %s %s/%s: %w", k.resource.GroupResource(), k.namespace, k.name, err))
		return
	}
	o.adopt(tracker, k.resource, u)
}

// adopt adds the live object u to the overlay, unless the overlay already
// holds or deleted it: the overlay's version wins.
func (o *overlay) adopt(tracker core.ObjectTracker, gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	k := key(gvr, u.GetNamespace(), u.GetName())
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.gone[k] {
		return
	}
	if _, err := tracker.Get(gvr, k.namespace, k.name); err == nil {
		return
	}
	obj, err := scheme.New(u.GroupVersionKind())
	if err != nil {
		o.failLocked(fmt.Errorf("%s %s/%s: %w", u.GetKind(), k.namespace, k.name, err))
		return
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		o.failLocked(fmt.Errorf("%s %s/%s: %w", u.GetKind(), k.namespace, k.name, err))
		return
	}
	if err := tracker.Add(obj); err != nil && !apierrors.IsAlreadyExists(err) {
		o.failLocked(fmt.Errorf("%s %s/%s: %w", u.GetKind(), k.namespace, k.name, err))
	}
	if gvr.Group == clerumv1alpha1.GroupName {
		if status := reflect.ValueOf(obj).Elem().FieldByName("Status"); status.IsValid() {
			conditions, _ := status.FieldByName("Conditions").Interface().([]metav1.Condition)
			o.shown[shownKey{u.GetKind(), k.namespace, k.name}] = conditions
		}
	}
}

type shownKey struct{ kind, namespace, name string }

// liveConditions are the status conditions the clerum.io object of kind
// had in the live cluster, if it was read.
func (o *overlay) liveConditions(kind, namespace, name string) []metav1.Condition {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.shown[shownKey{kind, namespace, name}]
}

func (o *overlay) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failLocked(err)
}

func (o *overlay) failLocked(err error) {
	if o.err == nil {
		o.err = err
	}
}

// failure is the first failure to read the live cluster.
func (o *overlay) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// writeCount is how many writes were sent so far.
func (o *overlay) writeCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.writes)
}

// recorded returns the writes so far, in the order they were sent.
func (o *overlay) recorded() []write {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]write(nil), o.writes...)
}

func key(gvr schema.GroupVersionResource, namespace, name string) objectKey {
	return objectKey{resource: gvr, namespace: namespace, name: name}
}

// writeKey is the object a create, update, patch or delete names.
func writeKey(action core.Action) (objectKey, bool) {
	switch a := action.(type) {
	case core.CreateActionImpl:
		m, err := meta.Accessor(a.Object)
		if err != nil {
			return objectKey{}, false
		}
		return key(a.Resource, a.Namespace, m.GetName()), true
	case core.UpdateActionImpl:
		m, err := meta.Accessor(a.Object)
		if err != nil {
			return objectKey{}, false
		}
		return key(a.Resource, a.Namespace, m.GetName()), true
	case core.PatchActionImpl:
		return key(a.Resource, a.Namespace, a.Name), true
	case core.DeleteActionImpl:
		return key(a.Resource, a.Namespace, a.Name), true
	}
	return objectKey{}, false
}

// selectors are a list's or watch's label and field selectors. Of the
// field selectors only metadata.name and metadata.namespace are
// evaluated, the only ones HCC's informers use.
type selectors struct {
	labels labels.Selector
	fields fields.Selector
}

func selectorsOf(opts metav1.ListOptions) (selectors, error) {
	s := selectors{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if opts.LabelSelector != "" {
		if s.labels, err = labels.Parse(opts.LabelSelector); err != nil {
			return s, apierrors.NewBadRequest(err.Error())
		}
	}
	if opts.FieldSelector != "" {
		if s.fields, err = fields.ParseSelector(opts.FieldSelector); err != nil {
			return s, apierrors.NewBadRequest(err.Error())
		}
	}
	return s, nil
}

func (s selectors) matches(m metav1.Object) bool {
	if !s.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	for _, r := range s.fields.Requirements() {
		var have string
		switch r.Field {
		case "metadata.name":
			have = m.GetName()
		case "metadata.namespace":
			have = m.GetNamespace()
		default:
			continue
		}
		if (r.Operator == selection.NotEquals) == (have == r.Value) {
			return false
		}
	}
	return true
}
