package kit

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// sharedValues makes the caches hold one copy of each label set, label
// selector and resource list that many cached objects carry alike: every
// child of a Host carries the Host's labels, every NetworkPolicy that
// names a server carries the server's selector, and every Deployment the
// same resource requests. At 10,000 servers and 5,000 Hosts those copies
// were a third of the controller's live heap (docs/development.md, "The
// large fleet").
//
// Sharing is safe because a cached object is read-only: client-go's
// convention, which HCC keeps (every write is built from a DeepCopy or a
// fresh map; docs/reconcilers.md, "What the caches keep"). A DeepCopy of a
// cached object copies the shared values like any other.
//
// An entry lives as long as the first cached object that carried it (a
// runtime cleanup on that object drops it), so the table never outgrows
// the caches: an object that arrives after that one is gone gets, and
// shares from then on, a new copy. It is safe for concurrent use.
type sharedValues struct {
	mu        sync.Mutex
	next      uint64
	labels    map[string]sharedEntry[map[string]string]
	selectors map[string]sharedEntry[*metav1.LabelSelector]
	resources map[string]sharedEntry[corev1.ResourceList]
	// structs are the pod templates' security contexts, probes and
	// rollout strategies, by type and protobuf encoding.
	structs map[string]sharedEntry[any]
	// words are the strings of a small vocabulary every object repeats
	// (its API version, namespace, its owner's API version and kind),
	// kept for the life of the process: at most maxWords of them, so a
	// cluster of many namespaces costs a bounded table, not a leak.
	words map[string]string
}

// maxWords bounds sharedValues.words.
const maxWords = 4096

type sharedEntry[V any] struct {
	value V
	id    uint64
}

func newSharedValues() *sharedValues {
	return &sharedValues{
		labels:    map[string]sharedEntry[map[string]string]{},
		selectors: map[string]sharedEntry[*metav1.LabelSelector]{},
		resources: map[string]sharedEntry[corev1.ResourceList]{},
		structs:   map[string]sharedEntry[any]{},
		words:     map[string]string{},
	}
}

// sharer is the sharing of one object: the values it carries are looked
// up, or entered with holder, the object's metadata, as their first
// carrier.
type sharer struct {
	t      *sharedValues
	holder *metav1.ObjectMeta
	key    strings.Builder
}

// share replaces obj's label sets, selectors and resource lists by the
// copies the caches already hold, in place, and enters those they do not.
// Objects of other kinds keep theirs but for their metadata's labels.
func (t *sharedValues) share(obj any) {
	m, ok := metaOf(obj)
	if !ok {
		return
	}
	s := &sharer{t: t, holder: m}
	m.Labels = s.labels(m.Labels)
	t.meta(obj, m)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Selector = s.selector(o.Spec.Selector)
		o.Spec.Strategy.RollingUpdate = shareStruct(s, o.Spec.Strategy.RollingUpdate)
		s.podTemplate(&o.Spec.Template)
	case *batchv1.Job:
		o.Spec.Selector = s.selector(o.Spec.Selector)
		s.podTemplate(&o.Spec.Template)
	case *corev1.Service:
		o.Spec.Selector = s.labels(o.Spec.Selector)
	case *networkingv1.NetworkPolicy:
		o.Spec.PodSelector.MatchLabels = s.labels(o.Spec.PodSelector.MatchLabels)
		for i := range o.Spec.Ingress {
			s.peers(o.Spec.Ingress[i].From)
		}
		for i := range o.Spec.Egress {
			s.peers(o.Spec.Egress[i].To)
		}
	}
}

// metaOf returns the metadata of a typed object, an interior pointer
// that keeps the whole object alive.
func metaOf(obj any) (*metav1.ObjectMeta, bool) {
	accessor, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, false
	}
	m, ok := accessor.GetObjectMeta().(*metav1.ObjectMeta)
	return m, ok && m != nil
}

// meta shares the strings of obj's type and metadata that are one of a
// small vocabulary.
func (t *sharedValues) meta(obj any, m *metav1.ObjectMeta) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if typed, ok := obj.(interface{ GetObjectKind() schema.ObjectKind }); ok {
		if tm, ok := typed.GetObjectKind().(*metav1.TypeMeta); ok {
			tm.APIVersion, tm.Kind = t.word(tm.APIVersion), t.word(tm.Kind)
		}
	}
	m.Namespace = t.word(m.Namespace)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = t.word(r.APIVersion), t.word(r.Kind)
	}
}

// word returns the vocabulary's copy of w, entering it while there is
// room. t.mu is held.
func (t *sharedValues) word(w string) string {
	if w == "" {
		return w
	}
	if have, ok := t.words[w]; ok {
		return have
	}
	if len(t.words) < maxWords {
		t.words[w] = w
	}
	return w
}

