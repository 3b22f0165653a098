package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// watcher is a consumer that polls a topic from its start for the whole test and records
// every key it is given.
type watcher struct {
	name string
	mu   sync.Mutex
	seen map[string]int
}

// watchTopic starts a consumer of topic on c with isolation level iso; it stops when the
// test ends.
func watchTopic(t *testing.T, c *clustertest.Cluster, name, topic string, iso kgo.IsolationLevel) *watcher {
	t.Helper()
	w := &watcher{name: name, seen: map[string]int{}}
	cl := c.Client(nil, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			w.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { w.seen[string(r.Key)]++ })
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done }) // before the client's Close (cleanups run last first)
	return w
}

// outside returns the keys w was given that are not in final, sorted.
func (w *watcher) outside(final map[string]bool) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k := range w.seen {
		if !final[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// missing returns how many keys of final w has not been given yet.
func (w *watcher) missing(final map[string]bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for k := range final {
		if w.seen[k] == 0 {
			n++
		}
	}
	return n
}

// TestMirrorRF3FailbackLongerFollowerTail: no divergent record is ever readable on the
// old primary during a failback onto it (cluster.md §3, the HW hold of LOG_ALIGNMENT). A
// (3 nodes, RF 3) mirrors to B, B fails over and takes its own writes; A's topic has
// min.insync.replicas 3, and with one A node (V) down, A takes acks=1 writes: the two
// live replicas of each partition hold them, but the ISR of two is below min ISR, so the
// HW stays at the last mirror position and they are not readable (checked). They are
// the divergent tail the failback must drop. The failback starts with V down: LOG_ALIGNMENT
// waits for the ISR (min ISR 3; or every replica with
// mirror.support.unclean.leader.election=true). V then restarts, catches up with the
// leader's untrusted log and rejoins the ISR — the moment the HW would move over the
// divergent tail if the leader did not hold it until its truncation. After the
// truncation the followers' logs end beyond their leader's until DivergingEpoch truncates
// them (checked in their logs). Throughout, a read_uncommitted and a read_committed consumer poll A's
// topic: neither is ever given a record outside the final (mirrored) log, and both get
// all of it; at the end every replica of A and of B is byte-identical (MD5 of the .log
// segments).
//
// The unclean opt-in subtest keeps min.insync.replicas 3 as well: with 2, the two live
// replicas would make the acks=1 writes readable before the failback starts.
func TestMirrorRF3FailbackLongerFollowerTail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		configs map[string]string
		reason  string
	}{
		{"minISR3", map[string]string{"min.insync.replicas": "3"}, "below min.insync.replicas 3"},
		{"uncleanOptIn", map[string]string{"min.insync.replicas": "3", "mirror.support.unclean.leader.election": "true"}, "is not every replica"},
	} {
		t.Run(tc.name, func(t *testing.T) { failbackLongerFollowerTail(t, tc.configs, tc.reason) })
	}
}

