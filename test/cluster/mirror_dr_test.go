package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// TestMirrorRF3DisasterRecovery is the disaster-recovery story of the metadata-sync issue
// on RF 3 clusters (issue 15): two 3-node clusters A and B (RF 3, min.insync.replicas 2);
// a producer writes to a 2-partition topic on A while a three-member group consumes,
// slower than the producer writes, and commits there; B mirrors the topic and syncs the group's offsets. The group is chosen so
// that its coordinator on B is a node that leads neither partition of the topic on B.
// Then every A node is killed (kill -9), B fails over (`kmirror mirrors --stop`) and the
// same group, three members again, resumes on B: every record B holds that the group had
// not consumed on A is consumed on B — none is skipped — and so are the records written
// to B after the failover.
func TestMirrorRF3DisasterRecovery(t *testing.T) {
	const topic, mirror, partitions = "orders", "from-a", int32(2)
	a, b := startClusters(t, rf3, rf3)
	createTopicRF3(t, a, a.Node(1).Addr, topic, partitions)
	mustMirrorsCLI(t, "Created cluster mirror from-a.", b.Node(1).Addr, "--create", "--mirror", mirror,
		"--mirror-config", writeMirrorConfig(t, mirror, a.Bootstrap()))
	mustMirrorsCLI(t, "Started mirroring topic orders in mirror from-a.", b.Node(2).Addr, "--start", "--mirror", mirror, "--topics", topic)
	waitMirroring(t, b.Node(3).Addr, mirror, topic, partitions, func() (map[int32]int64, error) { return endOffsets(a.Node(1).Addr, topic) })

	leaders := b.WaitLeaders(topic)
	group := ""
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		for i := 0; i < 100; i++ {
			g := fmt.Sprintf("orders-app-%d", i)
			c, err := clustertest.FindCoordinator(b.Node(1).Addr, g, false)
			if err != nil {
				return false, fmt.Sprintf("FindCoordinator %s on B: %v", g, err)
			}
			if !slices.Contains(leaders, c) {
				group = g
				t.Logf("group %s: coordinator node %d on B, %s led by %v", g, c, topic, leaders)
				return true, ""
			}
		}
		return false, fmt.Sprintf("no group of 100 has its coordinator on B off the leaders %v", leaders)
	})

	var mu sync.Mutex
	before := map[string]bool{} // consumed on A
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	prod := a.Client([]string{a.Node(1).Addr}, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	wg.Add(1)
	go func() { // up to 1000 records/s until the disaster, faster than the group reads
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			prod.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%06d", i)}, nil)
			time.Sleep(time.Millisecond)
		}
	}()
	var members []*kgo.Client
	for range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.Node(1).Addr, a.Node(2).Addr, a.Node(3).Addr), kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(100*time.Millisecond),
			kgo.RetryTimeout(time.Second), kgo.SessionTimeout(6*time.Second), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil { // at most 100 records/s per member: the group lags
				fs := cl.PollRecords(ctx, 5)
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) { before[string(r.Value)] = true })
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	// the group consumed and its offsets are synced onto B (the sync task's first runs)
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		offs, err := groupOffsets(b.Node(1).Addr, group, topic)
		mu.Lock()
		n := len(before)
		mu.Unlock()
		return err == nil && n >= 300 && len(offs) == int(partitions) && offs[0].At > 0 && offs[1].At > 0,
			fmt.Sprintf("group %s consumed %d on A; offsets on B %v (%v)", group, n, offs, err)
	})

	// the disaster: every A node dies under the producer and the group
	for _, n := range a.Nodes {
		n.Kill()
	}
	stop()
	wg.Wait()
	for _, cl := range members {
		cl.Close()
	}
	prod.Close()
	ends, err := endOffsets(b.Node(1).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	mustMirrorsCLI(t, "Stopped mirroring topic orders in mirror from-a.", b.Node(2).Addr, "--stop", "--mirror", mirror, "--topics", topic)

	// what B holds: every record below the end offsets it had before the failover
	onB := map[string]bool{}
	rcl := b.Client([]string{b.Node(1).Addr}, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pos := map[int32]int64{}
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	for done := false; !done; {
		fs := rcl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read B's mirrored records up to %v, want %v", pos, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				onB[string(r.Value)] = true
			}
			pos[r.Partition] = r.Offset + 1
		})
		done = true
		for p, e := range ends {
			done = done && pos[p] >= e // no transaction: the last offset is a data record
		}
	}
	unconsumed := 0
	for v := range onB {
		if !before[v] {
			unconsumed++
		}
	}
	if unconsumed == 0 {
		t.Fatalf("B holds no record the group had not consumed on A (%d on B): nothing to resume", len(onB))
	}
	// B is writable
	wcl := b.Client([]string{b.Node(1).Addr}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range partitions {
		if err := wcl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "after-failover-%d", p)}).FirstErr(); err != nil {
			t.Fatalf("produce to B after the failover: %v", err)
		}
	}

	// the same group resumes on B with three members
	after := map[string]int{}
	cctx, cstop := context.WithCancel(context.Background())
	defer cstop()
	for range 3 {
		cl := b.Client([]string{b.Node(1).Addr, b.Node(2).Addr, b.Node(3).Addr}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) { after[string(r.Value)]++ })
				mu.Unlock()
			}
		}()
	}
	missing := func() []string {
		var out []string
		for v := range onB {
			if !before[v] && after[v] == 0 {
				out = append(out, v)
			}
		}
		for p := range partitions {
			if v := fmt.Sprintf("after-failover-%d", p); after[v] == 0 {
				out = append(out, v)
			}
		}
		slices.Sort(out)
		return out
	}
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		m := missing()
		return len(m) == 0, fmt.Sprintf("the group on B has not consumed %d records (first %v)", len(m), m[:min(len(m), 5)])
	})
	cstop()
	wg.Wait()
	dups := 0
	for v := range after {
		if before[v] {
			dups++
		}
	}
	if c, err := clustertest.FindCoordinator(b.Node(1).Addr, group, false); err != nil || slices.Contains(b.WaitLeaders(topic), c) {
		t.Fatalf("group %s's coordinator on B is node %d (%v), a leader of %s", group, c, err, topic)
	}
	t.Logf("DR on RF 3: the group consumed %d records on A, B held %d (%d not consumed on A), the group resumed on B with %d records (%d read again on B)",
		len(before), len(onB), unconsumed, len(after), dups)
}
