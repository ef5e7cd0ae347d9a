// Package fakeapi is the part of the API server's write semantics that
// client-go's fake clientsets lack and HCC's reconcilers rely on: every
// object written gets a new, larger resourceVersion and a created one a
// UID; an update of the main resource keeps the status and an update of
// the status subresource keeps all else; a server-side apply of a
// clerum.io status (the fake has no schema for the kinds) replaces the
// status. kittest's Fixture and `hcc-controller diff` both serve their
// fakes with it, so a unit test and diff see one API server. An update
// that carries a resourceVersion other than the stored one is a Conflict.
package fakeapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
)

// Server numbers the objects written to the fakes it serves, as one etcd.
type Server struct {
	rv        atomic.Int64
	uids      atomic.Int64
	uidPrefix string
}

// New returns a Server whose first write gets resourceVersion rv+1 and
// whose created objects get UIDs uidPrefix1, uidPrefix2, ...
func New(rv int64, uidPrefix string) *Server {
	s := &Server{uidPrefix: uidPrefix}
	s.rv.Store(rv)
	return s
}

// NextResourceVersion returns a resourceVersion larger than every one
// given so far.
func (s *Server) NextResourceVersion() string { return strconv.FormatInt(s.rv.Add(1), 10) }

// Serve returns the reactor of creates and updates on tracker; any other
// action, and a create or update it cannot read, falls through. The fake
// hands reactors a copy of the action, so the caller's object is never
// changed.
func (s *Server) Serve(tracker core.ObjectTracker) core.ReactionFunc {
	return func(action core.Action) (bool, runtime.Object, error) {
		switch a := action.(type) {
		case core.CreateActionImpl:
			if a.Subresource != "" {
				return false, nil, nil
			}
			obj := a.Object
			m, err := meta.Accessor(obj)
			if err != nil {
				return false, nil, nil
			}
			if m.GetUID() == "" {
				m.SetUID(types.UID(fmt.Sprintf("%s%d", s.uidPrefix, s.uids.Add(1))))
			}
			m.SetResourceVersion(s.NextResourceVersion())
			defaults(obj)
			return core.ObjectReaction(tracker)(a)
		case core.UpdateActionImpl:
			obj := a.Object
			m, err := meta.Accessor(obj)
			if err != nil {
				return false, nil, nil
			}
			old, err := tracker.Get(a.Resource, a.Namespace, m.GetName())
			if err != nil {
				return false, nil, nil // the tracker answers: NotFound
			}
			// Optimistic concurrency: an update from a copy older than the
			// stored object is refused, as the API server refuses it, so a
			// reconciler whose cache is behind its own write retries
			// instead of writing twice.
			if rv := m.GetResourceVersion(); rv != "" {
				if stored, err := meta.Accessor(old); err == nil && stored.GetResourceVersion() != rv {
					return true, nil, apierrors.NewConflict(a.Resource.GroupResource(), m.GetName(),
						fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
				}
			}
			switch a.Subresource {
			case "":
				CopyStatus(obj, old)
			case "status":
				obj = withStatus(old.DeepCopyObject(), obj)
				if m, err = meta.Accessor(obj); err != nil {
					return false, nil, nil
				}
			default:
				return false, nil, nil
			}
			m.SetResourceVersion(s.NextResourceVersion())
			defaults(obj)
			a.Object = obj
			return core.ObjectReaction(tracker)(a)
		}
		return false, nil, nil
	}
}

// ApplyStatus returns the reactor of server-side applies of a clerum.io
// object's status on tracker, stored as the API server does for HCC, the
// status's only writer: the status becomes the one applied. applied, when
// not nil, is called with each apply stored and the object its apply
// configuration decodes to. Any other patch falls through.
func (s *Server) ApplyStatus(tracker core.ObjectTracker, applied func(p core.PatchActionImpl, obj runtime.Object)) core.ReactionFunc {
	return func(action core.Action) (bool, runtime.Object, error) {
		p, ok := action.(core.PatchActionImpl)
		if !ok || p.Subresource != "status" || p.PatchType != types.ApplyPatchType {
			return false, nil, nil
		}
		old, err := tracker.Get(p.Resource, p.Namespace, p.Name)
		if err != nil {
			return true, nil, err
		}
		apply := reflect.New(reflect.TypeOf(old).Elem()).Interface().(runtime.Object)
		if err := json.Unmarshal(p.Patch, apply); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		obj := withStatus(old.DeepCopyObject(), apply)
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		m.SetResourceVersion(s.NextResourceVersion())
		if err := tracker.Update(p.Resource, obj, p.Namespace); err != nil {
			return true, nil, err
		}
		if applied != nil {
			applied(p, apply)
		}
		return true, obj.DeepCopyObject(), nil
	}
}

// CopyStatus sets obj's Status to old's, for kinds that have one.
func CopyStatus(obj, old runtime.Object) {
	dst := reflect.ValueOf(obj).Elem().FieldByName("Status")
	src := reflect.ValueOf(old).Elem().FieldByName("Status")
	if dst.IsValid() && src.IsValid() && dst.CanSet() {
		dst.Set(src)
	}
}

// withStatus returns base with status's Status.
func withStatus(base, status runtime.Object) runtime.Object {
	CopyStatus(base, status)
	return base
}

// defaults are the API server's defaults the kit relies on.
func defaults(obj runtime.Object) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		pod := &d.Spec.Template.Spec
		if pod.DeprecatedServiceAccount == "" {
			pod.DeprecatedServiceAccount = pod.ServiceAccountName
		}
	}
}
