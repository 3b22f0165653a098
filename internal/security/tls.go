package security

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// Getter returns the value of a Kafka config key ("" when unset).
type Getter func(key string) string

// Store types of ssl.keystore.type and ssl.truststore.type (Kafka's).
const (
	StorePEM    = "PEM"
	StorePKCS12 = "PKCS12"
	StoreJKS    = "JKS"
)

// ServerTLSConfig builds a listener's TLS configuration from Kafka's ssl.* keys:
// ssl.keystore.{type,location,password,key,certificate.chain}, ssl.key.password,
// ssl.truststore.{type,location,password,certificates}, ssl.client.auth
// (required|requested|none), ssl.enabled.protocols and ssl.cipher.suites. A keystore is
// required. Errors are one line naming the key.
func ServerTLSConfig(get Getter) (*tls.Config, error) {
	cert, err := loadKeystore(get)
	if err != nil {
		return nil, err
	}
	if cert == nil {
		return nil, fmt.Errorf("ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key) is required on a TLS listener")
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{*cert}}
	if err := applyProtocols(cfg, get); err != nil {
		return nil, err
	}
	pool, err := loadTruststore(get)
	if err != nil {
		return nil, err
	}
	cfg.ClientCAs = pool
	switch strings.ToLower(strings.TrimSpace(get("ssl.client.auth"))) {
	case "", "none":
		cfg.ClientAuth = tls.NoClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("ssl.client.auth %q is not one of required, requested, none", get("ssl.client.auth"))
	}
	return cfg, nil
}

// ClientTLSConfig builds the TLS configuration of an outbound connection (a broker to
// another broker, a mirror to its source) from the same keys as ServerTLSConfig: the
// keystore is optional (a client certificate), the truststore verifies the server, and
// ssl.endpoint.identification.algorithm="" turns host name verification off (callers
// pass Kafka's default "https" when the key is unset). Without a truststore the system
// roots are trusted.
func ClientTLSConfig(get Getter) (*tls.Config, error) {
	cert, err := loadKeystore(get)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	if err := applyProtocols(cfg, get); err != nil {
		return nil, err
	}
	if cfg.RootCAs, err = loadTruststore(get); err != nil {
		return nil, err
	}
	if strings.TrimSpace(get("ssl.endpoint.identification.algorithm")) == "" {
		// Kafka still verifies the chain; only the host name check is off.
		cfg.InsecureSkipVerify = true //nolint:gosec // the chain is verified by verifyChainOnly
		cfg.VerifyPeerCertificate = verifyChainOnly(cfg.RootCAs)
	}
	return cfg, nil
}

// verifyChainOnly verifies the server's chain against roots without checking its host
// name (ssl.endpoint.identification.algorithm empty: Kafka still verifies trust).
func verifyChainOnly(roots *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return fmt.Errorf("server sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
}

func storeType(get Getter, key string) (string, error) {
	t := strings.ToUpper(strings.TrimSpace(get(key)))
	switch t {
	case "":
		return StoreJKS, nil // Kafka's default
	case StorePEM, StorePKCS12, StoreJKS:
		return t, nil
	}
	return "", fmt.Errorf("%s %q is not one of PEM, PKCS12, JKS", key, get(key))
}

// loadKeystore returns the certificate chain and private key of the keystore, nil when
// none is configured.
func loadKeystore(get Getter) (*tls.Certificate, error) {
	loc := strings.TrimSpace(get("ssl.keystore.location"))
	chain, key := get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
	typ, err := storeType(get, "ssl.keystore.type")
	if err != nil {
		return nil, err
	}
	if loc == "" && chain == "" {
		return nil, nil
	}
	if loc == "" { // KIP-651 inline PEM
		if typ != StorePEM {
			return nil, fmt.Errorf("ssl.keystore.certificate.chain needs ssl.keystore.type=PEM")
		}
		return pemKeyPair([]byte(chain), []byte(key))
	}
	data, err := os.ReadFile(loc)
	if err != nil {
		return nil, fmt.Errorf("ssl.keystore.location: %v", err)
	}
	switch typ {
	case StorePEM:
		return pemKeyPair(data, data)
	case StorePKCS12:
		k, leaf, cas, err := pkcs12.DecodeChain(data, get("ssl.keystore.password"))
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location %s: PKCS12: %v", loc, err)
		}
		c := &tls.Certificate{PrivateKey: k, Leaf: leaf, Certificate: [][]byte{leaf.Raw}}
		for _, ca := range cas {
			c.Certificate = append(c.Certificate, ca.Raw)
		}
		return c, nil
	default:
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(data), []byte(get("ssl.keystore.password"))); err != nil {
			return nil, fmt.Errorf("ssl.keystore.location %s: JKS: %v", loc, err)
		}
		keyPass := get("ssl.key.password")
		if keyPass == "" {
			keyPass = get("ssl.keystore.password")
		}
		for _, alias := range ks.Aliases() {
			if !ks.IsPrivateKeyEntry(alias) {
				continue
			}
			e, err := ks.GetPrivateKeyEntry(alias, []byte(keyPass))
			if err != nil {
				return nil, fmt.Errorf("ssl.keystore.location %s: JKS entry %q: %v", loc, alias, err)
			}
			k, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
			if err != nil {
				return nil, fmt.Errorf("ssl.keystore.location %s: JKS entry %q: %v", loc, alias, err)
			}
			c := &tls.Certificate{PrivateKey: k}
			for _, cc := range e.CertificateChain {
				c.Certificate = append(c.Certificate, cc.Content)
			}
			return c, nil
		}
		return nil, fmt.Errorf("ssl.keystore.location %s: JKS keystore holds no private key entry", loc)
	}
}

