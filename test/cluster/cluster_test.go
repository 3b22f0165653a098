// Package cluster tests kmirror clusters of real `kmirror serve` processes on loopback
// (internal/clustertest) with real clients, franz-go and kcat: every node serves the
// whole cluster, metadata reaches broker-only nodes, the active controller and a
// coordinator's node can be killed, a node stops with a controlled shutdown, and bad
// nodes are refused without harm to the running cluster (issue 13's "Done when"). Apache
// Kafka's own tools against such clusters are in test/interop (KMIRROR_INTEROP=1).
package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

// createTopic creates topic through the broker at addr and waits until every running
// broker answers a live leader for each partition; it returns the leaders.
func createTopic(t *testing.T, c *clustertest.Cluster, addr, topic string, partitions int32) []int32 {
	t.Helper()
	adm := kadm.NewClient(c.Client([]string{addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("CreateTopics %s through %s: %v", topic, addr, err)
	}
	return c.WaitLeaders(topic)
}

// distinct returns the sorted distinct values of ids.
func distinct(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func needKcat(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed; run `make deps`")
	}
}

// kcat runs kcat with args and stdin, failing the test on a non-zero exit.
func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("kcat %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// produceSync produces one record per key to topic through cl, round robin over the
// partitions, failing the test on any error.
func produceSync(t *testing.T, cl *kgo.Client, topic string, keys []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, k := range keys {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("v-" + k)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// consumeKeys reads topic from the start through a client seeded with seed only until it
// holds n records, and returns their keys; it fails the test after 30 s with fewer.
func consumeKeys(t *testing.T, c *clustertest.Cluster, seed, topic string, n int) []string {
	t.Helper()
	cl := c.Client([]string{seed}, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	for len(keys) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s through %s: %d of %d records within 30 s", topic, seed, len(keys), n)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Logf("fetch %s-%d through %s: %v (retried)", topic, p, seed, err)
		})
		fs.EachRecord(func(r *kgo.Record) { keys = append(keys, string(r.Key)) })
	}
	return keys
}

// sameKeys fails the test unless got holds each of want exactly once.
func sameKeys(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	sort.Strings(g)
	sort.Strings(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s: got %d records, want %d (each once)\ngot:  %v\nwant: %v", what, len(g), len(w), clip(g), clip(w))
	}
}

func clip(s []string) []string {
	if len(s) > 40 {
		return append(s[:40:40], fmt.Sprintf("… %d more", len(s)-40))
	}
	return s
}

// TestThreeNodesAnyBootstrap: on a cluster of three combined nodes a topic of 12
// partitions created through one node gets leaders on all three, every node answers the
// same leaders and the same quorum (DescribeQuorum: one leader, voters 1–3), and
// franz-go and kcat produce through each node and read everything back through each
// node.
func TestThreeNodesAnyBootstrap(t *testing.T) {
	needKcat(t)
	c := clustertest.Start(t, clustertest.Spec{Combined: 3})
	leaders := createTopic(t, c, c.Node(2).Addr, "spread", 12)
	if got := distinct(leaders); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("the 12 partitions are led by nodes %v (leaders %v), want all of 1, 2, 3", got, leaders)
	}

	var quorum clustertest.Quorum
	for i, n := range c.Brokers() {
		q, err := clustertest.DescribeQuorum(n.Addr)
		if err != nil {
			t.Fatalf("DescribeQuorum through node %d: %v", n.ID, err)
		}
		if !slices.Equal(q.Voters, []int32{1, 2, 3}) || q.LeaderID < 1 || q.LeaderID > 3 {
			t.Fatalf("DescribeQuorum through node %d: leader %d, voters %v; want a leader among voters [1 2 3]", n.ID, q.LeaderID, q.Voters)
		}
		if i > 0 && q.LeaderID != quorum.LeaderID {
			t.Fatalf("DescribeQuorum: node %d names leader %d, node 1 leader %d", n.ID, q.LeaderID, quorum.LeaderID)
		}
		quorum = q
	}

	var want []string
	for _, n := range c.Brokers() {
		cl := c.Client([]string{n.Addr}, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		var keys []string
		for j := range 120 {
			keys = append(keys, fmt.Sprintf("kgo-%d-%03d", n.ID, j))
		}
		produceSync(t, cl, "spread", keys)
		want = append(want, keys...)

		var in strings.Builder
		for j := range 30 {
			k := fmt.Sprintf("kcat-%d-%02d", n.ID, j)
			fmt.Fprintf(&in, "%s:v-%s\n", k, k)
			want = append(want, k)
		}
		kcat(t, in.String(), "-b", n.Addr, "-P", "-t", "spread", "-K:", "-X", "acks=all", "-X", "partitioner=random")
	}

	for _, n := range c.Brokers() {
		sameKeys(t, fmt.Sprintf("franz-go through node %d", n.ID), consumeKeys(t, c, n.Addr, "spread", len(want)), want)
		out := kcat(t, "", "-b", n.Addr, "-C", "-t", "spread", "-e", "-q", "-f", "%k\n")
		sameKeys(t, fmt.Sprintf("kcat through node %d", n.ID), strings.Fields(out), want)
	}
}
