package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clustertest"
	"github.com/kmirror/kmirror/internal/record"
)

// mirrorsCLI runs `kmirror mirrors --bootstrap-server addr args…` (the binary the cluster
// runs) and returns its standard output, or an error carrying its standard error.
func mirrorsCLI(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, clustertest.Bin(t), append([]string{"mirrors", "--bootstrap-server", addr}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kmirror mirrors --bootstrap-server %s %s: %v: %s", addr, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// mustMirrorsCLI is mirrorsCLI failing the test on a non-zero exit; it checks that the
// output holds want.
func mustMirrorsCLI(t *testing.T, want, addr string, args ...string) {
	t.Helper()
	out, err := mirrorsCLI(t, addr, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, want) {
		t.Fatalf("kmirror mirrors %s through %s printed %q, want a line %q", strings.Join(args, " "), addr, out, want)
	}
}

// mirrorRow is one object of `kmirror mirrors --describe --json` (docs/operations.md).
type mirrorRow struct {
	Mirror            string  `json:"mirror"`
	Topic             string  `json:"topic"`
	Partition         int32   `json:"partition"`
	SourceOffset      *int64  `json:"source_offset"`
	DestinationOffset *int64  `json:"destination_offset"`
	Lag               *int64  `json:"lag"`
	State             string  `json:"state"`
	Error             *string `json:"error"`
	LastMirrorEpoch   *int32  `json:"last_mirror_epoch"`
	LastMirrorOffset  *int64  `json:"last_mirror_offset"`
	TruncatedTo       *int64  `json:"truncated_to"`
	TruncatedRecords  int64   `json:"truncated_records"`
}

func (r mirrorRow) String() string {
	v := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	s := fmt.Sprintf("%s-%d %s src %s dst %s lag %s", r.Topic, r.Partition, r.State, v(r.SourceOffset), v(r.DestinationOffset), v(r.Lag))
	if r.Error != nil {
		s += " error " + *r.Error
	}
	return s
}

// describeMirror is `kmirror mirrors --describe --mirror NAME --json` through addr, by
// partition of topic.
func describeMirror(t *testing.T, addr, mirror, topic string) (map[int32]mirrorRow, error) {
	t.Helper()
	out, err := mirrorsCLI(t, addr, "--describe", "--mirror", mirror, "--json")
	if err != nil {
		return nil, err
	}
	var rows []mirrorRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return nil, fmt.Errorf("--describe --json printed %q: %v", out, err)
	}
	m := map[int32]mirrorRow{}
	for _, r := range rows {
		if r.Mirror == mirror && r.Topic == topic {
			m[r.Partition] = r
		}
	}
	return m, nil
}

// waitMirroring waits until describe through addr shows every partition of topic
// MIRRORING with lag 0 and its destination offset at the source's end offset (what
// sourceEnds answers, asked anew each try), and returns the rows.
func waitMirroring(t *testing.T, addr, mirror, topic string, partitions int32, sourceEnds func() (map[int32]int64, error)) map[int32]mirrorRow {
	t.Helper()
	var rows map[int32]mirrorRow
	clustertest.Eventually(t, 90*time.Second, func() (bool, string) {
		ends, err := sourceEnds()
		if err != nil {
			return false, fmt.Sprintf("source end offsets: %v", err)
		}
		if rows, err = describeMirror(t, addr, mirror, topic); err != nil {
			return false, err.Error()
		}
		for p := range partitions {
			r, ok := rows[p]
			switch {
			case !ok:
				return false, fmt.Sprintf("describe of %s through %s lists no %s-%d", mirror, addr, topic, p)
			case r.State != "MIRRORING" || r.Lag == nil || *r.Lag != 0 || r.DestinationOffset == nil || *r.DestinationOffset != ends[p]:
				return false, fmt.Sprintf("describe of %s through %s: %v; the source's end offset is %d", mirror, addr, r, ends[p])
			}
		}
		return true, ""
	})
	return rows
}

// startClusters formats and starts clusters of the given shapes side by side, each with
// its own cluster ID, and waits until every broker of each lists its brokers.
func startClusters(t *testing.T, specs ...clustertest.Spec) (*clustertest.Cluster, *clustertest.Cluster) {
	t.Helper()
	var cs []*clustertest.Cluster
	for _, s := range specs {
		cs = append(cs, clustertest.New(t, s))
	}
	for _, c := range cs {
		for _, n := range c.Nodes {
			n.Spawn()
		}
	}
	for _, c := range cs {
		for _, n := range c.Nodes {
			n.WaitServing()
		}
		c.WaitBrokers(len(c.Brokers()))
	}
	return cs[0], cs[1]
}

// rawBatch is one record batch as a Fetch answered it: its offsets and epoch, its CRC,
// whether it is a control batch, its record count and its bytes.
type rawBatch struct {
	base, last int64
	epoch      int32
	crc        uint32
	control    bool
	records    int
	raw        []byte
}

// dataRecords counts the records of the batches that are not control batches: what a
// read_uncommitted consumer reads.
func dataRecords(all map[int32][]rawBatch) int {
	n := 0
	for _, bs := range all {
		for _, b := range bs {
			if !b.control {
				n += b.records
			}
		}
	}
	return n
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// splitRaw frames the record batches of a Fetch answer without the product's code (a
// partial last batch is cut off) and checks each one's magic and CRC-32C.
func splitRaw(data []byte) ([]rawBatch, error) {
	var out []rawBatch
	for len(data) >= 12 {
		size := 12 + int(int32(binary.BigEndian.Uint32(data[8:12])))
		if size < 61 {
			return nil, fmt.Errorf("batch of %d bytes", size)
		}
		if size > len(data) {
			break
		}
		b := data[:size]
		data = data[size:]
		if b[16] != 2 {
			return nil, fmt.Errorf("batch at %d has magic %d", binary.BigEndian.Uint64(b), b[16])
		}
		crc := binary.BigEndian.Uint32(b[17:21])
		if got := crc32.Checksum(b[21:], castagnoli); got != crc {
			return nil, fmt.Errorf("batch at %d: CRC %08x, its bytes have %08x", binary.BigEndian.Uint64(b), crc, got)
		}
		base := int64(binary.BigEndian.Uint64(b))
		out = append(out, rawBatch{base: base, last: base + int64(int32(binary.BigEndian.Uint32(b[23:27]))),
			epoch: int32(binary.BigEndian.Uint32(b[12:16])), crc: crc, control: binary.BigEndian.Uint16(b[21:23])&0x20 != 0,
			records: int(int32(binary.BigEndian.Uint32(b[57:61]))), raw: slices.Clone(b)})
	}
	return out, nil
}

// partitionBatches fetches every batch of topic-partition (READ_UNCOMMITTED, replica ID
// −1, from offset 0 to the high watermark) from its leader, as a consumer would, with
// raw Fetch requests to the leader only; it returns the batches and the high watermark.
func partitionBatches(c *clustertest.Cluster, topic string, id [16]byte, partition int32) ([]rawBatch, int64, error) {
	var leader int32 = -1
	for _, n := range c.Brokers() {
		if n.Running() {
			ls, err := clustertest.Leaders(n.Addr, topic)
			if err != nil {
				return nil, 0, err
			}
			leader = ls[partition]
			break
		}
	}
	if leader < 1 || !c.Node(leader).Running() {
		return nil, 0, fmt.Errorf("%s-%d is led by %d", topic, partition, leader)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(leader).Addr), kgo.RequestRetries(0))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	var out []rawBatch
	var offset int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis, req.MinBytes = 100, 1
		req.MaxBytes = 4 << 20
		req.SessionEpoch = -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, id
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = partition, offset, 1<<20
		fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = -1, -1, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
		cancel()
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("Fetch %s-%d at %d from node %d: %w", topic, partition, offset, leader, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, 0, fmt.Errorf("Fetch %s-%d from node %d: %d topics answered", topic, partition, leader, len(resp.Topics))
		}
		rp := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
			return nil, 0, fmt.Errorf("Fetch %s-%d at %d from node %d: %w", topic, partition, offset, leader, err)
		}
		if rp.LogStartOffset != 0 {
			return nil, 0, fmt.Errorf("%s-%d on node %d starts at %d, not 0", topic, partition, leader, rp.LogStartOffset)
		}
		if offset >= rp.HighWatermark {
			return out, rp.HighWatermark, nil
		}
		bs, err := splitRaw(rp.RecordBatches)
		if err != nil {
			return nil, 0, fmt.Errorf("Fetch %s-%d at %d from node %d: %w", topic, partition, offset, leader, err)
		}
		if len(bs) == 0 {
			return nil, 0, fmt.Errorf("Fetch %s-%d at %d from node %d: no whole batch below the high watermark %d", topic, partition, offset, leader, rp.HighWatermark)
		}
		for _, b := range bs {
			if b.last < offset {
				continue // a batch before the fetch offset, as Kafka may return
			}
			if b.base != offset {
				return nil, 0, fmt.Errorf("%s-%d on node %d: a batch at %d after offset %d (a gap)", topic, partition, leader, b.base, offset)
			}
			out = append(out, b)
			offset = b.last + 1
		}
	}
}

