package resources

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// SecretCheck is what the Secrets a server names say.
type SecretCheck struct {
	// Missing names what is absent — a Secret or a key, never a value —
	// or a Secret the server may not read, and why; empty when everything
	// is there.
	Missing []string
	// Forbidden is whether a named Secret is one no server may read
	// (names.ForbiddenSecret): unlike a missing Secret, which running pods
	// may outlive, it stops them.
	Forbidden bool
	// Digest covers the values of the envSecret keys the pods read.
	Digest string
}

// DigestKey derives the key of the pod template's secret digest from the
// controller's InternalControl HMAC secret, so the annotation, which
// whoever may read Deployments can read, is no unkeyed hash of Secret
// values that a low-entropy value could be guessed from. The derivation
// makes the key independent of the JWT signing key it comes from;
// rotating that secret rolls every McpServer's pods once.
func DigestKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("clerum.io/secret-digest v1"))
	return m.Sum(nil)
}

// CheckSecrets validates s's envSecret (EnvSecretOf: none for a remote
// server, which ignores it) and auth references with lookup, which returns
// a Secret whose values are digests (secretdigest.Digest), or a NotFound;
// the pod-template digest is keyed with key (DigestKey). A service-account
// token, a registry credential or one of HCC's own Secrets counts as
// missing, with the reason (names.ForbiddenSecret): a server could
// otherwise read the namespace's tokens, or a Host's credential, into its
// environment. The controller and render share it.
func CheckSecrets(s *clerumv1alpha1.McpServer, key []byte, lookup func(name string) (*corev1.Secret, error)) (SecretCheck, error) {
	var check SecretCheck
	get := func(name string) (*corev1.Secret, error) {
		secret, err := lookup(name)
		if apierrors.IsNotFound(err) {
			check.Missing = append(check.Missing, fmt.Sprintf("Secret %s does not exist", name))
			return nil, nil
		}
		if err == nil && secret != nil {
			if why := names.ForbiddenSecret(string(secret.Type), secret.Labels); why != "" {
				check.Missing = append(check.Missing, fmt.Sprintf("Secret %s may not be read by an McpServer: it %s", name, why))
				check.Forbidden = true
				return nil, nil
			}
		}
		return secret, err
	}
	if es := EnvSecretOf(s); es != nil {
		secret, err := get(es.Name)
		if err != nil {
			return check, err
		}
		if secret != nil {
			h := hmac.New(sha256.New, key)
			keys := make([]string, 0, len(es.Keys))
			for _, k := range es.Keys {
				keys = append(keys, k.SecretKey)
			}
			sort.Strings(keys)
			for _, k := range keys {
				d, ok := secret.Data[k]
				if !ok {
					check.Missing = append(check.Missing, fmt.Sprintf("Secret %s has no key %s", es.Name, k))
					continue
				}
				fmt.Fprintf(h, "%s=%s\n", k, d)
			}
			if len(keys) > 0 {
				check.Digest = "hmac-sha256:" + hex.EncodeToString(h.Sum(nil))
			}
		}
	}
	if a := s.Spec.Auth; a != nil {
		secret, err := get(a.SecretRef.Name)
		if err != nil {
			return check, err
		}
		if secret != nil {
			if _, ok := secret.Data[a.SecretRef.Key]; !ok {
				check.Missing = append(check.Missing, fmt.Sprintf("Secret %s has no key %s", a.SecretRef.Name, a.SecretRef.Key))
			}
		}
	}
	return check, nil
}

// Message says what is missing, or that nothing is.
func (sc SecretCheck) Message() string {
	if len(sc.Missing) == 0 {
		return "every referenced Secret and key exists"
	}
	return strings.Join(sc.Missing, "; ")
}
