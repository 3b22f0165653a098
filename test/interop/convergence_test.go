package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/clustertest"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// rf3Spec is a 3-node kmirror cluster (combined nodes) with replication factor 3 for
// every topic and internal topic, min.insync.replicas 2 and a short
// replica.lag.time.max.ms, so that a dead follower leaves the ISR within seconds; extra
// entries are added.
func rf3Spec(extra map[string]string) clustertest.Spec {
	props := map[string]string{
		"default.replication.factor":               "3",
		"min.insync.replicas":                      "2",
		"offsets.topic.replication.factor":         "3",
		"transaction.state.log.replication.factor": "3",
		"transaction.state.log.min.isr":            "2",
		"mirror.state.topic.replication.factor":    "3",
		"replica.lag.time.max.ms":                  "3000",
	}
	for k, v := range extra {
		props[k] = v
	}
	return clustertest.Spec{Combined: 3, Props: props}
}

// convSegmentBytes is segment.bytes on both clusters: Kafka's minimum (1 MiB), so that
// a partition of a few MiB rolls a few segments.
const convSegmentBytes = "1048576"

// convPayload pads every record of the load to about 1.5 KiB; the load sends it
// uncompressed, so that a few MiB per partition roll a few segments.
var convPayload = strings.Repeat("x", 1500)

// idempotentLoad produces 1.5 KiB records round-robin to the partitions of topic with an
// idempotent producer (acks=all) until ctx is done or max records were acknowledged,
// counting them in n. Errors are retried by the client; a produce that fails anyway
// (a long broker outage) is dropped, the load goes on.
func idempotentLoad(ctx context.Context, bootstrap, topic string, partitions int32, max int64, n *atomic.Int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), manualPartitions,
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(30*time.Second), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := int64(0); ctx.Err() == nil && n.Load() < max; i++ {
		var rs []*kgo.Record
		for p := range partitions {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "i%d", i), Value: []byte(convPayload)})
		}
		pctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		if cl.ProduceSync(pctx, rs...).FirstErr() == nil {
			n.Add(int64(len(rs)))
		}
		cancel()
		time.Sleep(5 * time.Millisecond) // a steady load, not a flood, on 2 cores
	}
	return nil
}

// txnLoad runs transactions of one record per partition of topic, every third one
// aborted, until ctx is done, counting committed and aborted transactions. A transaction
// that fails (a coordinator or leader moving) is aborted; a producer that cannot abort
// is replaced (the new one fences it).
func txnLoad(ctx context.Context, bootstrap, topic string, partitions int32, committed, aborted *atomic.Int64) error {
	newCl := func() (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), manualPartitions,
			kgo.TransactionalID("conv-txn"), kgo.TransactionTimeout(10*time.Second), kgo.RecordDeliveryTimeout(30*time.Second),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	cl, err := newCl()
	if err != nil {
		return err
	}
	defer func() { cl.Close() }()
	for i := 0; ctx.Err() == nil; i++ {
		tctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		err := cl.BeginTransaction()
		if err == nil {
			var rs []*kgo.Record
			for p := range partitions {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "t%d", i), Value: []byte(convPayload)})
			}
			err = cl.ProduceSync(tctx, rs...).FirstErr()
		}
		commit := err == nil && i%3 != 2
		if err == nil {
			err = cl.EndTransaction(tctx, kgo.TransactionEndTry(commit))
			switch {
			case err == nil && commit:
				committed.Add(1)
			case err == nil:
				aborted.Add(1)
			}
		}
		if err != nil {
			if cl.AbortBufferedRecords(tctx) != nil || cl.EndTransaction(tctx, kgo.TryAbort) != nil {
				cl.Close()
				if cl, err = newCl(); err != nil {
					cancel()
					return err
				}
			}
		}
		cancel()
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// consumeAll reads every partition of topic from the start with isolation level iso
// until it read the record keyed "end" on each, and returns per partition the offset and
// key of every record read.
func consumeAll(t *testing.T, bootstrap, topic string, partitions int32, iso kgo.IsolationLevel) map[int32][]string {
	t.Helper()
	offs := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range partitions {
		offs[topic][p] = kgo.NewOffset().AtStart()
	}
	cl := newClient(t, bootstrap, kgo.ConsumePartitions(offs), kgo.FetchIsolationLevel(iso))
	out := map[int32][]string{}
	done := map[int32]bool{}
	ctx := ctxT(t)
	for len(done) < int(partitions) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: read the end record on %d of %d partitions", bootstrap, len(done), partitions)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("consume %s-%d from %s: %v", topic, p, bootstrap, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], fmt.Sprintf("%d:%s", r.Offset, r.Key))
			if string(r.Key) == "end" {
				done[r.Partition] = true
			}
		})
	}
	return out
}

