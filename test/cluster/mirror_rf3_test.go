package cluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
)

// rf3 is the shape of the replicated clusters of these tests: 3 combined nodes, RF 3
// defaults for every topic and internal topic, min.insync.replicas 2, and a short
// replica.lag.time.max.ms so that a dead follower leaves the ISR within seconds.
var rf3 = clustertest.Spec{Combined: 3, Props: map[string]string{
	"default.replication.factor":               "3",
	"min.insync.replicas":                      "2",
	"offsets.topic.replication.factor":         "3",
	"transaction.state.log.replication.factor": "3",
	"transaction.state.log.min.isr":            "2",
	"mirror.state.topic.replication.factor":    "3",
	"replica.lag.time.max.ms":                  "3000",
}}

// createTopicRF3 creates topic with replication factor 3 through addr and waits for its
// leaders.
func createTopicRF3(t *testing.T, c *clustertest.Cluster, addr, topic string, partitions int32) []int32 {
	t.Helper()
	adm := kadm.NewClient(c.Client([]string{addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("CreateTopics %s (RF 3) through %s: %v", topic, addr, err)
	}
	return c.WaitLeaders(topic)
}

// isrs is the ISR of each partition of topic as the broker at addr's Metadata answers it.
func isrs(addr, topic string) (map[int32][]int32, error) {
	m, err := clustertest.Metadata(addr, topic)
	if err != nil {
		return nil, err
	}
	if len(m.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics", topic, len(m.Topics))
	}
	if err := kerr.ErrorForCode(m.Topics[0].ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32][]int32{}
	for _, p := range m.Topics[0].Partitions {
		out[p.Partition] = slices.Clone(p.ISR)
	}
	return out, nil
}

// waitISRSize waits until the broker at addr answers an ISR of n members for every
// partition of topic.
func waitISRSize(t *testing.T, addr, topic string, partitions int32, n int) {
	t.Helper()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		got, err := isrs(addr, topic)
		if err != nil {
			return false, err.Error()
		}
		for p := range partitions {
			if len(got[p]) != n {
				return false, fmt.Sprintf("ISRs of %s through %s: %v, want %d members each", topic, addr, got, n)
			}
		}
		return true, ""
	})
}

// waitReplicasIdentical waits until every node of each cluster given holds the same
// bytes for every partition of topic (clustertest LogDigest: the concatenated segment
// files), and all of them the same across the clusters.
func waitReplicasIdentical(t *testing.T, topic string, partitions int32, cs ...*clustertest.Cluster) {
	t.Helper()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		for p := range partitions {
			var first string
			var where []string
			for ci, c := range cs {
				for _, n := range c.Brokers() {
					d, size, ok := n.LogDigest(topic, p)
					if !ok {
						return false, fmt.Sprintf("cluster %d node %d holds no %s-%d", ci, n.ID, topic, p)
					}
					where = append(where, fmt.Sprintf("cluster %d node %d: %s… (%d bytes)", ci, n.ID, d[:12], size))
					if first == "" {
						first = d
					} else if d != first {
						return false, fmt.Sprintf("%s-%d replicas differ: %s", topic, p, strings.Join(where, "; "))
					}
				}
			}
		}
		return true, ""
	})
}

// controlCounts counts, in batches, the ABORT markers by producer ID and the
// MIRROR_PID_RESET control batches.
func controlCounts(t *testing.T, batches []rawBatch) (aborts map[int64]int, pidResets int) {
	t.Helper()
	aborts = map[int64]int{}
	for _, b := range batches {
		if !b.control {
			continue
		}
		rb := record.Batch(b.raw)
		typ, err := rb.ControlType()
		if err != nil {
			t.Fatalf("control batch at %d: %v", b.base, err)
		}
		switch typ {
		case record.ControlAbort:
			aborts[rb.ProducerID()]++
		case record.ControlMirrorPIDReset:
			pidResets++
		}
	}
	return aborts, pidResets
}

