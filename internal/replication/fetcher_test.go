package replication

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/partition"
)

func TestNotLeaderBackoff(t *testing.T) {
	max := time.Second
	want := []time.Duration{20, 40, 80, 160, 320, 640, 1000, 1000}
	for n, w := range want {
		if got := notLeaderBackoff(n, max); got != w*time.Millisecond {
			t.Errorf("notLeaderBackoff(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
	for _, n := range []int{16, 40, 1 << 20} {
		if got := notLeaderBackoff(n, max); got != max {
			t.Errorf("notLeaderBackoff(%d) = %v, want %v", n, got, max)
		}
	}
	if got := notLeaderBackoff(0, 5*time.Millisecond); got != 5*time.Millisecond {
		t.Errorf("with a 5 ms replica.fetch.backoff.ms: %v", got)
	}
}

// TestProcessNotLeaderPause checks the pause process gives a partition the leader
// answered NOT_LEADER_OR_FOLLOWER or UNKNOWN_LEADER_EPOCH: notLeaderBackoff of the
// answers in a row, while other errors keep replica.fetch.backoff.ms. The bounds compare
// the deadline process sets with clock readings taken before and after the call, which
// hold however long the call takes.
func TestProcessNotLeaderPause(t *testing.T) {
	m := NewManager(Options{Backoff: time.Second})
	defer m.Close()
	f := newFetcher(m, fetcherKey{leader: 2})
	p := &partition.Partition{}
	f.add(p, 5)
	k := partKey{topic: "t", p: 0}
	asked := func() map[partKey]sent {
		return map[partKey]sent{k: {p: p, gen: f.parts[p].gen, leaderEpoch: 5}}
	}
	answer := func(code int16) time.Duration {
		resp := kmsg.NewPtrFetchResponse()
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.ErrorCode = code
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		before := time.Now()
		f.process(context.Background(), nil, resp, asked())
		after := time.Now()
		until := f.parts[p].delayUntil
		lo, hi := until.Sub(after), until.Sub(before)
		// The pause d was added to a reading between before and after: lo ≤ d ≤ hi.
		for _, d := range []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, time.Second} {
			if lo <= d && d <= hi {
				return d
			}
		}
		t.Fatalf("error %d: pause between %v and %v, none of the expected ones", code, lo, hi)
		return 0
	}
	if d := answer(kerr.NotLeaderForPartition.Code); d != 20*time.Millisecond {
		t.Errorf("first NOT_LEADER_OR_FOLLOWER: pause %v, want 20ms", d)
	}
	if d := answer(kerr.UnknownLeaderEpoch.Code); d != 40*time.Millisecond {
		t.Errorf("then UNKNOWN_LEADER_EPOCH: pause %v, want 40ms", d)
	}
	if d := answer(kerr.NotLeaderForPartition.Code); d != 80*time.Millisecond {
		t.Errorf("third in a row: pause %v, want 80ms", d)
	}
	if d := answer(kerr.UnknownTopicOrPartition.Code); d != time.Second {
		t.Errorf("UNKNOWN_TOPIC_OR_PARTITION: pause %v, want replica.fetch.backoff.ms (1s)", d)
	}
	// A new leader epoch (Follow → add) starts the count again.
	f.add(p, 6)
	if d := answer(kerr.NotLeaderForPartition.Code); d != 20*time.Millisecond {
		t.Errorf("after a new leader epoch: pause %v, want 20ms", d)
	}
}