// replicaDir is one replica's directory of a partition, named for messages.
type replicaDir struct{ who, dir string }

// partitionReplicas lists the directories of partition p of topic on every node of the
// Kafka cluster and of the kmirror cluster.
func partitionReplicas(kc []string, dst *clustertest.Cluster, topic string, p int32) []replicaDir {
	var out []replicaDir
	name := fmt.Sprintf("%s-%d", topic, p)
	for i, d := range kc {
		out = append(out, replicaDir{fmt.Sprintf("kafka node %d", i+1), filepath.Join(d, name)})
	}
	for _, n := range dst.Nodes {
		out = append(out, replicaDir{fmt.Sprintf("kmirror node %d", n.ID), filepath.Join(n.Props["log.dirs"], name)})
	}
	return out
}

// sameBytes reports whether every replica's concatenated segments are equal, with a
// description of them.
func sameBytes(rs []replicaDir) (bool, string) {
	var first string
	var where []string
	same := true
	for _, r := range rs {
		s, ok := clustertest.ReadSegments(r.dir)
		if !ok {
			return false, r.who + ": no readable partition directory"
		}
		where = append(where, fmt.Sprintf("%s: %s… %d bytes, segments %v", r.who, s.All[:12], s.Size, s.Bases))
		if first == "" {
			first = s.All
		} else if s.All != first {
			same = false
		}
	}
	return same, strings.Join(where, "; ")
}

