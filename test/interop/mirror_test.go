package interop

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// mirrorAdmin is a kgo client for kmirror that knows the mirror RPCs.
func mirrorAdmin(t *testing.T, addr string) *kgo.Client {
	return newClient(t, addr, kgo.MaxVersions(mirrorproto.ClientVersions()))
}

func describeMirror(t *testing.T, admin *kgo.Client, mirror string) map[string][]mirrorproto.DescribeClusterMirrorsResponsePartition {
	t.Helper()
	kr, err := admin.Request(ctxT(t), &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: []string{mirror}})
	if err != nil {
		t.Fatalf("DescribeClusterMirrors: %v", err)
	}
	out := map[string][]mirrorproto.DescribeClusterMirrorsResponsePartition{}
	for _, m := range kr.(*mirrorproto.DescribeClusterMirrorsResponse).Mirrors {
		for _, tp := range m.Topics {
			out[tp.TopicName] = tp.Partitions
		}
	}
	return out
}

// waitMirrored waits until every partition of topic is MIRRORING with its destination LEO
// at the source's log end offset (asked anew each try: a source leader elected a moment
// ago may answer a high watermark below the one its predecessor reached, until its
// followers fetched again).
func waitMirrored(t *testing.T, admin, src *kgo.Client, mirror, topic string) {
	t.Helper()
	var ends map[int32]int64
	var last []mirrorproto.DescribeClusterMirrorsResponsePartition
	eventually(t, func() string {
		var ps []string
		for _, p := range last {
			msg := ""
			if p.ErrorMessage != nil {
				msg = *p.ErrorMessage
			}
			ps = append(ps, fmt.Sprintf("%d: %s at %d (%q)", p.PartitionIndex, p.State, p.DestinationOffset, msg))
		}
		return fmt.Sprintf("%s: source ends %v, describe %v", topic, ends, ps)
	}, func() bool {
		ends = endOffsets(t, src, topic)
		last = describeMirror(t, admin, mirror)[topic]
		if len(last) != len(ends) {
			return false
		}
		for _, p := range last {
			if p.State != mirrorproto.StateMirroring || p.DestinationOffset != ends[p.PartitionIndex] {
				return false
			}
		}
		return true
	})
}

// compareLogs asserts that every partition of topic holds the same batches (bytes and
// offsets), log start offset, high watermark, last stable offset and aborted transactions
// on the Apache Kafka source and on kmirror, and that the topic IDs match (a source
// without topic IDs, Apache Kafka before 2.8: kmirror's topic has one of its own).
func compareLogs(t *testing.T, src, dst *kgo.Client, topic string) []partitionLog {
	t.Helper()
	var logs []partitionLog
	sm, dm := metadata(t, src, topic)[topic], metadata(t, dst, topic)[topic]
	idsOK := sm.ID == dm.ID || sm.ID == [16]byte{} && dm.ID != [16]byte{}
	if !idsOK || sm.Partitions != dm.Partitions {
		t.Fatalf("%s: source topic ID %x with %d partitions, kmirror %x with %d", topic, sm.ID, sm.Partitions, dm.ID, dm.Partitions)
	}
	for p := int32(0); p < sm.Partitions; p++ {
		s, d := fetchAll(t, src, topic, sm.ID, p), fetchAll(t, dst, topic, dm.ID, p)
		logs = append(logs, s)
		if s.LogStartOffset != d.LogStartOffset || s.HighWatermark != d.HighWatermark || s.LastStable != d.LastStable {
			t.Errorf("%s/%d: source log start/HW/LSO %d/%d/%d, kmirror %d/%d/%d", topic, p,
				s.LogStartOffset, s.HighWatermark, s.LastStable, d.LogStartOffset, d.HighWatermark, d.LastStable)
		}
		if fmt.Sprint(s.Aborted) != fmt.Sprint(d.Aborted) {
			t.Errorf("%s/%d: aborted transactions: source %+v, kmirror %+v", topic, p, s.Aborted, d.Aborted)
		}
		if len(s.Batches) != len(d.Batches) {
			t.Errorf("%s/%d: source has %d batches, kmirror %d", topic, p, len(s.Batches), len(d.Batches))
			continue
		}
		for i := range s.Batches {
			if !bytes.Equal(s.Batches[i], d.Batches[i]) {
				t.Errorf("%s/%d: batch %d differs: source base offset %d epoch %d len %d, kmirror base offset %d epoch %d len %d",
					topic, p, i, s.Batches[i].BaseOffset(), s.Batches[i].LeaderEpoch(), len(s.Batches[i]),
					d.Batches[i].BaseOffset(), d.Batches[i].LeaderEpoch(), len(d.Batches[i]))
				break
			}
		}
	}
	return logs
}

