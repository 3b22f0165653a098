package broker_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// produceTo appends n records to topic/partition and fails the test on error.
func produceTo(t *testing.T, b *brokertest.Broker, topic string, partition int32, n int) {
	t.Helper()
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprint(i))}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func topicID(t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	td, err := kadm.NewClient(cl).ListTopics(context.Background(), topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("metadata of %s: %v %v", topic, err, td[topic].Err)
	}
	return td[topic].ID
}

// fetchReq is a Fetch v13 request with MaxWait 0 for the given partitions at offset 0
// (map partition → fetch offset).
func fetchReq(sessionID, epoch int32, id [16]byte, parts map[int32]int64) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.SetVersion(13)
	r.SessionID, r.SessionEpoch = sessionID, epoch
	r.MaxWaitMillis, r.MinBytes = 0, 0
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = id
		for p := int32(0); p < 16; p++ {
			off, ok := parts[p]
			if !ok {
				continue
			}
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// answered returns partition → number of record bytes for every partition in resp.
func answered(resp *kmsg.FetchResponse) map[int32]int {
	out := map[int32]int{}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			out[sp.Partition] = len(sp.RecordBatches)
		}
	}
	return out
}

// TestFetchSessionProtocol drives KIP-227 by hand: a full fetch creates a session,
// incremental fetches answer only changed partitions, add and forget partitions, and
// wrong epochs, unknown IDs, mixed topic-ID use and closed sessions get Kafka's errors.
func TestFetchSessionProtocol(t *testing.T) {
	b := brokertest.Start(t, nil)
	cl := b.Client()
	createTopic(t, cl, "fs", 3, nil)
	id := topicID(t, cl, "fs")
	produceTo(t, b, "fs", 0, 5)
	c := dialRaw(t, b.Addr())

	// Full fetch, epoch 0: a new session with partitions 0 and 1.
	full := c.request(fetchReq(0, 0, id, map[int32]int64{0: 0, 1: 0})).(*kmsg.FetchResponse)
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("full fetch: error %d session %d", full.ErrorCode, full.SessionID)
	}
	if got := answered(full); len(got) != 2 || got[0] == 0 {
		t.Fatalf("full fetch answered %v, want both partitions with records on 0", got)
	}
	sid := full.SessionID

	// Incremental epoch 1, offsets moved past the data: nothing changed, nothing answered.
	inc := c.request(fetchReq(sid, 1, id, map[int32]int64{0: 5})).(*kmsg.FetchResponse)
	if inc.ErrorCode != 0 || inc.SessionID != sid || len(answered(inc)) != 0 {
		t.Fatalf("unchanged incremental fetch: error %d session %d answered %v", inc.ErrorCode, inc.SessionID, answered(inc))
	}
	// The same epoch again is refused; the session survives.
	if r := c.request(fetchReq(sid, 1, id, nil)).(*kmsg.FetchResponse); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("repeated epoch: error %d, want INVALID_FETCH_SESSION_EPOCH", r.ErrorCode)
	}
	// New data on partition 1 only: only partition 1 is answered, with its records.
	produceTo(t, b, "fs", 1, 3)
	inc = c.request(fetchReq(sid, 2, id, nil)).(*kmsg.FetchResponse)
	if got := answered(inc); len(got) != 1 || got[1] == 0 || inc.Topics[0].TopicID != id {
		t.Fatalf("incremental after produce to 1 answered %v", got)
	}
	// Add partition 2 (never told: answered), update 1 past its data (HW unchanged: not).
	inc = c.request(fetchReq(sid, 3, id, map[int32]int64{1: 3, 2: 0})).(*kmsg.FetchResponse)
	if got := answered(inc); len(got) != 1 || got[2] != 0 {
		t.Fatalf("incremental adding partition 2 answered %v, want only 2 (empty)", got)
	}
	// Forget partition 0; new data on 0 is no longer fetched.
	forget := fetchReq(sid, 4, id, nil)
	forget.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{TopicID: id, Partitions: []int32{0}}}
	if r := c.request(forget).(*kmsg.FetchResponse); r.ErrorCode != 0 || len(answered(r)) != 0 {
		t.Fatalf("forget: error %d answered %v", r.ErrorCode, answered(r))
	}
	produceTo(t, b, "fs", 0, 2)
	produceTo(t, b, "fs", 2, 1)
	inc = c.request(fetchReq(sid, 5, id, nil)).(*kmsg.FetchResponse)
	if got := answered(inc); len(got) != 1 || got[2] == 0 {
		t.Fatalf("after forgetting 0 answered %v, want only partition 2", got)
	}
	// A v12 (topic names) request in a v13 (topic IDs) session.
	v12 := fetchReq(sid, 6, id, nil)
	v12.SetVersion(12)
	if r := c.request(v12).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v12 in a v13 session: error %d, want FETCH_SESSION_TOPIC_ID_ERROR", r.ErrorCode)
	}
	// Unknown session ID.
	if r := c.request(fetchReq(sid+1, 1, id, nil)).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	// Epoch −1 closes the session and answers sessionless.
	closeReq := fetchReq(sid, -1, id, map[int32]int64{0: 0})
	if r := c.request(closeReq).(*kmsg.FetchResponse); r.ErrorCode != 0 || r.SessionID != 0 || answered(r)[0] == 0 {
		t.Fatalf("closing fetch: error %d session %d answered %v", r.ErrorCode, r.SessionID, answered(r))
	}
	if r := c.request(fetchReq(sid, 6, id, nil)).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	// Sessions by topic name (v12) work the same way.
	v12full := fetchReq(0, 0, id, nil)
	v12full.SetVersion(12)
	v12full.Topics = []kmsg.FetchRequestTopic{{Topic: "fs", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 7, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1}}}}
	r := c.request(v12full).(*kmsg.FetchResponse)
	if r.SessionID == 0 {
		t.Fatal("v12 full fetch created no session")
	}
	produceTo(t, b, "fs", 0, 1)
	inc12 := fetchReq(r.SessionID, 1, id, nil)
	inc12.SetVersion(12)
	if r2 := c.request(inc12).(*kmsg.FetchResponse); len(answered(r2)) != 1 || r2.Topics[0].Topic != "fs" || answered(r2)[0] == 0 {
		t.Fatalf("v12 incremental answered %+v", r2.Topics)
	}
}

