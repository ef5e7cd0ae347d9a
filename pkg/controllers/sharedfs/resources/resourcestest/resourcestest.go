// Package resourcestest holds the fixtures of the SharedFileSystem
// builders' tests and the reconciler's tests, which cannot share a _test
// file: the options, the file systems and the JWT public keys both use. It
// is test helpers, imported only by tests.
package resourcestest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	"github.com/clerum/hcc/pkg/mark"
)

// Options are the builders' options of the tests.
var Options = resources.Options{
	HostNamespace:   "mcp-host",
	ClusterDomain:   "cluster.local",
	Image:           "clerum/workspace-files-controller:0.9.5",
	ImagePullPolicy: corev1.PullIfNotPresent,
	ImagePullSecret: "clerum",
	Port:            8086,
	InitImage:       "busybox:1.36",
	Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("50m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("200m")},
	},
	JWTConfigMap:        "mcp-host-config",
	JWTConfigMapKey:     "CLERUM_AUTH_JWT_PUBLIC_KEY",
	MaxUploadBytes:      104857600,
	MaxListEntries:      5000,
	MaxPathDepth:        32,
	DefaultSize:         resource.MustParse("10Gi"),
	DefaultStorageClass: "do-block-storage-retain",
	MaxSize:             resource.MustParse("100Gi"),
	ClaimMark:           mark.NewKey("a-test-hmac-secret", mark.PurposeClaim),
}

// NewFS is SharedFileSystem name in mcp-host, generation 1, with opts
// applied.
func NewFS(name string, opts ...func(*clerumv1alpha1.SharedFileSystem)) *clerumv1alpha1.SharedFileSystem {
	fs := &clerumv1alpha1.SharedFileSystem{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: name, UID: types.UID("uid-" + name), Generation: 1},
	}
	for _, o := range opts {
		o(fs)
	}
	return fs
}

// WithHosts sets the Hosts that may use the file system.
func WithHosts(hosts ...string) func(*clerumv1alpha1.SharedFileSystem) {
	return func(fs *clerumv1alpha1.SharedFileSystem) { fs.Spec.HostRefs = hosts }
}

// WithDirs sets the directories the file system starts with.
func WithDirs(dirs ...string) func(*clerumv1alpha1.SharedFileSystem) {
	return func(fs *clerumv1alpha1.SharedFileSystem) { fs.Spec.Directories = dirs }
}

// WithSize sets the size of the file system's claim.
func WithSize(size string) func(*clerumv1alpha1.SharedFileSystem) {
	return func(fs *clerumv1alpha1.SharedFileSystem) { fs.Spec.Size = ptr.To(resource.MustParse(size)) }
}

// EnvMap is c's environment as name to value.
func EnvMap(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// PEMKey returns key as a PEM "PUBLIC KEY".
func PEMKey(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// RSAKey returns the PEM public key of a fresh RSA key.
func RSAKey(t *testing.T) string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return PEMKey(t, &k.PublicKey)
}

// ECKey returns the PEM public key of a fresh P-256 key.
func ECKey(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return PEMKey(t, &k.PublicKey)
}
