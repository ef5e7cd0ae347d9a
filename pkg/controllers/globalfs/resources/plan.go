package resources

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/reasons"
	"github.com/clerum/hcc/pkg/workload"
)

// GVK is the kind of the children's owner, for controller references.
var GVK = schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("GlobalFileSystem")

// Admission is whether a GlobalFileSystem may be deployed, decided from the
// Postgres Secret and the JWT ConfigMap before anything is written. The
// controller and render share it.
type Admission struct {
	// Block is why nothing is written (reasons.ConfigMissing,
	// reasons.ConfigInvalid), empty when the GFS may be deployed.
	Block string
	// Message says what was found, naming objects and keys, never a value.
	Message string
	// Digest is ConfigDigest of the referenced values; empty when blocked.
	Digest string
}

// Admit decides admission. secret is the Postgres Secret as the cache holds
// it (values digested) or nil; configMap the JWT ConfigMap or nil. Both are
// the same for every GlobalFileSystem of the namespace.
func Admit(secret *corev1.Secret, configMap *corev1.ConfigMap, opts Options) Admission {
	var missing []string
	secretValue, ok := []byte(nil), false
	switch {
	case secret == nil:
		missing = append(missing, fmt.Sprintf("Secret %s does not exist", opts.PostgresSecret))
	default:
		if secretValue, ok = secret.Data[opts.PostgresSecretKey]; !ok {
			missing = append(missing, fmt.Sprintf("Secret %s has no key %s", opts.PostgresSecret, opts.PostgresSecretKey))
		}
	}
	var publicKey string
	switch {
	case configMap == nil:
		missing = append(missing, fmt.Sprintf("ConfigMap %s does not exist", opts.JWTConfigMap))
	default:
		if publicKey, ok = configMap.Data[opts.JWTConfigMapKey]; !ok {
			missing = append(missing, fmt.Sprintf("ConfigMap %s has no key %s", opts.JWTConfigMap, opts.JWTConfigMapKey))
		}
	}
	if len(missing) > 0 {
		return Admission{Block: reasons.ConfigMissing, Message: strings.Join(missing, "; ")}
	}
	if err := ParsePublicKey(publicKey); err != nil {
		return Admission{Block: reasons.ConfigInvalid,
			Message: fmt.Sprintf("key %s of ConfigMap %s is not a usable public key: %v", opts.JWTConfigMapKey, opts.JWTConfigMap, err)}
	}
	return Admission{
		Message: fmt.Sprintf("Secret %s has key %s; ConfigMap %s key %s holds a PEM public key",
			opts.PostgresSecret, opts.PostgresSecretKey, opts.JWTConfigMap, opts.JWTConfigMapKey),
		Digest: ConfigDigest(secretValue, publicKey),
	}
}

// ErrNotPublicKey: the value is not exactly one PEM public key.
var ErrNotPublicKey = errors.New("want exactly one PEM block of type PUBLIC KEY (PKIX) or RSA PUBLIC KEY (PKCS #1)")

// ParsePublicKey accepts exactly one PEM public key block and nothing
// after it but whitespace. Errors never quote the value.
func ParsePublicKey(s string) error {
	block, rest := pem.Decode([]byte(strings.TrimSpace(s)))
	if block == nil || len(strings.TrimSpace(string(rest))) > 0 {
		return ErrNotPublicKey
	}
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		_, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		_, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		return ErrNotPublicKey
	}
	if err != nil {
		return fmt.Errorf("the %s block does not parse", block.Type)
	}
	return nil
}

// Children are the objects HCC writes for a GlobalFileSystem that holds its
// drive and whose configuration is admitted: the one plan the reconciler
// ensures and render prints (Plan).
type Children struct {
	// EgressPolicy isolates the egress of the gfsc and seed pods; the
	// reconciler writes it first and starts or rolls no pod until it is
	// HCC's as desired.
	EgressPolicy *networkingv1.NetworkPolicy
	Service      *corev1.Service
	Deployment   *appsv1.Deployment
	// SeedJob is nil once status says the drive's root is seeded: the Job
	// is never created again.
	SeedJob *batchv1.Job
}

// MakeChildren returns g's children under admission a and opts (its
// WaitHost and WaitPort included), or none when a is a block. The children
// carry no owner references: the kit sets them from the live owner.
func MakeChildren(g *clerumv1alpha1.GlobalFileSystem, a Admission, opts Options) Children {
	if a.Block != "" {
		return Children{}
	}
	c := Children{
		EgressPolicy: BuildEgressPolicy(g, opts),
		Service:      BuildService(g, opts),
		Deployment:   BuildDeployment(g, opts, a.Digest),
	}
	if !g.Status.RootSeeded {
		c.SeedJob = BuildSeedJob(g, opts, a.Digest)
	}
	return c
}

// Plan returns, for render, every object the controller would write for g
// in an empty cluster: MakeChildren flattened, Deployment, Service, egress
// policy and seed Job, or none when a is a block (a.Block says why). Owner
// references name the GlobalFileSystem with an empty uid.
func Plan(g *clerumv1alpha1.GlobalFileSystem, a Admission, opts Options) []runtime.Object {
	if a.Block != "" {
		return nil
	}
	c := MakeChildren(g, a, opts)
	own := []workload.Object{c.Deployment, c.Service, c.EgressPolicy}
	if c.SeedJob != nil {
		own = append(own, c.SeedJob)
	}
	return workload.ControlledBy(GVK, g.Name, own...)
}
