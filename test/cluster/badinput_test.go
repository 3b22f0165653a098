package cluster

import (
	"context"
	"fmt"
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
)

// refused starts n and waits for it to exit by itself: it must exit non-zero with its
// reason as its last line, one line starting "Error: " that holds each of wants.
func refused(t *testing.T, n *clustertest.Node, what string, wants ...string) string {
	t.Helper()
	n.Spawn()
	out, err, exited := n.Wait(60 * time.Second)
	if !exited {
		n.Kill()
		t.Fatalf("%s: node %d still runs after 60 s; last line: %s", what, n.ID, clustertest.LastLine(out))
	}
	line := clustertest.LastLine(out)
	if err == nil {
		t.Fatalf("%s: node %d exited with status 0; last line: %s", what, n.ID, line)
	}
	if !strings.HasPrefix(line, "Error: ") || strings.Count(out, "Error: ") != 1 {
		t.Fatalf("%s: node %d's last line is not its one error line: %q", what, n.ID, line)
	}
	for _, w := range wants {
		if !strings.Contains(line, w) {
			t.Fatalf("%s: node %d's error does not say %q: %s", what, n.ID, w, line)
		}
	}
	t.Logf("%s: %s", what, line)
	return line
}

// healthy checks that the cluster is as it was: every broker lists the brokers want and
// no other, each at its own address; the active controller is still before; records
// produced through each broker are read back through each.
func healthy(t *testing.T, c *clustertest.Cluster, want []int32, before *clustertest.Node, round string) {
	t.Helper()
	for _, b := range c.Brokers() {
		m, err := clustertest.Metadata(b.Addr)
		if err != nil {
			t.Fatalf("%s: Metadata through node %d: %v", round, b.ID, err)
		}
		var ids []int32
		for _, mb := range m.Brokers {
			ids = append(ids, mb.NodeID)
			if addr := fmt.Sprintf("%s:%d", mb.Host, mb.Port); addr != c.Node(mb.NodeID).Addr {
				t.Fatalf("%s: node %d lists broker %d at %s, want %s", round, b.ID, mb.NodeID, addr, c.Node(mb.NodeID).Addr)
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, want) {
			t.Fatalf("%s: node %d lists brokers %v, want %v", round, b.ID, ids, want)
		}
	}
	if now := c.ActiveController(); now != before {
		t.Fatalf("%s: the active controller changed from node %d to node %d", round, before.ID, now.ID)
	}
	topic := "healthy-" + strings.ReplaceAll(round, " ", "-")
	createTopic(t, c, c.Node(1).Addr, topic, 4)
	var keys []string
	for _, b := range c.Brokers() {
		k := keyRange(fmt.Sprintf("%s-%d", topic, b.ID), 8)
		produceSync(t, c.Client([]string{b.Addr}), topic, k)
		keys = append(keys, k...)
	}
	for _, b := range c.Brokers() {
		sameKeys(t, fmt.Sprintf("%s: records through node %d", round, b.ID), consumeKeys(t, c, b.Addr, topic, len(keys)), keys)
	}
}

// TestBadNodesRefused: against a running cluster of three combined nodes and a
// broker-only node, each bad node is refused with a one-line error that says what is
// wrong, and the cluster is unharmed (same brokers at the same addresses, same active
// controller, records produced and read through every broker):
//   - a broker-only node formatted with another cluster ID, and a voter restarted on a
//     log directory formatted with another cluster ID;
//   - a node of the 3-voter config whose log directory is not formatted (the message names
//     `kmirror storage format`);
//   - a controller whose node.id controller.quorum.voters does not name (a config error
//     naming the key; `kmirror storage format` refuses it too);
//   - a second broker with the node.id of a running one (another broker is registered
//     with that node.id).
func TestBadNodesRefused(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3, Brokers: 1})
	all := []int32{1, 2, 3, 4}
	active := c.ActiveController()
	healthy(t, c, all, active, "at start")

	other := clustertest.RandomUUID(t)
	n5 := c.NewNode(5, "broker", nil)
	n5.Format(other)
	refused(t, n5, "broker-only node of another cluster", "formatted for another cluster")

	var voter *clustertest.Node
	for _, n := range c.Nodes[:3] {
		if n != active {
			voter = n
			break
		}
	}
	if out, err := voter.Term(40 * time.Second); err != nil {
		t.Fatalf("SIGTERM node %d: %v; last line: %s", voter.ID, err, clustertest.LastLine(out))
	}
	ownDir := voter.Props["log.dirs"]
	voter.Props["log.dirs"] = filepath.Join(t.TempDir(), "other-cluster")
	voter.Format(other)
	refused(t, voter, fmt.Sprintf("voter %d restarted on a log directory of another cluster", voter.ID), "cluster")
	voter.Props["log.dirs"] = filepath.Join(t.TempDir(), "unformatted")
	refused(t, voter, fmt.Sprintf("voter %d restarted on an unformatted log directory", voter.ID), "kmirror storage format", "not formatted")
	voter.Props["log.dirs"] = ownDir
	voter.Start()
	c.WaitBrokers(len(all))
	healthy(t, c, all, active, "after the bad voters")

	n6 := c.NewNode(6, "broker", nil)
	refused(t, n6, "unformatted broker-only node", "kmirror storage format", "not formatted")

	n7 := c.NewNode(7, "broker,controller", nil)
	n7.WriteConfig()
	refused(t, n7, "controller not named by controller.quorum.voters", "controller.quorum.voters", "node id 7")
	if out, err := exec.Command(clustertest.Bin(t), "storage", "format", "-t", c.ClusterID, "-c", n7.Config()).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "controller.quorum.voters") {
		t.Fatalf("kmirror storage format of a controller not named by controller.quorum.voters: %v\n%s", err, out)
	}

	dup := c.NewNode(4, "broker", nil)
	dup.Format(c.ClusterID)
	refused(t, dup, "second broker with node.id 4", "another broker is registered with that node.id")
	if !c.Node(4).Running() {
		t.Fatal("node 4 stopped when a second node with its node.id tried to register")
	}
	healthy(t, c, all, active, "after the bad brokers")
}

