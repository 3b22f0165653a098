package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/security/securitytest"
)

// TestKafkaToolsOverSASLSSL: Apache Kafka's kafka-configs adds a SCRAM-SHA-512 user over
// SASL_SSL as the bootstrapped admin (--add-config 'SCRAM-SHA-512=[password=…]'), and the
// Java console producer and consumer produce and consume as that user with a PEM
// truststore; kafka-configs --describe lists the credential's mechanism and iterations.
func TestKafkaToolsOverSASLSSL(t *testing.T) {
	needKafka(t)
	ca := securitytest.NewCA(t, "ca")
	dir := t.TempDir()
	securitytest.BootstrapScram(t, dir, "SCRAM-SHA-512", map[string]string{"admin": "admin-secret"})
	b := brokertest.Start(t, map[string]string{
		"listeners":               "SASL_SSL://127.0.0.1:0",
		"log.dirs":                dir,
		"sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"ssl.keystore.type":       "PEM",
		"ssl.keystore.location":   ca.Server(t).KeystorePEM,
	})
	clientProps := func(user, pw string) string {
		p := filepath.Join(t.TempDir(), user+".properties")
		body := fmt.Sprintf(`security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";
ssl.truststore.type=PEM
ssl.truststore.location=%s
`, user, pw, ca.PEMFile)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bs := []string{"--bootstrap-server", b.Addr()}
	admin := clientProps("admin", "admin-secret")
	out := tool(t, "", configsTool, append(bs, "--command-config", admin, "--entity-type", "users", "--entity-name", "alice",
		"--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]")...)
	mustContain(t, "add SCRAM user", out, "Completed updating config for user alice.")
	out = tool(t, "", configsTool, append(bs, "--command-config", admin, "--entity-type", "users", "--entity-name", "alice", "--describe")...)
	mustContain(t, "describe SCRAM user", out, "SCRAM-SHA-512=iterations=8192")

	alice := clientProps("alice", "alice-secret")
	var in strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&in, "value-%d\n", i)
	}
	tool(t, in.String(), consoleProducer, append(bs, "--topic", "secure", "--command-config", alice)...)
	out = tool(t, "", consoleConsumer, append(bs, "--topic", "secure", "--from-beginning", "--max-messages", "10",
		"--timeout-ms", "60000", "--command-config", alice)...)
	if got := strings.Fields(out); len(got) != 10 || got[0] != "value-0" || got[9] != "value-9" {
		t.Fatalf("console consumer as alice printed:\n%s", out)
	}
}
