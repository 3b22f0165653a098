package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// createRF3Topic creates topic with replication factor 3 and min.insync.replicas 2 and
// waits until every partition has a leader.
func createRF3Topic(t *testing.T, c *clustertest.Cluster, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(c.Client([]string{c.Nodes[0].Addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("CreateTopics %s RF 3: %v", topic, err)
	}
	c.WaitLeaders(topic)
}

// TestReplicationRF3: a topic with replication factor 3 and min.insync.replicas 2 on three
// nodes takes acks=all idempotent writes through every node; every record is read back,
// and every partition's three replicas end byte-identical.
func TestReplicationRF3(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3})
	const topic, partitions = "replicated", 6
	createRF3Topic(t, c, topic, partitions)
	const perNode = 300
	var want []string
	for _, n := range c.Brokers() {
		cl := c.Client([]string{n.Addr}, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
		var keys []string
		for i := range perNode {
			keys = append(keys, fmt.Sprintf("n%d-%d", n.ID, i))
		}
		produceSync(t, cl, topic, keys)
		want = append(want, keys...)
	}
	sameKeys(t, "read back through node 2", consumeKeys(t, c, c.Node(2).Addr, topic, len(want)), want)
	for p := range int32(partitions) {
		clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
			var first string
			for _, n := range c.Nodes {
				d, size, ok := n.LogDigest(topic, p)
				if !ok {
					return false, fmt.Sprintf("node %d holds no replica of %s-%d", n.ID, topic, p)
				}
				if first == "" {
					first = d
				} else if d != first {
					return false, fmt.Sprintf("node %d's replica of %s-%d differs (%d bytes)", n.ID, topic, p, size)
				}
			}
			return true, ""
		})
	}
}

// TestKilledBrokerFencedOnConnectionLoss: a broker killed with SIGKILL is fenced once its
// controller connection has closed and no heartbeat followed within twice
// broker.heartbeat.interval.ms, without waiting out broker.session.timeout.ms (ten minutes
// here, longer than the test waits): its leaderships move to the other ISR members, it
// leaves every ISR, and acks=all writes go on.
func TestKilledBrokerFencedOnConnectionLoss(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3, Props: map[string]string{"broker.session.timeout.ms": "600000"}})
	const topic, partitions = "fenced-on-close", 3
	createRF3Topic(t, c, topic, partitions)
	active := c.ActiveController()
	var victim, survivor *clustertest.Node
	for _, n := range c.Nodes {
		switch {
		case n == active:
			survivor = n
		case victim == nil:
			victim = n
		}
	}
	victim.Kill()
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		md, err := clustertest.Metadata(survivor.Addr, topic)
		if err != nil {
			return false, err.Error()
		}
		for _, b := range md.Brokers {
			if b.NodeID == victim.ID {
				return false, fmt.Sprintf("killed broker %d is still listed (unfenced)", victim.ID)
			}
		}
		for _, p := range md.Topics[0].Partitions {
			if p.Leader == victim.ID || p.Leader < 0 {
				return false, fmt.Sprintf("%s-%d is led by %d", topic, p.Partition, p.Leader)
			}
			for _, r := range p.ISR {
				if r == victim.ID {
					return false, fmt.Sprintf("%s-%d keeps killed broker %d in its ISR %v", topic, p.Partition, victim.ID, p.ISR)
				}
			}
		}
		return true, ""
	})
	cl := c.Client([]string{survivor.Addr}, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	produceSync(t, cl, topic, []string{"after-1", "after-2", "after-3"})
}