// followerFetch sends node addr one Fetch (v16 at most) as follower replicaID with broker
// epoch brokerEpoch for partition 0 of topic id from offset, naming leaderEpoch (−1:
// none), and returns its answer for the partition.
func followerFetch(t *testing.T, addr string, id [16]byte, replicaID int32, brokerEpoch int64, leaderEpoch int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID, req.ReplicaState.Epoch = replicaID, replicaID, brokerEpoch
	req.MaxWaitMillis, req.MinBytes = 0, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.PartitionMaxBytes = 0, leaderEpoch, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		t.Fatalf("Fetch as replica %d: %v", replicaID, err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch as replica %d: error %d, %d topics", replicaID, resp.ErrorCode, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// leaderView is what the leader of partition 0 of a topic answers about it: the high
// watermark a consumer's Fetch sees, the LEO a follower's would, the ISR Metadata names.
type leaderView struct {
	hw  int64
	isr []int32
}

func viewOf(t *testing.T, addr, topic string, id [16]byte) leaderView {
	t.Helper()
	sp := followerFetch(t, addr, id, -1, -1, -1, 0)
	if sp.ErrorCode != 0 {
		t.Fatalf("consumer Fetch of %s-0: error %d", topic, sp.ErrorCode)
	}
	m, err := clustertest.Metadata(addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	isr := slices.Clone(m.Topics[0].Partitions[0].ISR)
	slices.Sort(isr)
	return leaderView{hw: sp.HighWatermark, isr: isr}
}

// TestBadFollowerFetches: follower Fetches that Apache Kafka refuses are refused with
// Kafka's error and change nothing the leader knows. Partition 0 of a topic with
// replication factor 2 on a controller and three brokers has leader L (leader epoch ≥ 1,
// after a controlled shutdown of the first leader, which now follows as F with a new
// broker epoch) and a third broker N; F is paused (SIGSTOP, still in the ISR: long
// session and lag timeouts) so that five records produced with acks=1 leave the high
// watermark at F's LEO, five below L's. Each of these fetches, asking from L's LEO (which
// would move the HW there if it were recorded as F's position), gets the error of Kafka's
// Partition.fetchRecords and no records, and the HW and the ISR stay as they were:
//   - as F with the broker epoch of its previous process: NOT_LEADER_OR_FOLLOWER
//     (Replica.updateFetchStateOrThrow's stale broker epoch);
//   - as F with a leader epoch older than L's: FENCED_LEADER_EPOCH; newer:
//     UNKNOWN_LEADER_EPOCH;
//   - as N, not a replica: UNKNOWN_LEADER_EPOCH when it names the leader epoch,
//     NOT_LEADER_OR_FOLLOWER when it does not (followerReplicaOrThrow).
//
// The same fetch as F with its current broker epoch does move the HW to L's LEO; F,
// resumed, ends with a replica identical to L's.
func TestBadFollowerFetches(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Controllers: 1, Brokers: 3, Props: map[string]string{
		"broker.session.timeout.ms":    "120000",
		"replica.lag.time.max.ms":      "120000",
		"auto.leader.rebalance.enable": "false",
	}})
	const topic = "bad-fetch"
	adm := kadm.NewClient(c.Client([]string{c.Node(2).Addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("CreateTopics %s: %v %v", topic, err, resp.Err)
	}
	var meta *kmsg.MetadataResponse
	state := func(addr string) (leader, epoch int32, replicas, isr []int32) {
		var err error
		if meta, err = clustertest.Metadata(addr, topic); err != nil || len(meta.Topics) != 1 || len(meta.Topics[0].Partitions) != 1 {
			return -1, -1, nil, nil
		}
		p := meta.Topics[0].Partitions[0]
		return p.Leader, p.LeaderEpoch, p.Replicas, p.ISR
	}
	var first int32
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		l, _, r, isr := state(c.Node(2).Addr)
		first = l
		return l > 0 && len(isr) == 2, fmt.Sprintf("leader %d, replicas %v, ISR %v", l, r, isr)
	})
	id := meta.Topics[0].TopicID
	oldEpoch := c.Node(first).BrokerEpoch()
	if oldEpoch < 0 {
		t.Fatalf("node %d logged no broker epoch", first)
	}
	if out, err := c.Node(first).Term(40 * time.Second); err != nil {
		t.Fatalf("SIGTERM node %d: %v; last line: %s", first, err, clustertest.LastLine(out))
	}
	c.Node(first).Start()
	var leaderID, epoch int32
	var replicas []int32
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		var isr []int32
		leaderID, epoch, replicas, isr = state(c.Node(first).Addr)
		return leaderID > 0 && leaderID != first && epoch >= 1 && len(isr) == 2 && c.Node(first).BrokerEpoch() > oldEpoch,
			fmt.Sprintf("leader %d (epoch %d), ISR %v, node %d's broker epoch %d (was %d)", leaderID, epoch, isr, first, c.Node(first).BrokerEpoch(), oldEpoch)
	})
	f, l := c.Node(first), c.Node(leaderID)
	var n *clustertest.Node
	for _, b := range c.Brokers() {
		if !slices.Contains(replicas, b.ID) {
			n = b
		}
	}
	fEpoch, nEpoch := f.BrokerEpoch(), n.BrokerEpoch()
	t.Logf("leader %d at epoch %d; follower %d (broker epoch %d, before its restart %d); node %d (broker epoch %d) not a replica",
		l.ID, epoch, f.ID, fEpoch, oldEpoch, n.ID, nEpoch)

	produceSync(t, c.Client([]string{l.Addr}, kgo.RequiredAcks(kgo.AllISRAcks())), topic, keyRange("all", 5))
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		v := viewOf(t, l.Addr, topic, id)
		return v.hw == 5, fmt.Sprintf("HW %d, want 5", v.hw)
	})
	f.Pause()
	defer f.Resume()
	produceSync(t, c.Client([]string{l.Addr}, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()), topic, keyRange("one", 5))
	before := viewOf(t, l.Addr, topic, id)
	if before.hw != 5 || !slices.Equal(before.isr, []int32{min(l.ID, f.ID), max(l.ID, f.ID)}) {
		t.Fatalf("with node %d paused: HW %d, ISR %v; want 5 and both replicas", f.ID, before.hw, before.isr)
	}
	for _, tc := range []struct {
		what        string
		replica     int32
		brokerEpoch int64
		leaderEpoch int32
		want        *kerr.Error
	}{
		{"the follower with its previous process's broker epoch", f.ID, oldEpoch, epoch, kerr.NotLeaderForPartition},
		{"the follower with an older leader epoch", f.ID, fEpoch, epoch - 1, kerr.FencedLeaderEpoch},
		{"the follower with a newer leader epoch", f.ID, fEpoch, epoch + 1, kerr.UnknownLeaderEpoch},
		{"a broker with no replica, naming the leader epoch", n.ID, nEpoch, epoch, kerr.UnknownLeaderEpoch},
		{"a broker with no replica, naming no leader epoch", n.ID, nEpoch, -1, kerr.NotLeaderForPartition},
	} {
		sp := followerFetch(t, l.Addr, id, tc.replica, tc.brokerEpoch, tc.leaderEpoch, 10)
		if sp.ErrorCode != tc.want.Code || len(sp.RecordBatches) != 0 {
			t.Errorf("Fetch as %s: error %v with %d bytes of records, want %v and none", tc.what, kerr.ErrorForCode(sp.ErrorCode), len(sp.RecordBatches), tc.want)
		}
		if after := viewOf(t, l.Addr, topic, id); after.hw != before.hw || !slices.Equal(after.isr, before.isr) {
			t.Fatalf("after the Fetch as %s: HW %d, ISR %v; before %d, %v", tc.what, after.hw, after.isr, before.hw, before.isr)
		}
	}
	if sp := followerFetch(t, l.Addr, id, f.ID, fEpoch, epoch, 10); sp.ErrorCode != 0 {
		t.Fatalf("Fetch as the follower with its broker epoch: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		v := viewOf(t, l.Addr, topic, id)
		return v.hw == 10, fmt.Sprintf("after a valid Fetch from offset 10: HW %d, want 10", v.hw)
	})
	f.Resume()
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		dl, _, _ := l.LogDigest(topic, 0)
		df, size, _ := f.LogDigest(topic, 0)
		return dl == df, fmt.Sprintf("node %d's replica (%d bytes) differs from the leader's", f.ID, size)
	})
}
