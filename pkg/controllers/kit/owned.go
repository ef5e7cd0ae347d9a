package kit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// Children writes one reconciler's child objects (docs/reconcilers.md,
// "Owned objects") through Ensure. It is safe for concurrent use by the
// reconciler's workers.
//
// # Get, compare, update — not server-side apply
//
// Children are written by Create and optimistic-locked Update after a
// semantic comparison with the informer's copy, not by server-side apply.
// Decided once, for every kind, because:
//
//   - HCC owns the whole pod template. Under server-side apply a container,
//     volume or environment entry another manager added to a map-list stays
//     (it is theirs), and HCC could only remove it with a full Update anyway.
//     Update replaces the spec, so such an entry is a difference and undone.
//   - Zero writes on an unchanged cluster. An apply request cannot be skipped
//     without knowing whether it would change anything, and with server-side
//     apply knowing that takes the request itself or a dry run: one API
//     request per child per sync, thousands on a full resync. Comparing
//     against the cache costs nothing, provided the builder emits the object
//     as the API server defaults it — which kittest.RoundTrip proves per
//     builder against a real API server.
//   - A stale cache cannot overwrite a newer change: Update carries the
//     cached resourceVersion and UID, so it fails with a Conflict the kit's
//     loop retries quietly instead of clobbering what it did not see.
//
// What this costs, and how it is contained: a builder that misses a default
// shows as one write per sync (RoundTrip fails in CI first); a label or
// annotation HCC stops setting stays on old objects, because without
// managedFields nothing records which keys were HCC's; fields the API server
// assigns (a Service's clusterIP, a bound claim's volumeName) are copied from
// the live object per kind, and a change the API server would refuse (an
// immutable field, a claim shrinking) is refused here with a typed error
// instead of failing at the server on every retry. Status has several
// writers and is applied by server-side apply (BuildConditions); children
// have one.
//
// # Ownership (docs/ownership.md)
//
// HCC writes only a child that carries clerum.io/managed-by and its writer's
// identity label naming the owner. A controller reference to the owner's
// kind and name but another UID names an owner that no longer exists (it was
// deleted and re-created under its name) and is taken over: rewritten to the
// live owner; so is a managed child with no controller reference at all
// (written by an earlier HCC). A controller reference to anything else is a
// different live owner and the child is refused like an unmanaged one. HCC
// cannot prove from the child alone that such an owner is gone, and refusing
// is the safe side: where the owner is really gone, the garbage collector
// deletes the child and the next sync creates HCC's own.
type Children struct {
	kube kubernetes.Interface
	// caches are the informers the live copies come from: Ensure asks
	// them whether a copy lacks annotations the server holds.
	caches       *Informers
	fieldManager string
	recorder     record.EventRecorder
	refused      func(kind string, cause Cause)
	// hold keeps a create and its mark together (WithHold).
	hold WriteHold

	mu sync.Mutex
	// reported remembers the refusals already reported, as the refused
	// object's UID and resourceVersion, so a refusal is reported once per
	// state of the object and not on every sync or retry. An entry goes
	// when the name is written; one whose owner went away while refused
	// stays, a few bytes per name, until the process restarts.
	reported map[refusalKey]string
	// unseen are the children this process created that a sync has not
	// yet been shown by its cache: a sync that runs before the watch
	// delivers one reads it instead of creating it again (a create that
	// could only meet AlreadyExists).
	unseen map[refusalKey]bool
}

// Child is the type of a child object: a pointer to a typed API object.
type Child interface {
	comparable
	metav1.Object
	runtime.Object
}

// Owner is the object whose children a reconciler writes.
type Owner struct {
	// Object is the live owner as the lister has it. Its name and UID go
	// into the controller reference, and events about its children are
	// recorded on it.
	Object interface {
		metav1.Object
		runtime.Object
	}
	// GVK is Object's kind: objects from a lister carry no TypeMeta.
	GVK schema.GroupVersionKind
	// IdentityLabel is the writer's identity label (names.LabelMcpServer,
	// names.LabelHost, clerum.io/sharedfilesystem, clerum.io/globalfilesystem):
	// a child is the owner's when it carries it with names.Label(owner name).
	IdentityLabel string

	noReference bool
}

