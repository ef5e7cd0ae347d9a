package resources

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/reasons"
	"github.com/clerum/hcc/pkg/workload"
)

// Admission is whether a SharedFileSystem may be deployed, decided from the
// JWT public key ConfigMap before anything is written. The controller and
// render share it.
type Admission struct {
	// Block is reasons.ConfigMissing or reasons.ConfigInvalid, empty
	// when the file system may be deployed.
	Block string
	// Message says what was found.
	Message string
	// KeyDigest is KeyDigest of the validated key; empty when blocked.
	KeyDigest string
}

// Admit validates the JWT public key the WFC is to verify tokens with:
// configMap returns a ConfigMap of the host namespace, or nil. The key
// (opts.JWTConfigMapKey of opts.JWTConfigMap) must exist and hold one PEM
// "PUBLIC KEY" block that parses as an RSA or EC public key; a WFC started
// with anything else would refuse every token, or start without the mount.
func Admit(configMap func(name string) *corev1.ConfigMap, opts Options) Admission {
	cm := configMap(opts.JWTConfigMap)
	if cm == nil {
		return Admission{Block: reasons.ConfigMissing,
			Message: fmt.Sprintf("ConfigMap %s/%s (the JWT public key) does not exist", opts.HostNamespace, opts.JWTConfigMap)}
	}
	value, ok := cm.Data[opts.JWTConfigMapKey]
	if !ok {
		return Admission{Block: reasons.ConfigMissing,
			Message: fmt.Sprintf("ConfigMap %s/%s has no key %s (the JWT public key)", opts.HostNamespace, opts.JWTConfigMap, opts.JWTConfigMapKey)}
	}
	if err := ValidatePublicKey(value); err != nil {
		return Admission{Block: reasons.ConfigInvalid,
			Message: fmt.Sprintf("key %s of ConfigMap %s/%s is not a usable JWT public key: %v", opts.JWTConfigMapKey, opts.HostNamespace, opts.JWTConfigMap, err)}
	}
	return Admission{KeyDigest: KeyDigest(value),
		Message: fmt.Sprintf("key %s of ConfigMap %s/%s holds a valid public key", opts.JWTConfigMapKey, opts.HostNamespace, opts.JWTConfigMap)}
}

// ValidatePublicKey reports why value is not one PEM-encoded PKIX RSA or
// EC public key, or nil when it is. The error never quotes the value.
func ValidatePublicKey(value string) error {
	block, rest := pem.Decode([]byte(value))
	switch {
	case block == nil:
		return fmt.Errorf("no PEM block")
	case block.Type != "PUBLIC KEY":
		return fmt.Errorf("a PEM block of type %q, not PUBLIC KEY", block.Type)
	case strings.TrimSpace(string(rest)) != "":
		return fmt.Errorf("data after the PEM block")
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("the PEM block does not parse: %w", err)
	}
	switch key.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
		return nil
	}
	return fmt.Errorf("a %T, not an RSA or EC key", key)
}

// GVK is the SharedFileSystem kind, the owner of every child.
var GVK = schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("SharedFileSystem")

// Children are the objects the controller writes for one SharedFileSystem,
// as the builders make them: no owner references (the kit sets them from
// the live owner), no server-set fields.
type Children struct {
	// Claim is the data claim wfc-F-data. The controller never shrinks a
	// live claim, nor creates or grows one past HCC_SFS_MAX_SIZE
	// (CheckSize).
	Claim *corev1.PersistentVolumeClaim
	// IngressPolicy admits spec.hostRefs to the WFC pods.
	IngressPolicy *networkingv1.NetworkPolicy
	Service       *corev1.Service
	// Deployment is the WFC; nil when the Admission blocks the file system
	// (there is no validated key to start it with).
	Deployment *appsv1.Deployment
	// EgressPolicy lets spec.hostRefs reach the WFC pods; nil when no Host
	// may, and then a live one is deleted.
	EgressPolicy *networkingv1.NetworkPolicy
}

// MakeChildren returns fs's children for the Admission a and opts: the one
// plan the controller's sync ensures and render prints (Plan). A blocked
// file system still gets its policies, which the controller keeps in step
// with spec.hostRefs when they exist; it creates nothing while blocked.
func MakeChildren(fs *clerumv1alpha1.SharedFileSystem, a Admission, opts Options) Children {
	ch := Children{
		Claim:         BuildClaim(fs, opts),
		IngressPolicy: BuildIngressPolicy(fs, opts),
		Service:       BuildService(fs, opts),
		EgressPolicy:  BuildEgressPolicy(fs, opts),
	}
	if a.Block == "" {
		ch.Deployment = BuildDeployment(fs, a.KeyDigest, opts)
	}
	return ch
}

// Plan returns, for render, every object the controller would write for fs
// in an empty cluster — MakeChildren, in the controller's write order — or
// none when a is a block (render reports a.Block and a.Message). Owner
// references name the SharedFileSystem with an empty uid.
func Plan(fs *clerumv1alpha1.SharedFileSystem, a Admission, opts Options) []runtime.Object {
	if a.Block != "" {
		return nil
	}
	ch := MakeChildren(fs, a, opts)
	own := []workload.Object{ch.Claim, ch.IngressPolicy, ch.Service, ch.Deployment}
	if ch.EgressPolicy != nil {
		own = append(own, ch.EgressPolicy)
	}
	return workload.ControlledBy(GVK, fs.Name, own...)
}
