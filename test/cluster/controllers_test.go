package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// topicGone waits until every running broker answers UNKNOWN_TOPIC_OR_PARTITION for topic.
func topicGone(t *testing.T, c *clustertest.Cluster, topic string) {
	t.Helper()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		for _, b := range c.Brokers() {
			if !b.Running() {
				continue
			}
			_, err := clustertest.Leaders(b.Addr, topic)
			if !errors.Is(err, kerr.UnknownTopicOrPartition) {
				return false, fmt.Sprintf("node %d: metadata of deleted topic %s: %v", b.ID, topic, err)
			}
		}
		return true, ""
	})
}

// TestFiveNodesControllerFailover: three controller-only nodes and two broker-only nodes.
// The broker-only nodes are the quorum's observers and get the metadata: a topic created
// through one is served with the same leaders by the other, records produced through one
// are read through the other. kill -9 of the active controller (found with
// DescribeQuorum) elects another, and topics are still created and deleted through
// either broker; the killed controller rejoins. A broker-only node killed and restarted
// catches up and leads its partitions again.
func TestFiveNodesControllerFailover(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Controllers: 3, Brokers: 2})
	b4, b5 := c.Node(4), c.Node(5)
	q, err := clustertest.DescribeQuorum(b4.Addr)
	if err != nil {
		t.Fatalf("DescribeQuorum through broker 4: %v", err)
	}
	if !slices.Equal(q.Voters, []int32{1, 2, 3}) || !slices.Equal(q.Observers, []int32{4, 5}) {
		t.Fatalf("DescribeQuorum: voters %v, observers %v; want voters [1 2 3], observers [4 5]", q.Voters, q.Observers)
	}

	leaders := createTopic(t, c, b4.Addr, "before", 6)
	if got := distinct(leaders); !slices.Equal(got, []int32{4, 5}) {
		t.Fatalf("topic before is led by %v (leaders %v), want both brokers 4 and 5", got, leaders)
	}
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	produceSync(t, c.Client([]string{b5.Addr}), "before", keys)
	sameKeys(t, "records of topic before through broker 4", consumeKeys(t, c, b4.Addr, "before", len(keys)), keys)

	active := c.ActiveController()
	if active.ID > 3 {
		t.Fatalf("the active controller is node %d, a broker-only node", active.ID)
	}
	active.Kill()
	var next clustertest.Quorum
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		for _, b := range []*clustertest.Node{b4, b5} {
			q, err := clustertest.DescribeQuorum(b.Addr)
			if err != nil {
				return false, fmt.Sprintf("DescribeQuorum through broker %d: %v", b.ID, err)
			}
			if q.LeaderID == active.ID || q.LeaderID < 1 || q.LeaderID > 3 {
				return false, fmt.Sprintf("DescribeQuorum through broker %d: leader %d after node %d was killed", b.ID, q.LeaderID, active.ID)
			}
			next = q
		}
		return true, ""
	})
	if next.LeaderEpoch <= q.LeaderEpoch {
		t.Fatalf("the new active controller %d has epoch %d, the killed one had %d", next.LeaderID, next.LeaderEpoch, q.LeaderEpoch)
	}
	t.Logf("active controller %d killed; node %d elected at epoch %d", active.ID, next.LeaderID, next.LeaderEpoch)

	leaders = createTopic(t, c, b5.Addr, "after", 4)
	if got := distinct(leaders); !slices.Equal(got, []int32{4, 5}) {
		t.Fatalf("topic after is led by %v (leaders %v), want both brokers 4 and 5", got, leaders)
	}
	produceSync(t, c.Client([]string{b4.Addr}), "after", keys)
	sameKeys(t, "records of topic after through broker 5", consumeKeys(t, c, b5.Addr, "after", len(keys)), keys)

	adm := kadm.NewClient(c.Client([]string{b4.Addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.DeleteTopic(ctx, "before")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("DeleteTopics before through broker 4 after the controller failover: %v", err)
	}
	topicGone(t, c, "before")

	active.Start()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		q, err := clustertest.DescribeQuorum(b5.Addr)
		if err != nil {
			return false, fmt.Sprintf("DescribeQuorum through broker 5: %v", err)
		}
		if !slices.Equal(q.Voters, []int32{1, 2, 3}) {
			return false, fmt.Sprintf("voters %v after node %d restarted", q.Voters, active.ID)
		}
		return true, ""
	})
	createTopic(t, c, b4.Addr, "rejoined", 2)

	// A broker-only node killed and started again follows the metadata log again (its
	// local log replayed, as an observer) and leads its partitions again.
	before := c.WaitLeaders("after")
	b5.Kill()
	b5.Start()
	if got := c.WaitLeaders("after"); !slices.Equal(got, before) {
		t.Fatalf("after broker 5 restarted, topic after is led by %v, before by %v", got, before)
	}
	createTopic(t, c, b5.Addr, "after-broker-restart", 2)
	sameKeys(t, "records of topic after through broker 5 after its restart", consumeKeys(t, c, b5.Addr, "after", len(keys)), keys)
}

// leadersAndEpochs is the leader and leader epoch of every partition of topic as the
// broker at addr answers Metadata.
func leadersAndEpochs(addr, topic string) ([][2]int32, error) {
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
	out := make([][2]int32, len(m.Topics[0].Partitions))
	for _, p := range m.Topics[0].Partitions {
		out[p.Partition] = [2]int32{p.Leader, p.LeaderEpoch}
	}
	return out, nil
}

// TestCombinedControllerFailoverKeepsLiveLeaders: in a cluster of three combined nodes,
// kill -9 of the active controller elects another, which keeps the live brokers, its own
// included, in the cluster: once the killed node is fenced (its partitions answer leader
// −1), every partition the two live nodes led has the same leader at the same leader
// epoch as before (no leadership moved or bounced), and the new active controller never
// fenced a live broker.
func TestCombinedControllerFailoverKeepsLiveLeaders(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3})
	const topic = "stay"
	createTopic(t, c, c.Node(1).Addr, topic, 6)
	active := c.ActiveController()
	var witness *clustertest.Node
	for _, n := range c.Nodes {
		if n != active {
			witness = n
			break
		}
	}
	before, err := leadersAndEpochs(witness.Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	active.Kill()
	next := c.ActiveController()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			now, err := leadersAndEpochs(n.Addr, topic)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", n.ID, err)
			}
			for p, le := range now {
				if before[p][0] == active.ID && le[0] != -1 {
					return false, fmt.Sprintf("node %d answers leader %d for %s-%d, led by the killed node %d", n.ID, le[0], topic, p, active.ID)
				}
			}
		}
		return true, ""
	})
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		now, err := leadersAndEpochs(n.Addr, topic)
		if err != nil {
			t.Fatal(err)
		}
		for p, le := range now {
			if before[p][0] != active.ID && le != before[p] {
				t.Fatalf("after the active controller (node %d) was killed and node %d took over, node %d answers leader %d epoch %d for %s-%d; before: leader %d epoch %d",
					active.ID, next.ID, n.ID, le[0], le[1], topic, p, before[p][0], before[p][1])
			}
		}
	}
	for _, line := range strings.Split(next.Output(), "\n") {
		if strings.Contains(line, "fencing broker") && !strings.Contains(line, fmt.Sprintf("broker=%d ", active.ID)) {
			t.Fatalf("the new active controller (node %d) fenced a live broker: %s", next.ID, line)
		}
	}
}
