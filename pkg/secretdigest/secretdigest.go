// Package secretdigest is what a cached Secret keeps: its identity, labels,
// HCC's annotations, type, key names and a digest of each value, never a
// value. Every Secret informer's transform is Digest, and callers that read
// Secrets outside an informer (render) use it too, so they see what the
// controller sees. It imports no client code, so the pure planning packages
// can use it.
package secretdigest

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationPrefix is the prefix of the annotations a digested Secret
// keeps: HCC's own (e.g. the expiry it records on a credential Secret).
// Every other annotation is dropped: kubectl's last-applied-configuration
// holds a Secret's values in plain text.
const AnnotationPrefix = "clerum.io/"

// Digest is the transform of every Secret informer: the cached copy
// keeps the Secret's identity, labels, clerum.io/ annotations, owner
// references, type and key names, and for each value its SHA-256 digest in
// hex — never the value. It also serves callers that read Secrets outside an
// informer (render), so they see what the controller sees.
//
// It is idempotent, as client-go requires of a transform: an informer may
// pass one object through it twice (the watch-list's temporary store, then
// the FIFO's Replace). Digesting the digests would give the same Secret a
// different digest on a cold start than on a watch event, and roll every
// pod that reads it on each restart or failover.
func Digest(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil // a tombstone
	}
	if _, done := s.StringData[digestedMarker]; done {
		return s, nil
	}
	out := &corev1.Secret{
		TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion,
			Generation: s.Generation, CreationTimestamp: s.CreationTimestamp, DeletionTimestamp: s.DeletionTimestamp,
			Labels: s.Labels, OwnerReferences: s.OwnerReferences, Finalizers: s.Finalizers,
		},
		Type:      s.Type,
		Immutable: s.Immutable,
		Data:      make(map[string][]byte, len(s.Data)+len(s.StringData)),
	}
	for k, v := range s.Annotations {
		if strings.HasPrefix(k, AnnotationPrefix) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	for k, v := range s.Data {
		out.Data[k] = ValueDigest(v)
	}
	for k, v := range s.StringData {
		out.Data[k] = ValueDigest([]byte(v))
	}
	out.StringData = map[string]string{digestedMarker: "sha256"}
	return out, nil
}

// digestedMarker marks a Secret Digest produced. It is a stringData
// key, which no Secret read from the API server carries: the server folds
// stringData into data on every write and never returns it, and a key
// holding '/' is no valid Secret key anyway.
const digestedMarker = "clerum.io/values-digested"

// ValueDigest is the digest Digest stores for a value: SHA-256, hex.
func ValueDigest(v []byte) []byte {
	sum := sha256.Sum256(v)
	return []byte(hex.EncodeToString(sum[:]))
}
