package interop

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/kafkaproc"
	"github.com/kmirror/kmirror/internal/mirrorproto"
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

// TestMirrorACLSyncFromApacheKafka: a mirror from an Apache Kafka source with its
// StandardAuthorizer on copies the source's bindings to a kmirror destination, and
// removes one once the source removes it.
func TestMirrorACLSyncFromApacheKafka(t *testing.T) {
	needKafka(t)
	src, err := kafkaproc.StartBroker(java, kafkaproc.BrokerConfig{
		Dir: filepath.Join(workDir, "kafka-acls"), JVM: jvm("512m"), ToolJVM: jvm("256m"),
		Props: []string{
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users=User:ANONYMOUS", // the PLAINTEXT principal of every connection, the controller's too
			"offsets.topic.num.partitions=1",
		},
		ReadyTimeout: 90 * time.Second,
	})
	if err != nil {
		t.Fatalf("start Apache Kafka: %v", err)
	}
	t.Cleanup(src.Stop)
	scl := newClient(t, src.Addr)
	sadm := kadm.NewClient(scl)
	add := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := sadm.CreateACLs(ctxT(t), b)
		if err == nil {
			for _, r := range res {
				err = r.Err
			}
		}
		if err != nil {
			t.Fatalf("CreateAcls on Apache Kafka: %v", err)
		}
	}
	add(kadm.NewACLs().Allow("User:alice").Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	add(kadm.NewACLs().Allow("User:alice").Groups("app-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))

	dst := brokertest.Start(t, map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:ANONYMOUS",
	})
	admin := mirrorAdmin(t, dst.Addr())
	cr, err := admin.Request(ctxT(t), &mirrorproto.CreateClusterMirrorRequest{MirrorName: "from-kafka",
		Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: src.Addr}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := cr.(*mirrorproto.CreateClusterMirrorResponse); r.ErrorCode != 0 {
		t.Fatal(mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage))
	}
	dadm := kadm.NewClient(dst.Client())
	all := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()
	listed := func() string {
		rs, err := dadm.DescribeACLs(ctxT(t), all)
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, r := range rs {
			for _, d := range r.Described {
				out = append(out, fmt.Sprintf("%s:%s:%s:%s:%s", d.Type, d.Name, d.Pattern, d.Principal, d.Operation))
			}
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	const group, topic = "GROUP:app-:PREFIXED:User:alice:READ", "TOPIC:orders:LITERAL:User:alice:READ"
	eventually(t, func() string { return "destination bindings: " + listed() }, func() bool { return listed() == group+" "+topic })

	if _, err := sadm.DeleteACLs(ctxT(t), kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string { return "destination bindings after the removal: " + listed() }, func() bool { return listed() == group })
}
