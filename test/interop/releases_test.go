package interop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/kafkaproc"
)

// sourceReleases are the Apache Kafka releases TestMirrorFromKafkaReleases mirrors from
// (KMIRROR_INTEROP_SOURCES, space-separated, overrides): 2.6.3, ZooKeeper-based, whose
// Fetch v11 has no DivergingEpoch (the OffsetForLeaderEpoch fallback) and no topic IDs;
// 3.9.1, the last release with both ZooKeeper and KRaft, run as KRaft; 4.4.0. The suite's
// own source (kafkaVersion) covers the release in between. docs/compatibility.md records
// what each negotiates.
var sourceReleases = []string{"2.6.3", "3.9.1", "4.4.0"}

// releaseJava fetches (fetch-kafka.sh --broker) the broker jars of Apache Kafka version and
// returns a Java running them (the tools stay the suite's, of kafkaVersion).
func releaseJava(t *testing.T, version string) kafkaproc.Java {
	t.Helper()
	out, err := exec.Command("./fetch-kafka.sh", "--broker", version).Output()
	if err != nil {
		t.Fatalf("fetch-kafka.sh --broker %s: %v", version, err)
	}
	j, err := kafkaproc.NewJava(strings.TrimSpace(string(out)), workDir)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// zkBased reports whether Apache Kafka version runs on ZooKeeper here (before 3.0;
// 3.x also could, but KRaft is what 3.9 users move to).
func zkBased(version string) bool {
	return strings.HasPrefix(version, "2.") || strings.HasPrefix(version, "1.")
}

// startRelease starts n brokers of Apache Kafka version under dir (with a ZooKeeper
// server for a ZooKeeper-based release; a KRaft release runs one combined node, n must be
// 1), each with props added, all stopped when the test ends.
func startRelease(t *testing.T, j kafkaproc.Java, version, dir string, n int, props ...string) []*kafkaproc.Broker {
	t.Helper()
	base := append([]string{"num.partitions=1", "offsets.topic.num.partitions=4",
		"transaction.state.log.num.partitions=4", "log.cleaner.backoff.ms=200"}, props...)
	var zk string
	if zkBased(version) {
		z, err := kafkaproc.StartZooKeeper(j, filepath.Join(dir, "zookeeper"), jvm("128m"))
		if err != nil {
			t.Fatalf("start ZooKeeper of Apache Kafka %s: %v", version, err)
		}
		t.Cleanup(z.Stop)
		zk = z.Addr
	} else if n != 1 {
		t.Fatalf("a KRaft release runs as one node here")
	}
	var out []*kafkaproc.Broker
	for i := 1; i <= n; i++ {
		b, err := kafkaproc.StartBroker(j, kafkaproc.BrokerConfig{
			Dir: filepath.Join(dir, fmt.Sprintf("broker%d", i)), JVM: jvm("384m"), ToolJVM: jvm("256m"),
			Props: base, ZooKeeper: zk, NodeID: i, ClusterID: "kmirror-interop-" + strings.ReplaceAll(version, ".", "-"),
		})
		if err != nil {
			t.Fatalf("start Apache Kafka %s broker %d: %v", version, i, err)
		}
		t.Cleanup(b.Stop) // after ZooKeeper's Stop in cleanup order: brokers go first
		out = append(out, b)
	}
	return out
}

// logNegotiated logs the Fetch, ListOffsets and OffsetForLeaderEpoch versions kmirror's
// mirror speaks with the broker at addr (the smaller of both sides' maxima), for
// docs/compatibility.md; it returns the Fetch version.
func logNegotiated(t *testing.T, version, addr string) int16 {
	t.Helper()
	cl := newClient(t, addr)
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	ours := kversion.Stable()
	got := map[int16]int16{}
	for _, k := range resp.ApiKeys {
		if v, ok := ours.LookupMaxKeyVersion(k.ApiKey); ok {
			got[k.ApiKey] = min(v, k.MaxVersion)
		}
	}
	t.Logf("Apache Kafka %s: Fetch v%d, ListOffsets v%d, OffsetForLeaderEpoch v%d, Metadata v%d", version,
		got[kmsg.Fetch.Int16()], got[kmsg.ListOffsets.Int16()], got[kmsg.OffsetForLeaderEpoch.Int16()], got[kmsg.Metadata.Int16()])
	return got[kmsg.Fetch.Int16()]
}

// TestMirrorFromKafkaReleases runs the mirroring scenarios (byte identity with every
// codec, compaction gaps, DeleteRecords, committed and aborted transactions, group
// offset sync and failover) against a source of each of sourceReleases, and on a source
// without Fetch v12 the unclean-election truncation of uncleanTruncationScenario.
func TestMirrorFromKafkaReleases(t *testing.T) {
	needKafka(t)
	releases := sourceReleases
	if v := os.Getenv("KMIRROR_INTEROP_SOURCES"); v != "" {
		releases = strings.Fields(v)
	}
	for _, version := range releases {
		t.Run(version, func(t *testing.T) {
			j := releaseJava(t, version)
			dir := filepath.Join(workDir, "release-"+version)
			src := startRelease(t, j, version, dir, 1)[0]
			fetchV := logNegotiated(t, version, src.Addr)
			t.Run("mirror", func(t *testing.T) { mirrorScenario(t, src.Addr) })
			t.Run("group-failover", func(t *testing.T) { groupFailoverScenario(t, src.Addr) })
			if fetchV < 12 && zkBased(version) {
				t.Run("unclean-truncation", func(t *testing.T) { uncleanTruncationScenario(t, j, version, dir) })
			}
		})
	}
}

// uncleanTruncationScenario: a partition of RF 2 on two ZooKeeper-based brokers with
// unclean.leader.election.enable=true; its follower is shut down, the leader
// acknowledges acks=1 writes the follower lacks and the mirror copies them; the leader is
// killed (kill -9) and the follower comes back and is elected uncleanly, without those
// writes, and takes new ones. The mirror, which has no DivergingEpoch from this source,
// finds the divergence with OffsetForLeaderEpoch, truncates the lost writes (reported as
// such) and mirrors the new leader's: its log ends identical to the source's.
func uncleanTruncationScenario(t *testing.T, j kafkaproc.Java, version, dir string) {
	bs := startRelease(t, j, version, filepath.Join(dir, "unclean"), 2, "unclean.leader.election.enable=true",
		"controlled.shutdown.enable=true")
	b1, b2 := bs[0], bs[1]
	bootstrap := b1.Addr + "," + b2.Addr
	const topic = "mu-unclean"
	seeds := kgo.SeedBrokers(b1.Addr, b2.Addr)
	cl := newClient(t, b1.Addr, seeds, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2} // broker 1 leads
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for k, v := range map[string]string{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	cresp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(cresp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	eventually(t, func() string { return "the topic's ISR never held both brokers" }, func() bool {
		return len(isr(t, cl, topic)) == 2
	})
	all := newClient(t, b1.Addr, seeds, kgo.RequiredAcks(kgo.AllISRAcks()))
	produce(t, all, topic, 0, values("both", 20)...)

	dst := brokertest.Start(t, nil)
	admin := mirrorAdmin(t, dst.Addr())
	dst.MirrorFrom(ctxT(t), "unclean", bootstrap, topic)
	waitMirrored(t, admin, cl, "unclean", topic)

	// the follower goes; the leader alone acknowledges what the follower never gets
	b2.Stop()
	eventually(t, func() string { return fmt.Sprintf("ISR %v", isr(t, cl, topic)) }, func() bool {
		return len(isr(t, cl, topic)) == 1
	})
	produce(t, cl, topic, 0, values("lost", 15)...)
	waitMirrored(t, admin, cl, "unclean", topic)
	if d := describeMirror(t, admin, "unclean")[topic][0]; d.DestinationOffset != 35 {
		t.Fatalf("the mirror holds %d offsets before the unclean election, want 35", d.DestinationOffset)
	}

	// kill -9 the leader; the follower returns and is elected without the last 15
	b1.Kill()
	if err := b2.Restart(); err != nil {
		t.Fatal(err)
	}
	cl2 := newClient(t, b2.Addr, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	eventually(t, func() string { return fmt.Sprintf("leader of %s: %d", topic, leaderOf(t, cl2, topic)) }, func() bool {
		return leaderOf(t, cl2, topic) == 2
	})
	produce(t, cl2, topic, 0, values("new-leader", 10)...)
	if end := endOffsets(t, cl2, topic)[0]; end != 30 {
		t.Fatalf("the uncleanly elected leader ends at %d, want 30 (20 replicated + 10 new)", end)
	}
	waitMirrored(t, admin, cl2, "unclean", topic)
	compareLogs(t, cl2, dst.Client(), topic)
	d := describeMirror(t, admin, "unclean")[topic][0]
	if d.TruncatedOffset != 20 || d.TruncatedRecords != 15 {
		t.Fatalf("the mirror reports a truncation to %d of %d records, want to 20 of 15", d.TruncatedOffset, d.TruncatedRecords)
	}
}

// isr returns the ISR of partition 0 of topic from Metadata.
func isr(t *testing.T, cl *kgo.Client, topic string) []int32 {
	t.Helper()
	p := partition0(t, cl, topic)
	return p.ISR
}

// leaderOf returns the leader of partition 0 of topic from Metadata (−1 none).
func leaderOf(t *testing.T, cl *kgo.Client, topic string) int32 {
	t.Helper()
	return partition0(t, cl, topic).Leader
}

func partition0(t *testing.T, cl *kgo.Client, topic string) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	for _, mt := range resp.Topics {
		for _, p := range mt.Partitions {
			if p.Partition == 0 {
				return p
			}
		}
	}
	p := kmsg.NewMetadataResponseTopicPartition()
	p.Leader = -1
	return p
}
