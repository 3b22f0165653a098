package broker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// TestDescribeTopicPartitionsPages: topics come sorted by name, with every partition's
// leader, replicas and ISR, paged by ResponsePartitionLimit through the cursor as Kafka's
// handler does; an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION.
func TestDescribeTopicPartitionsPages(t *testing.T) {
	b := brokertest.Start(t, nil)
	cl := b.Client()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		n    int32
	}{{"b-topic", 3}, {"a-topic", 2}} {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tc.name, tc.n, 1
		req.Topics = append(req.Topics, rt)
		if _, err := req.RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for pages := 0; ; pages++ {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		for _, n := range []string{"b-topic", "a-topic", "nope"} {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = n
			req.Topics = append(req.Topics, rt)
		}
		req.ResponsePartitionLimit, req.Cursor = 2, cursor
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range resp.Topics {
			if *st.Topic == "nope" {
				if st.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					t.Fatalf("unknown topic: error %d", st.ErrorCode)
				}
				got = append(got, "nope:?")
				continue
			}
			for _, sp := range st.Partitions {
				if sp.LeaderID != b.NodeID() || len(sp.Replicas) != 1 || len(sp.ISR) != 1 || sp.ErrorCode != 0 {
					t.Fatalf("%s-%d: %+v", *st.Topic, sp.Partition, sp)
				}
				got = append(got, *st.Topic+":"+string(rune('0'+sp.Partition)))
			}
		}
		if resp.NextCursor == nil {
			break
		}
		if pages > 5 {
			t.Fatal("the cursor does not end")
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	want := "a-topic:0 a-topic:1 b-topic:0 b-topic:1 b-topic:2 nope:?"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("pages gave %q, want %q", s, want)
	}
}
