package kit

import (
	"fmt"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/secretdigest"
)

// Secrets returns the Secret informer of namespace. It watches every Secret
// there (a reconciler validates Secrets it did not write) and caches none of
// their values: secretdigest.Digest is its transform. Every reconciler that reads
// Secrets takes them from here, so two of them in one namespace share the
// one transform instead of racing to install their own.
func (i *Informers) Secrets(namespace string) coreinformers.SecretInformer {
	inf := i.Kube(namespace, AllObjects, "secrets").Core().V1().Secrets()
	// Before Start (Kube checked it), so setting the transform cannot fail,
	// and a second call sets the same one. The annotations it drops from
	// HCC's own Secrets are tracked: Ensure updates the Host's credential
	// Secret.
	_ = i.setTransform(namespace, "secrets", inf.Informer(), Transform{Name: "secret-digest", Func: secretdigest.Digest}, true)
	return inf
}

// SetTransform sets t on inf, the informer of resource in namespace taken
// from Kube, in place of StripUnread, and records it, so a test's caches
// (Caches) store what the informer would. It fails once inf has started,
// and when a transform of another name was set for the same informer: two
// reconcilers sharing an informer must agree on what it caches. What t
// drops is not tracked (Dropped): it is for a kind no reconciler updates
// from its cache (the NetworkPolicy operator's Host pods).
func (i *Informers) SetTransform(namespace, resource string, inf cache.SharedIndexInformer, t Transform) error {
	return i.setTransform(namespace, resource, inf, t, false)
}

func (i *Informers) setTransform(namespace, resource string, inf cache.SharedIndexInformer, t Transform, track bool) error {
	t = t.orDefault()
	i.mu.Lock()
	defer i.mu.Unlock()
	k := claimKey{namespace, resource}
	if have, ok := i.transforms[k]; ok {
		if have.Name != t.Name {
			return fmt.Errorf("the %s informer of %s has the transform %s already, not %s", resource, namespace, have.Name, t.Name)
		}
		return nil
	}
	if track || t.Name == StripUnreadTransform.Name {
		t.Func = i.dropped.track(t.Func)
	}
	if err := inf.SetTransform(t.Func); err != nil {
		return err
	}
	if i.transforms == nil {
		i.transforms = map[claimKey]Transform{}
	}
	i.transforms[k] = t
	return nil
}
