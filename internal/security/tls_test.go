package security_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/security"
	"github.com/kmirror/kmirror/internal/security/securitytest"
)

func getter(m map[string]string) security.Getter { return func(k string) string { return m[k] } }

// handshake runs a TLS handshake over loopback between server and client and returns the
// server's view of the connection, or the client's error.
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	states := make(chan tls.ConnectionState, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		tc.Handshake()
		states <- tc.ConnectionState()
		tc.Write([]byte{1})
	}()
	cl := client.Clone()
	cl.ServerName = "localhost"
	c, err := tls.Dial("tcp", ln.Addr().String(), cl)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return tls.ConnectionState{}, err
	}
	return <-states, nil
}

// keytool runs Java's keytool (the JKS stores of the tests are made by it, as an
// operator's are).
func keytool(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("keytool", args...).CombinedOutput(); err != nil {
		t.Fatalf("keytool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestStores: a listener's keystore and truststore load from PEM files, inline PEM,
// PKCS12 and JKS (made by keytool), and a client presenting a certificate of the
// truststore's CA completes a handshake with ssl.client.auth=required; one from another
// CA does not.
func TestStores(t *testing.T) {
	if _, err := exec.LookPath("keytool"); err != nil {
		t.Fatal("keytool (Java 17) is not installed")
	}
	ca := securitytest.NewCA(t, "ca")
	server := ca.Server(t)
	alice := ca.Client(t, pkix.Name{CommonName: "alice"})
	dir := t.TempDir()
	jks := filepath.Join(dir, "server.jks")
	keytool(t, "-importkeystore", "-srckeystore", server.KeystoreP12, "-srcstoretype", "PKCS12", "-srcstorepass", "changeit",
		"-destkeystore", jks, "-deststoretype", "JKS", "-deststorepass", "changeit", "-noprompt")
	trustJKS := filepath.Join(dir, "trust.jks")
	keytool(t, "-importcert", "-noprompt", "-alias", "ca", "-file", ca.PEMFile, "-keystore", trustJKS, "-storetype", "JKS", "-storepass", "changeit")
	trustP12 := filepath.Join(dir, "trust.p12")
	keytool(t, "-importcert", "-noprompt", "-alias", "ca", "-file", ca.PEMFile, "-keystore", trustP12, "-storetype", "PKCS12", "-storepass", "changeit")
	chain, _ := os.ReadFile(server.CertPEM)
	key, _ := os.ReadFile(server.KeyPEM)
	caPEM, _ := os.ReadFile(ca.PEMFile)

	for _, tc := range []struct {
		name string
		keys map[string]string
	}{
		{"PEM files", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": server.KeystorePEM,
			"ssl.truststore.type": "PEM", "ssl.truststore.location": ca.PEMFile}},
		{"inline PEM", map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": string(chain), "ssl.keystore.key": string(key),
			"ssl.truststore.type": "PEM", "ssl.truststore.certificates": string(caPEM)}},
		{"PKCS12", map[string]string{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": server.KeystoreP12, "ssl.keystore.password": "changeit",
			"ssl.truststore.type": "PKCS12", "ssl.truststore.location": trustP12, "ssl.truststore.password": "changeit"}},
		{"JKS (the default type)", map[string]string{"ssl.keystore.location": jks, "ssl.keystore.password": "changeit",
			"ssl.truststore.location": trustJKS, "ssl.truststore.password": "changeit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.keys["ssl.client.auth"] = "required"
			srv, err := security.ServerTLSConfig(getter(tc.keys))
			if err != nil {
				t.Fatal(err)
			}
			// The client side reads its truststore from the same keys.
			cl, err := security.ClientTLSConfig(getter(map[string]string{
				"ssl.keystore.type": "PEM", "ssl.keystore.location": alice.KeystorePEM,
				"ssl.truststore.type": tc.keys["ssl.truststore.type"], "ssl.truststore.location": tc.keys["ssl.truststore.location"],
				"ssl.truststore.password": tc.keys["ssl.truststore.password"], "ssl.truststore.certificates": tc.keys["ssl.truststore.certificates"],
				"ssl.endpoint.identification.algorithm": "https",
			}))
			if err != nil {
				t.Fatal(err)
			}
			st, err := handshake(t, srv, cl)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.PeerCertificates) == 0 || st.PeerCertificates[0].Subject.CommonName != "alice" {
				t.Fatalf("the server saw client certificates %v", st.PeerCertificates)
			}
			other := securitytest.NewCA(t, "other")
			if _, err := handshake(t, srv, ca.ClientTLS(other.Client(t, pkix.Name{CommonName: "mallory"}))); err == nil {
				t.Fatal("a client certificate of another CA was accepted")
			}
		})
	}
}

// TestStoreErrors: bad store settings are one-line errors naming the key, never a value.
func TestStoreErrors(t *testing.T) {
	ca := securitytest.NewCA(t, "ca")
	server := ca.Server(t)
	for _, tc := range []struct {
		keys map[string]string
		want string
	}{
		{map[string]string{}, "ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key) is required"},
		{map[string]string{"ssl.keystore.type": "BKS", "ssl.keystore.location": server.KeystorePEM}, `ssl.keystore.type "BKS" is not one of PEM, PKCS12, JKS`},
		{map[string]string{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": server.KeystoreP12, "ssl.keystore.password": "wrong-secret"}, "PKCS12"},
		{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": server.KeystorePEM, "ssl.enabled.protocols": "SSLv3"}, `ssl.enabled.protocols: unknown protocol "SSLv3"`},
		{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": server.KeystorePEM, "ssl.cipher.suites": "TLS_NOPE"}, `ssl.cipher.suites: unknown cipher suite "TLS_NOPE"`},
		{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": server.KeystorePEM, "ssl.client.auth": "sometimes"}, `ssl.client.auth "sometimes"`},
		{map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.key": "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
			"ssl.keystore.certificate.chain": string(must(os.ReadFile(server.CertPEM)))}, "encrypted PEM private keys (ssl.key.password) are not supported"},
	} {
		_, err := security.ServerTLSConfig(getter(tc.keys))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "wrong-secret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", tc.keys, err, tc.want)
		}
	}
}

// TestProtocolsAndCipherSuites: ssl.enabled.protocols sets the version range and
// ssl.cipher.suites the TLS 1.2 suites by their IANA names.
func TestProtocolsAndCipherSuites(t *testing.T) {
	ca := securitytest.NewCA(t, "ca")
	cfg, err := security.ServerTLSConfig(getter(map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.location": ca.Server(t).KeystorePEM,
		"ssl.enabled.protocols": "TLSv1.2", "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS12 {
		t.Fatalf("versions %x..%x, want TLS 1.2 only", cfg.MinVersion, cfg.MaxVersion)
	}
	if len(cfg.CipherSuites) != 1 || cfg.CipherSuites[0] != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 {
		t.Fatalf("cipher suites %v", cfg.CipherSuites)
	}
	st, err := handshake(t, cfg, ca.ClientTLS(nil))
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != tls.VersionTLS12 || st.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 {
		t.Fatalf("negotiated %x / %x", st.Version, st.CipherSuite)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