// topicID is the topic ID of topic as the broker at addr's Metadata answers it.
func topicID(addr, topic string) ([16]byte, error) {
	m, err := clustertest.Metadata(addr, topic)
	if err != nil {
		return [16]byte{}, err
	}
	if len(m.Topics) != 1 {
		return [16]byte{}, fmt.Errorf("metadata of %s: %d topics", topic, len(m.Topics))
	}
	if err := kerr.ErrorForCode(m.Topics[0].ErrorCode); err != nil {
		return [16]byte{}, err
	}
	return m.Topics[0].TopicID, nil
}

// sameBatches compares topic on two clusters partition by partition: the same batches
// (base offset, last offset, epoch, CRC and every byte) at the same offsets, up to the
// same high watermark. It returns "" when they are identical, else the first difference.
func sameBatches(an string, a *clustertest.Cluster, bn string, b *clustertest.Cluster, topic string, id [16]byte, partitions int32) (string, map[int32][]rawBatch) {
	all := map[int32][]rawBatch{}
	for p := range partitions {
		ab, ahw, err := partitionBatches(a, topic, id, p)
		if err != nil {
			return an + ": " + err.Error(), nil
		}
		bb, bhw, err := partitionBatches(b, topic, id, p)
		if err != nil {
			return bn + ": " + err.Error(), nil
		}
		if ahw != bhw || len(ab) != len(bb) {
			return fmt.Sprintf("%s-%d: high watermark %d (%d batches) on %s, %d (%d batches) on %s", topic, p, ahw, len(ab), an, bhw, len(bb), bn), nil
		}
		for i := range ab {
			x, y := ab[i], bb[i]
			if x.base != y.base || x.last != y.last || x.epoch != y.epoch || x.crc != y.crc || !bytes.Equal(x.raw, y.raw) {
				return fmt.Sprintf("%s-%d batch %d: offsets %d–%d epoch %d CRC %08x (%d bytes) on %s, %d–%d epoch %d CRC %08x (%d bytes) on %s",
					topic, p, i, x.base, x.last, x.epoch, x.crc, len(x.raw), an, y.base, y.last, y.epoch, y.crc, len(y.raw), bn), nil
			}
		}
		all[p] = ab
	}
	return "", all
}

