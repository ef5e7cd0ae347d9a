// Package mark authenticates what HCC reads back out of objects it wrote
// (docs/ownership.md, "HCC's mark").
//
// HCC's managed-by and identity labels say "HCC may take this over", not
// "HCC wrote this": anyone who can create objects in HCC's namespaces can
// write them. Where HCC believes something an object says (the Host a
// credential was issued for and when it expires, that a seed Job ran for a
// GlobalFileSystem, that a claim's volume was bound by Kubernetes to a claim
// HCC created), the object also carries an HMAC over exactly those
// facts, keyed from INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET. Only a process
// holding that secret can compute it, so a forged object verifies as
// holding nothing.
//
// Each use has its own key, derived from the secret and a purpose string,
// so a mark computed for one kind of object never verifies on another, and
// none equals the secret-digest key of pod templates.
package mark

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Annotation is the annotation that carries an object's mark.
const Annotation = "clerum.io/hcc-mark"

// Purposes: one key per kind of fact HCC authenticates.
const (
	// PurposeRuntimeToken marks a Host's runtime-token Secret: the Host UID,
	// the expiry and the digest of the credential.
	PurposeRuntimeToken = "runtime-token"
	// PurposeSeedJob marks a GlobalFileSystem's seed Job.
	PurposeSeedJob = "seed-job"
	// PurposeClaim marks a PersistentVolumeClaim HCC created (a Host's
	// workspace, a SharedFileSystem's data): the claim's namespace, name
	// and UID and its owner's UID.
	PurposeClaim = "claim"
)

// version prefixes every mark, so a later format can tell its own apart.
const version = "v1:"

// Key computes and checks the marks of one purpose. The zero Key (no
// secret configured, as in render) signs nothing and verifies nothing.
type Key struct {
	k []byte
}

// NewKey derives the key of purpose from secret
// (INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET). An empty secret gives the zero
// Key.
func NewKey(secret, purpose string) Key {
	if secret == "" {
		return Key{}
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("clerum.io/hcc-mark v1 " + purpose))
	return Key{k: m.Sum(nil)}
}

// Usable reports whether the key can sign and verify.
func (k Key) Usable() bool { return len(k.k) > 0 }

// Sign returns the mark over fields, in order. Each field is
// length-prefixed, so no two different field lists share a mark. The zero
// Key returns "".
func (k Key) Sign(fields ...string) string {
	if !k.Usable() {
		return ""
	}
	m := hmac.New(sha256.New, k.k)
	var n [8]byte
	for _, f := range fields {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return version + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether mark is k's mark over fields. It compares in
// constant time; the zero Key and an empty mark never verify.
func (k Key) Verify(mark string, fields ...string) bool {
	if !k.Usable() || mark == "" {
		return false
	}
	return hmac.Equal([]byte(mark), []byte(k.Sign(fields...)))
}
