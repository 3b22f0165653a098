package interop

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/kafkaproc"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

var (
	kafkaClusterOnce sync.Once
	kafkaClusterRun  *kafkaproc.Cluster
	kafkaClusterErr  error
)

// kafkaCluster returns the suite's shared 3-node Apache Kafka cluster (KRaft, every node
// broker and controller, min.insync.replicas=2, internal topics with replication factor
// 3), starting it on first use; every node is running when it returns (a test that
// bounced nodes and failed may have left one down).
func kafkaCluster(t *testing.T) *kafkaproc.Cluster {
	t.Helper()
	needKafka(t)
	kafkaClusterOnce.Do(func() {
		kafkaClusterRun, kafkaClusterErr = kafkaproc.StartCluster(java, kafkaproc.ClusterConfig{
			Dir:     filepath.Join(workDir, "kafka-cluster"),
			Nodes:   3,
			JVM:     jvm("384m"),
			ToolJVM: jvm("256m"),
			Props: []string{
				"num.partitions=1",
				"default.replication.factor=3",
				"min.insync.replicas=2",
				"offsets.topic.num.partitions=4",
				"transaction.state.log.num.partitions=4",
			},
			ClusterID:    "kmirror-interop-cluster3",
			ReadyTimeout: 2 * time.Minute,
		})
	})
	if kafkaClusterErr != nil {
		t.Fatalf("start the 3-node Apache Kafka cluster: %v", kafkaClusterErr)
	}
	for _, n := range kafkaClusterRun.Nodes {
		if !n.Running() {
			if err := n.Start(); err != nil {
				t.Fatalf("restart Kafka node %d: %v", n.ID, err)
			}
		}
	}
	if err := kafkaClusterRun.WaitBrokers(0); err != nil {
		t.Fatal(err)
	}
	return kafkaClusterRun
}

// createReplicatedTopic creates topic with partitions partitions and replication factor
// 3 (min.insync.replicas 2 from the cluster) on the Kafka cluster, and waits until every
// partition has a leader and 3 in-sync replicas.
func createReplicatedTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctxT(t), partitions, 3, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	waitFullISR(t, cl, topic)
}

// partitionMeta is one partition of a Metadata response.
type partitionMeta struct {
	Leader, LeaderEpoch int32
	Replicas, ISR       []int32
}

// partitionsMeta returns the partitions of topic from a Metadata request through cl;
// partitions answering an error are left out.
func partitionsMeta(t *testing.T, cl *kgo.Client, topic string) map[int32]partitionMeta {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatalf("metadata %s: %v", topic, err)
	}
	out := map[int32]partitionMeta{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode == 0 && p.Leader >= 0 {
				out[p.Partition] = partitionMeta{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR}
			}
		}
	}
	return out
}