// failbackLongerFollowerTail is TestMirrorRF3FailbackLongerFollowerTail with configs on
// A's topic; reason is what A's leaders log while LOG_ALIGNMENT waits.
func failbackLongerFollowerTail(t *testing.T, configs map[string]string, reason string) {
	const topic, partitions = "orders", 3
	a, b := startClusters(t, rf3, rf3)
	createTopicRF3(t, a, a.Node(1).Addr, topic, partitions)
	setTopicConfigs(t, a, "A", topic, configs)
	watchers := []*watcher{
		watchTopic(t, a, "read_uncommitted", topic, kgo.ReadUncommitted()),
		watchTopic(t, a, "read_committed", topic, kgo.ReadCommitted()),
	}

	first := keyRange("first", 60)
	produceSync(t, a.Client(nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), topic, first)
	aEnds := mirrorFromA(t, a, b, topic, partitions)
	aID, err := topicID(a.Node(1).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	mustMirrorsCLI(t, "Stopped mirroring topic orders in mirror from-a.", b.Node(1).Addr, "--stop", "--mirror", "from-a", "--topics", topic)
	bKeys := keyRange("b-own", 30)
	produceSync(t, b.Client(nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), topic, bKeys)
	bEnds, err := endOffsets(b.Node(1).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	// the mirror (and so A's __mirror_state, RF 3) is created while every A node runs
	mustMirrorsCLI(t, "Created cluster mirror from-b.", a.Node(1).Addr, "--create", "--mirror", "from-b", "--mirror-config", writeMirrorConfig(t, "from-b", b.Bootstrap()))

	hw, err := aEnds()
	if err != nil {
		t.Fatal(err)
	}
	victim := a.Node(3)
	victim.Kill()
	live := a.Node(1)
	waitISRSize(t, live.Addr, topic, partitions, 2)
	divergent := keyRange("a-divergent", 24)
	produceSync(t, a.Client([]string{a.Node(1).Addr, a.Node(2).Addr}, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()), topic, divergent)
	// the ISR of two is below min.insync.replicas 3: the HW stays where the mirror left it
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		got, err := aEnds()
		return err == nil && sameOffsets(got, hw), fmt.Sprintf("A's HWs after the acks=1 writes with node %d down: %v (%v), want %v", victim.ID, got, err, hw)
	})

	mustMirrorsCLI(t, "Started mirroring topic orders in mirror from-b.", a.Node(2).Addr, "--start", "--mirror", "from-b", "--topics", topic)
	waitAlignmentWaits(t, a, live.Addr, topic, partitions, reason, fmt.Sprintf("failback with A's node %d down", victim.ID))

	victim.Start() // catches up with the untrusted logs and rejoins the ISRs
	back := waitMirroring(t, live.Addr, "from-b", topic, partitions, func() (map[int32]int64, error) { return bEnds, nil })
	truncated := 0
	for p := range int32(partitions) {
		truncated += int(back[p].TruncatedRecords)
	}
	if truncated != len(divergent) {
		t.Fatalf("failback truncated %d records in all, A took %d divergent ones", truncated, len(divergent))
	}
	waitISRSize(t, live.Addr, topic, partitions, 3)
	waitReplicasIdentical(t, topic, partitions, a, b)
	waitSameBatches(t, "after the failback", "B", b, "A", a, topic, aID, partitions)

	final := map[string]bool{}
	for _, k := range append(slices.Clone(first), bKeys...) {
		final[k] = true
	}
	for _, w := range watchers {
		clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
			n := w.missing(final)
			return n == 0, fmt.Sprintf("the %s consumer of A's %s has not read %d records of the final log", w.name, topic, n)
		})
		if bad := w.outside(final); len(bad) > 0 {
			t.Errorf("the %s consumer of A's %s read %d records that are not in the final log: %v", w.name, topic, len(bad), clip(bad))
		}
	}
	// the followers' tails: after its leader's truncation, a follower of every partition
	// held a log ending beyond the leader's, which DivergingEpoch cut
	for p := range int32(partitions) {
		longer := false
		for _, n := range a.Brokers() {
			for _, line := range strings.Split(n.Log(), "\n") {
				if !strings.Contains(line, fmt.Sprintf("partition=%s-%d ", topic, p)) {
					continue
				}
				if strings.Contains(line, "mirror partition truncated") {
					t.Logf("A node %d: %s", n.ID, line)
				}
				if strings.Contains(line, "truncating a diverging log") {
					t.Logf("A node %d: %s", n.ID, line)
					if leo, to := logInt(line, "leo"), logInt(line, "truncateTo"); leo > to && to >= 0 {
						longer = true
					}
				}
			}
		}
		if !longer {
			t.Errorf("no follower of A's %s-%d logged a diverging log longer than its leader's (truncated by DivergingEpoch)", topic, p)
		}
	}
}

// logInt is the integer value of key=N in a log line, −1 when absent.
func logInt(line, key string) int64 {
	_, v, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return -1
	}
	var n int64
	if _, err := fmt.Sscan(strings.Fields(v)[0], &n); err != nil {
		return -1
	}
	return n
}

// logged reports whether a running node of c logged a line holding every one of parts.
func logged(c *clustertest.Cluster, parts ...string) bool {
	for _, n := range c.Brokers() {
		if !n.Running() {
			continue
		}
		for _, line := range strings.Split(n.Log(), "\n") {
			ok := true
			for _, s := range parts {
				if !strings.Contains(line, s) {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
	}
	return false
}
