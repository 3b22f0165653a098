package broker_test

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/security/securitytest"
)

// roundTrip produces n records to topic through a client with opts and reads them back
// through another, checking values in order.
func roundTrip(t *testing.T, b *brokertest.Broker, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	ctx := context.Background()
	p := b.Client(append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())...)
	for i := 0; i < n; i++ {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	c := b.Client(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	for i, r := range consumeN(t, c, n) {
		if string(r.Value) != "v"+strconv.Itoa(i) {
			t.Fatalf("record %d: %q", i, r.Value)
		}
	}
}

// refused checks that a client with opts cannot reach the broker: its first request
// fails (authentication or TLS), and the error is not a timeout of a live connection.
func refused(t *testing.T, b *brokertest.Broker, what string, opts ...kgo.Opt) error {
	t.Helper()
	cl := b.Client(append(opts, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))...)
	err := cl.Ping(context.Background())
	if err == nil {
		t.Fatalf("%s: the broker accepted the client", what)
	}
	return err
}

func tlsListener(ca *securitytest.CA, server *securitytest.Leaf, protocol string) map[string]string {
	return map[string]string{
		"listeners":               protocol + "://127.0.0.1:0",
		"ssl.keystore.type":       "PEM",
		"ssl.keystore.location":   server.KeystorePEM,
		"ssl.truststore.type":     "PEM",
		"ssl.truststore.location": ca.PEMFile,
	}
}