// waitFullISR waits until every partition of topic has a leader and every replica in
// its ISR (3).
func waitFullISR(t *testing.T, cl *kgo.Client, topic string) {
	t.Helper()
	var last map[int32]partitionMeta
	eventually(t, func() string { return fmt.Sprintf("%s: partitions %+v, want 3 in-sync replicas each", topic, last) }, func() bool {
		last = partitionsMeta(t, cl, topic)
		if len(last) == 0 {
			return false
		}
		for _, p := range last {
			if len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
}

// bounceLeader stops the Kafka node leading partition p of topic with SIGTERM (kill: with
// SIGKILL), waits until another node leads it at a higher leader epoch, starts the node
// again and waits until it is back in every ISR of topic. It returns the leader epoch the
// partition had after the move.
func bounceLeader(t *testing.T, kc *kafkaproc.Cluster, cl *kgo.Client, topic string, p int32, kill bool) int32 {
	t.Helper()
	before := partitionsMeta(t, cl, topic)[p]
	n := kc.Nodes[before.Leader-1]
	if kill {
		n.Kill()
	} else {
		n.Stop()
	}
	var now partitionMeta
	eventually(t, func() string { return fmt.Sprintf("%s-%d: leader %+v after node %d stopped", topic, p, now, n.ID) }, func() bool {
		now = partitionsMeta(t, cl, topic)[p]
		return now.Leader >= 0 && now.Leader != n.ID && now.LeaderEpoch > before.LeaderEpoch
	})
	if err := n.Start(); err != nil {
		t.Fatalf("restart Kafka node %d: %v", n.ID, err)
	}
	waitFullISR(t, cl, topic)
	return now.LeaderEpoch
}

// moveLeader moves the leadership of partition p of topic to another in-sync replica
// without a broker bounce, as an operator does: AlterPartitionReassignments puts that
// replica first (same replica set, new order), then ElectLeaders elects the preferred
// replica (kafka-leader-election --election-type PREFERRED). It waits until the new
// leader leads at a higher leader epoch and returns that epoch.
func moveLeader(t *testing.T, cl *kgo.Client, topic string, p int32) int32 {
	t.Helper()
	adm := kadmClient(cl)
	before := partitionsMeta(t, cl, topic)[p]
	to := int32(-1)
	for _, r := range before.ISR {
		if r != before.Leader {
			to = r
			break
		}
	}
	if to < 0 {
		t.Fatalf("%s-%d: no in-sync replica but the leader: %+v", topic, p, before)
	}
	order := []int32{to}
	for _, r := range before.Replicas {
		if r != to {
			order = append(order, r)
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, order)
	resp, err := adm.AlterPartitionAssignments(ctxT(t), req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("reorder the replicas of %s-%d to %v: %v", topic, p, order, err)
	}
	var now partitionMeta
	eventually(t, func() string { return fmt.Sprintf("%s-%d: %+v, want leader %d", topic, p, now, to) }, func() bool {
		rs, err := adm.ElectLeaders(ctxT(t), kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {p: {}}})
		if err != nil {
			return false
		}
		_ = rs // ELECTION_NOT_NEEDED once done; the metadata tells
		now = partitionsMeta(t, cl, topic)[p]
		return now.Leader == to && now.LeaderEpoch > before.LeaderEpoch
	})
	return now.LeaderEpoch
}

// TestMirrorSourceEpochRaisedWithoutRecordsFromKafkaCluster (issue 15, spec section 6:
// DLE ≥ SLE): a topic of a 3-node Apache Kafka cluster (RF 3, min ISR 2) holding 10
// records is mirrored into kmirror; its leader is bounced three times (SIGTERM, SIGKILL,
// SIGTERM) and then moved by reassignment and preferred election until the source leader
// epoch is above the destination's first one, with no record written: after each raise
// the destination's leader epoch is ≥ the source's within a metadata refresh. Then two
// groups commit on the source: Kafka's console consumer reading the 10 records, and a
// commit at offset 10 with the source's current leader epoch (which no batch carries, as
// an admin tool may write it); the mirror syncs both and fails over, and Kafka's console
// consumer in each group on kmirror reads exactly the 5 records written there after the
// failover — neither stalls validating the source's epoch (a Java consumer waits for
// metadata with a leader epoch at least its committed one).
func TestMirrorSourceEpochRaisedWithoutRecordsFromKafkaCluster(t *testing.T) {
	kc := kafkaCluster(t)
	scl := newClient(t, kc.Bootstrap())
	const topic, mirror = "sle-orders", "sle-from-kafka"
	groups := []string{"sle-console", "sle-latest-epoch"}
	createReplicatedTopic(t, scl, topic, 1, nil)
	produce(t, scl, topic, 0, groupValues(0, 0, 10)...)

	dst := brokertest.Start(t, nil)
	admin := mirrorAdmin(t, dst.Addr())
	dst.MirrorFrom(ctxT(t), mirror, kc.Bootstrap(), topic)
	waitMirrored(t, admin, scl, mirror, topic)
	dcl := dst.Client()
	first := partitionsMeta(t, dcl, topic)[0].LeaderEpoch

	var sle int32
	followed := func(what string) {
		t.Helper()
		var dle int32
		eventually(t, func() string { return fmt.Sprintf("%s: destination leader epoch %d, source %d", what, dle, sle) }, func() bool {
			dle = partitionsMeta(t, dcl, topic)[0].LeaderEpoch
			return dle >= sle
		})
		t.Logf("%s: source leader epoch %d, destination %d", what, sle, dle)
	}
	for i := 0; i < 3; i++ {
		sle = bounceLeader(t, kc, scl, topic, 0, i == 1)
		followed(fmt.Sprintf("bounce %d", i+1))
	}
	for sle <= first {
		sle = moveLeader(t, scl, topic, 0)
		followed("leader moved")
	}
	if ends := endOffsets(t, scl, topic); ends[0] != 10 {
		t.Fatalf("source log end %d after the raises, want 10", ends[0])
	}

	out := tool(t, "", consoleConsumer, "--bootstrap-server", kc.Bootstrap(), "--topic", topic, "--group", groups[0],
		"--from-beginning", "--max-messages", "10", "--timeout-ms", "60000")
	if n := len(strings.Fields(out)); n != 10 {
		t.Fatalf("the source group read %d records, want 10:\n%s", n, out)
	}
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 10, LeaderEpoch: sle})
	if resp, err := kadmClient(scl).CommitOffsets(ctxT(t), groups[1], commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit %s at the source leader epoch %d: %v %v", groups[1], sle, err, resp.Error())
	}
	for _, g := range groups {
		var got kadm.OffsetResponse
		eventually(t, func() string { return fmt.Sprintf("group %s offset on kmirror %+v, want 10", g, got) }, func() bool {
			offs, err := kadmClient(dcl).FetchOffsets(ctxT(t), g)
			if err != nil {
				return false
			}
			got, _ = offs.Lookup(topic, 0)
			return got.At == 10
		})
		t.Logf("group %s: offset 10 at leader epoch %d on kmirror", g, got.LeaderEpoch)
	}

	stopMirrorTopics(t, admin, mirror, topic)
	waitStopped(t, admin, mirror, topic)
	produce(t, dcl, topic, 0, groupValues(0, 10, 15)...)
	want := sortedLines(strings.Join(groupValues(0, 10, 15), "\n"))
	for _, g := range groups {
		out := tool(t, "", consoleConsumer, "--bootstrap-server", dst.Addr(), "--topic", topic, "--group", g,
			"--max-messages", "5", "--timeout-ms", "60000")
		if got := sortedLines(out); got != want {
			t.Fatalf("group %s on kmirror after failover read:\n%s\nwant the 5 records written after it:\n%s", g, got, want)
		}
	}
}

// watchStates polls the mirror's partition states of topic through admin until stop is
// closed and returns every state other than MIRRORING it saw, with the partition, in the
// order seen (each change once).
func watchStates(t *testing.T, admin *kgo.Client, mirror, topic string, stop <-chan struct{}) <-chan []string {
	out := make(chan []string, 1)
	go func() {
		var seen []string
		last := map[int32]mirrorproto.State{}
		for {
			select {
			case <-stop:
				out <- seen
				return
			case <-time.After(100 * time.Millisecond):
			}
			kr, err := admin.Request(context.Background(), &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: []string{mirror}})
			if err != nil {
				continue
			}
			for _, m := range kr.(*mirrorproto.DescribeClusterMirrorsResponse).Mirrors {
				for _, tp := range m.Topics {
					if tp.TopicName != topic {
						continue
					}
					for _, p := range tp.Partitions {
						if p.State != last[p.PartitionIndex] && p.State != mirrorproto.StateMirroring {
							msg := ""
							if p.ErrorMessage != nil {
								msg = *p.ErrorMessage
							}
							seen = append(seen, fmt.Sprintf("%s-%d %s %s", topic, p.PartitionIndex, p.State, msg))
						}
						last[p.PartitionIndex] = p.State
					}
				}
			}
		}
	}()
	return out
}

