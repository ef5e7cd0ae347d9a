package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// credential is a server's credential as its Secret holds it now.
type credential struct {
	// required is whether the server declares spec.auth.
	required bool
	// resolved is whether the Secret and key exist; value and secretUID are
	// set only then.
	resolved  bool
	value     []byte
	secretUID types.UID
	ref       v1alpha1.SecretKeyReference
}

// credentialSecret returns the Secret s.spec.auth names, or nil when s has
// no auth or the Secret is missing. It is the only Secret read in the
// package: callers reach it only with a granted server.
func credentialSecret(secrets SecretReader, s *v1alpha1.McpServer) *corev1.Secret {
	if s.Spec.Auth == nil {
		return nil
	}
	secret, err := secrets.Get(s.Spec.Auth.SecretRef.Name)
	if err != nil {
		return nil
	}
	// A service-account token, a registry credential or one of HCC's own
	// Secrets is never a server's credential, whoever names it: it is
	// answered as missing, as the operator reports it (SecretsMissing).
	if names.ForbiddenSecret(string(secret.Type), secret.Labels) != "" {
		return nil
	}
	return secret
}

// credentialOf is s's credential as secret, from credentialSecret, holds it.
func credentialOf(s *v1alpha1.McpServer, secret *corev1.Secret) credential {
	if s.Spec.Auth == nil {
		return credential{}
	}
	c := credential{required: true, ref: s.Spec.Auth.SecretRef}
	if secret == nil {
		return c
	}
	if v, ok := secret.Data[c.ref.Key]; ok {
		c.resolved, c.value, c.secretUID = true, v, secret.UID
	}
	return c
}

// revisionDomain separates these digests from any other use of the same
// inputs.
const revisionDomain = "clerum.io/hcc-api/credentialRevision/v1"

// revision is the opaque credentialRevision of server s holding c. It must
// be the same on every replica with no shared secret, change whenever the
// value changes, and not reveal the value to whoever sees it (Hosts, and
// the audit log, which records it).
//
// A plain hash of the value would let anyone holding a revision confirm
// guesses of a low-entropy credential offline. So a resolved value is
// MACed under a key derived from its Secret's UID: 122 random bits the API
// server assigns, identical for every replica watching that object, stable
// while the Secret exists, and never written to a response, log or metric.
// Only a reader of the Secret's metadata learns it, and such a reader can
// read the value anyway. Recreating the Secret changes the revision even
// for an unchanged value, which costs mcp-host one refetch.
//
// The server UID and the reference are MACed too, so servers sharing one
// Secret key still get distinct revisions and a recreated server a new one.
// Servers without auth, and servers whose Secret or key is missing, get
// revisions of their state alone (no value to protect); the latter changes
// when the Secret appears.
func (c credential) revision(s *v1alpha1.McpServer) string {
	switch {
	case !c.required:
		return mac(nil, "none", string(s.UID))
	case !c.resolved:
		return mac(nil, "unresolved", string(s.UID), c.ref.Name, c.ref.Key)
	default:
		return mac([]byte(c.secretUID), "value", string(s.UID), c.ref.Name, c.ref.Key, string(c.value))
	}
}

// mac returns the first 128 bits of HMAC-SHA-256, keyed by the domain and
// keyMaterial, over the length-prefixed fields, in base64url. Length
// prefixes keep distinct field lists from colliding.
func mac(keyMaterial []byte, fields ...string) string {
	m := hmac.New(sha256.New, append([]byte(revisionDomain), keyMaterial...))
	var n [binary.MaxVarintLen64]byte
	for _, f := range fields {
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(f)))])
		m.Write([]byte(f))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}