// pemKeyPair parses a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or
// SEC 1; an ENCRYPTED PRIVATE KEY is refused).
func pemKeyPair(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c := &tls.Certificate{}
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			c.Certificate = append(c.Certificate, b.Bytes)
		}
	}
	if len(c.Certificate) == 0 {
		return nil, fmt.Errorf("ssl keystore holds no PEM certificate")
	}
	var key crypto.PrivateKey
	for rest := keyPEM; key == nil; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			// Go's standard library has no PKCS#8 decryption (PBES2); see docs/security.md.
			return nil, fmt.Errorf("ssl keystore: encrypted PEM private keys (ssl.key.password) are not supported: store the key unencrypted or use a PKCS12 keystore")
		}
		if err != nil {
			return nil, fmt.Errorf("ssl keystore private key: %v", err)
		}
	}
	if key == nil {
		return nil, fmt.Errorf("ssl keystore holds no PEM private key")
	}
	c.PrivateKey = key
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("ssl keystore certificate: %v", err)
	}
	c.Leaf = leaf
	return c, nil
}

// loadTruststore returns the CA pool of the truststore, nil when none is configured
// (the system roots for a client; no client certificates verified for a server).
func loadTruststore(get Getter) (*x509.CertPool, error) {
	loc := strings.TrimSpace(get("ssl.truststore.location"))
	inline := get("ssl.truststore.certificates")
	typ, err := storeType(get, "ssl.truststore.type")
	if err != nil {
		return nil, err
	}
	if loc == "" && inline == "" {
		return nil, nil
	}
	pool := x509.NewCertPool()
	if loc == "" {
		if typ != StorePEM {
			return nil, fmt.Errorf("ssl.truststore.certificates needs ssl.truststore.type=PEM")
		}
		if !pool.AppendCertsFromPEM([]byte(inline)) {
			return nil, fmt.Errorf("ssl.truststore.certificates holds no PEM certificate")
		}
		return pool, nil
	}
	data, err := os.ReadFile(loc)
	if err != nil {
		return nil, fmt.Errorf("ssl.truststore.location: %v", err)
	}
	switch typ {
	case StorePEM:
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("ssl.truststore.location %s holds no PEM certificate", loc)
		}
	case StorePKCS12:
		certs, err := pkcs12.DecodeTrustStore(data, get("ssl.truststore.password"))
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location %s: PKCS12: %v", loc, err)
		}
		for _, c := range certs {
			pool.AddCert(c)
		}
	default:
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(data), []byte(get("ssl.truststore.password"))); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location %s: JKS: %v", loc, err)
		}
		n := 0
		for _, alias := range ks.Aliases() {
			if !ks.IsTrustedCertificateEntry(alias) {
				continue
			}
			e, err := ks.GetTrustedCertificateEntry(alias)
			if err != nil {
				return nil, fmt.Errorf("ssl.truststore.location %s: JKS entry %q: %v", loc, alias, err)
			}
			c, err := x509.ParseCertificate(e.Certificate.Content)
			if err != nil {
				return nil, fmt.Errorf("ssl.truststore.location %s: JKS entry %q: %v", loc, alias, err)
			}
			pool.AddCert(c)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("ssl.truststore.location %s: JKS truststore holds no trusted certificate", loc)
		}
	}
	return pool, nil
}

// tlsVersions maps ssl.enabled.protocols entries (Java's names) to Go's versions.
var tlsVersions = map[string]uint16{
	"TLSv1": tls.VersionTLS10, "TLSv1.1": tls.VersionTLS11, "TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13,
}

// applyProtocols sets the TLS versions from ssl.enabled.protocols (Kafka's default
// TLSv1.2,TLSv1.3 when unset; Go enables the range from the lowest to the highest listed
// version) and the TLS 1.2 cipher suites from ssl.cipher.suites (IANA names, which Java
// uses too; TLS 1.3 suites are accepted and always all enabled, as Go does not let them
// be chosen). An unknown name is an error naming it.
func applyProtocols(cfg *tls.Config, get Getter) error {
	protos := splitList(get("ssl.enabled.protocols"))
	if len(protos) == 0 {
		protos = []string{"TLSv1.2", "TLSv1.3"}
	}
	for _, p := range protos {
		v, ok := tlsVersions[p]
		if !ok {
			return fmt.Errorf("ssl.enabled.protocols: unknown protocol %q (TLSv1.2, TLSv1.3, TLSv1.1, TLSv1)", p)
		}
		if cfg.MinVersion == 0 || v < cfg.MinVersion {
			cfg.MinVersion = v
		}
		if v > cfg.MaxVersion {
			cfg.MaxVersion = v
		}
	}
	names := splitList(get("ssl.cipher.suites"))
	if len(names) == 0 {
		return nil
	}
	byName := map[string]*tls.CipherSuite{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		byName[s.Name] = s
	}
	for _, n := range names {
		s, ok := byName[n]
		if !ok {
			return fmt.Errorf("ssl.cipher.suites: unknown cipher suite %q", n)
		}
		if len(s.SupportedVersions) == 1 && s.SupportedVersions[0] == tls.VersionTLS13 {
			continue
		}
		cfg.CipherSuites = append(cfg.CipherSuites, s.ID)
	}
	return nil
}

// splitList splits a Kafka LIST value on commas, trimming entries and dropping empty ones.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