// TestMirrorFollowsSourceLeaderChanges (issue 15: sources with several brokers): a
// 3-partition topic of a 3-node Apache Kafka cluster is mirrored into kmirror while a
// producer writes to it and its leaders move — by reassignment and preferred election,
// by kafka-leader-election, and by bounces of a leader (SIGTERM, SIGKILL). The mirror's
// fetchers follow every move (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, a metadata
// refresh): no partition ever leaves MIRRORING for FAILED, and afterwards every partition
// holds the source's batches.
func TestMirrorFollowsSourceLeaderChanges(t *testing.T) {
	kc := kafkaCluster(t)
	const topic, mirror, partitions = "moves-orders", "moves-from-kafka", int32(3)
	scl := newClient(t, kc.Bootstrap(), manualPartitions)
	createReplicatedTopic(t, scl, topic, partitions, nil)
	dst := brokertest.Start(t, nil)
	admin := mirrorAdmin(t, dst.Addr())
	dst.MirrorFrom(ctxT(t), mirror, kc.Bootstrap(), topic)
	waitMirrored(t, admin, scl, mirror, topic)

	stop := make(chan struct{})
	states := watchStates(t, admin, mirror, topic, stop)
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var n atomic.Int64
	loadDone := make(chan error, 1)
	go func() { loadDone <- idempotentLoad(ctx, kc.Bootstrap(), topic, partitions, 1<<40, &n) }()

	for round := 0; round < 2; round++ {
		for p := range partitions {
			moveLeader(t, scl, topic, p)
		}
	}
	tool(t, "", leaderElectionTool, "--bootstrap-server", kc.Bootstrap(), "--election-type", "PREFERRED", "--all-topic-partitions")
	bounceLeader(t, kc, scl, topic, 0, false)
	bounceLeader(t, kc, scl, topic, 1, true)
	tool(t, "", leaderElectionTool, "--bootstrap-server", kc.Bootstrap(), "--election-type", "PREFERRED", "--all-topic-partitions")
	stopLoad()
	if err := <-loadDone; err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Logf("%d records produced while the leaders moved", n.Load())
	waitFullISR(t, scl, topic)
	waitMirrored(t, admin, scl, mirror, topic)
	close(stop)
	for _, s := range <-states {
		if strings.Contains(s, mirrorproto.StateFailed.String()) {
			t.Errorf("a partition failed while the source leaders moved: %s", s)
		} else {
			t.Logf("state seen: %s", s)
		}
	}
	waitSameStableEnds(t, scl, dst.Client(), topic)
	compareLogs(t, scl, dst.Client(), topic)
}

// waitSameStableEnds waits until the source's and the destination's end offsets (high
// watermarks) of topic are equal and stay so for a second: after a leader change a new
// source leader may answer a high watermark below its predecessor's until its followers
// fetched again, and Kafka's automatic preferred-leader election can move a leader once
// more after the load stopped.
func waitSameStableEnds(t *testing.T, src, dst *kgo.Client, topic string) {
	t.Helper()
	var a, b map[int32]int64
	eventually(t, func() string { return fmt.Sprintf("%s: source ends %v, destination ends %v", topic, a, b) }, func() bool {
		a, b = endOffsets(t, src, topic), endOffsets(t, dst, topic)
		if !maps.Equal(a, b) {
			return false
		}
		time.Sleep(time.Second)
		return maps.Equal(endOffsets(t, src, topic), a) && maps.Equal(endOffsets(t, dst, topic), b)
	})
}
