package mirror

import (
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/record"
)

// oldSourceSpy records what the mirror asks a kfake source: the Fetch versions and the
// OffsetForLeaderEpoch questions (epoch asked per partition).
type oldSourceSpy struct {
	mu         sync.Mutex
	maxFetchV  int16
	ofleAsks   []int32
	ofleBefore int // Fetch requests seen when the last OffsetForLeaderEpoch came
	fetches    int
}

func (s *oldSourceSpy) install(c *kfake.Cluster) {
	c.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		s.mu.Lock()
		s.maxFetchV = max(s.maxFetchV, r.GetVersion())
		s.fetches++
		s.mu.Unlock()
		return nil, nil, false
	})
	c.ControlKey(kmsg.OffsetForLeaderEpoch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.OffsetForLeaderEpochRequest)
		s.mu.Lock()
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				s.ofleAsks = append(s.ofleAsks, p.LeaderEpoch)
			}
		}
		s.ofleBefore = s.fetches
		s.mu.Unlock()
		return nil, nil, false
	})
}

func (s *oldSourceSpy) asks() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int32(nil), s.ofleAsks...)
}

// TestOldSourceFetchFallback mirrors from a source that serves only Apache Kafka 2.6's
// API versions (Fetch v11: no LastFetchedEpoch/DivergingEpoch, no topic IDs): the
// mirror fetches by name at v11, its log is byte-identical to the source's, the
// destination topic gets a topic ID of its own, a source leader change is followed by an
// OffsetForLeaderEpoch check with the last appended batch's epoch, and a
// FENCED_LEADER_EPOCH answer followed by an OffsetForLeaderEpoch answer below the mirror's
// LEO truncates the mirror there, after which it fetches the source's records again and
// ends identical to it.
func TestOldSourceFetchFallback(t *testing.T) {
	c, src := newKfake(t, kfake.NumBrokers(2), kfake.MaxVersions(kversion.V2_6_0()), kfake.SeedTopics(1, "old"))
	spy := &oldSourceSpy{}
	spy.install(c)
	addrs := c.ListenAddrs()
	produce(t, addrs, "old", 300, kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(40))
	produce(t, addrs, "old", 200, kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.MaxBufferedRecords(25))

	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", "old")
	e.waitCaughtUp(src, "m1", "old")
	sameBatches(t, "old-0", sourceBatches(t, src, "old", 0), localBatches(t, e.localLog("old", 0)))

	lt, ok := e.local.Metadata().Image().Topic("old")
	if !ok || lt.Mirror == nil {
		t.Fatalf("old is not a mirror topic: %+v", lt)
	}
	if lt.ID == (metadata.TopicID{}) || lt.Mirror.SourceTopicID != (metadata.TopicID{}) {
		t.Fatalf("a source without topic IDs: the destination topic ID must be its own (got %x), the source topic ID none (got %x)",
			lt.ID, lt.Mirror.SourceTopicID)
	}
	if v := spy.maxFetchV; v != 11 {
		t.Fatalf("the mirror fetched a 2.6 source at Fetch v%d, want v11", v)
	}

	// a source leader change: the mirror asks OffsetForLeaderEpoch with the epoch of its
	// last batch before fetching from the new leader
	lastEpoch := record.Batch(localBatches(t, e.localLog("old", 0))[len(localBatches(t, e.localLog("old", 0)))-1].data).LeaderEpoch()
	leader := c.LeaderFor("old", 0)
	if err := c.MoveTopicPartition("old", 0, 1-leader); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string { return fmt.Sprintf("OffsetForLeaderEpoch asks %v", spy.asks()) }, func() bool {
		for _, a := range spy.asks() {
			if a == lastEpoch {
				return true
			}
		}
		return false
	})
	produce(t, addrs, "old", 100, kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.MaxBufferedRecords(30))
	e.waitCaughtUp(src, "m1", "old")
	src0 := sourceBatches(t, src, "old", 0)
	sameBatches(t, "old-0 after the leader change", src0, localBatches(t, e.localLog("old", 0)))
	if d := e.describe("m1", "old")[0]; d.TruncatedRecords != 0 {
		t.Fatalf("an OffsetForLeaderEpoch answer at the mirror's LEO truncated %d records", d.TruncatedRecords)
	}

	// the source says it lost the tail: FENCED_LEADER_EPOCH on the next fetch, then the
	// end of the asked epoch below the mirror's LEO
	cut := src0[len(src0)-3].offset
	leo := e.localLog("old", 0).LogEndOffset()
	c.ControlKey(kmsg.OffsetForLeaderEpoch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.OffsetForLeaderEpochRequest)
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, rp.LeaderEpoch, cut
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.FencedLeaderEpoch.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	eventually(t, func() string { return fmt.Sprintf("describe %+v", e.describe("m1", "old")) }, func() bool {
		d := e.describe("m1", "old")[0]
		return d.TruncatedOffset == cut && d.TruncatedRecords == leo-cut
	})
	e.waitCaughtUp(src, "m1", "old")
	sameBatches(t, "old-0 after the truncation", sourceBatches(t, src, "old", 0), localBatches(t, e.localLog("old", 0)))
}

// TestSourceMetadataWithoutBrokers: a source broker that has no cluster metadata yet (a
// ZooKeeper-based Kafka broker just restarted) answers Metadata with no broker and every
// topic UNKNOWN_TOPIC_OR_PARTITION. However many such answers come, the mirror must not
// take the topic for deleted (FAILED non-retryable): it keeps mirroring once the source
// answers properly again.
func TestSourceMetadataWithoutBrokers(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "restarting"))
	addrs := c.ListenAddrs()
	produce(t, addrs, "restarting", 50)
	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", "restarting")
	e.waitCaughtUp(src, "m1", "restarting")

	var mu sync.Mutex
	empty := 0
	c.ControlKey(kmsg.Metadata.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.MetadataRequest)
		mu.Lock()
		defer mu.Unlock()
		if empty >= 4 || len(req.Topics) == 0 {
			c.KeepControl()
			return nil, nil, false // answered by kfake
		}
		c.KeepControl()
		empty++
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.ControllerID = -1
		for _, rt := range req.Topics {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic, st.ErrorCode = rt.Topic, kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	// the mirror refreshes the source metadata every 300 ms (fastConfig)
	eventually(t, func() string { return fmt.Sprintf("%d empty Metadata answers", empty) }, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return empty >= 4
	})
	produce(t, addrs, "restarting", 30)
	e.waitCaughtUp(src, "m1", "restarting")
}
