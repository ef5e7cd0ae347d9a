// Package roots checks that a binary trusts the public Web PKI on a system
// with no certificates at all, as in its image, which holds the binary alone
// (docs/deploy.md, "The images"): the binary's main package must link
// golang.org/x/crypto/x509roots/fallback.
package roots

import (
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// publicChain is a public site's leaf and intermediate, whose root is in
// the Mozilla set the fallback package embeds (testdata/public-chain.pem
// says where they come from).
//
//go:embed testdata/public-chain.pem
var publicChain []byte

const (
	// childEnv marks the re-executed test binary.
	childEnv = "HCC_TEST_ROOTS_CHILD"
	// verified is what the child prints once the chain verified, so the
	// parent knows the check ran rather than matched no test.
	verified = "roots: verified"
	// chainHost and chainTime are the leaf's name and a time it was valid.
	chainHost = "www.google.com"
)

var chainTime = time.Date(2023, 3, 1, 0, 0, 0, 0, time.UTC)

// RequirePublicChainTrusted runs the calling test again in a child process
// of the same test binary — which links what the main package links — with
// SSL_CERT_FILE and SSL_CERT_DIR naming nothing, so the system has no
// certificates, as on an empty image. The child verifies a public site's
// chain against the system roots: it passes only if the roots the binary
// embeds are in use. Call it first thing in a top-level test.
func RequirePublicChainTrusted(t *testing.T) {
	t.Helper()
	if os.Getenv(childEnv) == "1" {
		verifyPublicChain(t)
		return
	}
	none := t.TempDir() + "/none"
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1", "SSL_CERT_FILE="+none, "SSL_CERT_DIR="+none)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), verified) {
		t.Fatalf("with no system certificates, the binary does not trust a public root (%v):\n%s", err, out)
	}
}

func verifyPublicChain(t *testing.T) {
	t.Helper()
	var certs []*x509.Certificate
	for rest := publicChain; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) != 2 {
		t.Fatalf("testdata/public-chain.pem: want a leaf and an intermediate, got %d certificates", len(certs))
	}
	intermediates := x509.NewCertPool()
	intermediates.AddCert(certs[1])
	// No Roots: the system's, which here are the fallback roots or none.
	chains, err := certs[0].Verify(x509.VerifyOptions{
		DNSName:       chainHost,
		Intermediates: intermediates,
		CurrentTime:   chainTime,
	})
	if err != nil {
		t.Fatalf("verify %s: %v", chainHost, err)
	}
	chain := chains[0]
	t.Logf("%s: %s -> %s -> %s", verified, chain[0].Subject.CommonName, chain[1].Subject.CommonName, chain[len(chain)-1].Subject.CommonName)
}