// waitSameBatches waits until topic's batches are byte-identical on a and b (each
// cluster's answers may still move while mirroring settles), and returns them.
func waitSameBatches(t *testing.T, what, an string, a *clustertest.Cluster, bn string, b *clustertest.Cluster, topic string, id [16]byte, partitions int32) map[int32][]rawBatch {
	t.Helper()
	var all map[int32][]rawBatch
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		var diff string
		diff, all = sameBatches(an, a, bn, b, topic, id, partitions)
		return diff == "", what + ": " + diff
	})
	return all
}

// rawProduce sends one batch of one record to topic-partition, to the broker at addr
// itself (no retries), and returns the partition's error code and message.
func rawProduce(addr, topic string, partition int32) (int16, string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return 0, "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	batch := record.Build(record.BatchHeader{Timestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.KV{{Key: []byte("refused"), Value: []byte("refused")}})
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return 0, "", err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, "", errors.New("Produce: no partition in the answer")
	}
	p := resp.Topics[0].Partitions[0]
	msg := ""
	if p.ErrorMessage != nil {
		msg = *p.ErrorMessage
	}
	return p.ErrorCode, msg, nil
}

// checkReadOnly checks that every partition of topic on c refuses a produce sent to its
// leader with POLICY_VIOLATION and a message starting READ_ONLY_TOPIC that names the
// mirror and the state (spec section 10), and that a franz-go producer gets
// POLICY_VIOLATION, non-retriable, through each node.
func checkReadOnly(t *testing.T, c *clustertest.Cluster, topic, mirror string, partitions int32) {
	t.Helper()
	leaders := c.WaitLeaders(topic)
	want := fmt.Sprintf("READ_ONLY_TOPIC: %s is a mirror topic of %s (MIRRORING); stop mirroring to write to it", topic, mirror)
	for p := range partitions {
		addr := c.Node(leaders[p]).Addr
		code, msg, err := rawProduce(addr, topic, p)
		if err != nil {
			t.Fatalf("produce to %s-%d at its leader, node %d: %v", topic, p, leaders[p], err)
		}
		if code != kerr.PolicyViolation.Code || msg != want {
			t.Fatalf("produce to mirror partition %s-%d at its leader, node %d: error %d %q; want POLICY_VIOLATION (%d) %q",
				topic, p, leaders[p], code, msg, kerr.PolicyViolation.Code, want)
		}
	}
	for _, n := range c.Brokers() {
		cl := c.Client([]string{n.Addr}, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(3))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: n.ID % partitions, Value: []byte("refused")}).FirstErr()
		cancel()
		cl.Close()
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Fatalf("franz-go produce to mirror topic %s bootstrapped from node %d: %v, want POLICY_VIOLATION", topic, n.ID, err)
		}
	}
}