// TestMirrorLogConvergenceFromKafkaCluster is the KIP-1279 prototype's log-convergence
// test (issue 15): a 3-partition topic of a 3-node Apache Kafka cluster (RF 3, min ISR 2)
// is mirrored into a 3-node kmirror cluster (RF 3, min ISR 2) under load — an idempotent
// producer and a transactional one aborting every third transaction — while source and
// destination nodes are bounced in turn (Kafka SIGTERM, kmirror SIGKILL, Kafka SIGKILL,
// kmirror SIGTERM). Once the load stopped, an end record is written and the mirror
// caught up (lag 0, equal LEOs), every replica of every partition on both clusters holds
// the same bytes: the set of segment base offsets and the MD5 of every segment when all
// replicas rolled at the same offsets, the concatenated segments otherwise (both sides
// roll at segment.bytes by the size of each append, and a Kafka follower appends a
// fetched chunk of several batches at once, so the boundaries may legitimately differ:
// the test logs which case it met). And a read_committed and a read_uncommitted consumer
// read the same records at the same offsets from both clusters.
func TestMirrorLogConvergenceFromKafkaCluster(t *testing.T) {
	kc := kafkaCluster(t)
	const topic, mirror, partitions = "conv-orders", "conv-from-kafka", int32(3)
	scl := newClient(t, kc.Bootstrap(), manualPartitions)
	createReplicatedTopic(t, scl, topic, partitions, map[string]string{"segment.bytes": convSegmentBytes})

	dst := clustertest.Start(t, rf3Spec(map[string]string{"log.segment.bytes": convSegmentBytes}))
	admin := newClient(t, dst.Bootstrap(), kgo.MaxVersions(mirrorproto.ClientVersions()))
	brokertest.StartMirror(ctxT(t), t, admin, mirror, kc.Bootstrap(), topic)
	waitMirrored(t, admin, scl, mirror, topic)
	dcl := newClient(t, dst.Bootstrap())

	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var idem, committed, aborted atomic.Int64
	var wg sync.WaitGroup
	loadErrs := make([]error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		loadErrs[0] = idempotentLoad(ctx, kc.Bootstrap(), topic, partitions, 9000, &idem)
	}()
	go func() {
		defer wg.Done()
		loadErrs[1] = txnLoad(ctx, kc.Bootstrap(), topic, partitions, &committed, &aborted)
	}()

	bounce := func(what string, stop, start func()) {
		t.Helper()
		time.Sleep(3 * time.Second) // some load first
		t.Logf("%s (idempotent records %d, transactions committed %d, aborted %d)", what, idem.Load(), committed.Load(), aborted.Load())
		stop()
		time.Sleep(3 * time.Second) // some load with the node down
		start()
		waitFullISR(t, scl, topic)
		waitFullISR(t, dcl, topic)
	}
	startKafka := func(i int) func() {
		return func() {
			if err := kc.Nodes[i].Start(); err != nil {
				t.Fatalf("restart Kafka node %d: %v", i+1, err)
			}
		}
	}
	bounce("SIGTERM Kafka node 1", kc.Nodes[0].Stop, startKafka(0))
	bounce("SIGKILL kmirror node 2", dst.Nodes[1].Kill, dst.Nodes[1].Start)
	bounce("SIGKILL Kafka node 2", kc.Nodes[1].Kill, startKafka(1))
	bounce("SIGTERM kmirror node 3", func() {
		if _, err := dst.Nodes[2].Term(60 * time.Second); err != nil {
			t.Logf("kmirror node 3 exit: %v", err)
		}
	}, dst.Nodes[2].Start)
	bounce("SIGKILL Kafka node 3", kc.Nodes[2].Kill, startKafka(2))
	stopLoad()
	wg.Wait()
	for _, err := range loadErrs {
		if err != nil {
			t.Fatalf("load: %v", err)
		}
	}
	t.Logf("load done: idempotent records %d, transactions committed %d, aborted %d", idem.Load(), committed.Load(), aborted.Load())
	if idem.Load() == 0 || committed.Load() == 0 || aborted.Load() == 0 {
		t.Fatalf("the load wrote too little to test anything")
	}
	// the end record, keyed "end", tells the consumers below where to stop
	for p := range partitions {
		if err := scl.ProduceSync(ctxT(t), &kgo.Record{Topic: topic, Partition: p, Key: []byte("end")}).FirstErr(); err != nil {
			t.Fatalf("end record: %v", err)
		}
	}
	waitMirrored(t, admin, scl, mirror, topic)

	var kafkaDirs []string
	for _, n := range kc.Nodes {
		kafkaDirs = append(kafkaDirs, n.LogDir)
	}
	for p := range partitions {
		rs := partitionReplicas(kafkaDirs, dst, topic, p)
		var desc string
		eventually(t, func() string { return fmt.Sprintf("%s-%d replicas differ: %s", topic, p, desc) }, func() bool {
			var same bool
			same, desc = sameBytes(rs)
			return same
		})
		var first clustertest.Segments
		sameBounds := true
		for i, r := range rs {
			s, _ := clustertest.ReadSegments(r.dir)
			if i == 0 {
				first = s
			} else if !slices.Equal(s.Bases, first.Bases) {
				sameBounds = false
			}
		}
		if len(first.Bases) < 2 {
			t.Errorf("%s-%d: %d segments; the load should roll a few", topic, p, len(first.Bases))
		}
		if !sameBounds {
			t.Logf("%s-%d: segment boundaries differ between replicas, their concatenations are equal: %s", topic, p, desc)
			continue
		}
		for _, r := range rs {
			s, _ := clustertest.ReadSegments(r.dir)
			if !slices.Equal(s.MD5, first.MD5) {
				t.Errorf("%s-%d: %s segment MD5s %v, %s %v", topic, p, r.who, s.MD5, rs[0].who, first.MD5)
			}
		}
		t.Logf("%s-%d: every replica holds segments %v with equal MD5s", topic, p, first.Bases)
	}

	for name, iso := range map[string]kgo.IsolationLevel{"read_committed": kgo.ReadCommitted(), "read_uncommitted": kgo.ReadUncommitted()} {
		src := consumeAll(t, kc.Bootstrap(), topic, partitions, iso)
		got := consumeAll(t, dst.Bootstrap(), topic, partitions, iso)
		for p := range partitions {
			if !slices.Equal(src[p], got[p]) {
				t.Errorf("%s consumer, %s-%d: %d records on Kafka, %d on kmirror, or different ones", name, topic, p, len(src[p]), len(got[p]))
			}
		}
		t.Logf("%s consumer: the same records on both clusters", name)
	}
}
