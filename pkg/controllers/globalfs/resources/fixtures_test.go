package resources

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/secretdigest"
)

// The fixtures of the builders' tests, the same as the reconciler's
// (pkg/controllers/globalfs/controller_test.go), which this package may not
// import.

const gfsNS = "gfs"

// publicKeyPEM is a valid PEM public key for the JWT ConfigMap.
var publicKeyPEM = func() string {
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

func pgSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gfsNS, Name: testOptions.PostgresSecret, ResourceVersion: "1"},
		Data: map[string][]byte{testOptions.PostgresSecretKey: []byte("postgres://gfsc:hunter2@control-postgres.control-plane:5432/gfs")}}
}

func jwtConfigMap(pemValue string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: gfsNS, Name: testOptions.JWTConfigMap, ResourceVersion: "1"},
		Data: map[string]string{testOptions.JWTConfigMapKey: pemValue}}
}

// digested is s as the Secret cache holds it.
func digested(s *corev1.Secret) *corev1.Secret {
	d, _ := secretdigest.Digest(s)
	return d.(*corev1.Secret)
}

func newGFS(name string, opts ...func(*clerumv1alpha1.GlobalFileSystem)) *clerumv1alpha1.GlobalFileSystem {
	g := &clerumv1alpha1.GlobalFileSystem{
		ObjectMeta: metav1.ObjectMeta{Namespace: gfsNS, Name: name, UID: types.UID("uid-" + name), Generation: 1},
	}
	for _, o := range opts {
		o(g)
	}
	return g
}
