// Package securitytest makes the certificates and SCRAM credentials of security tests:
// a CA, server and client certificates signed by it (crypto/x509), written as the PEM
// and PKCS12 stores Kafka's ssl.* keys name, and the bootstrap records of SCRAM users.
package securitytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/security"
)

// CA is a self-signed test CA.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEMFile holds the CA certificate (a PEM truststore).
	PEMFile string
	dir     string
	serial  int64
}

// Leaf is a certificate signed by a CA with its key.
type Leaf struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// KeystorePEM holds the PKCS#8 key and the certificate (ssl.keystore.type=PEM).
	KeystorePEM string
	// KeystoreP12 holds the key and certificate as PKCS12 with password "changeit".
	KeystoreP12 string
	// CertPEM and KeyPEM hold the certificate and the key alone (kcat's ssl.* files).
	CertPEM, KeyPEM string
}

// NewCA makes a CA valid for a day whose files go in t.TempDir().
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, Key: key, dir: t.TempDir(), serial: 1}
	ca.PEMFile = write(t, ca.dir, cn+"-ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Server makes a server certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(t testing.TB) *Leaf {
	return ca.leaf(t, pkix.Name{CommonName: "localhost"}, x509.ExtKeyUsageServerAuth)
}

// Client makes a client certificate with subject name.
func (ca *CA) Client(t testing.TB, name pkix.Name) *Leaf {
	return ca.leaf(t, name, x509.ExtKeyUsageClientAuth)
}

// ExpiredClient makes a client certificate with subject name that expired an hour ago.
func (ca *CA) ExpiredClient(t testing.TB, name pkix.Name) *Leaf {
	return ca.leafUntil(t, name, x509.ExtKeyUsageClientAuth, time.Now().Add(-time.Hour))
}

func (ca *CA) leaf(t testing.TB, name pkix.Name, usage x509.ExtKeyUsage) *Leaf {
	return ca.leafUntil(t, name, usage, time.Now().Add(24*time.Hour))
}

func (ca *CA) leafUntil(t testing.TB, name pkix.Name, usage x509.ExtKeyUsage, notAfter time.Time) *Leaf {
	t.Helper()
	ca.serial++
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.serial), Subject: name,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: notAfter,
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})
	p12, err := pkcs12.Modern.Encode(key, cert, []*x509.Certificate{ca.Cert}, "changeit")
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(ca.dir, name.CommonName+"-"+big.NewInt(ca.serial).String())
	return &Leaf{Cert: cert, Key: key,
		KeystorePEM: write(t, ca.dir, filepath.Base(base)+"-keystore.pem", append(append([]byte{}, keyPEM...), certPEM...)),
		KeystoreP12: write(t, ca.dir, filepath.Base(base)+".p12", p12),
		CertPEM:     write(t, ca.dir, filepath.Base(base)+"-cert.pem", certPEM),
		KeyPEM:      write(t, ca.dir, filepath.Base(base)+"-key.pem", keyPEM),
	}
}

// ClientTLS is a client configuration trusting ca, presenting leaf when it is not nil.
func (ca *CA) ClientTLS(leaf *Leaf) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: pool}
	if leaf != nil {
		cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key, Leaf: leaf.Cert}}
	}
	return cfg
}

// ServerTLS is a listener configuration presenting a new Server certificate of ca (for
// in-process servers such as kfake's TLS listener).
func (ca *CA) ServerTLS(t testing.TB) *tls.Config {
	leaf := ca.Server(t)
	return &tls.Config{MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key, Leaf: leaf.Cert}}}
}

// BootstrapScram writes to dir the bootstrap records (metadata.BootstrapFile) of a
// SCRAM credential per user (user name → password) for mechanism, as `kmirror storage
// format --add-scram` does.
func BootstrapScram(t testing.TB, dir, mechanism string, users map[string]string) {
	t.Helper()
	var recs []metadata.Record
	for u, pw := range users {
		c, err := security.NewScramCredential(mechanism, pw, security.ScramMinIterations)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, metadata.UserScramCredentialRecord{Name: u, Mechanism: security.ScramMechanismCode(mechanism),
			Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations})
	}
	if err := metadata.WriteBootstrap(dir, recs); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func write(t testing.TB, dir, name string, b []byte) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
