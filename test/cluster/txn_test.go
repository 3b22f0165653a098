package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// initProducerID sends an idempotent InitProducerID (no transactional ID) to the broker
// at addr itself and returns the producer ID it hands out.
func initProducerID(t *testing.T, addr string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var id int64 = -1
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = 60000
		resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return false, fmt.Sprintf("InitProducerID at %s: %v", addr, err)
		}
		id = resp.ProducerID
		return true, ""
	})
	return id
}

// TestProducerIDsAcrossNodes: producer IDs never collide across the nodes of a cluster:
// InitProducerID answered by each node (before and after one node is killed with SIGKILL
// and restarted), and the idempotent producers bootstrapped from each node, whose
// producer IDs DescribeProducers reports on partitions led by every node.
func TestProducerIDsAcrossNodes(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3})
	leaders := createTopic(t, c, c.Node(1).Addr, "idem", 6)
	if got := distinct(leaders); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("idem is led by %v, want all of 1, 2, 3", got)
	}
	owner := map[int64]string{}
	note := func(id int64, who string) {
		t.Helper()
		if id < 0 {
			t.Fatalf("%s: producer ID %d", who, id)
		}
		if prev, ok := owner[id]; ok {
			t.Fatalf("producer ID %d handed out twice: to %s and to %s", id, prev, who)
		}
		owner[id] = who
	}
	for round := range 2 {
		for _, n := range c.Brokers() {
			for i := range 3 {
				note(initProducerID(t, n.Addr), fmt.Sprintf("InitProducerID #%d at node %d (round %d)", i, n.ID, round))
			}
		}
		if round == 0 {
			c.Node(2).Kill()
			c.Node(2).Start()
			c.WaitLeaders("idem")
		}
	}

	clientIDs := map[int64]int32{}
	for _, n := range c.Brokers() {
		cl := c.Client([]string{n.Addr}, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		produceSync(t, cl, "idem", keyRange(fmt.Sprintf("idem-%d", n.ID), 60))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		id, _, err := cl.ProducerID(ctx)
		cancel()
		if err != nil {
			t.Fatalf("producer bootstrapped from node %d: %v", n.ID, err)
		}
		note(id, fmt.Sprintf("the idempotent producer bootstrapped from node %d", n.ID))
		clientIDs[id] = n.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	described, err := kadm.NewClient(c.Client(nil)).DescribeProducers(ctx, kadm.TopicsSet{"idem": nil})
	if err != nil {
		t.Fatalf("DescribeProducers idem: %v", err)
	}
	partitions := 0
	described.EachPartition(func(p kadm.DescribedProducersPartition) {
		partitions++
		if p.Err != nil {
			t.Fatalf("DescribeProducers idem-%d (leader %d): %v", p.Partition, p.Leader, p.Err)
		}
		var got []int64
		p.ActiveProducers.Each(func(dp kadm.DescribedProducer) { got = append(got, dp.ProducerID) })
		slices.Sort(got)
		var want []int64
		for id := range clientIDs {
			want = append(want, id)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("DescribeProducers idem-%d (leader %d): producers %v, want the three clients' %v", p.Partition, p.Leader, got, want)
		}
	})
	if partitions != 6 {
		t.Fatalf("DescribeProducers described %d partitions of idem, want 6", partitions)
	}
}

// txnProducer is a transactional franz-go producer bootstrapped from seed.
func txnProducer(t *testing.T, c *clustertest.Cluster, seed, txnID string) *kgo.Client {
	t.Helper()
	return c.Client([]string{seed}, kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(30*time.Second))
}

// runTxn produces one record per key to topic's partition p (key → partition), in one
// transaction, and ends it with commit or abort.
func runTxn(t *testing.T, cl *kgo.Client, topic string, keys map[string]int32, commit bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("BeginTransaction: %v", err)
	}
	for k, p := range keys {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: []byte(k)}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("transactional produce %s to %s-%d: %v", k, topic, p, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	end := kgo.TryAbort
	if commit {
		end = kgo.TryCommit
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatalf("EndTransaction (commit %v): %v", commit, err)
	}
}

// TestTransactionsAcrossNodes: transactions over the partitions of a topic led by all
// three nodes, from producers bootstrapped from different nodes whose coordinators are
// on different nodes: a committed, an aborted and another committed transaction. Every
// partition gets each transaction's marker (its end offset counts 3 markers and its last
// stable offset reaches it), read_committed consumers through any node (franz-go and
// kcat) read exactly the committed records, and read_uncommitted the aborted ones too.
func TestTransactionsAcrossNodes(t *testing.T) {
	needKcat(t)
	c := clustertest.Start(t, clustertest.Spec{Combined: 3})
	const topic = "tx"
	leaders := createTopic(t, c, c.Node(1).Addr, topic, 6)
	if got := distinct(leaders); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("%s is led by %v, want all of 1, 2, 3", topic, got)
	}
	one := findCoordinator(t, c, "tx-one", true)
	two, twoID := int32(-1), ""
	for i := 0; i < 30 && two < 0; i++ {
		id := fmt.Sprintf("tx-two-%d", i)
		if co := findCoordinator(t, c, id, true); co != one {
			two, twoID = co, id
		}
	}
	if two < 0 {
		t.Fatalf("no transactional ID of 30 tried has its coordinator elsewhere than node %d", one)
	}
	t.Logf("tx-one coordinated by node %d, %s by node %d; partitions led by %v", one, twoID, two, leaders)

	p1 := txnProducer(t, c, c.Node(1).Addr, "tx-one")
	p2 := txnProducer(t, c, c.Node(3).Addr, twoID)
	batch := func(prefix string, perPartition int) map[string]int32 {
		m := map[string]int32{}
		for p := range int32(6) {
			for i := range perPartition {
				m[fmt.Sprintf("%s-p%d-%d", prefix, p, i)] = p
			}
		}
		return m
	}
	first, aborted, second := batch("committed1", 2), batch("aborted", 2), batch("committed2", 1)
	runTxn(t, p1, topic, first, true)
	runTxn(t, p2, topic, aborted, false)
	runTxn(t, p1, topic, second, true)
	for _, p := range []*kgo.Client{p1, p2} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		id, _, err := p.ProducerID(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("producer ID %d", id)
	}
	id1, _, _ := p1.ProducerID(context.Background())
	id2, _, _ := p2.ProducerID(context.Background())
	if id1 == id2 {
		t.Fatalf("both transactional producers have producer ID %d", id1)
	}

	// 2 + 2 + 1 records and 3 markers on every partition; no transaction left open.
	adm := kadm.NewClient(c.Client(nil))
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		stable, err2 := adm.ListCommittedOffsets(ctx, topic)
		if err2 == nil {
			err2 = stable.Error()
		}
		if err != nil || err2 != nil {
			return false, fmt.Sprintf("ListOffsets: %v, %v", err, err2)
		}
		for p := range int32(6) {
			e, _ := ends.Lookup(topic, p)
			s, _ := stable.Lookup(topic, p)
			if e.Offset != 8 || s.Offset != 8 {
				return false, fmt.Sprintf("%s-%d (leader %d): end offset %d, last stable offset %d; want 8 and 8 (5 records, 3 markers)", topic, p, leaders[p], e.Offset, s.Offset)
			}
		}
		return true, ""
	})

	var committed, all []string
	for k := range first {
		committed = append(committed, k)
	}
	for k := range second {
		committed = append(committed, k)
	}
	all = append(all, committed...)
	for k := range aborted {
		all = append(all, k)
	}
	for _, n := range c.Brokers() {
		sameKeys(t, fmt.Sprintf("read_committed franz-go through node %d", n.ID), readCommitted(t, c, n.Addr, topic), committed)
		out := kcat(t, "", "-b", n.Addr, "-C", "-t", topic, "-e", "-q", "-f", "%k\n", "-X", "isolation.level=read_committed")
		sameKeys(t, fmt.Sprintf("read_committed kcat through node %d", n.ID), strings.Fields(out), committed)
	}
	out := kcat(t, "", "-b", c.Node(2).Addr, "-C", "-t", topic, "-e", "-q", "-f", "%k\n", "-X", "isolation.level=read_uncommitted")
	sameKeys(t, "read_uncommitted kcat through node 2", strings.Fields(out), all)
}