// writeMirrorConfig writes a mirror config file naming bootstrap.
func writeMirrorConfig(t *testing.T, name, bootstrap string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), name+".properties")
	if err := os.WriteFile(f, []byte("bootstrap.servers="+bootstrap+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestMirrorRF3StopWithNodeDown: failover (`--stop`) of a mirror topic on a 3-node
// destination with RF 3 and min.insync.replicas 2 while one destination node is down
// (killed just before, so it still leads a partition and sits in every ISR). The source
// topic (RF 3) holds idempotent records and one transaction left open over all its
// partitions. `--stop` answers success once every partition is STOPPED: the partition
// the dead node led is failed over by its new leader, the others once the ISR dropped the
// dead node. The topic takes acks=all writes at once. After the node is back in every
// ISR, each partition holds exactly one ABORT marker, for the open transaction's producer,
// and exactly one MIRROR_PID_RESET, and its three replicas are byte-identical.
func TestMirrorRF3StopWithNodeDown(t *testing.T) {
	const topic, partitions = "orders", 3
	a, b := startClusters(t, rf3, rf3)
	openTxnSource(t, a, topic, partitions)
	mirrorFromA(t, a, b, topic, partitions)
	waitISRSize(t, b.Node(1).Addr, topic, partitions, 3)
	aID, err := topicID(a.Node(1).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}

	checkMirrorLeaderEpoch(t, b, topic, aID, true)

	leaders := b.WaitLeaders(topic)
	victim := b.Node(leaders[0])
	live := b.Node(leaders[0]%3 + 1)
	victim.Kill()
	mustMirrorsCLI(t, "Stopped mirroring topic orders in mirror from-a.", live.Addr, "--stop", "--mirror", "from-a", "--topics", topic)
	rows, err := describeMirror(t, live.Addr, "from-a", topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		if rows[p].State != "STOPPED" {
			t.Fatalf("after --stop answered with node %d down: %v, want STOPPED", victim.ID, rows[p])
		}
	}
	after := keyRange("after-failover", 30)
	produceSync(t, b.Client([]string{live.Addr}, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks())), topic, after)

	victim.Start()
	waitISRSize(t, live.Addr, topic, partitions, 3)
	checkFailoverMarkers(t, b, topic, aID, partitions)
	checkMirrorLeaderEpoch(t, b, topic, aID, false)
	have := map[string]int{}
	for _, k := range consumeKeys(t, b, live.Addr, topic, 90+len(after)) {
		have[k]++
	}
	for _, k := range append(keyRange("idem", 90), after...) {
		if have[k] != 1 {
			t.Fatalf("record %s is on B %d times after the failover, want once", k, have[k])
		}
	}
}

// checkMirrorLeaderEpoch sends the leader of partition 0 of topic on c a Fetch as one of
// its followers (its broker epoch, the partition's leader epoch, from the high
// watermark) and checks MirrorLeaderEpoch in the answer (spec section 6): while the
// topic is mirrored (mirrored true) it is the epoch of the partition's last batch (the
// source's), and a consumer's Fetch carries none; once stopped, none.
func checkMirrorLeaderEpoch(t *testing.T, c *clustertest.Cluster, topic string, id [16]byte, mirrored bool) {
	t.Helper()
	m, err := clustertest.Metadata(c.Node(1).Addr, topic)
	if err != nil || len(m.Topics) != 1 {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	p := m.Topics[0].Partitions[0]
	leader, follower := c.Node(p.Leader), c.Node(p.Leader%3+1)
	batches, _, err := partitionBatches(c, topic, id, 0)
	if err != nil || len(batches) == 0 {
		t.Fatalf("batches of %s-0: %d (%v)", topic, len(batches), err)
	}
	last := batches[len(batches)-1]
	sp := followerFetch(t, leader.Addr, id, follower.ID, follower.BrokerEpoch(), p.LeaderEpoch, last.last+1)
	mle, ok := mirrorproto.MirrorLeaderEpoch(&sp.UnknownTags)
	switch {
	case sp.ErrorCode != 0:
		t.Fatalf("Fetch of %s-0 as follower %d at leader epoch %d: %v", topic, follower.ID, p.LeaderEpoch, kerr.ErrorForCode(sp.ErrorCode))
	case mirrored && (!ok || mle != last.epoch):
		t.Fatalf("follower Fetch of mirrored %s-0: MirrorLeaderEpoch %d (sent %v), want %d, the last batch's (destination leader epoch %d)", topic, mle, ok, last.epoch, p.LeaderEpoch)
	case !mirrored && ok:
		t.Fatalf("follower Fetch of stopped %s-0: MirrorLeaderEpoch %d, want none", topic, mle)
	}
	t.Logf("%s-0: destination leader epoch %d, last batch epoch %d, MirrorLeaderEpoch %d (sent %v)", topic, p.LeaderEpoch, last.epoch, mle, ok)
	if sp := followerFetch(t, leader.Addr, id, -1, -1, -1, 0); sp.UnknownTags.Len() != 0 {
		t.Fatalf("consumer Fetch of %s-0 carries %d unknown tags, want none", topic, sp.UnknownTags.Len())
	}
}

// checkFailoverMarkers checks that every partition of topic on c holds exactly one
// MIRROR_PID_RESET and exactly one ABORT marker, all by one producer (the transaction
// left open on the source), and that its replicas are byte-identical.
func checkFailoverMarkers(t *testing.T, c *clustertest.Cluster, topic string, id [16]byte, partitions int32) {
	t.Helper()
	pid := int64(-1)
	for p := range partitions {
		batches, _, err := partitionBatches(c, topic, id, p)
		if err != nil {
			t.Fatal(err)
		}
		aborts, resets := controlCounts(t, batches)
		if resets != 1 || len(aborts) != 1 {
			t.Fatalf("%s-%d after the failover: %d MIRROR_PID_RESET, ABORT markers by producer %v; want one MIRROR_PID_RESET and one ABORT for the open transaction", topic, p, resets, aborts)
		}
		for pr, n := range aborts {
			if n != 1 || (pid >= 0 && pr != pid) {
				t.Fatalf("%s-%d after the failover: ABORT markers by producer %v, want one for the open transaction's producer (%d on the other partitions)", topic, p, aborts, pid)
			}
			pid = pr
		}
	}
	waitReplicasIdentical(t, topic, partitions, c)
}

// openTxnSource creates topic (RF 3) on a with 90 idempotent records and one transaction
// left open over every partition.
func openTxnSource(t *testing.T, a *clustertest.Cluster, topic string, partitions int32) {
	t.Helper()
	createTopicRF3(t, a, a.Node(1).Addr, topic, partitions)
	produceSync(t, a.Client(nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), topic, keyRange("idem", 90))
	txn := a.Client(nil, kgo.TransactionalID("open-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(5*time.Minute))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p := range partitions {
		if err := txn.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("open-%d", p))}).FirstErr(); err != nil {
			t.Fatalf("transactional produce to %s-%d: %v", topic, p, err)
		}
	}
}