// groupOffsets is OffsetFetch of group through addr: offset, leader epoch and metadata
// per partition of topic.
func groupOffsets(addr, group, topic string) (map[int32]kadm.Offset, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]kadm.Offset{}
	for p, o := range fetched[topic] {
		out[p] = o.Offset
	}
	return out, nil
}

func sameGroupOffsets(a, b map[int32]kadm.Offset) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		q, ok := b[p]
		if !ok || o.At != q.At || o.LeaderEpoch != q.LeaderEpoch || o.Metadata != q.Metadata {
			return false
		}
	}
	return true
}

// commitGroup has a member of group, bootstrapped from seed, read every committed record
// of topic (read_committed) and commit its position, then leave the group (Empty).
func commitGroup(t *testing.T, c *clustertest.Cluster, seed, group, topic string) {
	t.Helper()
	ends, err := endOffsets(seed, topic)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client([]string{seed}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pos := map[int32]int64{}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s read up to %v within 60 s, want the end offsets %v", group, pos, ends)
		}
		fs.EachRecord(func(r *kgo.Record) { pos[r.Partition] = r.Offset + 1 })
		// A partition's last record is followed by a marker at most.
		done := len(pos) == len(ends)
		for p, e := range ends {
			done = done && pos[p] == e
		}
		if done {
			break
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit of group %s: %v", group, err)
	}
	cl.Close()
}

// liveEndOffsets is ListOffsets (latest) of topic through addr for the partitions that
// answer (those of a node that is down do not).
func liveEndOffsets(addr, topic string) (map[int32]int64, error) {
	return listEndOffsets(addr, topic, true)
}