func values(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d-%s", prefix, i, strings.Repeat("payload ", 20))
	}
	return out
}

// recordCount counts the records in a partition's batches (after compaction, fewer than the
// offsets between the log start offset and the high watermark).
func recordCount(l partitionLog) (n int64) {
	for _, b := range l.Batches {
		n += int64(b.RecordCount())
	}
	return n
}

// TestMirrorFromApacheKafka mirrors topics of a real Apache Kafka broker into kmirror:
// idempotent, non-idempotent and transactional producers (committed and aborted
// transactions), each compression codec, records deleted with DeleteRecords and a topic
// compacted by Kafka's log cleaner; then asserts identical batches, offsets, topic IDs,
// log start offsets, high watermarks, last stable offsets and aborted transaction lists.
func TestMirrorFromApacheKafka(t *testing.T) {
	mirrorScenario(t, kafkaSource(t).Addr)
}

// mirrorScenario is TestMirrorFromApacheKafka against the Apache Kafka broker at srcAddr
// (also run against older releases by TestMirrorFromKafkaReleases).
func mirrorScenario(t *testing.T, srcAddr string) {
	scl := newClient(t, srcAddr, manualPartitions)
	var topics []string
	topic := func(name string, partitions int32, configs map[string]string) string {
		createTopic(t, scl, name, partitions, configs)
		topics = append(topics, name)
		return name
	}

	// Compacted first, so that Kafka's cleaner works while the rest is produced.
	compacted := topic("mk-compacted", 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "100",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100", "min.compaction.lag.ms": "0"})
	for round := 0; round < 3; round++ {
		var recs []*kgo.Record
		for k := 0; k < 5; k++ {
			recs = append(recs, &kgo.Record{Topic: compacted, Key: []byte(fmt.Sprintf("key-%d", k)), Value: []byte(fmt.Sprintf("round-%d", round))})
		}
		if err := scl.ProduceSync(ctxT(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // older than segment.ms: the next append rolls the segment
	}
	produce(t, scl, compacted, 0, "roll")

	plain := topic("mk-idempotent", 3, nil)
	for p := int32(0); p < 3; p++ {
		produce(t, scl, plain, p, values(fmt.Sprintf("p%d", p), 30)...)
	}
	nonIdem := topic("mk-non-idempotent", 1, nil)
	produce(t, newClient(t, srcAddr, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())), nonIdem, 0, values("n", 10)...)
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		name := topic("mk-"+c.name, 1, map[string]string{"compression.type": c.name})
		cl := newClient(t, srcAddr, kgo.ProducerBatchCompression(c.codec))
		produce(t, cl, name, 0, values(c.name, 40)...)
		produce(t, cl, name, 0, values(c.name+"-2", 15)...)
	}
	deleted := topic("mk-deleted", 1, nil)
	produce(t, scl, deleted, 0, values("d", 20)...)
	deleteRecords(t, scl, deleted, 0, 7)

	txn := topic("mk-transactions", 2, nil)
	tcl := newClient(t, srcAddr, manualPartitions, kgo.TransactionalID("interop-txn"))
	for i, commit := range []bool{true, false, true, false, true} {
		if err := tcl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			produce(t, tcl, txn, p, values(fmt.Sprintf("txn%d-p%d", i, p), 3+i)...)
		}
		if err := tcl.EndTransaction(ctxT(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
	}

	// Kafka's cleaner must have compacted the older segments before the mirror starts.
	cm := metadata(t, scl, compacted)[compacted]
	var recs, offs int64
	eventually(t, func() string { return fmt.Sprintf("%s: %d records in %d offsets", compacted, recs, offs) }, func() bool {
		l := fetchAll(t, scl, compacted, cm.ID, 0)
		recs, offs = recordCount(l), l.HighWatermark-l.LogStartOffset
		return recs < offs
	})

	dst := brokertest.Start(t, nil)
	admin := mirrorAdmin(t, dst.Addr())
	dst.MirrorFrom(ctxT(t), "from-kafka", srcAddr, topics...)
	// more records after the start: the mirror follows the source's tail
	produce(t, scl, plain, 1, values("tail", 25)...)
	if err := tcl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, tcl, txn, 0, values("tail-txn", 4)...)
	if err := tcl.EndTransaction(ctxT(t), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	dcl := dst.Client()
	logs := map[string][]partitionLog{}
	for _, name := range topics {
		waitMirrored(t, admin, scl, "from-kafka", name)
		logs[name] = compareLogs(t, scl, dcl, name)
	}
	// The scenarios happened on the source as intended (so identity above means something).
	if l := logs[compacted][0]; recordCount(l) >= l.HighWatermark-l.LogStartOffset {
		t.Errorf("%s was not compacted: %d records in offsets [%d, %d)", compacted, recordCount(l), l.LogStartOffset, l.HighWatermark)
	}
	if l := logs[deleted][0]; l.LogStartOffset != 7 || l.HighWatermark != 20 {
		t.Errorf("%s: log start %d HW %d, want 7 and 20", deleted, l.LogStartOffset, l.HighWatermark)
	}
	for p, l := range logs[txn] {
		var control, transactional int
		for _, b := range l.Batches {
			if b.IsControl() {
				control++
			} else if b.IsTransactional() {
				transactional++
			}
		}
		wantAborted := 2 // transactions 1 and 3; partition 0 also has the aborted tail transaction
		if p == 0 {
			wantAborted = 3
		}
		if len(l.Aborted) != wantAborted || control < 5 || transactional < 5 {
			t.Errorf("%s/%d: %d aborted transactions, %d control and %d transactional batches", txn, p, len(l.Aborted), control, transactional)
		}
	}
	for i, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		for _, b := range logs["mk-"+codec][0].Batches {
			if int(b.Compression()) != i+1 {
				t.Errorf("mk-%s: batch at %d has compression %d", codec, b.BaseOffset(), b.Compression())
			}
		}
	}
}

func stopMirrorTopics(t *testing.T, admin *kgo.Client, mirror string, topics ...string) {
	t.Helper()
	req := mirrorproto.NewStopMirrorTopicsRequest()
	req.MirrorName = mirror
	for _, n := range topics {
		req.Topics = append(req.Topics, mirrorproto.TopicName{TopicName: n})
	}
	kr, err := admin.Request(ctxT(t), req)
	if err != nil {
		t.Fatalf("StopMirrorTopics: %v", err)
	}
	resp := kr.(*mirrorproto.StopMirrorTopicsResponse)
	if err := mirrorproto.ErrorFor(resp.ErrorCode, resp.ErrorMessage); err != nil {
		t.Fatalf("StopMirrorTopics: %v", err)
	}
	for _, tr := range resp.Topics {
		if err := mirrorproto.ErrorFor(tr.ErrorCode, tr.ErrorMessage); err != nil {
			t.Fatalf("StopMirrorTopics %s: %v", tr.Name, err)
		}
	}
}

// waitStopped waits until every partition of topic in mirror is STOPPED (the failover
// sequence done).
func waitStopped(t *testing.T, admin *kgo.Client, mirror, topic string) {
	t.Helper()
	eventually(t, func() string { return fmt.Sprintf("%+v", describeMirror(t, admin, mirror)[topic]) }, func() bool {
		ps := describeMirror(t, admin, mirror)[topic]
		for _, p := range ps {
			if p.State != mirrorproto.StateStopped {
				return false
			}
		}
		return len(ps) > 0
	})
}

// TestMirrorGroupFailoverFromApacheKafka: a group consumes part of a topic on Apache Kafka
// with Kafka's console consumer; kmirror mirrors the topic and syncs the group's committed
// offsets; after failover (StopMirrorTopics) Kafka's console consumer with the same --group
// on kmirror reads exactly the records the group had not consumed, and Kafka's console
// producer can write to the now-writable topic.
func TestMirrorGroupFailoverFromApacheKafka(t *testing.T) {
	groupFailoverScenario(t, kafkaSource(t).Addr)
}

// groupFailoverScenario is TestMirrorGroupFailoverFromApacheKafka against the Apache
// Kafka broker at srcAddr (also run against older releases by
// TestMirrorFromKafkaReleases).
func groupFailoverScenario(t *testing.T, srcAddr string) {
	scl := newClient(t, srcAddr, manualPartitions)
	const topic, group = "mg-orders", "mg-app"
	createTopic(t, scl, topic, 2, nil)
	for p := int32(0); p < 2; p++ {
		produce(t, scl, topic, p, groupValues(p, 0, 20)...)
	}
	out := tool(t, "", consoleConsumer, "--bootstrap-server", srcAddr, "--topic", topic, "--group", group,
		"--from-beginning", "--max-messages", "40", "--timeout-ms", "60000")
	if n := len(strings.Fields(out)); n != 40 {
		t.Fatalf("source group read %d records, want 40:\n%s", n, out)
	}
	for p := int32(0); p < 2; p++ {
		produce(t, scl, topic, p, groupValues(p, 20, 30)...)
	}

	dst := brokertest.Start(t, nil)
	admin := mirrorAdmin(t, dst.Addr())
	dst.MirrorFrom(ctxT(t), "groups-from-kafka", srcAddr, topic)
	waitMirrored(t, admin, scl, "groups-from-kafka", topic)
	dcl := dst.Client()
	var got string
	eventually(t, func() string { return "group offsets on kmirror: " + got }, func() bool {
		offs, err := kadmClient(dcl).FetchOffsets(ctxT(t), group)
		if err != nil {
			got = err.Error()
			return false
		}
		o0, _ := offs.Lookup(topic, 0)
		o1, _ := offs.Lookup(topic, 1)
		got = fmt.Sprintf("%d %d", o0.At, o1.At)
		return o0.At == 20 && o1.At == 20
	})

	// Failover: the source goes away for this topic; the destination becomes writable.
	stopMirrorTopics(t, admin, "groups-from-kafka", topic)
	waitStopped(t, admin, "groups-from-kafka", topic)
	out = tool(t, "", consoleConsumer, "--bootstrap-server", dst.Addr(), "--topic", topic, "--group", group,
		"--max-messages", "20", "--timeout-ms", "60000")
	want := append(groupValues(0, 20, 30), groupValues(1, 20, 30)...)
	if g := sortedLines(out); g != sortedLines(strings.Join(want, "\n")) {
		t.Fatalf("group on kmirror after failover read:\n%s\nwant the 20 unconsumed records %v", g, want)
	}
	tool(t, "after-failover\n", consoleProducer, "--bootstrap-server", dst.Addr(), "--topic", topic)
	// Count data records (failover appends a control batch per partition, spec section 5).
	id, data := metadata(t, dcl, topic)[topic].ID, int64(0)
	for p := int32(0); p < 2; p++ {
		for _, b := range fetchAll(t, dcl, topic, id, p).Batches {
			if !b.IsControl() {
				data += int64(b.RecordCount())
			}
		}
	}
	if data != 61 {
		t.Fatalf("%d data records after a write to the failed-over topic, want 61", data)
	}
}

func groupValues(p int32, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("p%d-r%02d", p, i))
	}
	return out
}