// readCommitted reads the 6 partitions of topic with read_committed through seed until
// each has delivered its record at offset 6 (the last record, before the last commit
// marker at 7), and returns every key read.
func readCommitted(t *testing.T, c *clustertest.Cluster, seed, topic string) []string {
	t.Helper()
	cl := c.Client([]string{seed}, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	done := map[int32]bool{}
	for len(done) < 6 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed through %s: partitions %v done within 30 s, keys %v", seed, done, keys)
		}
		fs.EachRecord(func(r *kgo.Record) {
			keys = append(keys, string(r.Key))
			if r.Offset == 6 {
				done[r.Partition] = true
			}
		})
	}
	return keys
}

// produceReads counts the Produce responses a client read (a kgo.HookBrokerRead).
type produceReads struct{ n atomic.Int64 }

// OnBrokerRead implements kgo.HookBrokerRead.
func (h *produceReads) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if kmsg.Key(key) == kmsg.Produce && err == nil {
		h.n.Add(1)
	}
}

// TestTxnProduceWhileCoordinatorDown: a transaction holds a partition led by one node
// when its coordinator's node (another one) is killed with SIGKILL. Once that partition's
// leader answers no leader for the coordinator's __transaction_state partition, a produce
// of the transaction to it is answered (at least one Produce response read) but not
// refused: it is retried, as Kafka answers a produce whose transaction coordinator is
// not available (NOT_ENOUGH_REPLICAS), not INVALID_TXN_STATE, which ends the producer's
// transaction. After the coordinator's node is back the produce is acknowledged, the
// transaction commits, and read_committed reads both of its records.
func TestTxnProduceWhileCoordinatorDown(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3})
	const topic = "txdown"
	leaders := createTopic(t, c, c.Node(1).Addr, topic, 6)
	txnID, coord := "", int32(-1)
	var part int32 = -1
	for i := 0; i < 30 && part < 0; i++ {
		id := fmt.Sprintf("txdown-%d", i)
		co := findCoordinator(t, c, id, true)
		for p, l := range leaders {
			if l != co {
				txnID, coord, part = id, co, int32(p)
				break
			}
		}
	}
	if part < 0 {
		t.Fatalf("no partition of %s led elsewhere than the coordinator (leaders %v)", topic, leaders)
	}
	leader := c.Node(leaders[part])
	t.Logf("%s coordinated by node %d; producing to %s-%d on node %d", txnID, coord, topic, part, leader.ID)

	hook := &produceReads{}
	cl := c.Client([]string{leader.Addr}, kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(60*time.Second), kgo.WithHooks(hook))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: part, Key: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce before the kill: %v", err)
	}

	c.Node(coord).Kill()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		m, err := clustertest.Metadata(leader.Addr, "__transaction_state")
		if err != nil || len(m.Topics) != 1 {
			return false, fmt.Sprintf("metadata of __transaction_state through node %d: %v", leader.ID, err)
		}
		for _, p := range m.Topics[0].Partitions {
			if p.Leader == coord {
				return false, fmt.Sprintf("node %d still answers node %d as the leader of __transaction_state-%d", leader.ID, coord, p.Partition)
			}
		}
		return true, ""
	})
	reads := hook.n.Load()
	done := make(chan error, 1)
	cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: part, Key: []byte("during")}, func(_ *kgo.Record, err error) { done <- err })
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("transactional produce to %s-%d while the coordinator's node %d is down: %v; want it retried until the coordinator is back", topic, part, coord, err)
		default:
		}
		return hook.n.Load() > reads, fmt.Sprintf("no Produce response read from node %d", leader.ID)
	})
	c.Node(coord).Start()
	if err := <-done; err != nil {
		t.Fatalf("transactional produce to %s-%d after the coordinator's node %d is back: %v", topic, part, coord, err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the coordinator's node %d is back: %v", coord, err)
	}
	rc := c.Client([]string{leader.Addr}, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var keys []string
	for len(keys) < 2 {
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed %s-%d: %v within 90 s, want [before during]", topic, part, keys)
		}
		fs.EachRecord(func(r *kgo.Record) { keys = append(keys, string(r.Key)) })
	}
	if !slices.Equal(keys, []string{"before", "during"}) {
		t.Fatalf("read_committed %s-%d: %v, want [before during]", topic, part, keys)
	}
}