// TestMirrorIntoFailoverFailbackThreeNodes: `kmirror mirrors` (the real CLI binary, run
// against a different node for each step) mirrors into, fails over on, and fails back
// onto a 3-node destination (RF 1). Two 3-node clusters A and B with their own cluster
// IDs; A has a 6-partition topic led by all three of its nodes, written by an idempotent
// producer and a committed and an aborted transaction, and a group's committed offsets.
//   - Mirroring A → B: B's copy is led by all three B nodes, has A's topic ID, and every
//     partition holds A's batches byte for byte at the same offsets (raw Fetch of both
//     leaders, CRCs and bytes compared); the group's offsets (offset, leader epoch,
//     metadata) are synced onto B.
//   - B's copy is read-only: a produce to each partition's leader is refused with
//     POLICY_VIOLATION "READ_ONLY_TOPIC: …" (spec section 10), franz-go gets
//     POLICY_VIOLATION through each node, and nothing is appended.
//   - kill -9 of a B node while A takes writes: B's other nodes go on mirroring their
//     partitions; after the restart the node's partitions catch up, and B is again
//     byte-identical to A: no gap, no duplicate.
//   - Failover (`--stop` on B): every partition is STOPPED with its last mirror position
//     at A's end offset and one MIRROR_PID_RESET appended; produces to B through each
//     node are acknowledged. A, still up, takes writes that B never gets (the divergence).
//   - Failback (a mirror on A from B, topic started): each partition of A truncates its
//     divergent records to B's last mirror position (reported by describe), mirrors B's
//     writes, and ends byte-identical to B; no divergent record is readable on A, and A's
//     topic is now read-only.
func TestMirrorIntoFailoverFailbackThreeNodes(t *testing.T) {
	const (
		topic      = "orders"
		partitions = 6
		group      = "orders-app"
	)
	start := time.Now()
	a, b := startClusters(t, clustertest.Spec{Combined: 3}, clustertest.Spec{Combined: 3})
	if a.ClusterID == b.ClusterID {
		t.Fatalf("clusters A and B were formatted with one cluster ID %s", a.ClusterID)
	}
	for _, c := range []*clustertest.Cluster{a, b} {
		m, err := clustertest.Metadata(c.Node(1).Addr)
		if err != nil {
			t.Fatal(err)
		}
		if m.ClusterID == nil || *m.ClusterID != c.ClusterID {
			t.Fatalf("Metadata answers cluster ID %v, the cluster was formatted with %s", m.ClusterID, c.ClusterID)
		}
	}
	t.Logf("two 3-node clusters serving after %v", time.Since(start).Round(time.Millisecond))

	// 1. The source topic on A, led by all three A nodes, with idempotent and
	// transactional data and a group's committed offsets.
	if got := distinct(createTopic(t, a, a.Node(1).Addr, topic, partitions)); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("%s on A is led by %v, want all of 1, 2, 3", topic, got)
	}
	idem := a.Client([]string{a.Node(1).Addr}, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceSync(t, idem, topic, keyRange("idem", 120))
	txn := txnProducer(t, a, a.Node(2).Addr, "orders-txn")
	perPartition := func(prefix string, n int) map[string]int32 {
		m := map[string]int32{}
		for p := range int32(partitions) {
			for i := range n {
				m[fmt.Sprintf("%s-p%d-%d", prefix, p, i)] = p
			}
		}
		return m
	}
	runTxn(t, txn, topic, perPartition("committed", 3), true)
	runTxn(t, txn, topic, perPartition("aborted", 2), false)
	produceSync(t, idem, topic, keyRange("idem-after-txn", 30))
	commitGroup(t, a, a.Node(3).Addr, group, topic)
	// Through another node than the commit's, whose image may not show the new
	// __consumer_offsets yet (COORDINATOR_NOT_AVAILABLE, retriable).
	var aGroup map[int32]kadm.Offset
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		var err error
		aGroup, err = groupOffsets(a.Node(1).Addr, group, topic)
		return err == nil && len(aGroup) == partitions, fmt.Sprintf("OffsetFetch %s on A: %v (%d partitions), want offsets for the %d partitions", group, err, len(aGroup), partitions)
	})
	aID, err := topicID(a.Node(1).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	aEnds := func() (map[int32]int64, error) { return endOffsets(a.Node(2).Addr, topic) }

	// 2. The mirror A → B with the CLI: create through B's node 1, start through node 2,
	// describe through node 3.
	dir := t.TempDir()
	fromA := filepath.Join(dir, "from-a.properties")
	if err := os.WriteFile(fromA, []byte("bootstrap.servers="+a.Bootstrap()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMirrorsCLI(t, "Created cluster mirror from-a.", b.Node(1).Addr, "--create", "--mirror", "from-a", "--mirror-config", fromA)
	mustMirrorsCLI(t, "Started mirroring topic orders in mirror from-a.", b.Node(2).Addr, "--start", "--mirror", "from-a", "--topics", topic)
	listed, err := mirrorsCLI(t, b.Node(3).Addr, "--list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(listed, a.ClusterID) {
		t.Fatalf("--list on B does not name A's cluster ID %s as the source of from-a:\n%s", a.ClusterID, listed)
	}
	waitMirroring(t, b.Node(3).Addr, "from-a", topic, partitions, aEnds)
	if got := distinct(b.WaitLeaders(topic)); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("mirror topic %s on B is led by %v, want all of 1, 2, 3", topic, got)
	}
	for _, n := range b.Brokers() {
		id, err := topicID(n.Addr, topic)
		if err != nil {
			t.Fatal(err)
		}
		if id != aID {
			t.Fatalf("B's node %d answers topic ID %x for %s, A has %x", n.ID, id, topic, aID)
		}
	}
	waitSameBatches(t, "after the first catch-up", "A", a, "B", b, topic, aID, partitions)
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		got, err := groupOffsets(b.Node(2).Addr, group, topic)
		return err == nil && sameGroupOffsets(got, aGroup), fmt.Sprintf("group %s on B: %v (%v), on A %v", group, got, err, aGroup)
	})
	t.Logf("mirrored and byte-identical after %v", time.Since(start).Round(time.Millisecond))

	// 3. Read-only on B.
	checkReadOnly(t, b, topic, "from-a", partitions)
	waitSameBatches(t, "after the refused produces", "A", a, "B", b, topic, aID, partitions)

	// 4. kill -9 of a B node while A takes writes.
	bLeaders := b.WaitLeaders(topic)
	victim := b.Node(2)
	producer := startProducer(t, a, "during-kill", topic, []int32{0, 1, 2, 3, 4, 5})
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		return producer.acks() >= 60, "the producer to A got fewer than 60 acknowledgements"
	})
	victim.Kill()
	atKill, err := aEnds()
	if err != nil {
		t.Fatal(err)
	}
	// The partitions led by B's live nodes go on mirroring past where A was at the kill.
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		ends, err := liveEndOffsets(b.Node(1).Addr, topic)
		for p, l := range bLeaders {
			if l == victim.ID {
				continue
			}
			if err != nil || ends[int32(p)] <= atKill[int32(p)] {
				return false, fmt.Sprintf("B's %s-%d (node %d) at %d (%v) while node %d is down; A was at %d at the kill", topic, p, l, ends[int32(p)], err, victim.ID, atKill[int32(p)])
			}
		}
		return true, ""
	})
	victim.Start()
	acked := producer.finish(t, "producer to A during the kill of B's node 2")
	waitMirroring(t, b.Node(1).Addr, "from-a", topic, partitions, aEnds)
	afterKill := waitSameBatches(t, "after the restart of B's node 2", "A", a, "B", b, topic, aID, partitions)
	// Every record acknowledged by A is on B exactly once.
	count := map[string]int{}
	for _, k := range consumeKeys(t, b, b.Node(2).Addr, topic, dataRecords(afterKill)) {
		count[k]++
	}
	for _, k := range acked {
		if count[k] != 1 {
			t.Fatalf("record %s acknowledged by A is on B %d times, want once", k, count[k])
		}
	}
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		got, err := groupOffsets(b.Node(2).Addr, group, topic)
		return err == nil && sameGroupOffsets(got, aGroup), fmt.Sprintf("group %s on B after the restart: %v (%v), on A %v", group, got, err, aGroup)
	})
	t.Logf("node 2 of B killed and restarted: %d records produced meanwhile, identical after %v", len(acked), time.Since(start).Round(time.Millisecond))

	// 5. Failover on B.
	stopEnds, err := aEnds()
	if err != nil {
		t.Fatal(err)
	}
	mustMirrorsCLI(t, "Stopped mirroring topic orders in mirror from-a.", b.Node(3).Addr, "--stop", "--mirror", "from-a", "--topics", topic)
	// --stop answers once every partition is STOPPED; describe may still miss a node's
	// own figures for a moment (a partition it cannot ask about shows offsets "-").
	var stopped map[int32]mirrorRow
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		var err error
		if stopped, err = describeMirror(t, b.Node(1).Addr, "from-a", topic); err != nil {
			return false, err.Error()
		}
		for p := range int32(partitions) {
			r := stopped[p]
			if r.State != "STOPPED" {
				t.Fatalf("after --stop answered: %v, want STOPPED", r)
			}
			if r.LastMirrorOffset == nil || r.DestinationOffset == nil {
				return false, fmt.Sprintf("after --stop: %v, last mirror offset %v", r, r.LastMirrorOffset)
			}
			if *r.LastMirrorOffset != stopEnds[p] || *r.DestinationOffset != stopEnds[p]+1 {
				t.Fatalf("after --stop: %v, last mirror offset %d; want the last mirror offset at A's end offset %d and one MIRROR_PID_RESET after it", r, *r.LastMirrorOffset, stopEnds[p])
			}
		}
		return true, ""
	})
	// A, still up, takes records B never gets.
	divergent := keyRange("a-divergent", 24)
	produceSync(t, idem, topic, divergent)
	// B takes writes through each node.
	var bKeys []string
	for _, n := range b.Brokers() {
		keys := keyRange(fmt.Sprintf("b-node%d", n.ID), 30)
		produceSync(t, b.Client([]string{n.Addr}, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), topic, keys)
		bKeys = append(bKeys, keys...)
	}
	bEnds, err := endOffsets(b.Node(1).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	aDiverged, err := aEnds()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failed over after %v", time.Since(start).Round(time.Millisecond))

	// 6. Failback onto A: a mirror on A from B, created through A's node 2, started
	// through node 3, described through node 1.
	fromB := filepath.Join(dir, "from-b.properties")
	if err := os.WriteFile(fromB, []byte("bootstrap.servers="+b.Bootstrap()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMirrorsCLI(t, "Created cluster mirror from-b.", a.Node(2).Addr, "--create", "--mirror", "from-b", "--mirror-config", fromB)
	mustMirrorsCLI(t, "Started mirroring topic orders in mirror from-b.", a.Node(3).Addr, "--start", "--mirror", "from-b", "--topics", topic)
	back := waitMirroring(t, a.Node(1).Addr, "from-b", topic, partitions, func() (map[int32]int64, error) { return bEnds, nil })
	truncated := 0
	for p := range int32(partitions) {
		r := back[p]
		lmo := *stopped[p].LastMirrorOffset
		if r.TruncatedTo == nil || *r.TruncatedTo != lmo || r.TruncatedRecords != aDiverged[p]-lmo {
			t.Fatalf("failback of %s-%d: truncated to %v, %d records; want to B's last mirror offset %d, dropping A's %d divergent records",
				topic, p, r.TruncatedTo, r.TruncatedRecords, lmo, aDiverged[p]-lmo)
		}
		truncated += int(r.TruncatedRecords)
	}
	if truncated != len(divergent) {
		t.Fatalf("failback truncated %d records in all, A took %d divergent ones", truncated, len(divergent))
	}
	final := waitSameBatches(t, "after the failback", "B", b, "A", a, topic, aID, partitions)
	have := map[string]int{}
	for _, k := range consumeKeys(t, a, a.Node(2).Addr, topic, dataRecords(final)) {
		have[k]++
	}
	for _, k := range divergent {
		if have[k] > 0 {
			t.Fatalf("divergent record %s is still readable on A after the failback", k)
		}
	}
	for _, k := range append(bKeys, acked...) {
		if have[k] != 1 {
			t.Fatalf("record %s is on A %d times after the failback, want once", k, have[k])
		}
	}
	checkReadOnly(t, a, topic, "from-b", partitions)
	nb := 0
	for _, bs := range final {
		nb += len(bs)
	}
	t.Logf("failed back: %d divergent records truncated, A and B hold the same %d batches; %v in all", truncated, nb, time.Since(start).Round(time.Millisecond))
}

// TestMirrorDescribeWithNodeDown: `kmirror mirrors --describe` through a live node of a
// 3-node destination answers while another node is down but not yet fenced (its session,
// 30 s here, has not expired, so the image still lists it as a live broker that leads its
// partitions): the live nodes describe the partitions they lead, MIRRORING and caught up,
// the down node's partitions are described from their persisted states, and the nodes
// asked stay up. The node asked used to crash on the down node's missing answer (a nil
// response in mirror.Manager.DescribeClusterMirrors' merge of the sync tasks).
func TestMirrorDescribeWithNodeDown(t *testing.T) {
	const topic, partitions = "orders", 6
	a, b := startClusters(t, clustertest.Spec{Combined: 1}, clustertest.Spec{Combined: 3, Props: map[string]string{
		// a 15 s heartbeat interval: the killed node's closed connection alone fences it
		// only after twice that, the session's 30 s
		"broker.session.timeout.ms": "30000", "broker.heartbeat.interval.ms": "15000"}})
	createTopic(t, a, a.Node(1).Addr, topic, partitions)
	produceSync(t, a.Client(nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), topic, keyRange("k", 60))
	cfg := filepath.Join(t.TempDir(), "from-a.properties")
	if err := os.WriteFile(cfg, []byte("bootstrap.servers="+a.Bootstrap()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMirrorsCLI(t, "Created cluster mirror from-a.", b.Node(1).Addr, "--create", "--mirror", "from-a", "--mirror-config", cfg)
	mustMirrorsCLI(t, "Started mirroring topic orders in mirror from-a.", b.Node(2).Addr, "--start", "--mirror", "from-a", "--topics", topic)
	ends := func() (map[int32]int64, error) { return endOffsets(a.Node(1).Addr, topic) }
	waitMirroring(t, b.Node(3).Addr, "from-a", topic, partitions, ends)
	leaders := b.WaitLeaders(topic)
	aEnds, err := ends()
	if err != nil {
		t.Fatal(err)
	}

	down := b.Node(3)
	down.Kill()
	// unfenced reports whether node 1 still answers the down node as the leader of its
	// partitions: its session has not expired.
	unfenced := func() bool {
		ls, err := clustertest.Leaders(b.Node(1).Addr, topic)
		return err == nil && slices.Equal(ls, leaders)
	}
	if !unfenced() {
		t.Fatalf("node 3 was fenced at once after kill -9 (session timeout 30 s); this test needs it unfenced")
	}
	n := b.Node(1)
	rows, err := describeMirror(t, n.Addr, "from-a", topic)
	if err != nil {
		t.Fatalf("describe through node 1 while node 3 is down: %v", err)
	}
	if !n.Running() {
		t.Fatalf("node 1 exited answering a describe while node 3 is down:\n%s", n.Output())
	}
	if len(rows) != partitions {
		t.Fatalf("describe through node 1 while node 3 is down lists %d partitions of %s, want %d", len(rows), topic, partitions)
	}
	for p, l := range leaders {
		r := rows[int32(p)]
		if l == down.ID {
			continue
		}
		if r.State != "MIRRORING" || r.DestinationOffset == nil || *r.DestinationOffset != aEnds[int32(p)] {
			t.Fatalf("describe through node 1 while node 3 is down: %v (led by live node %d), want MIRRORING at A's end offset %d", r, l, aEnds[int32(p)])
		}
	}
	if !unfenced() {
		t.Fatalf("node 3 was fenced before the describe ended: it did not run while it was down and unfenced")
	}
}