// TestMirrorRF3StopBelowMinISR: failover of a mirror topic whose destination ISRs are
// below its min.insync.replicas (3, set on the topic; RF 3) because a destination node is
// down: the failover markers (acks=all) are refused, the failover stays in STOPPING and is
// retried (the node logs the retry), and once the node is back and in the ISRs every
// partition becomes STOPPED with, on every replica, exactly one ABORT for the open
// transaction and one MIRROR_PID_RESET: the retries neither lose nor repeat a step.
func TestMirrorRF3StopBelowMinISR(t *testing.T) {
	const topic, partitions = "orders", 3
	a, b := startClusters(t, rf3, rf3)
	openTxnSource(t, a, topic, partitions)
	mirrorFromA(t, a, b, topic, partitions)
	aID, err := topicID(a.Node(1).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	setTopicConfigs(t, b, "B", topic, map[string]string{"min.insync.replicas": "3"})
	victim := b.Node(3)
	victim.Kill()
	waitISRSize(t, b.Node(1).Addr, topic, partitions, 2)

	stopped := make(chan error, 1)
	go func() {
		_, err := mirrorsCLI(t, b.Node(1).Addr, "--stop", "--mirror", "from-a", "--topics", topic)
		stopped <- err
	}()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		for _, n := range b.Brokers()[:2] {
			if strings.Contains(n.Log(), "NOT_ENOUGH_REPLICAS") && strings.Contains(n.Log(), "mirror failover") {
				return true, ""
			}
		}
		return false, "no live B node logged a failover refused with NOT_ENOUGH_REPLICAS"
	})
	rows, err := describeMirror(t, b.Node(1).Addr, "from-a", topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(partitions) {
		if rows[p].State == "STOPPED" {
			t.Fatalf("with an ISR of 2 below min.insync.replicas 3: %v, want its failover unfinished", rows[p])
		}
	}
	victim.Start()
	// --stop answers success when the node is back within its wait, else names the
	// partitions still failing over; either way their leaders finish the sequence
	if err := <-stopped; err != nil && !strings.Contains(err.Error(), "failover not finished") {
		t.Fatalf("--stop: %v", err)
	}
	clustertest.Eventually(t, 90*time.Second, func() (bool, string) {
		rows, err := describeMirror(t, b.Node(1).Addr, "from-a", topic)
		if err != nil {
			return false, err.Error()
		}
		for p := range int32(partitions) {
			if rows[p].State != "STOPPED" {
				return false, fmt.Sprintf("after node %d came back: %v, want STOPPED", victim.ID, rows[p])
			}
		}
		return true, ""
	})
	waitISRSize(t, b.Node(1).Addr, topic, partitions, 3)
	checkFailoverMarkers(t, b, topic, aID, partitions)
}