func (s *sharer) podTemplate(p *corev1.PodTemplateSpec) {
	p.Labels = s.labels(p.Labels)
	p.Spec.SecurityContext = shareStruct(s, p.Spec.SecurityContext)
	for _, containers := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range containers {
			c := &containers[i]
			c.Resources.Limits = s.resources(c.Resources.Limits)
			c.Resources.Requests = s.resources(c.Resources.Requests)
			c.SecurityContext = shareStruct(s, c.SecurityContext)
			c.ReadinessProbe = shareStruct(s, c.ReadinessProbe)
			c.LivenessProbe = shareStruct(s, c.LivenessProbe)
			c.StartupProbe = shareStruct(s, c.StartupProbe)
		}
	}
}

// shareStruct returns the shared copy of p, a struct of the API that
// holds no map (its protobuf encoding is then canonical, and equal
// encodings are equal values).
func shareStruct[T any, PT interface {
	*T
	Marshal() ([]byte, error)
}](s *sharer, p PT) PT {
	if p == nil {
		return nil
	}
	data, err := p.Marshal()
	if err != nil {
		return p
	}
	s.key.Reset()
	s.key.WriteString(fmt.Sprintf("%T\x00", p))
	s.key.Write(data)
	return lookup(s, s.t.structs, any(p)).(PT)
}

func (s *sharer) peers(peers []networkingv1.NetworkPolicyPeer) {
	for i := range peers {
		peers[i].PodSelector = s.selector(peers[i].PodSelector)
		peers[i].NamespaceSelector = s.selector(peers[i].NamespaceSelector)
	}
}

// labels returns the shared copy of m (nil and empty maps are kept as
// they are: semantic equality tells them apart nowhere HCC looks, but the
// cache need not decide that).
func (s *sharer) labels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	s.key.Reset()
	writeMap(&s.key, m)
	return lookup(s, s.t.labels, m)
}

func (s *sharer) selector(sel *metav1.LabelSelector) *metav1.LabelSelector {
	if sel == nil {
		return nil
	}
	// Nothing is written into sel: client-go passes an object through
	// the transform twice before caching it (a watch-list relist), and on
	// the second pass sel is already the shared copy, a cached object's,
	// which others read meanwhile. Its labels are shared with every other
	// label set: a Deployment's selector is its Service's. When that
	// changes them, a new selector carries them.
	labels := s.labels(sel.MatchLabels)
	candidate := sel
	if !sameMap(labels, sel.MatchLabels) {
		candidate = &metav1.LabelSelector{MatchLabels: labels, MatchExpressions: sel.MatchExpressions}
	}
	s.key.Reset()
	writeMap(&s.key, sel.MatchLabels)
	// The nil and empty forms are written apart, so the shared copy has
	// the very form each object had.
	writeNil(&s.key, sel.MatchLabels == nil)
	for _, r := range sel.MatchExpressions {
		s.key.WriteString(r.Key + "\x00" + string(r.Operator))
		for _, v := range r.Values {
			s.key.WriteString("\x00" + v)
		}
		s.key.WriteString("\x01")
	}
	writeNil(&s.key, sel.MatchExpressions == nil)
	return lookup(s, s.t.selectors, candidate)
}

// sameMap reports whether a and b are one map (or both nil).
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func (s *sharer) resources(r corev1.ResourceList) corev1.ResourceList {
	if len(r) == 0 {
		return r
	}
	s.key.Reset()
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	for _, k := range keys {
		q := r[corev1.ResourceName(k)]
		// The canonical form: two quantities that print alike are equal
		// to semantic equality (Quantity.Cmp), which is how HCC compares.
		s.key.WriteString(k + "\x00" + q.String() + "\x00" + string(q.Format) + "\x01")
	}
	return lookup(s, s.t.resources, r)
}

// writeMap writes m's entries sorted, each key and value ended by a byte
// no label holds.
func writeMap(b *strings.Builder, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(k + "\x00" + m[k] + "\x01")
	}
}

func writeNil(b *strings.Builder, isNil bool) {
	if isNil {
		b.WriteString("nil")
	}
	b.WriteString("\x02")
}

// lookup returns the value of s's key in table, or enters v as it with s's
// holder as its first carrier.
func lookup[V any](s *sharer, table map[string]sharedEntry[V], v V) V {
	key := s.key.String()
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := table[key]; ok {
		return e.value
	}
	t.next++
	id := t.next
	table[key] = sharedEntry[V]{value: v, id: id}
	runtime.AddCleanup(s.holder, func(d dropKey) { dropShared(t, table, d) }, dropKey{key: key, id: id})
	return v
}

// dropKey names an entry and the carrier that entered it.
type dropKey struct {
	key string
	id  uint64
}

// dropShared removes key's entry once its first carrier is gone, unless a
// later carrier entered it again.
func dropShared[V any](t *sharedValues, table map[string]sharedEntry[V], d dropKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := table[d.key]; ok && e.id == d.id {
		delete(table, d.key)
	}
}

// size is how many values the table holds, for tests.
func (t *sharedValues) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.labels) + len(t.selectors) + len(t.resources) + len(t.structs)
}
