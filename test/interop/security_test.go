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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/kafkaproc"
	"github.com/kmirror/kmirror/internal/mirrorproto"
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

// TestMirrorFromApacheKafkaOverSASLSSL: a mirror reaches an Apache Kafka source with its
// StandardAuthorizer on over SASL_SSL as the SCRAM-SHA-512 user mirror, which holds only
// the bindings of docs/mirroring.md "The source principal's minimal rights". The topics
// matching topics.include are discovered and mirrored batch for batch, the group's
// committed offsets are synced, the source's bindings appear on the destination
// (acls.include) and one removed on the source is gone after two runs of the acls task,
// and no sync task fails.
func TestMirrorFromApacheKafkaOverSASLSSL(t *testing.T) {
	needKafka(t)
	ca := securitytest.NewCA(t, "ca")
	server := ca.Server(t)
	saslAddr, err := kafkaproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	src, err := kafkaproc.StartBroker(java, kafkaproc.BrokerConfig{
		Dir: filepath.Join(workDir, "kafka-sasl-ssl"), JVM: jvm("512m"), ToolJVM: jvm("256m"),
		Listeners: []string{"SASL_SSL://" + saslAddr},
		Props: []string{
			"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"super.users=User:ANONYMOUS", // the PLAINTEXT listener's principal: the test's admin, the controller
			"sasl.enabled.mechanisms=SCRAM-SHA-512",
			"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
			"listener.name.sasl_ssl.ssl.keystore.type=PKCS12",
			"listener.name.sasl_ssl.ssl.keystore.location=" + server.KeystoreP12,
			"listener.name.sasl_ssl.ssl.keystore.password=changeit",
			"offsets.topic.num.partitions=1",
		},
		ReadyTimeout: 90 * time.Second,
	})
	if err != nil {
		t.Fatalf("start Apache Kafka: %v", err)
	}
	t.Cleanup(src.Stop)
	scl := newClient(t, src.Addr, manualPartitions)
	sadm := kadm.NewClient(scl)
	if res, err := sadm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{{User: "mirror", Mechanism: kadm.ScramSha512,
		Iterations: 4096, Password: "mirror-secret"}}); err != nil || res.AllFailed() {
		t.Fatalf("AlterUserScramCredentials mirror on Apache Kafka: %v %+v", err, res)
	}
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
	// The minimal rights, for the topics and groups prefixed ms-.
	const mirror = "User:mirror"
	add(kadm.NewACLs().Allow(mirror).Topics("ms-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead, kadm.OpDescribeConfigs))
	add(kadm.NewACLs().Allow(mirror).Topics("*").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe))
	add(kadm.NewACLs().Allow(mirror).Groups("ms-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpDescribe))
	add(kadm.NewACLs().Allow(mirror).Clusters().ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe))
	// The bindings to sync.
	add(kadm.NewACLs().Allow("User:alice").Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	add(kadm.NewACLs().Allow("User:alice").Groups("app-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	add(kadm.NewACLs().Deny("User:alice").Topics("ms-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))

	const topic, group = "ms-orders", "ms-app"
	createTopic(t, scl, topic, 2, nil)
	createTopic(t, scl, "other", 1, nil) // outside the mirror's rights and patterns
	for p := int32(0); p < 2; p++ {
		produce(t, scl, topic, p, values(fmt.Sprintf("p%d", p), 20)...)
	}
	commits := kadm.Offsets{}
	commits.Add(kadm.Offset{Topic: topic, Partition: 0, At: 12, LeaderEpoch: -1})
	commits.Add(kadm.Offset{Topic: topic, Partition: 1, At: 7, LeaderEpoch: -1})
	if r, err := sadm.CommitOffsets(ctxT(t), group, commits); err != nil || r.Error() != nil {
		t.Fatalf("commit %s on Apache Kafka: %v %v", group, err, r.Error())
	}

	dst := brokertest.Start(t, map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:ANONYMOUS",
	})
	admin := mirrorAdmin(t, dst.Addr())
	const name = "sasl-from-kafka"
	var cfg []mirrorproto.CreateClusterMirrorRequestConfig
	for k, v := range map[string]string{
		"bootstrap.servers":       saslAddr,
		"security.protocol":       "SASL_SSL",
		"sasl.mechanism":          "SCRAM-SHA-512",
		"sasl.jaas.config":        `org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="mirror-secret";`,
		"ssl.truststore.location": ca.PEMFile,
		"topics.include":          "ms-.*",
		"groups.include":          "ms-.*",
	} {
		cfg = append(cfg, mirrorproto.CreateClusterMirrorRequestConfig{Name: k, Value: v})
	}
	cr, err := admin.Request(ctxT(t), &mirrorproto.CreateClusterMirrorRequest{MirrorName: name, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if r := cr.(*mirrorproto.CreateClusterMirrorResponse); r.ErrorCode != 0 {
		t.Fatal(mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage))
	}

	eventually(t, func() string { return fmt.Sprintf("mirror topics %v", describeMirror(t, admin, name)) },
		func() bool { return len(describeMirror(t, admin, name)[topic]) == 2 })
	waitMirrored(t, admin, scl, name, topic)
	compareLogs(t, scl, dst.Client(), topic)

	dcl := dst.Client()
	var got string
	eventually(t, func() string { return "group offsets on kmirror: " + got }, func() bool {
		offs, err := kadm.NewClient(dcl).FetchOffsets(ctxT(t), group)
		if err != nil {
			got = err.Error()
			return false
		}
		o0, _ := offs.Lookup(topic, 0)
		o1, _ := offs.Lookup(topic, 1)
		got = fmt.Sprintf("%d %d", o0.At, o1.At)
		return o0.At == 12 && o1.At == 7
	})

	dadm := kadm.NewClient(dcl)
	all := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()
	alices := func() string {
		rs, err := dadm.DescribeACLs(ctxT(t), all)
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, r := range rs {
			for _, d := range r.Described {
				if d.Principal == "User:alice" {
					out = append(out, fmt.Sprintf("%s:%s:%s:%s:%s", d.Type, d.Name, d.Pattern, d.Operation, d.Permission))
				}
			}
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	const groupACL, denyACL, topicACL = "GROUP:app-:PREFIXED:READ:ALLOW", "TOPIC:ms-:PREFIXED:WRITE:DENY", "TOPIC:orders:LITERAL:READ:ALLOW"
	eventually(t, func() string { return "alice's bindings on kmirror: " + alices() },
		func() bool { return alices() == groupACL+" "+denyACL+" "+topicACL })

	if _, err := sadm.DeleteACLs(ctxT(t), kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	removed := time.Now().UnixMilli()
	// Two runs of the acls task that ended after the removal: the second began after it.
	runs := map[int64]bool{}
	eventually(t, func() string { return fmt.Sprintf("acls task runs since the removal: %d", len(runs)) }, func() bool {
		for _, st := range syncTasks(t, admin, name) {
			if st.Task == "acls" && st.LastSuccessMs > removed {
				runs[st.LastSuccessMs] = true
			}
		}
		return len(runs) >= 2
	})
	if got := alices(); got != groupACL+" "+denyACL {
		t.Fatalf("alice's bindings on kmirror two acls runs after the source removed %s: %s", topicACL, got)
	}
	for _, st := range syncTasks(t, admin, name) {
		if st.ErrorCount != 0 || st.LastSuccessMs < 0 {
			msg := ""
			if st.LastError != nil {
				msg = *st.LastError
			}
			t.Errorf("sync task %s with the minimal source rights: %d errors (last: %s), last success %d", st.Task, st.ErrorCount, msg, st.LastSuccessMs)
		}
	}
}

// syncTasks returns the status of the sync tasks of mirror (DescribeClusterMirrors).
func syncTasks(t *testing.T, admin *kgo.Client, mirror string) []mirrorproto.DescribeClusterMirrorsSyncTask {
	t.Helper()
	kr, err := admin.Request(ctxT(t), &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: []string{mirror}})
	if err != nil {
		t.Fatalf("DescribeClusterMirrors: %v", err)
	}
	for _, m := range kr.(*mirrorproto.DescribeClusterMirrorsResponse).Mirrors {
		return m.SyncTasks
	}
	return nil
}