// TestMirrorRF3FailbackWaitsForISR: failback onto a 3-node old primary (RF 3) with one
// of its nodes down when the failback starts, and a topic config that makes two replicas
// too few: min.insync.replicas 3, or mirror.support.unclean.leader.election=true (wait
// for every replica; min.insync.replicas stays 2). A mirrors to B, B fails over, A (still
// up) takes divergent acks=all writes that every A replica holds, and B takes its own
// writes. With an A node down the ISRs have two members: LOG_ALIGNMENT on A waits (its
// leaders log why, and no partition leaves LOG_ALIGNMENT while the node is down). Once
// the node is back, each leader truncates its divergent tail, the followers, whose logs
// are then longer than the leader's, truncate theirs by DivergingEpoch before the
// partition is MIRRORING, and every replica of both clusters ends byte-identical; no
// divergent record is readable on A.
func TestMirrorRF3FailbackWaitsForISR(t *testing.T) {
	for _, tc := range []struct{ name, key, value, reason string }{
		{"minISR3", "min.insync.replicas", "3", "below min.insync.replicas 3"},
		{"uncleanOptIn", "mirror.support.unclean.leader.election", "true", "is not every replica"},
	} {
		t.Run(tc.name, func(t *testing.T) { failbackWaitsForISR(t, tc.key, tc.value, tc.reason) })
	}
}

