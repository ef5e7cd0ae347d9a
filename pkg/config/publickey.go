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

// minRSAKeyBits is the smallest RS256 verification key accepted.
const minRSAKeyBits = 2048

// rsaPublicKey is a required PEM RSA public key. There is no insecure
// fallback: without a usable key the API could not verify any v2 token.
func rsaPublicKey(p func(*Config) **rsa.PublicKey) field {
	return field{
		rule:  fmt.Sprintf("PEM RSA public key (`PUBLIC KEY` or `RSA PUBLIC KEY`), ≥ %d bits; `\\n` escapes allowed", minRSAKeyBits),
		blank: isEmpty,
		set: func(c *Config, s string) error {
			key, err := parseRSAPublicKey(s)
			if err != nil {
				return err
			}
			*p(c) = key
			return nil
		},
	}
}

func parseRSAPublicKey(s string) (*rsa.PublicKey, error) {
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
	// pem.Decode skips anything before the block; reject it so that the
	// value is exactly one key and nothing else.
	if !strings.HasPrefix(s, "-----BEGIN ") {
		return nil, errors.New("is not a PEM block")
	}
	block, rest := pem.Decode([]byte(s))
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
