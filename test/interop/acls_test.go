package interop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/security/securitytest"
)

// aclsTool is kafka-acls.sh.
const aclsTool = "org.apache.kafka.tools.AclCommand"

// TestKafkaAclsTool: Apache Kafka's kafka-acls adds, lists and removes bindings on a
// kmirror broker with the StandardAuthorizer on, literal and prefixed, ALLOW and DENY,
// over SASL_PLAINTEXT as the SCRAM-SHA-512 super user admin (--command-config; the
// credential bootstrapped as storage format --add-scram does).
func TestKafkaAclsTool(t *testing.T) {
	needKafka(t)
	dir := t.TempDir()
	securitytest.BootstrapScram(t, dir, "SCRAM-SHA-512", map[string]string{"admin": "admin-secret"})
	b := brokertest.Start(t, map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"log.dirs":                dir,
		"sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"authorizer.class.name":   "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":             "User:admin",
	})
	admin := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(admin, []byte(`security.protocol=SASL_PLAINTEXT
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";
`), 0o600); err != nil {
		t.Fatal(err)
	}
	bs := []string{"--bootstrap-server", b.Addr(), "--command-config", admin}
	tool(t, "", aclsTool, append(bs, "--add", "--allow-principal", "User:alice", "--operation", "Read",
		"--topic", "orders", "--group", "app")...)
	tool(t, "", aclsTool, append(bs, "--add", "--deny-principal", "User:bob", "--operation", "Write",
		"--topic", "pay-", "--resource-pattern-type", "prefixed")...)

	out := tool(t, "", aclsTool, append(bs, "--list")...)
	mustContain(t, "list", out,
		"ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)",
		"(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
		"ResourcePattern(resourceType=GROUP, name=app, patternType=LITERAL)",
		"ResourcePattern(resourceType=TOPIC, name=pay-, patternType=PREFIXED)",
		"(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)")

	out = tool(t, "", aclsTool, append(bs, "--list", "--topic", "orders")...)
	mustContain(t, "list --topic orders", out, "name=orders")
	if strings.Contains(out, "name=pay-") {
		t.Fatalf("list --topic orders shows the prefixed pay- binding:\n%s", out)
	}
	out = tool(t, "", aclsTool, append(bs, "--list", "--principal", "User:bob")...)
	mustContain(t, "list --principal User:bob", out, "name=pay-")

	tool(t, "", aclsTool, append(bs, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")...)
	out = tool(t, "", aclsTool, append(bs, "--list")...)
	if strings.Contains(out, "name=orders") {
		t.Fatalf("the removed binding on orders is still listed:\n%s", out)
	}
	mustContain(t, "list after remove", out, "name=app", "name=pay-")
}