// failbackWaitsForISR is TestMirrorRF3FailbackWaitsForISR with topic config key=value on
// A's topic; reason is what A's leaders log while they wait.
func failbackWaitsForISR(t *testing.T, key, value, reason string) {
	const topic, partitions = "orders", 3
	a, b := startClusters(t, rf3, rf3)
	createTopicRF3(t, a, a.Node(1).Addr, topic, partitions)
	aProd := a.Client(nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceSync(t, aProd, topic, keyRange("first", 60))
	mirrorFromA(t, a, b, topic, partitions)
	aID, err := topicID(a.Node(1).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	mustMirrorsCLI(t, "Stopped mirroring topic orders in mirror from-a.", b.Node(1).Addr, "--stop", "--mirror", "from-a", "--topics", topic)

	divergent := keyRange("a-divergent", 24)
	produceSync(t, aProd, topic, divergent)
	bKeys := keyRange("b-own", 30)
	produceSync(t, b.Client(nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), topic, bKeys)
	bEnds, err := endOffsets(b.Node(1).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	waitISRSize(t, a.Node(1).Addr, topic, partitions, 3)

	setTopicConfigs(t, a, "A", topic, map[string]string{key: value})
	// the mirror (and so A's __mirror_state, RF 3) is created while every A node runs
	mustMirrorsCLI(t, "Created cluster mirror from-b.", a.Node(1).Addr, "--create", "--mirror", "from-b", "--mirror-config", writeMirrorConfig(t, "from-b", b.Bootstrap()))
	victim := a.Node(3)
	victim.Kill()
	waitISRSize(t, a.Node(1).Addr, topic, partitions, 2)

	mustMirrorsCLI(t, "Started mirroring topic orders in mirror from-b.", a.Node(2).Addr, "--start", "--mirror", "from-b", "--topics", topic)
	waitAlignmentWaits(t, a, a.Node(1).Addr, topic, partitions, reason, fmt.Sprintf("failback with A's node %d down and %s=%s", victim.ID, key, value))

	victim.Start()
	back := waitMirroring(t, a.Node(1).Addr, "from-b", topic, partitions, func() (map[int32]int64, error) { return bEnds, nil })
	truncated := 0
	for p := range int32(partitions) {
		truncated += int(back[p].TruncatedRecords)
	}
	if truncated != len(divergent) {
		t.Fatalf("failback truncated %d records in all, A took %d divergent ones", truncated, len(divergent))
	}
	waitSameBatches(t, "after the failback", "B", b, "A", a, topic, aID, partitions)
	waitISRSize(t, a.Node(1).Addr, topic, partitions, 3)
	waitReplicasIdentical(t, topic, partitions, a, b)
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
	for _, k := range append(keyRange("first", 60), bKeys...) {
		if have[k] != 1 {
			t.Fatalf("record %s is on A %d times after the failback, want once", k, have[k])
		}
	}
	for _, n := range a.Brokers() {
		for _, line := range strings.Split(n.Log(), "\n") {
			if strings.Contains(line, "LOG_ALIGNMENT waits for its replicas") || strings.Contains(line, "mirror partition truncated") {
				t.Logf("A node %d: %s", n.ID, line)
			}
		}
	}
}

// TestMirrorRF3CoordinatorMoves: the mirror coordinator — the broker that runs a mirror's
// cluster-wide sync tasks — is the leader of the __mirror_state partition of the mirror's
// name (FNV-1a mod the partition count), so it moves with that leadership (cluster.md
// §3). On a 3-node destination with RF 3, a group's committed offsets are synced from the
// source; the node that leads that __mirror_state partition is killed; the partition gets
// another leader, and offsets the group commits on the source afterwards still reach the
// destination, while the mirror goes on mirroring the source's new records.
func TestMirrorRF3CoordinatorMoves(t *testing.T) {
	const topic, partitions, group, mirror = "orders", 3, "orders-app", "from-a"
	a, b := startClusters(t, rf3, rf3)
	createTopicRF3(t, a, a.Node(1).Addr, topic, partitions)
	aProd := a.Client(nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceSync(t, aProd, topic, keyRange("first", 60))
	commitGroup(t, a, a.Node(1).Addr, group, topic)
	aEnds := mirrorFromA(t, a, b, topic, partitions)
	synced := func(addr string) {
		t.Helper()
		clustertest.Eventually(t, 90*time.Second, func() (bool, string) {
			want, err := groupOffsets(a.Node(1).Addr, group, topic)
			if err != nil {
				return false, err.Error()
			}
			got, err := groupOffsets(addr, group, topic)
			return err == nil && sameGroupOffsets(got, want), fmt.Sprintf("group %s on B through %s: %v (%v), on A %v", group, addr, got, err, want)
		})
	}
	synced(b.Node(1).Addr)

	h := fnv.New32a()
	h.Write([]byte(mirror))
	const statePartitions = 4 // clustertest.Defaults' mirror.state.topic.num.partitions
	sp := int32(h.Sum32() % statePartitions)
	leaders, err := clustertest.Leaders(b.Node(1).Addr, "__mirror_state")
	if err != nil || len(leaders) != statePartitions {
		t.Fatalf("leaders of B's __mirror_state: %v (%v), want %d partitions", leaders, err, statePartitions)
	}
	coord := b.Node(leaders[sp])
	live := b.Node(coord.ID%3 + 1)
	coord.Kill()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		ls, err := clustertest.Leaders(live.Addr, "__mirror_state")
		if err != nil || len(ls) != statePartitions {
			return false, fmt.Sprintf("leaders of B's __mirror_state through node %d: %v (%v)", live.ID, ls, err)
		}
		return ls[sp] >= 1 && ls[sp] != coord.ID, fmt.Sprintf("__mirror_state-%d of B is led by %d after its leader %d was killed", sp, ls[sp], coord.ID)
	})
	produceSync(t, aProd, topic, keyRange("second", 60))
	commitGroup(t, a, a.Node(1).Addr, group, topic)
	waitMirroring(t, live.Addr, mirror, topic, partitions, aEnds)
	synced(live.Addr)
}

// mirrorFromA creates the cluster mirror from-a on b from a's bootstrap, starts topic in
// it and waits until its partitions are MIRRORING at a's end offsets; it returns the
// function reading a's end offsets of topic.
func mirrorFromA(t *testing.T, a, b *clustertest.Cluster, topic string, partitions int32) func() (map[int32]int64, error) {
	t.Helper()
	aEnds := func() (map[int32]int64, error) { return endOffsets(a.Node(1).Addr, topic) }
	mustMirrorsCLI(t, "Created cluster mirror from-a.", b.Node(1).Addr, "--create", "--mirror", "from-a", "--mirror-config", writeMirrorConfig(t, "from-a", a.Bootstrap()))
	mustMirrorsCLI(t, "Started mirroring topic "+topic+" in mirror from-a.", b.Node(1).Addr, "--start", "--mirror", "from-a", "--topics", topic)
	waitMirroring(t, b.Node(1).Addr, "from-a", topic, partitions, aEnds)
	return aEnds
}

// setTopicConfigs sets configs on topic of cluster c (named name in the failure).
func setTopicConfigs(t *testing.T, c *clustertest.Cluster, name, topic string, configs map[string]string) {
	t.Helper()
	var alter []kadm.AlterConfig
	for k, v := range configs {
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(c.Client(nil)).AlterTopicConfigs(ctx, alter, topic)
	if err == nil {
		_, err = res.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("set %v on %s's %s: %v", configs, name, topic, err)
	}
}

// waitAlignmentWaits waits until a leader on c logged, for every partition of topic,
// that LOG_ALIGNMENT waits for its replicas with reason, then checks that the mirror
// from-b (described at addr) shows every partition in LOG_ALIGNMENT; what names the
// situation in the failure.
func waitAlignmentWaits(t *testing.T, c *clustertest.Cluster, addr, topic string, partitions int32, reason, what string) {
	t.Helper()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		for p := range partitions {
			if !logged(c, "LOG_ALIGNMENT waits for its replicas", fmt.Sprintf("partition=%s-%d ", topic, p), reason) {
				return false, fmt.Sprintf("no leader logged that LOG_ALIGNMENT of %s-%d waits (%q)", topic, p, reason)
			}
		}
		return true, ""
	})
	rows, err := describeMirror(t, addr, "from-b", topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		if rows[p].State != "LOG_ALIGNMENT" {
			t.Fatalf("%s: %v, want LOG_ALIGNMENT", what, rows[p])
		}
	}
}