// WithoutReference returns o for children that carry no owner reference and
// whose ownership is decided by labels alone. Children in another namespace
// than the owner's get this treatment whatever the Owner says: owner
// references cannot cross namespaces, and the garbage collector would take
// one for a dangling reference and delete the child.
func (o Owner) WithoutReference() Owner {
	o.noReference = true
	return o
}

func (o Owner) references(child metav1.Object) bool {
	return !o.noReference && child.GetNamespace() == o.Object.GetNamespace()
}

func (o Owner) identity() string { return names.Label(o.Object.GetName()) }

// Action is what Ensure did, or what Plan says to do, with a child.
type Action int

const (
	// ActionNone: the child is as desired (or it was refused, with an error).
	ActionNone Action = iota
	// ActionCreate: the child did not exist.
	ActionCreate
	// ActionUpdate: the child differed in something HCC owns.
	ActionUpdate
	// ActionTakeOver: an update that also rewrites the controller reference,
	// which named an owner that no longer exists or was missing.
	ActionTakeOver
)

func (a Action) String() string {
	switch a {
	case ActionCreate:
		return "create"
	case ActionUpdate:
		return "update"
	case ActionTakeOver:
		return "take over"
	}
	return "none"
}

// Cause says why a child was not written. The refusal metric is labelled
// with it.
type Cause string

const (
	// CauseUnmanaged: the object lacks clerum.io/managed-by.
	CauseUnmanaged Cause = "Unmanaged"
	// CauseOtherWriter: it is managed, but its identity label (or policy
	// type) belongs to another owner or writer.
	CauseOtherWriter Cause = "OtherWriter"
	// CauseOtherOwner: its controller reference names a different owner.
	CauseOtherOwner Cause = "OtherOwner"
	// CauseImmutable: the builder changed a field the API server never lets
	// change after creation.
	CauseImmutable Cause = "Immutable"
	// CauseShrink: the builder asks a PersistentVolumeClaim for less storage
	// than it has; claims only grow.
	CauseShrink Cause = "Shrink"
)

var (
	// ErrNotOwned matches a RefusedError for an object HCC does not own
	// (CauseUnmanaged, CauseOtherWriter, CauseOtherOwner).
	ErrNotOwned = errors.New("not owned by HCC")
	// ErrChangeRefused matches a RefusedError for a change the API server
	// would refuse (CauseImmutable, CauseShrink).
	ErrChangeRefused = errors.New("change refused")
	// ErrBeingDeleted: the child has a deletion timestamp; it is neither
	// written nor re-created until it is gone, whose event re-enqueues the
	// owner.
	ErrBeingDeleted = errors.New("being deleted")
)

// RefusedError says that a child was not written and why. It is final until
// the object or the builder's output changes: report it in a condition, do
// not retry it on the rate limiter.
type RefusedError struct {
	Kind      string
	Namespace string
	Name      string
	Cause     Cause
	// Detail says what was found, in a sentence fragment for messages.
	Detail string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s %s/%s is not written: %s", e.Kind, e.Namespace, e.Name, e.Detail)
}

// Is makes errors.Is(err, ErrNotOwned) and errors.Is(err, ErrChangeRefused)
// tell the two families apart.
func (e *RefusedError) Is(target error) bool {
	switch e.Cause {
	case CauseImmutable, CauseShrink:
		return target == ErrChangeRefused
	}
	return target == ErrNotOwned
}

// ChildClient is the part of a typed client-go client that Ensure and
// DeleteChild use.
type ChildClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Kind holds what Ensure needs to know about one kind of child: its client
// and which of its fields HCC owns. The values are in owned_kinds.go
// (Deployments, Services, ...); they are read-only.
type Kind[T Child] struct {
	// Name is the kind's name, in errors, events and the refusal metric.
	Name   string
	client func(kube kubernetes.Interface, namespace string) ChildClient[T]
	// prepare turns write (a copy of the builder's object) into what to
	// send over live: it copies what the API server assigns from live, and
	// returns a RefusedError (Cause and Detail) for a change the API server
	// would refuse.
	prepare func(write, live T) error
	// owned returns the content HCC owns (spec, data, rules...), compared
	// semantically; metadata is compared by Plan.
	owned func(T) any
	// policyTyped: ownership is also decided by clerum.io/policy-type
	// (NetworkPolicies, docs/ownership.md).
	policyTyped bool
	// vet, when set, refuses a live child whose content says it is not
	// HCC's (a claim's data source or volume) unless marked: the child
	// carries a valid mark of kind's marker, or this process marked it. It
	// runs before prepare, on a write whose metadata is already merged.
	vet func(write, live T, marked bool) error
	// marker, when usable, marks every child Ensure creates, and every
	// unmarked one Plan finds HCC's (in the same update). See WithMarker.
	marker *Marker
}

