package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fullFetch is a v13 full fetch (epoch 0) of n partitions of one topic, with its
// response (every partition at high watermark 10).
func fullFetch(n int) (*kmsg.FetchRequest, *kmsg.FetchResponse) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(13)
	req.SessionEpoch = 0
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = [16]byte{1}
	st := kmsg.NewFetchResponseTopic()
	st.TopicID = rt.TopicID
	for p := int32(0); p < int32(n); p++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition, sp.HighWatermark, sp.LogStartOffset = p, 10, 0
		st.Partitions = append(st.Partitions, sp)
	}
	req.Topics = []kmsg.FetchRequestTopic{rt}
	resp.Topics = []kmsg.FetchResponseTopic{st}
	return req, resp
}

// TestFetchSessionEviction follows FetchSessionCache.tryEvict: a full cache refuses a
// new session while every session is fresh, evicts a session idle for more than the
// eviction time, and otherwise evicts the smallest session older than the eviction
// time when the new one is at least as large.
func TestFetchSessionEviction(t *testing.T) {
	c := newFetchSessionCache(2)
	create := func(n int, now int64) int32 {
		req, resp := fullFetch(n)
		return c.finish(c.newContext(req, now), resp, now, nil).SessionID
	}
	a := create(3, 0)
	b := create(1, 0)
	if a == 0 || b == 0 || c.len() != 2 {
		t.Fatalf("sessions %d %d, cache %d", a, b, c.len())
	}
	if id := create(5, 1000); id != 0 {
		t.Fatalf("full cache of fresh sessions created session %d", id)
	}
	// Keep b in use; a goes idle past the eviction time and is evicted.
	inc := kmsg.NewPtrFetchRequest()
	inc.SetVersion(13)
	inc.SessionID, inc.SessionEpoch = b, 1
	later := int64(fetchSessionEvictionMs + 10)
	if fc := c.newContext(inc, later); fc.kind != fetchIncremental {
		t.Fatalf("incremental fetch of b: kind %d err %d", fc.kind, fc.errCode)
	}
	d := create(2, later+1)
	if d == 0 || c.sessions[a] != nil || c.sessions[b] == nil {
		t.Fatalf("stale session not evicted: new %d, a present %v", d, c.sessions[a] != nil)
	}
	// Both b (1 partition) and d are in use, b is old: a new session of 1 partition
	// evicts the smallest old one, b.
	now := later + 20
	inc.SessionEpoch = 2
	c.newContext(inc, now)
	e := create(1, now+1)
	if e == 0 || c.sessions[b] != nil || c.sessions[d] == nil {
		t.Fatalf("old small session not evicted: new %d, b present %v", e, c.sessions[b] != nil)
	}
}
