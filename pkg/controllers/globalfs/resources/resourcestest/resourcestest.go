// Package resourcestest holds the fixtures of the GlobalFileSystem
// builders' tests and the reconciler's tests, which cannot share a _test
// file: the options, the file systems and the Secret and ConfigMap they
// read. It is test helpers, imported only by tests.
package resourcestest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/secretdigest"
)

const (
	// Namespace holds the GlobalFileSystems of the tests and their
	// children.
	Namespace = "gfs"
	// ConnectionString must never reach an object HCC writes, an event,
	// a log line or a status.
	ConnectionString = "postgres://gfsc:hunter2@control-postgres.control-plane:5432/gfs"
	// Digest stands for the digest of the configuration.
	Digest = "sha256:0000"
)

// Options are the builders' options of the tests.
var Options = resources.Options{
	ControlPlaneNamespace: "control-plane",
	ClusterDomain:         "cluster.local",
	Image:                 "clerum/gfs-controller:1.4.2",
	ImagePullPolicy:       corev1.PullIfNotPresent,
	ImagePullSecret:       "clerum",
	PriorityClassName:     "platform-critical",
	InitImage:             "busybox:1.36",
	Port:                  8087,
	Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("100m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
	},
	PostgresAppLabel:  "control-postgres",
	PostgresPort:      5432,
	PostgresSecret:    "gfs-controller-db",
	PostgresSecretKey: "connection-string",
	JWTConfigMap:      "gfs-config",
	JWTConfigMapKey:   "jwt-public-key",
	DriveName:         "main",
	TokenAudience:     "gfs-controller",
}

// PublicKeyPEM is a valid PEM public key for the JWT ConfigMap.
var PublicKeyPEM = func() string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}()

// PGSecret is the Secret that holds ConnectionString.
func PGSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Options.PostgresSecret, ResourceVersion: "1"},
		Data: map[string][]byte{Options.PostgresSecretKey: []byte(ConnectionString)}}
}

// JWTConfigMap is the ConfigMap that holds pemValue as the JWT public key.
func JWTConfigMap(pemValue string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Options.JWTConfigMap, ResourceVersion: "1"},
		Data: map[string]string{Options.JWTConfigMapKey: pemValue}}
}

// Digested is s as the Secret cache holds it.
func Digested(s *corev1.Secret) *corev1.Secret {
	d, _ := secretdigest.Digest(s)
	return d.(*corev1.Secret)
}

// NewGFS is GlobalFileSystem name in Namespace, generation 1, with opts
// applied.
func NewGFS(name string, opts ...func(*clerumv1alpha1.GlobalFileSystem)) *clerumv1alpha1.GlobalFileSystem {
	g := &clerumv1alpha1.GlobalFileSystem{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, UID: types.UID("uid-" + name), Generation: 1},
	}
	for _, o := range opts {
		o(g)
	}
	return g
}