type refusalKey struct{ kind, namespace, name string }

// NewChildren returns a writer of children through kube, as fieldManager.
// Refusals are recorded on recorder and counted through refused (nil: not
// counted), e.g. func(kind string, cause kit.Cause) {
// vec.WithLabelValues(kind, string(cause)).Inc() }.
func NewChildren(kube kubernetes.Interface, caches *Informers, fieldManager string, recorder record.EventRecorder, refused func(kind string, cause Cause)) *Children {
	return &Children{
		kube:         kube,
		caches:       caches,
		fieldManager: fieldManager,
		recorder:     recorder,
		refused:      refused,
		reported:     map[refusalKey]string{},
		unseen:       map[refusalKey]bool{},
	}
}

// WithHold makes c create a child of a marked kind and write its mark
// under one hold: a leader that stops between the two still writes the
// mark before its lease is released, so the next leader, which does not
// remember the create, does not find the child unmarked (and, a claim
// bound meanwhile to a static volume, refuse it for good). nil holds
// nothing. It returns c.
func (c *Children) WithHold(hold WriteHold) *Children {
	c.hold = hold
	return c
}

// Ensure makes the child desired (from a pure builder, fully defaulted)
// exist as the builder says, given live, the lister's copy or nil when the
// lister has none. It returns the child as the API server now has it, or
// live when nothing was written. An update is built from live, or, when
// live lacks annotations its informer's transform dropped
// (Informers.Dropped), from the child read from the API server: an update
// replaces the annotations whole.
//
// On error nothing was written (or the write failed) and the returned
// object is nil; with ActionCreate, the child was created but its mark
// (WithMarker) could not be written: the child stays unmarked, judged so by
// the next sync. A *RefusedError (errors.Is ErrNotOwned or ErrChangeRefused)
// was reported by a Warning event and the refusal metric, once per state of
// the refused object; the caller sets a condition and goes on with its other
// children. A Conflict (an update from an outdated cached copy) or a
// NotFound (the object went between the create and the read that follows
// an AlreadyExists) is for the loop to retry.
func Ensure[T Child](ctx context.Context, c *Children, kind Kind[T], owner Owner, live, desired T) (T, Action, error) {
	var zero T
	client := kind.client(c.kube, desired.GetNamespace())
	key := refusalKey{kind.Name, desired.GetNamespace(), desired.GetName()}
	if live != zero {
		c.setUnseen(key, false)
	} else if c.isUnseen(key) {
		// Created by this process, not in the cache yet: read it.
		got, err := client.Get(ctx, desired.GetName(), metav1.GetOptions{})
		switch {
		case err == nil:
			live = got
		case apierrors.IsNotFound(err):
			c.setUnseen(key, false) // gone since: create it again
		default:
			return zero, ActionNone, err
		}
	}
	if live == zero {
		obj, _, err := Plan(kind, owner, zero, desired)
		if err != nil {
			return zero, ActionNone, err
		}
		if kind.marker.usable() && c.hold != nil {
			held, done, err := c.hold(ctx)
			if err != nil {
				return zero, ActionNone, err
			}
			defer done()
			ctx = held
		}
		created, err := client.Create(ctx, obj, metav1.CreateOptions{FieldManager: c.fieldManager})
		if err == nil {
			c.forget(kind.Name, created)
			c.setUnseen(key, true)
			if !kind.marker.usable() {
				return created, ActionCreate, nil
			}
			// The mark names the UID the create just gave the child.
			marked, err := MarkCreated(ctx, c, kind, created, func(o T) string { return kind.marker.Sign(owner, o) })
			if err != nil {
				// Owed: the next Ensure marks it, whatever the volume
				// binder did to it meanwhile.
				kind.marker.rememberCreated(owner, created)
				return zero, ActionCreate, err
			}
			kind.marker.remember(owner, marked)
			return marked, ActionCreate, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return zero, ActionNone, err
		}
		// The name is held by an object the lister does not have: the
		// cache is behind, or the informer's selector hides the object (an
		// informer of managed objects never sees an unmanaged one). Read it
		// once and judge it as if cached, so that an unmanaged object is
		// reported rather than retried forever as a lagging cache.
		if live, err = client.Get(ctx, desired.GetName(), metav1.GetOptions{}); err != nil {
			return zero, ActionNone, err
		}
	}

	obj, action, err := planEnsure(c, kind, owner, live, desired)
	if err != nil || action == ActionNone {
		return obj, action, err
	}
	if c.caches.Dropped(live) {
		// The cached copy lacks annotations the server holds (StripUnread):
		// an update built from it would erase them. Plan again from the
		// object as the server has it.
		fresh, err := client.Get(ctx, live.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || (err == nil && fresh.GetUID() != live.GetUID()):
			return zero, ActionNone, fmt.Errorf("%s %s/%s: %w", kind.Name, live.GetNamespace(), live.GetName(), ErrCacheBehind)
		case err != nil:
			return zero, ActionNone, err
		}
		live = fresh
		if obj, action, err = planEnsure(c, kind, owner, live, desired); err != nil || action == ActionNone {
			return obj, action, err
		}
	}
	updated, err := client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: c.fieldManager})
	if apierrors.IsNotFound(err) {
		// Deleted since the cache saw it: the next sync creates it.
		return zero, ActionNone, fmt.Errorf("%s %s/%s: %w", kind.Name, live.GetNamespace(), live.GetName(), ErrCacheBehind)
	}
	if err != nil {
		return zero, ActionNone, err
	}
	c.forget(kind.Name, updated)
	if kind.marker.Unmarked(owner, updated) && kind.marker.Verify(owner, updated) {
		kind.marker.remember(owner, updated) // the owed mark is written
	}
	if action == ActionTakeOver {
		c.recorder.Eventf(owner.Object, corev1.EventTypeNormal, reasons.EventTakenOver,
			"took over %s %s/%s: its controller reference named no %s, or one that no longer exists",
			kind.Name, live.GetNamespace(), live.GetName(), owner.GVK.Kind)
	}
	return updated, action, nil
}

