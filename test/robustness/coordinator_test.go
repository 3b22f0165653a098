package robustness

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// TestCoordinatorMoveKeepsOffsets: with __consumer_offsets at replication factor 3, a
// group's coordinator killed with SIGKILL moves to another replica of its offsets
// partition, which answers OffsetFetch with every offset the group committed before, and
// a new member resumes from exactly those offsets; the workload's writes meanwhile lose
// nothing.
func TestCoordinatorMoveKeepsOffsets(t *testing.T) {
	e := startEnv(t, false, map[string]string{
		"offsets.topic.replication.factor": "3",
		"offsets.topic.num.partitions":     "3",
	})
	const topic, parts, group = "offsets", 3, "robustness-group"
	e.createTopic(topic, parts, nil, nil)
	w := startWorkload(e, topic, parts, 1)
	w.waitProgress("before the group", 200)
	for round := range rounds(1, 3) {
		// A member reads some records and commits them, then leaves.
		committed := consumeAndCommit(t, e, group, topic, 100)
		fetched := fetchOffsets(t, e, group, topic)
		for p, o := range committed {
			if fetched[p] != o {
				t.Fatalf("round %d: OffsetFetch answers %v, the member committed %v", round, fetched, committed)
			}
		}
		k := coordinator(t, e, group, -1)
		e.kill(k)
		moved := coordinator(t, e, group, k)
		t.Logf("round %d: coordinator %d killed, %d took over; committed %v", round, k, moved, committed)
		if got := fetchOffsets(t, e, group, topic); !sameOffsets(got, committed) {
			t.Errorf("round %d: the new coordinator answers OffsetFetch %v, %v was committed", round, got, committed)
		}
		// A new member starts where the group left off.
		first := firstOffsets(t, e, group, topic, committed)
		for p, o := range committed {
			if first[p] != o {
				t.Errorf("round %d: a new member read %s-%d from offset %d, %d was committed", round, topic, p, first[p], o)
			}
		}
		e.start(k)
		e.waitFullISR(topic)
		e.waitFullISR("__consumer_offsets")
	}
	w.finish()
}

// consumeAndCommit reads at least n records of topic as a member of group, commits what
// it read (synchronously) and leaves; it returns the offsets committed.
func consumeAndCommit(t *testing.T, e *env, group, topic string, n int) map[int32]int64 {
	t.Helper()
	cl := e.c.Client(nil, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	read := 0
	for read < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the group member read %d of %d records", read, n)
		}
		read += fs.NumRecords()
	}
	out := map[int32]int64{}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	for _, ps := range cl.CommittedOffsets() {
		for p, o := range ps {
			out[p] = o.Offset
		}
	}
	if len(out) == 0 {
		t.Fatalf("the group member committed nothing")
	}
	cl.LeaveGroup()
	return out
}

// fetchOffsets is group's committed offsets of topic (OffsetFetch through kadm, retried
// while the coordinator moves; a new client each try, as franz-go keeps a coordinator it
// cannot dial).
func fetchOffsets(t *testing.T, e *env, group, topic string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	clustertest.Eventually(t, waitLong, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.c.Bootstrap(), ",")...))
		if err != nil {
			return false, err.Error()
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		os, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = os.Error()
		}
		if err != nil {
			return false, fmt.Sprintf("OffsetFetch %s: %v", group, err)
		}
		clear(out)
		os.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				out[o.Partition] = o.At
			}
		})
		return true, ""
	})
	return out
}

func sameOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}

// coordinator waits until every live node names the same live coordinator of group,
// other than not, and returns it.
func coordinator(t *testing.T, e *env, group string, not int32) int32 {
	t.Helper()
	var k int32
	clustertest.Eventually(t, waitLong, func() (bool, string) {
		k = -1
		for _, n := range e.live() {
			id, err := clustertest.FindCoordinator(n.Addr, group, false)
			if err != nil {
				return false, fmt.Sprintf("FindCoordinator through node %d: %v", n.ID, err)
			}
			if id == not || id < 1 || e.generation(id) < 0 {
				return false, fmt.Sprintf("node %d names coordinator %d", n.ID, id)
			}
			if k >= 0 && id != k {
				return false, fmt.Sprintf("nodes name coordinators %d and %d", k, id)
			}
			k = id
		}
		return k >= 0, "no live node"
	})
	return k
}

// firstOffsets joins group with a new member and returns the offset of the first record
// it gets from each partition of topic in committed; it leaves without committing.
func firstOffsets(t *testing.T, e *env, group, topic string, committed map[int32]int64) map[int32]int64 {
	t.Helper()
	cl := e.c.Client(nil, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	out := map[int32]int64{}
	missing := func() int {
		n := 0
		for p := range committed {
			if _, ok := out[p]; !ok {
				n++
			}
		}
		return n
	}
	for missing() > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("a new member got no records of %d of the committed partitions %v", missing(), committed)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := out[r.Partition]; !ok {
				out[r.Partition] = r.Offset
			}
		})
	}
	cl.LeaveGroup()
	return out
}
