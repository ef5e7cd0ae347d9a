package resources

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// GVK is the kind of the children's owner, for controller references.
var GVK = schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("Host")

// Plan returns, for render, every per-Host object the controller would
// write for h in an empty cluster (the runtime-token Secret without data:
// only the Control API issues credentials), or why it writes none. Owner
// references name the Host with an empty uid.
func Plan(h *clerumv1alpha1.Host, a Admission, opts Options) (children []runtime.Object, err error) {
	if a.Block != "" {
		return nil, nil
	}
	d, err := BuildDeployment(h, a.ContextID, opts)
	if err != nil {
		return nil, err
	}
	ref := []metav1.OwnerReference{{APIVersion: GVK.GroupVersion().String(), Kind: GVK.Kind, Name: h.Name,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	own := []interface {
		runtime.Object
		metav1.Object
	}{BuildServiceAccount(h, opts), BuildRole(h, opts), BuildRoleBinding(h, opts), BuildWorkspaceClaim(h, opts),
		BuildEmptyRuntimeTokenSecret(h, opts), d, BuildService(h, opts)}
	if p := BuildDesktopPolicy(h, opts); p != nil {
		own = append(own, p)
	}
	for _, o := range own {
		o.SetOwnerReferences(ref)
		children = append(children, o)
	}
	// No owner reference reaches the channels namespace.
	children = append(children, BuildChannelReaderDeployment(h, opts), BuildChannelReaderService(h, opts), BuildChannelReaderPolicy(h, opts))
	return children, nil
}