// planEnsure is Plan for Ensure: a refusal is reported, and nothing to
// write returns live.
func planEnsure[T Child](c *Children, kind Kind[T], owner Owner, live, desired T) (T, Action, error) {
	var zero T
	obj, action, err := Plan(kind, owner, live, desired)
	if refused, ok := errors.AsType[*RefusedError](err); ok {
		c.report(owner, live, refused)
		return zero, ActionNone, err
	}
	if err != nil {
		return zero, ActionNone, err
	}
	if action == ActionNone {
		c.forget(kind.Name, live)
		return live, ActionNone, nil
	}
	return obj, action, nil
}

// Plan is Ensure without a client: what to send for desired given live (nil
// when absent) — the object to create or update, and which — or ActionNone
// and live when nothing HCC owns differs, or a *RefusedError. It reads
// nothing but its arguments (for a kind WithMarker, that includes the
// Marker's memory of the children this process marked) and never modifies
// them.
func Plan[T Child](kind Kind[T], owner Owner, live, desired T) (T, Action, error) {
	var zero T
	if err := checkDesired(kind, owner, desired); err != nil {
		return zero, ActionNone, err
	}
	useRef := owner.references(desired)
	write := desired.DeepCopyObject().(T)
	if live == zero {
		write.SetResourceVersion("")
		write.SetUID("")
		refs := withoutController(write.GetOwnerReferences())
		if useRef {
			refs = append(refs, controllerRef(owner))
		}
		write.SetOwnerReferences(refs)
		return write, ActionCreate, nil
	}

	verdict := judge(kind.policyTyped, owner, useRef, live, desired)
	if verdict.cause != "" {
		return zero, ActionNone, &RefusedError{Kind: kind.Name, Namespace: live.GetNamespace(), Name: live.GetName(),
			Cause: verdict.cause, Detail: verdict.detail}
	}
	if live.GetDeletionTimestamp() != nil {
		return zero, ActionNone, fmt.Errorf("%s %s/%s: %w", kind.Name, live.GetNamespace(), live.GetName(), ErrBeingDeleted)
	}

	mergeMeta(write, live, owner, useRef)
	if err := vetAndMark(kind, owner, write, live); err != nil {
		return zero, ActionNone, err
	}
	if err := kind.prepare(write, live); err != nil {
		if refused, ok := errors.AsType[*RefusedError](err); ok {
			refused.Kind, refused.Namespace, refused.Name = kind.Name, live.GetNamespace(), live.GetName()
		}
		return zero, ActionNone, err
	}
	if equality.Semantic.DeepEqual(ownedParts(kind, write), ownedParts(kind, live)) {
		return live, ActionNone, nil
	}
	if verdict.takeOver {
		return write, ActionTakeOver, nil
	}
	return write, ActionUpdate, nil
}

