package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
)

func TestReadCRDs(t *testing.T) {
	crds, err := readCRDs("testdata/crds")
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 1 || crds[0].GetName() != "widgets.test.hcc.clerum.github.com" {
		t.Fatalf("got %d CRDs (%v), want only widgets (the Kustomization skipped)", len(crds), crds)
	}

	crds, err = readCRDs("testdata/no-such-dir")
	if err != nil || len(crds) != 0 {
		t.Fatalf("missing dir: got %d CRDs, %v; want none, no error", len(crds), err)
	}
}

func TestPKI(t *testing.T) {
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(p.caPEM) {
		t.Fatal("CA PEM not parsable")
	}

	serving, err := tls.LoadX509KeyPair(p.servingCertFile, p.servingKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := serving.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}

	admin, err := tls.X509KeyPair(p.adminCertPEM, p.adminKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		t.Errorf("admin certificate: %v", err)
	}
	if got := admin.Leaf.Subject; got.CommonName != adminUser || len(got.Organization) != 1 || got.Organization[0] != adminGroup {
		t.Errorf("admin subject = %v, want CN=%s O=%s", got, adminUser, adminGroup)
	}

	pub, err := os.ReadFile(p.serviceAccountPub)
	if err != nil {
		t.Fatal(err)
	}
	if block, _ := pem.Decode(pub); block == nil || block.Type != "PUBLIC KEY" {
		t.Errorf("service-account public key file is not a PEM public key")
	}
}
