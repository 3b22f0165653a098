package interop

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// Apache Kafka 4.x command-line tools, by the class their bin/*.sh script runs.
const (
	topicsTool       = "org.apache.kafka.tools.TopicCommand"                        // kafka-topics.sh
	configsTool      = "kafka.admin.ConfigCommand"                                  // kafka-configs.sh
	consoleProducer  = "org.apache.kafka.tools.ConsoleProducer"                     // kafka-console-producer.sh
	consoleConsumer  = "org.apache.kafka.tools.consumer.ConsoleConsumer"            // kafka-console-consumer.sh
	groupsTool       = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand" // kafka-consumer-groups.sh
	producerPerf     = "org.apache.kafka.tools.ProducerPerformance"                 // kafka-producer-perf-test.sh
	consumerPerf     = "org.apache.kafka.tools.ConsumerPerformance"                 // kafka-consumer-perf-test.sh
	getOffsetsTool   = "org.apache.kafka.tools.GetOffsetShell"                      // kafka-get-offsets.sh
	dumpLogTool      = "org.apache.kafka.tools.DumpLogSegments"                     // kafka-dump-log.sh
	transactionsTool = "org.apache.kafka.tools.TransactionsCommand"                 // kafka-transactions.sh
)

func mustContain(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

func TestKafkaTopicsTool(t *testing.T) {
	needKafka(t)
	b := brokertest.Start(t, nil)
	bs := []string{"--bootstrap-server", b.Addr()}
	out := tool(t, "", topicsTool, append(bs, "--create", "--topic", "tools-topic", "--partitions", "2",
		"--replication-factor", "1", "--config", "retention.ms=3600000")...)
	mustContain(t, "create", out, "Created topic tools-topic.")

	out = tool(t, "", topicsTool, append(bs, "--list")...)
	if !regexp.MustCompile(`(?m)^tools-topic$`).MatchString(out) {
		t.Fatalf("list lacks tools-topic:\n%s", out)
	}

	id := metadata(t, b.Client(), "tools-topic")["tools-topic"].ID
	out = tool(t, "", topicsTool, append(bs, "--describe", "--topic", "tools-topic")...)
	mustContain(t, "describe", out, "Topic: tools-topic", "PartitionCount: 2", "ReplicationFactor: 1",
		"retention.ms=3600000", "Partition: 0", "Partition: 1", "TopicId: "+topicIDString(id))

	tool(t, "", topicsTool, append(bs, "--alter", "--topic", "tools-topic", "--partitions", "3")...)
	out = tool(t, "", topicsTool, append(bs, "--describe", "--topic", "tools-topic")...)
	mustContain(t, "describe after alter", out, "PartitionCount: 3", "Partition: 2")

	tool(t, "", topicsTool, append(bs, "--delete", "--topic", "tools-topic")...)
	var last string
	eventually(t, func() string { return "tools-topic still listed:\n" + last }, func() bool {
		last = tool(t, "", topicsTool, append(bs, "--list")...)
		return !strings.Contains(last, "tools-topic")
	})
}

// topicIDString renders a topic ID as Kafka's Uuid.toString does (URL-safe base64, no padding).
func topicIDString(id [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func TestKafkaConfigsTool(t *testing.T) {
	needKafka(t)
	b := brokertest.Start(t, nil)
	createTopic(t, b.Client(), "cfg", 1, nil)
	bs := []string{"--bootstrap-server", b.Addr()}
	out := tool(t, "", configsTool, append(bs, "--entity-type", "topics", "--entity-name", "cfg",
		"--alter", "--add-config", "retention.ms=1234567,cleanup.policy=compact")...)
	mustContain(t, "alter", out, "Completed updating config for topic cfg.")

	out = tool(t, "", configsTool, append(bs, "--entity-type", "topics", "--entity-name", "cfg", "--describe")...)
	mustContain(t, "describe", out, "Dynamic configs for topic cfg are:", "retention.ms=1234567", "cleanup.policy=compact")

	out = tool(t, "", configsTool, append(bs, "--entity-type", "topics", "--entity-name", "cfg",
		"--alter", "--delete-config", "retention.ms")...)
	mustContain(t, "delete-config", out, "Completed updating config for topic cfg.")
	out = tool(t, "", configsTool, append(bs, "--entity-type", "topics", "--entity-name", "cfg", "--describe")...)
	if strings.Contains(out, "retention.ms=1234567") {
		t.Fatalf("retention.ms still set after --delete-config:\n%s", out)
	}
	mustContain(t, "describe after delete", out, "cleanup.policy=compact")

	out = tool(t, "", configsTool, append(bs, "--entity-type", "topics", "--entity-name", "cfg", "--describe", "--all")...)
	mustContain(t, "describe --all", out, "All configs for topic cfg are:", "segment.bytes=", "retention.ms=")

	out = tool(t, "", configsTool, append(bs, "--entity-type", "brokers", "--describe", "--all")...)
	mustContain(t, "broker describe --all", out, "All configs for broker", "log.dirs="+b.Dir)
}

func TestKafkaConsoleProducerConsumer(t *testing.T) {
	needKafka(t)
	b := brokertest.Start(t, nil)
	createTopic(t, b.Client(), "console", 1, nil)
	bs := []string{"--bootstrap-server", b.Addr()}
	var in strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&in, "key-%d:value-%d\n", i, i)
	}
	tool(t, in.String(), consoleProducer, append(bs, "--topic", "console",
		"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")...)

	out := tool(t, "", consoleConsumer, append(bs, "--topic", "console", "--from-beginning",
		"--max-messages", "20", "--timeout-ms", "60000", "--group", "console-group",
		"--formatter-property", "print.key=true", "--formatter-property", "print.offset=true",
		"--formatter-property", "print.partition=true", "--formatter-property", "key.separator=|")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 20 {
		t.Fatalf("console consumer printed %d lines, want 20:\n%s", len(lines), out)
	}
	for i, l := range lines {
		want := fmt.Sprintf("Partition:0|Offset:%d|key-%d|value-%d", i, i, i)
		if strings.Join(strings.Fields(l), "") != want {
			t.Fatalf("line %d = %q, want %q", i, l, want)
		}
	}
	// The consumer committed its position on close: the group resumes at the end.
	offs, err := kadm.NewClient(b.Client()).FetchOffsets(ctxT(t), "console-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("console", 0); o.At != 20 {
		t.Fatalf("console-group committed %+v, want 20", o)
	}
}

func TestKafkaConsumerGroupsTool(t *testing.T) {
	needKafka(t)
	b := brokertest.Start(t, nil)
	cl := b.Client(manualPartitions)
	createTopic(t, cl, "grp", 2, nil)
	produce(t, cl, "grp", 0, "a", "b", "c", "d", "e", "f")
	produce(t, cl, "grp", 1, "g", "h", "i", "j")
	bs := []string{"--bootstrap-server", b.Addr()}
	tool(t, "", consoleConsumer, append(bs, "--topic", "grp", "--from-beginning", "--max-messages", "10",
		"--timeout-ms", "60000", "--group", "g1")...)
	produce(t, cl, "grp", 0, "late1", "late2") // lag 2 on partition 0

	out := tool(t, "", groupsTool, append(bs, "--list")...)
	if !regexp.MustCompile(`(?m)^g1\s*$`).MatchString(out) {
		t.Fatalf("--list lacks g1:\n%s", out)
	}

	out = tool(t, "", groupsTool, append(bs, "--describe", "--group", "g1")...)
	rows := groupRows(t, out)
	if rows["grp/0"] != [3]int64{6, 8, 2} || rows["grp/1"] != [3]int64{4, 4, 0} {
		t.Fatalf("--describe rows %v, want grp/0 6 8 2 and grp/1 4 4 0:\n%s", rows, out)
	}

	out = tool(t, "", groupsTool, append(bs, "--reset-offsets", "--group", "g1", "--topic", "grp",
		"--to-earliest", "--dry-run")...)
	reset := resetRows(t, out)
	if reset["grp/0"] != 0 || reset["grp/1"] != 0 {
		t.Fatalf("--dry-run rows %v, want new offset 0:\n%s", reset, out)
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(ctxT(t), "g1")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("grp", 0); o.At != 6 {
		t.Fatalf("--dry-run changed the committed offset: %+v", o)
	}

	out = tool(t, "", groupsTool, append(bs, "--reset-offsets", "--group", "g1", "--topic", "grp:0",
		"--to-offset", "3", "--execute")...)
	if reset = resetRows(t, out); reset["grp/0"] != 3 {
		t.Fatalf("--execute rows %v, want grp/0 at 3:\n%s", reset, out)
	}
	out = tool(t, "", groupsTool, append(bs, "--describe", "--group", "g1")...)
	if rows = groupRows(t, out); rows["grp/0"] != [3]int64{3, 8, 5} || rows["grp/1"] != [3]int64{4, 4, 0} {
		t.Fatalf("--describe after reset %v:\n%s", rows, out)
	}
}

var spaces = regexp.MustCompile(`\s+`)

// groupRows parses kafka-consumer-groups --describe: "topic/partition" → current offset,
// log end offset, lag.
func groupRows(t *testing.T, out string) map[string][3]int64 {
	t.Helper()
	rows := map[string][3]int64{}
	var cols []string
	for _, l := range strings.Split(out, "\n") {
		f := spaces.Split(strings.TrimSpace(l), -1)
		if len(f) > 0 && f[0] == "GROUP" {
			cols = f
			continue
		}
		if cols == nil || len(f) < len(cols)-3 {
			continue
		}
		col := func(name string) string {
			for i, c := range cols {
				if c == name && i < len(f) {
					return f[i]
				}
			}
			return ""
		}
		num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
		rows[col("TOPIC")+"/"+col("PARTITION")] = [3]int64{num(col("CURRENT-OFFSET")), num(col("LOG-END-OFFSET")), num(col("LAG"))}
	}
	if len(rows) == 0 {
		t.Fatalf("no rows in --describe output:\n%s", out)
	}
	return rows
}

// resetRows parses kafka-consumer-groups --reset-offsets: "topic/partition" → new offset.
func resetRows(t *testing.T, out string) map[string]int64 {
	t.Helper()
	rows := map[string]int64{}
	for _, l := range strings.Split(out, "\n") {
		f := spaces.Split(strings.TrimSpace(l), -1)
		if len(f) != 4 || f[0] == "GROUP" {
			continue
		}
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			continue
		}
		rows[f[1]+"/"+f[2]] = n
	}
	if len(rows) == 0 {
		t.Fatalf("no rows in --reset-offsets output:\n%s", out)
	}
	return rows
}

func TestKafkaPerfTools(t *testing.T) {
	needKafka(t)
	b := brokertest.Start(t, nil)
	createTopic(t, b.Client(), "perf", 2, nil)
	out := tool(t, "", producerPerf, "--topic", "perf", "--num-records", "5000", "--record-size", "100",
		"--throughput", "-1", "--producer-props", "bootstrap.servers="+b.Addr(), "acks=all", "linger.ms=5")
	mustContain(t, "producer perf", out, "5000 records sent")
	if ends := endOffsets(t, b.Client(), "perf"); ends[0]+ends[1] != 5000 {
		t.Fatalf("log end offsets %v after 5000 records", ends)
	}

	out = tool(t, "", consumerPerf, "--bootstrap-server", b.Addr(), "--topic", "perf", "--messages", "5000",
		"--timeout", "60000", "--hide-header")
	f := strings.Split(strings.TrimSpace(out), ",")
	if len(f) < 6 || strings.TrimSpace(f[4]) != "5000" {
		t.Fatalf("consumer perf: want 5000 in data.consumed.in.nMsg:\n%s", out)
	}
}

func TestKafkaGetOffsets(t *testing.T) {
	needKafka(t)
	b := brokertest.Start(t, nil)
	cl := b.Client()
	createTopic(t, cl, "offs", 2, nil)
	recs := []*kgo.Record{}
	for i := 0; i < 5; i++ {
		// partition 0: timestamps 1000..5000 with the maximum at offset 2
		ts := []int64{1000, 2000, 9000, 3000, 4000}[i]
		recs = append(recs, &kgo.Record{Topic: "offs", Partition: 0, Value: []byte("x"), Timestamp: msTime(ts)})
	}
	for i := 0; i < 3; i++ {
		recs = append(recs, &kgo.Record{Topic: "offs", Partition: 1, Value: []byte("y")})
	}
	pcl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, r := range recs {
		if err := pcl.ProduceSync(ctxT(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	bs := []string{"--bootstrap-server", b.Addr(), "--topic", "offs"}
	check := func(args []string, want string) {
		t.Helper()
		out := tool(t, "", getOffsetsTool, args...)
		if got := sortedLines(out); got != want {
			t.Fatalf("%v: got %q, want %q", args, got, want)
		}
	}
	check(bs, "offs:0:5\noffs:1:3")
	check(append(bs, "--time", "-1"), "offs:0:5\noffs:1:3")
	check(append(bs, "--time", "-2"), "offs:0:0\noffs:1:0")
	check(append(bs, "--time", "2500", "--partitions", "0"), "offs:0:2")
	check(append(bs, "--time", "-3", "--partitions", "0"), "offs:0:2")
	deleteRecords(t, cl, "offs", 1, 2)
	check(append(bs, "--time", "-2"), "offs:0:0\noffs:1:2")
}

func sortedLines(s string) string {
	var ls []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	sortStrings(ls)
	return strings.Join(ls, "\n")
}

func TestKafkaDumpLog(t *testing.T) {
	needKafka(t)
	b := brokertest.Start(t, nil)
	cl := b.Client()
	createTopic(t, cl, "dump", 1, nil)
	produce(t, cl, "dump", 0, "v0", "v1", "v2")
	gz := b.Client(kgo.ProducerBatchCompression(kgo.GzipCompression()))
	long := strings.Repeat("x", 200) // kgo sends a batch uncompressed when gzip would not shrink it
	produce(t, gz, "dump", 0, "w0"+long, "w1"+long)
	seg := filepath.Join(b.Dir, "dump-0", "00000000000000000000.log")
	if _, err := os.Stat(seg); err != nil {
		t.Fatalf("kmirror's segment file: %v", err)
	}
	checkDump := func(out string) {
		t.Helper()
		mustContain(t, "dump-log", out, "Dumping "+seg, "baseOffset: 0 lastOffset: 2 count: 3", "baseOffset: 3 lastOffset: 4 count: 2",
			"compresscodec: gzip")
		re := regexp.MustCompile(`\| offset: (\d+) .*keySize: 2 valueSize: \d+ .*key: (k\d) payload: (\S+)`)
		var got []string
		for _, m := range re.FindAllStringSubmatch(out, -1) {
			got = append(got, m[1]+"="+m[2]+":"+m[3])
		}
		want := "0=k0:v0 1=k1:v1 2=k2:v2 3=k0:w0" + long + " 4=k1:w1" + long
		if strings.Join(got, " ") != want {
			t.Fatalf("dump-log records %q, want %q:\n%s", strings.Join(got, " "), want, out)
		}
	}
	checkDump(tool(t, "", dumpLogTool, "--files", seg, "--print-data-log", "--deep-iteration"))
	// After a clean shutdown the offset and time indexes are trimmed and must verify.
	b.Stop()
	checkDump(tool(t, "", dumpLogTool, "--files", seg, "--print-data-log"))
	idx := strings.TrimSuffix(seg, ".log") + ".index"
	out := tool(t, "", dumpLogTool, "--files", idx+","+strings.TrimSuffix(seg, ".log")+".timeindex", "--verify-index-only")
	if strings.Contains(out, "Mismatches") || strings.Contains(out, "mismatch") || strings.Contains(out, "corrupt") {
		t.Fatalf("index verification:\n%s", out)
	}
}

// TestKafkaTransactionalTools: kafka-producer-perf-test with --transactional-id, then
// kafka-transactions list/describe-producers and a read_committed console consumer.
func TestKafkaTransactionalTools(t *testing.T) {
	needKafka(t)
	b := brokertest.Start(t, nil)
	createTopic(t, b.Client(), "txperf", 1, nil)
	bs := []string{"--bootstrap-server", b.Addr()}
	out := tool(t, "", producerPerf, "--topic", "txperf", "--num-records", "200", "--record-size", "10",
		"--throughput", "-1", "--transactional-id", "perf-tx", "--transaction-duration-ms", "50",
		"--command-property", "bootstrap.servers="+b.Addr())
	mustContain(t, "transactional producer perf", out, "200 records sent")

	out = tool(t, "", transactionsTool, append(bs, "list")...)
	if !regexp.MustCompile(`(?m)^perf-tx\s+1\s+\d+\s+CompleteCommit\s*$`).MatchString(out) {
		t.Fatalf("kafka-transactions list lacks perf-tx in CompleteCommit:\n%s", out)
	}
	out = tool(t, "", transactionsTool, append(bs, "describe-producers", "--topic", "txperf", "--partition", "0")...)
	if !regexp.MustCompile(`(?m)^\d+\s+0\s+\d+\s+199\s+\d+\s+None\s*$`).MatchString(out) {
		t.Fatalf("describe-producers: want last sequence 199 and no open transaction:\n%s", out)
	}
	out = tool(t, "", consoleConsumer, append(bs, "--topic", "txperf", "--from-beginning", "--max-messages", "200",
		"--isolation-level", "read_committed", "--timeout-ms", "60000")...)
	if n := len(strings.Fields(out)); n != 200 {
		t.Fatalf("read_committed console consumer read %d records, want 200", n)
	}
}
