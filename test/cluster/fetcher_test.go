package cluster

// The replica fetcher's (internal/replication) recovery paths over real processes: a
// follower whose log diverged from the leader's truncates where the DivergingEpoch answer
// says (KIP-101/KIP-320), and one whose log ends below the leader's log start offset
// restarts at it (OFFSET_OUT_OF_RANGE, Kafka's fetchOffsetAndTruncate).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// pairTopic creates topic, one partition with replication factor 2 and
// min.insync.replicas 1, and returns its leader and follower once both are in the ISR.
func pairTopic(t *testing.T, c *clustertest.Cluster, topic string) (leader, follower *clustertest.Node) {
	t.Helper()
	adm := kadm.NewClient(c.Client([]string{c.Brokers()[0].Addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 1, 2, map[string]*string{"min.insync.replicas": kadm.StringPtr("1")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	var l int32
	var isr []int32
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		l, _, isr = partition0(c, topic)
		return l > 0 && len(isr) == 2, fmt.Sprintf("leader %d, ISR %v", l, isr)
	})
	return c.Node(l), c.Node(isr[0] + isr[1] - l)
}

// partition0 is partition 0 of topic as a running broker's Metadata answers it: leader,
// leader epoch and ISR (sorted); leader −1 when no running broker answers.
func partition0(c *clustertest.Cluster, topic string) (leader, epoch int32, isr []int32) {
	for _, b := range c.Brokers() {
		if !b.Running() {
			continue
		}
		m, err := clustertest.Metadata(b.Addr, topic)
		if err != nil || len(m.Topics) != 1 || len(m.Topics[0].Partitions) != 1 {
			continue
		}
		p := m.Topics[0].Partitions[0]
		isr = slices.Clone(p.ISR)
		slices.Sort(isr)
		return p.Leader, p.LeaderEpoch, isr
	}
	return -1, -1, nil
}

// offsetsVia returns the earliest and latest offsets of partition 0 of topic through
// node addr (the HW for the latest).
func offsetsVia(t *testing.T, c *clustertest.Cluster, addr, topic string) (int64, int64) {
	t.Helper()
	adm := kadm.NewClient(c.Client([]string{addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := start.Lookup(topic, 0)
	e, _ := end.Lookup(topic, 0)
	if s.Err != nil || e.Err != nil {
		t.Fatalf("ListOffsets of %s-0: %v, %v", topic, s.Err, e.Err)
	}
	return s.Offset, e.Offset
}

// TestFetcherTruncatesDivergingLog: a follower whose log has records the new leader
// never had truncates them away at the DivergingEpoch the leader answers and then holds
// exactly the leader's log. Partition 0 (replication factor 2) holds 10 records on both
// replicas; the follower F is killed (it leaves the ISR); 5 records written to the leader
// L alone (acks=1) are on L only; L is killed, F restarted and elected uncleanly (leader
// epoch + 1, from offset 10); 3 records written to F. The cluster is a controller and two
// brokers, so that the quorum outlives both replicas being down. When L restarts and fetches from
// its LEO 15 with its last epoch, it truncates to offset 10 and takes F's 3 records: its
// replica ends byte-identical to F's, a consumer reads the 10 + 3 records and none of the
// 5, and L is back in the ISR.
func TestFetcherTruncatesDivergingLog(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Controllers: 1, Brokers: 2, Props: map[string]string{"auto.leader.rebalance.enable": "false"}})
	const topic = "diverging"
	l, f := pairTopic(t, c, topic)
	all := c.Client([]string{l.Addr, f.Addr}, kgo.RequiredAcks(kgo.AllISRAcks()))
	produceSync(t, all, topic, keyRange("both", 10))
	f.Kill()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		_, _, isr := partition0(c, topic)
		return slices.Equal(isr, []int32{l.ID}), fmt.Sprintf("ISR %v, want the leader %d alone", isr, l.ID)
	})
	produceSync(t, c.Client([]string{l.Addr}, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()), topic, keyRange("lost", 5))
	_, epoch, _ := partition0(c, topic)
	l.Kill()
	f.Start()
	var got map[string]int16
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		got = electLeaders(t, f.Addr, 1, topic, []int32{0})
		return got[topic+"-0"] == 0, fmt.Sprintf("unclean election of %s-0: %v", topic, kerr.ErrorForCode(got[topic+"-0"]))
	})
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		leader, e, _ := partition0(c, topic)
		return leader == f.ID && e > epoch, fmt.Sprintf("leader %d at epoch %d, want node %d above epoch %d", leader, e, f.ID, epoch)
	})
	produceSync(t, c.Client([]string{f.Addr}, kgo.RequiredAcks(kgo.AllISRAcks())), topic, keyRange("new", 3))

	l.Start()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		_, _, isr := partition0(c, topic)
		dl, ls, _ := l.LogDigest(topic, 0)
		df, fs, _ := f.LogDigest(topic, 0)
		return dl == df && len(isr) == 2, fmt.Sprintf("node %d's replica %d bytes, the leader's %d (same: %v); ISR %v", l.ID, ls, fs, dl == df, isr)
	})
	if !strings.Contains(l.Output(), "truncating a diverging log") {
		t.Errorf("node %d did not log a diverging-epoch truncation", l.ID)
	}
	sameKeys(t, "read after the truncation", consumeKeys(t, c, f.Addr, topic, 13), append(keyRange("both", 10), keyRange("new", 3)...))
}

