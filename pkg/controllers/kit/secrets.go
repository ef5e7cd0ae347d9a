package kit

import (
	"github.com/clerum/hcc/pkg/secretdigest"
	coreinformers "k8s.io/client-go/informers/core/v1"
)

// Secrets returns the Secret informer of namespace. It watches every Secret
// there (a reconciler validates Secrets it did not write) and caches none of
// their values: secretdigest.Digest is its transform. Every reconciler that reads
// Secrets takes them from here, so two of them in one namespace share the
// one transform instead of racing to install their own.
func (i *Informers) Secrets(namespace string) coreinformers.SecretInformer {
	inf := i.Kube(namespace, AllObjects, "secrets").Core().V1().Secrets()
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.digested == nil {
		i.digested = map[string]bool{}
	}
	if !i.digested[namespace] {
		// Before Start (Kube checked it), so SetTransform cannot fail.
		_ = inf.Informer().SetTransform(secretdigest.Digest)
		i.digested[namespace] = true
	}
	return inf
}