// TestFetchSessionCacheFull: with max.incremental.fetch.session.cache.slots=1 a second
// session is not created while the first is fresh (session ID 0, fetch still served).
func TestFetchSessionCacheFull(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"max.incremental.fetch.session.cache.slots": "1"})
	cl := b.Client()
	createTopic(t, cl, "slots", 1, nil)
	id := topicID(t, cl, "slots")
	produceTo(t, b, "slots", 0, 1)
	c := dialRaw(t, b.Addr())
	first := c.request(fetchReq(0, 0, id, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	second := c.request(fetchReq(0, 0, id, map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if first.SessionID == 0 || second.SessionID != 0 || answered(second)[0] == 0 {
		t.Fatalf("sessions %d, %d (want non-zero, 0); second answered %v", first.SessionID, second.SessionID, answered(second))
	}
}

// TestFetchSessionsFranzGo: franz-go consumers (which use incremental fetch sessions)
// read everything over 4 partitions while producing continues, in two rounds.
func TestFetchSessionsFranzGo(t *testing.T) {
	b := brokertest.Start(t, nil)
	createTopic(t, b.Client(), "fsg", 4, nil)
	p := b.Client(kgo.DefaultProduceTopic("fsg"))
	c := b.Client(kgo.ConsumeTopics("fsg"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(4096))
	next := 0
	for round := 0; round < 3; round++ {
		recs := make([]*kgo.Record, 2000)
		for i := range recs {
			recs[i] = &kgo.Record{Value: []byte(fmt.Sprint(next))}
			next++
		}
		if err := p.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		got := consumeN(t, c, len(recs))
		if len(got) != len(recs) {
			t.Fatalf("round %d: consumed %d, want %d", round, len(got), len(recs))
		}
		seen := map[string]bool{}
		for _, r := range got {
			if seen[string(r.Value)] {
				t.Fatalf("record %s twice", r.Value)
			}
			seen[string(r.Value)] = true
		}
	}
}