// TestFetcherRestartsBelowLogStart: a follower whose log ends below the leader's log
// start offset (OFFSET_OUT_OF_RANGE) restarts its log, empty, at the leader's log start
// and replicates from there. The follower F of partition 0 (replication factor 2) is
// killed after 10 records; the leader takes 20 more alone and DeleteRecords moves its
// log start to 25. Restarted, F rejoins the ISR; once it leads (the old leader stopped
// with a controlled shutdown) its log starts at 25 and ends at 30, and a consumer reads
// the 5 records from 25 on.
func TestFetcherRestartsBelowLogStart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3, Props: map[string]string{"auto.leader.rebalance.enable": "false"}})
	const topic = "below-start"
	l, f := pairTopic(t, c, topic)
	produceSync(t, c.Client([]string{l.Addr}, kgo.RequiredAcks(kgo.AllISRAcks())), topic, keyRange("a", 10))
	f.Kill()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		_, _, isr := partition0(c, topic)
		return slices.Equal(isr, []int32{l.ID}), fmt.Sprintf("ISR %v, want the leader %d alone", isr, l.ID)
	})
	cl := c.Client([]string{l.Addr}, kgo.RequiredAcks(kgo.AllISRAcks()))
	keys := keyRange("b", 20)
	for i := 0; i < 20; i += 5 {
		produceSync(t, cl, topic, keys[i:i+5])
	}
	adm := kadm.NewClient(c.Client([]string{l.Addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 25})
	dr, err := adm.DeleteRecords(ctx, os)
	if err == nil {
		err = dr.Error()
	}
	if err != nil {
		t.Fatalf("DeleteRecords before 25: %v", err)
	}
	if s, e := offsetsVia(t, c, l.Addr, topic); s != 25 || e != 30 {
		t.Fatalf("the leader's offsets after DeleteRecords: [%d, %d), want [25, 30)", s, e)
	}

	f.Start()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		_, _, isr := partition0(c, topic)
		return len(isr) == 2, fmt.Sprintf("ISR %v, want both replicas", isr)
	})
	if out, err := l.Term(40 * time.Second); err != nil {
		t.Fatalf("SIGTERM node %d: %v; last line: %s", l.ID, err, clustertest.LastLine(out))
	}
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		leader, _, _ := partition0(c, topic)
		return leader == f.ID, fmt.Sprintf("leader %d, want node %d", leader, f.ID)
	})
	if s, e := offsetsVia(t, c, f.Addr, topic); s != 25 || e != 30 {
		t.Fatalf("the restarted follower, leading, has offsets [%d, %d), want [25, 30)", s, e)
	}
	sameKeys(t, "read from the restarted follower", consumeKeys(t, c, f.Addr, topic, 5), keys[15:])
}