// vetAndMark applies kind's vet to live, trusting what a marked child says,
// and marks write when live is HCC's but not marked: the take-over of an
// unmarked child writes the mark in the same update. A child this process
// marked whose copy in hand lacks the mark (the cache is behind) is left
// without, so that no update is sent from the stale copy. A child this
// process created and could not mark (Marker.Unmarked) is trusted as
// marked — the create returned its UID — and marked in this update.
func vetAndMark[T Child](kind Kind[T], owner Owner, write, live T) error {
	verified := kind.marker.Verify(owner, live)
	owed := !verified && kind.marker.Unmarked(owner, live)
	marked := verified || owed || kind.marker.Remembered(owner, live)
	if kind.vet != nil {
		if err := kind.vet(write, live, marked); err != nil {
			if refused, ok := errors.AsType[*RefusedError](err); ok {
				refused.Kind, refused.Namespace, refused.Name = kind.Name, live.GetNamespace(), live.GetName()
			}
			return err
		}
	}
	if !kind.marker.usable() || (marked && !owed) {
		return nil
	}
	annotations := write.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[mark.Annotation] = kind.marker.Sign(owner, live)
	write.SetAnnotations(annotations)
	return nil
}

// checkDesired catches a builder that forgot the labels that make its
// object HCC's: written as it is, the next sync would refuse it.
func checkDesired[T Child](kind Kind[T], owner Owner, desired T) error {
	l := desired.GetLabels()
	switch {
	case owner.IdentityLabel == "":
		return fmt.Errorf("kit: owner of %s %s/%s has no identity label", kind.Name, desired.GetNamespace(), desired.GetName())
	case desired.GetName() == "" || desired.GetNamespace() == "":
		return fmt.Errorf("kit: desired %s has no name or namespace", kind.Name)
	case l[names.LabelManagedBy] != names.ManagedByValue || l[owner.IdentityLabel] != owner.identity():
		return fmt.Errorf("kit: desired %s %s/%s lacks the labels %s=%s and %s=%s", kind.Name,
			desired.GetNamespace(), desired.GetName(), names.LabelManagedBy, names.ManagedByValue, owner.IdentityLabel, owner.identity())
	case kind.policyTyped && l[names.LabelPolicyType] == "":
		return fmt.Errorf("kit: desired %s %s/%s has no %s label", kind.Name, desired.GetNamespace(), desired.GetName(), names.LabelPolicyType)
	case owner.references(desired) && owner.Object.GetUID() == "":
		return fmt.Errorf("kit: owner %s of %s %s/%s has no UID: not a live object", owner.Object.GetName(),
			kind.Name, desired.GetNamespace(), desired.GetName())
	}
	return nil
}

// verdict is the ownership rule's answer for one live child.
type verdict struct {
	cause    Cause  // non-empty: refused
	detail   string // why, for messages
	takeOver bool   // HCC's, but the controller reference must be rewritten
}