// TestSASLSSLScram512: over SASL_SSL with SCRAM-SHA-512 credentials bootstrapped as
// storage format --add-scram does, a franz-go client produces and consumes; a wrong
// password gets SASL_AUTHENTICATION_FAILED, a plaintext client and a TLS client without
// SASL get nothing; AlterUserScramCredentials adds a user that then authenticates, and
// DescribeUserScramCredentials reports mechanism and iterations.
func TestSASLSSLScram512(t *testing.T) {
	ca := securitytest.NewCA(t, "ca")
	dir := t.TempDir()
	securitytest.BootstrapScram(t, dir, "SCRAM-SHA-512", map[string]string{"admin": "admin-secret"})
	props := tlsListener(ca, ca.Server(t), "SASL_SSL")
	props["log.dirs"] = dir
	props["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
	props["connection.failed.authentication.delay.ms"] = "0"
	b := brokertest.Start(t, props)
	dial := kgo.DialTLSConfig(ca.ClientTLS(nil))
	as := func(user, pw string) kgo.Opt { return kgo.SASL(scram.Auth{User: user, Pass: pw}.AsSha512Mechanism()) }

	roundTrip(t, b, "secure", 20, dial, as("admin", "admin-secret"))

	if err := refused(t, b, "wrong password", dial, as("admin", "nope")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	refused(t, b, "a plaintext client")
	refused(t, b, "a TLS client without SASL", dial)

	adm := kadm.NewClient(b.Client(dial, as("admin", "admin-secret")))
	ctx := context.Background()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-secret"}})
	if err != nil || res.AllFailed() {
		t.Fatalf("AlterUserScramCredentials: %v %+v", err, res)
	}
	roundTrip(t, b, "carols", 3, dial, as("carol", "carol-secret"))
	desc, err := adm.DescribeUserSCRAMs(ctx, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if d := desc["carol"]; d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha512 || d.CredInfos[0].Iterations != 8192 {
		t.Fatalf("DescribeUserScramCredentials carol: %+v", d)
	}
	del, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || del.AllFailed() {
		t.Fatalf("delete carol: %v %+v", err, del)
	}
	if err := refused(t, b, "a deleted user", dial, as("carol", "carol-secret")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("deleted user: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestSASLPlaintextPlain: PLAIN users of the listener's PlainLoginModule produce and
// consume over SASL_PLAINTEXT; a wrong password and an unknown mechanism are refused.
func TestSASLPlaintextPlain(t *testing.T) {
	b := brokertest.Start(t, map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
		"connection.failed.authentication.delay.ms":           "0",
	})
	as := func(user, pw string) kgo.Opt { return kgo.SASL(plain.Auth{User: user, Pass: pw}.AsMechanism()) }
	roundTrip(t, b, "plain", 20, as("alice", "alice-secret"))
	if err := refused(t, b, "wrong password", as("alice", "admin-secret")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	var m sasl.Mechanism = scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()
	if err := refused(t, b, "an unknown mechanism", kgo.SASL(m)); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("SCRAM on a PLAIN listener: %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}
}

// TestSSLClientCertificate: with ssl.client.auth=required and a PKCS12 keystore, a client
// with a certificate from the truststore's CA produces and consumes; one without a
// certificate, one with a certificate of another CA or an expired one, and a plaintext
// client are refused. DescribeConfigs returns the keystore password as null and sensitive.
func TestSSLClientCertificate(t *testing.T) {
	ca := securitytest.NewCA(t, "ca")
	server := ca.Server(t)
	props := tlsListener(ca, server, "SSL")
	props["ssl.keystore.type"] = "PKCS12"
	props["ssl.keystore.location"] = server.KeystoreP12
	props["ssl.keystore.password"] = "changeit"
	props["ssl.client.auth"] = "required"
	b := brokertest.Start(t, props)
	alice := ca.Client(t, pkix.Name{CommonName: "alice", Organization: []string{"kmirror"}})
	roundTrip(t, b, "mtls", 20, kgo.DialTLSConfig(ca.ClientTLS(alice)))

	refused(t, b, "a TLS client without a certificate", kgo.DialTLSConfig(ca.ClientTLS(nil)))
	other := securitytest.NewCA(t, "other")
	cfg := ca.ClientTLS(other.Client(t, pkix.Name{CommonName: "mallory"}))
	refused(t, b, "a certificate of an untrusted CA", kgo.DialTLSConfig(cfg))
	refused(t, b, "an expired certificate", kgo.DialTLSConfig(ca.ClientTLS(ca.ExpiredClient(t, pkix.Name{CommonName: "alice"}))))
	refused(t, b, "a plaintext client")

	rc, err := kadm.NewClient(b.Client(kgo.DialTLSConfig(ca.ClientTLS(alice)))).DescribeBrokerConfigs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rc {
		for _, c := range r.Configs {
			if c.Key != "ssl.keystore.password" {
				continue
			}
			found = true
			if c.Value != nil || !c.Sensitive {
				t.Fatalf("ssl.keystore.password described as %v (sensitive %v), want null and sensitive", c.Value, c.Sensitive)
			}
			for _, syn := range c.Synonyms {
				if syn.Value != nil {
					t.Fatalf("ssl.keystore.password synonym %s has a value", syn.Source)
				}
			}
		}
	}
	if !found {
		t.Fatal("DescribeConfigs lacks ssl.keystore.password")
	}
}

// TestKcatSecurity: librdkafka (kcat) produces and consumes over SASL_SSL with
// SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN and SSL with a client certificate; a wrong
// SCRAM password is refused.
func TestKcatSecurity(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed; run `make deps`")
	}
	ca := securitytest.NewCA(t, "ca")
	server := ca.Server(t)
	alice := ca.Client(t, pkix.Name{CommonName: "alice"})
	dir := t.TempDir()
	securitytest.BootstrapScram(t, dir, "SCRAM-SHA-512", map[string]string{"admin": "admin-secret"})
	scramProps := tlsListener(ca, server, "SASL_SSL")
	scramProps["log.dirs"] = dir
	scramProps["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
	sslProps := tlsListener(ca, server, "SSL")
	sslProps["ssl.client.auth"] = "required"
	for _, tc := range []struct {
		name  string
		props map[string]string
		args  []string
	}{
		{"SASL_SSL SCRAM-SHA-512", scramProps, []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=admin", "-X", "sasl.password=admin-secret", "-X", "ssl.ca.location=" + ca.PEMFile}},
		{"SASL_PLAINTEXT PLAIN", map[string]string{
			"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
		}, []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}},
		{"SSL client certificate", sslProps, []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.PEMFile,
			"-X", "ssl.certificate.location=" + alice.CertPEM, "-X", "ssl.key.location=" + alice.KeyPEM}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := brokertest.Start(t, tc.props)
			args := append([]string{"-b", b.Addr()}, tc.args...)
			var in strings.Builder
			for i := 0; i < 10; i++ {
				in.WriteString("k" + strconv.Itoa(i) + ":v" + strconv.Itoa(i) + "\n")
			}
			kcat(t, in.String(), append(args, "-P", "-t", "sec", "-K:")...)
			out := kcat(t, "", append(args, "-C", "-t", "sec", "-e", "-q", "-f", "%k=%s\n")...)
			if strings.Count(out, "\n") != 10 || !strings.Contains(out, "k0=v0\n") || !strings.Contains(out, "k9=v9\n") {
				t.Fatalf("kcat read back:\n%s", out)
			}
		})
	}
	t.Run("wrong SCRAM password", func(t *testing.T) {
		b := brokertest.Start(t, scramProps)
		cmd := exec.Command("kcat", "-b", b.Addr(), "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=admin", "-X", "sasl.password=wrong", "-X", "ssl.ca.location="+ca.PEMFile, "-m", "3", "-L")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Authentication failed") {
			t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
		}
	})
}
