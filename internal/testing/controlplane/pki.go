package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity bounds how long the generated certificates are valid: long
// enough for any test run, short enough to be obviously throwaway.
const certValidity = 7 * 24 * time.Hour

// adminUser and adminGroup identify the admin client certificate.
// system:masters is bound to cluster-admin and bypasses RBAC.
const (
	adminUser  = "hcc-test-admin"
	adminGroup = "system:masters"
)

// pki holds the files kube-apiserver is started with and the PEM data
// clients need. One CA signs both the serving certificate and the client
// certificates, so it is both the server's trust root for clients
// (--client-ca-file) and the clients' trust root for the server.
type pki struct {
	caFile            string // CA certificate, also --client-ca-file
	servingCertFile   string
	servingKeyFile    string
	serviceAccountPub string // --service-account-key-file
	serviceAccountKey string // --service-account-signing-key-file

	caPEM        []byte
	adminCertPEM []byte
	adminKeyPEM  []byte
}

// newPKI generates a fresh CA, a serving certificate for 127.0.0.1 and
// localhost, an admin client certificate and a service-account key pair,
// and writes the files kube-apiserver reads into dir.
func newPKI(dir string) (*pki, error) {
	ca, err := newCA()
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "hcc-test-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
	})
	if err != nil {
		return nil, err
	}
	adminCert, adminKey, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: adminUser, Organization: []string{adminGroup}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	saKey, err := newKey()
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := encodeKey(saKey)
	if err != nil {
		return nil, err
	}

	p := &pki{
		caFile:            filepath.Join(dir, "ca.crt"),
		servingCertFile:   filepath.Join(dir, "apiserver.crt"),
		servingKeyFile:    filepath.Join(dir, "apiserver.key"),
		serviceAccountPub: filepath.Join(dir, "sa.pub"),
		serviceAccountKey: filepath.Join(dir, "sa.key"),
		caPEM:             ca.certPEM,
		adminCertPEM:      adminCert,
		adminKeyPEM:       adminKey,
	}
	files := map[string][]byte{
		p.caFile:            ca.certPEM,
		p.servingCertFile:   servingCert,
		p.servingKeyFile:    servingKey,
		p.serviceAccountPub: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		p.serviceAccountKey: saKeyPEM,
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

type certAuthority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

func newCA() (*certAuthority, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "hcc-test-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if err := setSerialAndValidity(template); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &certAuthority{cert: cert, key: key, certPEM: encodeCert(der)}, nil
}

// issue signs a certificate for a new key with the template's subject,
// usages and names, and returns the certificate and key in PEM.
func (ca *certAuthority) issue(template *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	template.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	if err := setSerialAndValidity(template); err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate for %s: %w", template.Subject.CommonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

func setSerialAndValidity(template *x509.Certificate) error {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return err
	}
	template.SerialNumber = serial
	// Backdated a little so that clock skew between the test and the
	// servers never makes a fresh certificate "not yet valid".
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(certValidity)
	return nil
}

// newKey returns an ECDSA P-256 key: much faster to generate than RSA, and
// accepted by kube-apiserver for TLS, client certificates and
// service-account token signing (ES256).
func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}
