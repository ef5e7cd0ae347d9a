package config

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

const (
	// minRSAKeyBits is the smallest RS256 verification key accepted.
	minRSAKeyBits = 2048
	// maxRSAPublicKeys bounds the keys one variable may hold. A rotation
	// needs two (the old and the new); a token without a kid costs one RSA
	// verification per key, so the bound is also a bound on that work.
	maxRSAPublicKeys = 4
	// pemBegin opens every PEM block.
	pemBegin = "-----BEGIN "
)

// rsaPublicKeys is a required list of PEM RSA public keys, one after
// another. There is no insecure fallback: without a usable key the API
// could not verify any v2 token, and a value that is not exactly a list of
// good public keys fails as a whole, so no key is silently dropped.
func rsaPublicKeys(p func(*Config) *[]*rsa.PublicKey) field {
	return field{
		rule: fmt.Sprintf("up to %d PEM RSA public keys (`PUBLIC KEY` or `RSA PUBLIC KEY`) one after another, each ≥ %d bits, no key twice; `\\n` escapes allowed",
			maxRSAPublicKeys, minRSAKeyBits),
		blank: isEmpty,
		set: func(c *Config, s string) error {
			keys, err := parseRSAPublicKeys(s)
			if err != nil {
				return err
			}
			*p(c) = keys
			return nil
		},
	}
}

// parseRSAPublicKeys parses s into its keys, in order. Reasons name a key
// by its position when s holds several, and never quote key material.
func parseRSAPublicKeys(s string) ([]*rsa.PublicKey, error) {
	switch {
	case strings.TrimSpace(s) == "":
		return nil, errors.New("required")
	case isPlaceholder(s):
		return nil, errors.New("is still a replace-with-… placeholder")
	}
	// Env files often carry a PEM on one line with literal \n sequences.
	// Base64 never contains a backslash, so the replacement cannot corrupt
	// a real PEM.
	s = strings.TrimSpace(strings.ReplaceAll(s, `\n`, "\n"))
	chunks, err := pemChunks(s)
	if err != nil {
		return nil, err
	}

	keys := make([]*rsa.PublicKey, 0, len(chunks))
	for i, chunk := range chunks {
		key, err := parseRSAPublicKey(chunk)
		if err != nil {
			if len(chunks) > 1 {
				return nil, fmt.Errorf("key %d: %w", i+1, err)
			}
			return nil, err
		}
		// A repeat is harmless to verification but almost always a
		// rotation mistake: the old key pasted twice instead of old and
		// new, which would fail only later, when the issuer switches keys.
		for j, prev := range keys {
			if prev.Equal(key) {
				return nil, fmt.Errorf("key %d repeats key %d", i+1, j+1)
			}
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// pemChunks splits s, trimmed, at each PEM begin line. Each chunk holds one
// begin line, so pem.Decode, which skips a broken block to find the next
// one, cannot skip anything: whatever is not one clean block fails.
func pemChunks(s string) ([]string, error) {
	if !strings.HasPrefix(s, pemBegin) {
		if strings.Contains(s, pemBegin) {
			return nil, errors.New("has data before the first PEM block")
		}
		return nil, errors.New("is not a PEM block")
	}
	var chunks []string
	for {
		next := strings.Index(s[len(pemBegin):], pemBegin)
		if next < 0 {
			break
		}
		next += len(pemBegin)
		chunks, s = append(chunks, s[:next]), s[next:]
	}
	chunks = append(chunks, s)
	if len(chunks) > maxRSAPublicKeys {
		return nil, fmt.Errorf("holds %d PEM blocks, at most %d are allowed", len(chunks), maxRSAPublicKeys)
	}
	return chunks, nil
}

// parseRSAPublicKey parses one chunk of pemChunks: exactly one PEM public
// key block, RSA, large enough, and nothing after it but whitespace.
func parseRSAPublicKey(chunk string) (*rsa.PublicKey, error) {
	block, rest := pem.Decode([]byte(chunk))
	switch {
	case block == nil:
		return nil, errors.New("is not a PEM block")
	case len(strings.TrimSpace(string(rest))) > 0:
		return nil, errors.New("has data after the PEM block")
	case strings.Contains(block.Type, "PRIVATE KEY"):
		return nil, fmt.Errorf("is a private key (%s); configure only the public key", block.Type)
	}

	var key any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block %q is not PUBLIC KEY or RSA PUBLIC KEY", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("malformed %s block: %v", block.Type, err)
	}

	switch k := key.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSAKeyBits {
			return nil, fmt.Errorf("RSA key has %d bits, want at least %d", bits, minRSAKeyBits)
		}
		return k, nil
	case *ecdsa.PublicKey:
		return nil, errors.New("is an ECDSA key, want RSA")
	case ed25519.PublicKey:
		return nil, errors.New("is an Ed25519 key, want RSA")
	}
	return nil, fmt.Errorf("is a %T, want an RSA key", key)
}
