package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// groupLedger is what the members of a consumer group read and committed: every delivery
// and, per partition, the highest offset a successful commit covered. A delivery below that
// offset is a record re-read beyond what the committed offsets imply.
type groupLedger struct {
	mu        sync.Mutex
	delivered map[string]int // key → deliveries
	committed map[int32]int64
	rereads   []string
}

func newGroupLedger() *groupLedger {
	return &groupLedger{delivered: map[string]int{}, committed: map[int32]int64{}}
}

func (l *groupLedger) deliver(member string, rs []*kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		l.delivered[string(r.Key)]++
		if c, ok := l.committed[r.Partition]; ok && r.Offset < c {
			l.rereads = append(l.rereads, fmt.Sprintf("%s read %s-%d@%d (key %s) below the committed offset %d", member, r.Topic, r.Partition, r.Offset, r.Key, c))
		}
	}
}

func (l *groupLedger) commit(rs []*kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		if r.Offset+1 > l.committed[r.Partition] {
			l.committed[r.Partition] = r.Offset + 1
		}
	}
}

// check fails the test if a record was re-read below a committed offset, and returns how
// many of keys were delivered and how many of them more than once.
func (l *groupLedger) check(t *testing.T, keys []string) (seen, dups int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.rereads) > 0 {
		t.Fatalf("records re-read beyond the committed offsets:\n%v", clip(l.rereads))
	}
	for _, k := range keys {
		switch n := l.delivered[k]; {
		case n == 1:
			seen++
		case n > 1:
			seen++
			dups++
		}
	}
	return seen, dups
}

// runMember consumes topic in group through a client seeded with seed only, committing
// each poll's records (CommitRecords) before it allows a rebalance, until ctx ends.
func runMember(ctx context.Context, t *testing.T, c *clustertest.Cluster, name, seed, group, topic string, l *groupLedger, wg *sync.WaitGroup) {
	cl := c.Client([]string{seed}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID(name))
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cl.Close()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			rs := fs.Records()
			l.deliver(name, rs)
			if len(rs) > 0 {
				for ctx.Err() == nil {
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					err := cl.CommitRecords(cctx, rs...)
					cancel()
					if err == nil {
						l.commit(rs)
						break
					}
					t.Logf("%s: commit: %v (retried)", name, err)
					time.Sleep(200 * time.Millisecond)
				}
			}
			cl.AllowRebalance()
		}
	}()
}

// committedOffsets is OffsetFetch of group for topic through addr, by partition.
func committedOffsets(addr, group, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	os, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := os.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range os[topic] {
		out[p] = o.At
	}
	return out, nil
}

// endOffsets is ListOffsets (latest) of topic through addr, by partition.
func endOffsets(addr, topic string) (map[int32]int64, error) {
	return listEndOffsets(addr, topic, false)
}

// listEndOffsets is ListOffsets (latest) of topic through addr, by partition; with live,
// the partitions that answer (those of a node that is down do not) instead of an error.
func listEndOffsets(addr, topic string, live bool) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	var shardErrs *kadm.ShardErrors
	if err != nil && !(live && errors.As(err, &shardErrs)) {
		return nil, err
	}
	if err := listed.Error(); err != nil && !live {
		return nil, err
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = o.Offset
		}
	})
	return out, nil
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

func keyRange(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return keys
}

// findCoordinator waits until every running broker answers FindCoordinator for key with
// the same live node, and returns it.
func findCoordinator(t *testing.T, c *clustertest.Cluster, key string, txn bool) int32 {
	t.Helper()
	var coord int32
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		coord = -1
		for _, n := range c.Brokers() {
			if !n.Running() {
				continue
			}
			got, err := clustertest.FindCoordinator(n.Addr, key, txn)
			switch {
			case err != nil:
				return false, fmt.Sprintf("FindCoordinator %s through node %d: %v", key, n.ID, err)
			case got < 1 || int(got) > len(c.Nodes) || !c.Node(got).Running():
				return false, fmt.Sprintf("FindCoordinator %s through node %d: node %d", key, n.ID, got)
			case coord >= 0 && got != coord:
				return false, fmt.Sprintf("FindCoordinator %s: node %d answers %d, another node %d", key, n.ID, got, coord)
			}
			coord = got
		}
		return coord >= 0, "no running broker"
	})
	return coord
}

// TestGroupCoordinatorKilled: a consumer group of two members, bootstrapped from two
// different nodes, reads a topic spread over three nodes and commits; the node of the
// group's coordinator (FindCoordinator) is killed with SIGKILL and started again at once.
// The committed offsets survive (OffsetFetch answers them after the restart), and the
// group resumes: both members are back in a stable group, every record produced after
// the restart is read, and no record below a committed offset is read again.
func TestGroupCoordinatorKilled(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3})
	const topic, group = "orders", "resume-group"
	createTopic(t, c, c.Node(1).Addr, topic, 6)
	coord := findCoordinator(t, c, group, false)
	producer := c.Client(nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	before := keyRange("before", 300)
	produceSync(t, producer, topic, before)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	ledger := newGroupLedger()
	runMember(ctx, t, c, "member-a", c.Node(1).Addr, group, topic, ledger, &wg)
	runMember(ctx, t, c, "member-b", c.Node(3).Addr, group, topic, ledger, &wg)
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		seen, _ := ledger.check(t, before)
		return seen == len(before), fmt.Sprintf("the group read %d of %d records", seen, len(before))
	})
	if _, dups := ledger.check(t, before); dups > 0 {
		t.Fatalf("%d records read twice by a group whose every poll was committed before a rebalance", dups)
	}
	ends, err := endOffsets(c.Node(2).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		got, err := committedOffsets(c.Node(2).Addr, group, topic)
		return err == nil && sameOffsets(got, ends), fmt.Sprintf("committed %v (%v), want the end offsets %v", got, err, ends)
	})

	victim := c.Node(coord)
	t.Logf("killing node %d, the coordinator of %s, with SIGKILL and starting it again", coord, group)
	victim.Kill()
	victim.Start()
	c.WaitLeaders(topic)
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		got, err := committedOffsets(c.Node(2).Addr, group, topic)
		return err == nil && sameOffsets(got, ends), fmt.Sprintf("after the restart: committed %v (%v), want %v", got, err, ends)
	})

	after := keyRange("after", 300)
	produceSync(t, producer, topic, after)
	clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
		seen, _ := ledger.check(t, after)
		return seen == len(after), fmt.Sprintf("after the restart the group read %d of %d new records", seen, len(after))
	})
	ledger.check(t, before)
	ends, err = endOffsets(c.Node(2).Addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		got, err := committedOffsets(c.Node(2).Addr, group, topic)
		return err == nil && sameOffsets(got, ends), fmt.Sprintf("committed %v (%v), want the end offsets %v", got, err, ends)
	})
	adm := kadm.NewClient(c.Client(nil))
	clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(dctx, group)
		if err != nil {
			return false, err.Error()
		}
		g := gs[group]
		return g.Err == nil && g.State == "Stable" && len(g.Members) == 2, fmt.Sprintf("group %s: state %s, %d members, %v", group, g.State, len(g.Members), g.Err)
	})
	_, dups := ledger.check(t, after)
	t.Logf("%d of the records produced after the restart were read twice (uncommitted when a member moved)", dups)
}
