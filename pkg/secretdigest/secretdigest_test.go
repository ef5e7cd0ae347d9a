package secretdigest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rawSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Annotations: map[string]string{
			"clerum.io/expires-at":                             "2026-12-01T00:00:00Z",
			"kubectl.kubernetes.io/last-applied-configuration": `{"stringData":{"token":"plain"}}`,
		}},
		Data: map[string][]byte{"token": []byte("plain")},
	}
}

// The cache holds digests, never values, and no annotation but HCC's own.
func TestDigestKeepsNoValue(t *testing.T) {
	out, err := Digest(rawSecret())
	require.NoError(t, err)
	s := out.(*corev1.Secret)
	assert.Equal(t, ValueDigest([]byte("plain")), s.Data["token"])
	assert.Equal(t, map[string]string{"clerum.io/expires-at": "2026-12-01T00:00:00Z"}, s.Annotations)
}

// client-go may transform one object twice (watch-list, then Replace): the
// second pass must not digest the digests, or a cold start and a watch
// event would disagree about the same Secret.
func TestDigestIsIdempotent(t *testing.T) {
	once, err := Digest(rawSecret())
	require.NoError(t, err)
	twice, err := Digest(once.(*corev1.Secret).DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, once, twice)
}

// A Secret as the API server returns it never carries the marker, so
// every Secret read from the cluster is digested.
func TestDigestDigestsEverySecretFromTheServer(t *testing.T) {
	raw := rawSecret()
	raw.Data["clerum.io-values-digested"] = []byte("sha256") // a look-alike key
	out, err := Digest(raw)
	require.NoError(t, err)
	assert.Equal(t, ValueDigest([]byte("plain")), out.(*corev1.Secret).Data["token"])
}