// TestTxnOffsetsSurviveRestart: a transactional producer (franz-go) produces and commits
// consumer offsets in a transaction (AddOffsetsToTxn, TxnOffsetCommit); the broker is
// restarted in the middle of it, by SIGTERM and by SIGKILL; the producer then commits
// the transaction, and OffsetFetch (require_stable) answers the offsets, and the
// produced record is read_committed.
func TestTxnOffsetsSurviveRestart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 1})
	n := c.Node(1)
	createTopic(t, c, n.Addr, "eos-in", 1)
	createTopic(t, c, n.Addr, "eos-out", 1)
	for round, restart := range []string{"SIGTERM", "SIGKILL"} {
		group := fmt.Sprintf("eos-group-%d", round)
		cl := c.Client([]string{n.Addr}, kgo.TransactionalID(fmt.Sprintf("eos-%d", round)), kgo.DefaultProduceTopic("eos-out"),
			kgo.TransactionTimeout(60*time.Second), kgo.RequestRetries(20))
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(restart)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce in the transaction: %v", restart, err)
		}
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = fmt.Sprintf("eos-%d", round), pid, epoch, group
		if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("%s: AddOffsetsToTxn: %v %v", restart, err, kerr.ErrorForCode(resp.ErrorCode))
		}
		commit := kmsg.NewPtrTxnOffsetCommitRequest()
		commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = add.TransactionalID, group, pid, epoch
		commit.Generation, commit.MemberID = -1, ""
		tt := kmsg.NewTxnOffsetCommitRequestTopic()
		tt.Topic = "eos-in"
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset, tp.LeaderEpoch = 0, int64(40+round), -1
		tt.Partitions = append(tt.Partitions, tp)
		commit.Topics = append(commit.Topics, tt)
		resp, err := commit.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s: TxnOffsetCommit: %v", restart, err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("%s: TxnOffsetCommit: %v", restart, kerr.ErrorForCode(code))
		}

		if restart == "SIGTERM" {
			if out, err := n.Term(40 * time.Second); err != nil {
				t.Fatalf("SIGTERM: %v\n%s", err, out)
			}
		} else {
			n.Kill()
		}
		n.Start()
		c.WaitLeaders("eos-out")

		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("%s: commit the transaction after the restart: %v", restart, err)
		}
		var got map[int32]int64
		clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
			got, err = committedOffsets(n.Addr, group, "eos-in")
			return err == nil && got[0] == int64(40+round), fmt.Sprintf("%s: committed offsets of %s: %v %v", restart, group, got, err)
		})
		cancel()
		cl.Close()
	}
	rc := c.Client([]string{n.Addr}, kgo.ConsumeTopics("eos-out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var vals []string
	for len(vals) < 2 && ctx.Err() == nil {
		rc.PollFetches(ctx).EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	if !slices.Equal(vals, []string{"SIGTERM", "SIGKILL"}) {
		t.Fatalf("read_committed eos-out: %v, want both transactions' records", vals)
	}
}
