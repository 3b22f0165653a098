package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// electLeaders sends ElectLeaders to addr for partitions of topic (all partitions of
// every topic when partitions is nil) and returns each partition's error by
// "topic-partition".
func electLeaders(t *testing.T, addr string, electionType int8, topic string, partitions []int32) map[string]int16 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType, req.TimeoutMillis = electionType, 20000
	if partitions != nil {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, partitions
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		t.Fatalf("ElectLeaders through %s: %v", addr, err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ElectLeaders through %s: %v", addr, kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	return out
}

// TestElectLeadersForwarded runs kafka-leader-election's request through a broker-only
// node, which forwards it to the active controller: preferred and unclean elections of
// partitions that have their leaders are not needed, an unknown partition is
// UNKNOWN_TOPIC_OR_PARTITION, and once the only replica of some partitions is killed
// their preferred election is PREFERRED_LEADER_NOT_AVAILABLE and their unclean one
// ELIGIBLE_LEADERS_NOT_AVAILABLE.
func TestElectLeadersForwarded(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Controllers: 1, Brokers: 2})
	b2, b3 := c.Node(2), c.Node(3)
	leaders := createTopic(t, c, b2.Addr, "elect", 4)
	const preferred, unclean = 0, 1
	all := []int32{0, 1, 2, 3}
	want := map[string]int16{"elect-9": kerr.UnknownTopicOrPartition.Code}
	for _, p := range all {
		want[fmt.Sprintf("elect-%d", p)] = kerr.ElectionNotNeeded.Code
	}
	for _, typ := range []int8{preferred, unclean} {
		if got := electLeaders(t, b3.Addr, typ, "elect", append(all, 9)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("election type %d through broker 3: %v, want %v", typ, got, want)
		}
	}
	if got := electLeaders(t, b3.Addr, preferred, "", nil); len(got) != 0 {
		t.Fatalf("preferred election of every partition, all led by their preferred replica: %v", got)
	}

	b2.Kill()
	var on2 []int32
	for p, l := range leaders {
		if l == 2 {
			on2 = append(on2, int32(p))
		}
	}
	if len(on2) == 0 {
		t.Fatalf("no partition led by broker 2: leaders %v", leaders)
	}
	key := fmt.Sprintf("elect-%d", on2[0])
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		got := electLeaders(t, b3.Addr, preferred, "elect", on2[:1])
		return got[key] == kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("preferred election of %s with broker 2 killed: %v", key, got)
	})
	if got := electLeaders(t, b3.Addr, unclean, "elect", on2[:1]); got[key] != kerr.EligibleLeadersNotAvailable.Code {
		t.Fatalf("unclean election of %s, whose only replica is down: %v", key, got)
	}
}