// judge applies the rules of docs/ownership.md to live, the object holding the name of
// desired. It is pure.
func judge(policyTyped bool, owner Owner, useRef bool, live, desired metav1.Object) verdict {
	l := live.GetLabels()
	if l[names.LabelManagedBy] != names.ManagedByValue {
		return verdict{cause: CauseUnmanaged, detail: fmt.Sprintf("it does not carry %s=%s", names.LabelManagedBy, names.ManagedByValue)}
	}
	id, hasID := l[owner.IdentityLabel]
	if hasID && id != owner.identity() {
		return verdict{cause: CauseOtherWriter, detail: fmt.Sprintf("its label %s=%s names another owner", owner.IdentityLabel, id)}
	}
	if policyTyped {
		// A NetworkPolicy is its writer's by policy type; a managed one with
		// no policy type on a name the writer reserves (desired's name is
		// one) is the repairable class, written by an older HCC, and so is
		// one without the identity label.
		want := desired.GetLabels()[names.LabelPolicyType]
		if got := l[names.LabelPolicyType]; got != "" && got != want {
			return verdict{cause: CauseOtherWriter, detail: fmt.Sprintf("its policy type %s belongs to another writer", got)}
		}
	} else if !hasID {
		return verdict{cause: CauseOtherWriter, detail: fmt.Sprintf("it does not carry %s, so another writer manages it", owner.IdentityLabel)}
	}
	if !useRef {
		// Without a reference of HCC's (a child in another namespace, or
		// one ownership decides by labels), a controller reference is some
		// other live owner's, unless it names the owner itself.
		if ref := metav1.GetControllerOfNoCopy(live); ref != nil {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil || gv.Group != owner.GVK.Group || ref.Kind != owner.GVK.Kind || ref.Name != owner.Object.GetName() ||
				live.GetNamespace() != owner.Object.GetNamespace() {
				return verdict{cause: CauseOtherOwner, detail: fmt.Sprintf("it is controlled by %s %s", ref.Kind, ref.Name)}
			}
		}
		return verdict{}
	}
	ref := metav1.GetControllerOfNoCopy(live)
	if ref == nil {
		return verdict{takeOver: true}
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != owner.GVK.Group || ref.Kind != owner.GVK.Kind || ref.Name != owner.Object.GetName() {
		return verdict{cause: CauseOtherOwner, detail: fmt.Sprintf("it is controlled by %s %s", ref.Kind, ref.Name)}
	}
	// Same kind and name: an owner that was deleted and re-created under its
	// name, whose child the garbage collector has not (or, with no
	// controller-manager, never) removed.
	// (Another version of the same group is the same owner; mergeMeta
	// rewrites the reference as an ordinary difference.)
	return verdict{takeOver: ref.UID != owner.Object.GetUID()}
}

// controllerRef is the reference HCC writes. It blocks the owner's
// foreground deletion, which under OwnerReferencesPermissionEnforcement
// needs update on the owner kind's finalizers: deploy/ grants it.
func controllerRef(owner Owner) metav1.OwnerReference {
	return *metav1.NewControllerRef(owner.Object, owner.GVK)
}

func withoutController(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, r := range refs {
		if r.Controller == nil || !*r.Controller {
			out = append(out, r)
		}
	}
	return out
}

// mergeMeta turns write's metadata (the builder's) into what to send over
// live: HCC's labels, annotations and finalizers over live's, so that keys
// others added stay; live's references with the controller reference
// replaced in place (order kept, so an unchanged list compares equal); and
// live's UID and resourceVersion, the preconditions that make a write from
// a stale cache fail instead of overwriting.
func mergeMeta(write, live metav1.Object, owner Owner, useRef bool) {
	write.SetLabels(overlay(live.GetLabels(), write.GetLabels()))
	write.SetAnnotations(overlay(live.GetAnnotations(), write.GetAnnotations()))
	finalizers := append([]string(nil), live.GetFinalizers()...)
	for _, f := range write.GetFinalizers() {
		if !contains(finalizers, f) {
			finalizers = append(finalizers, f)
		}
	}
	write.SetFinalizers(finalizers)

	refs := append([]metav1.OwnerReference(nil), live.GetOwnerReferences()...)
	if useRef {
		ours, replaced := controllerRef(owner), false
		for i, r := range refs {
			if r.Controller != nil && *r.Controller {
				refs[i], replaced = ours, true
			}
		}
		if !replaced {
			refs = append(refs, ours)
		}
	}
	write.SetOwnerReferences(refs)
	write.SetUID(live.GetUID())
	write.SetResourceVersion(live.GetResourceVersion())
}

// Client returns kind's typed client in namespace, for tests and tools that
// read children of any kind.
func (k Kind[T]) Client(kube kubernetes.Interface, namespace string) ChildClient[T] {
	return k.client(kube, namespace)
}

// parts is what HCC owns of a child: the metadata mergeMeta writes and the
// kind's content.
type parts struct {
	Labels          map[string]string
	Annotations     map[string]string
	Finalizers      []string
	OwnerReferences []metav1.OwnerReference
	Content         any
}

func ownedParts[T Child](kind Kind[T], o T) parts {
	return parts{o.GetLabels(), o.GetAnnotations(), o.GetFinalizers(), o.GetOwnerReferences(), kind.owned(o)}
}

// Diff shows how b differs from a in what HCC owns of a child of kind
// (- a, + b), or "" when it does not: for a debug log of an update, or a
// test's failure message.
func Diff[T Child](kind Kind[T], a, b T) string {
	pa, pb := ownedParts(kind, a), ownedParts(kind, b)
	if equality.Semantic.DeepEqual(pa, pb) {
		return ""
	}
	return diff.Diff(pa, pb)
}

// overlay returns base with over's entries set; nil when both are empty.
func overlay(base, over map[string]string) map[string]string {
	if len(base)+len(over) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func contains[E comparable](s []E, e E) bool {
	for _, x := range s {
		if x == e {
			return true
		}
	}
	return false
}

// report records a refusal on the owner and on the refused object and
// counts it, unless this state of the object was already reported.
func (c *Children) report(owner Owner, live metav1.Object, refused *RefusedError) {
	key := refusalKey{refused.Kind, refused.Namespace, refused.Name}
	state := string(live.GetUID()) + "/" + live.GetResourceVersion()
	c.mu.Lock()
	seen := c.reported[key] == state
	c.reported[key] = state
	c.mu.Unlock()
	if seen {
		return
	}
	reason := reasons.EventUnmanagedConflict
	if errors.Is(refused, ErrChangeRefused) {
		reason = reasons.EventChangeRefused
	}
	message := refused.Error() + "; it is left as it is"
	c.recorder.Event(owner.Object, corev1.EventTypeWarning, reason, message)
	if obj, ok := live.(runtime.Object); ok && reason == reasons.EventUnmanagedConflict {
		c.recorder.Event(obj, corev1.EventTypeWarning, reason, message)
	}
	if c.refused != nil {
		c.refused(refused.Kind, refused.Cause)
	}
}

// forget drops the refusal reported for obj's name, once HCC has written it
// or found it as desired, so a later conflict is reported afresh.
func (c *Children) isUnseen(k refusalKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unseen[k]
}

func (c *Children) setUnseen(k refusalKey, unseen bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if unseen {
		c.unseen[k] = true
	} else {
		delete(c.unseen, k)
	}
}

func (c *Children) forget(kind string, obj metav1.Object) {
	key := refusalKey{kind, obj.GetNamespace(), obj.GetName()}
	c.mu.Lock()
	delete(c.reported, key)
	c.mu.Unlock()
}

// Lister is the part of a namespaced lister EnsureFrom reads the live
// object from: every generated lister has it.
type Lister[T Child] interface {
	Get(name string) (T, error)
}

// EnsureFrom is Ensure with the live object read from l, the child's cache
// (none when l has no object of desired's name). It returns only the error:
// the reconcilers that call it read the outcome from the cache on the next
// sync.
func EnsureFrom[T Child](ctx context.Context, c *Children, kind Kind[T], owner Owner, l Lister[T], desired T) error {
	live, err := l.Get(desired.GetName())
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, _, err = Ensure(ctx, c, kind, owner, live, desired)
	return err
}
