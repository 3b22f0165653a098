package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// steadyProducer produces batches of records to the given partitions of topic until
// stopped, recording every error a produce returns (franz-go retries the retriable ones
// itself, without a delivery timeout: any error it returns is one it cannot retry).
type steadyProducer struct {
	cl     *kgo.Client
	topic  string
	parts  []int32
	mu     sync.Mutex
	acked  []string
	errs   []string
	stop   chan struct{}
	done   chan struct{}
	nextID int
}

func startProducer(t *testing.T, c *clustertest.Cluster, name, topic string, parts []int32) *steadyProducer {
	sp := &steadyProducer{cl: c.Client(nil, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ClientID(name)),
		topic: topic, parts: parts, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sp.done)
		for {
			select {
			case <-sp.stop:
				return
			default:
			}
			var recs []*kgo.Record
			for _, p := range sp.parts {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("%s-%05d", name, sp.nextID))})
				sp.nextID++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			res := sp.cl.ProduceSync(ctx, recs...)
			cancel()
			sp.mu.Lock()
			for _, r := range res {
				if r.Err != nil {
					sp.errs = append(sp.errs, fmt.Sprintf("%s-%d: %v", r.Record.Topic, r.Record.Partition, r.Err))
				} else {
					sp.acked = append(sp.acked, string(r.Record.Key))
				}
			}
			sp.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return sp
}

// acks returns how many records were acknowledged so far.
func (sp *steadyProducer) acks() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.acked)
}

// finish stops the producer and returns the acknowledged keys; any produce error fails
// the test.
func (sp *steadyProducer) finish(t *testing.T, what string) []string {
	t.Helper()
	close(sp.stop)
	<-sp.done
	if len(sp.errs) > 0 {
		t.Fatalf("%s: %d produce errors, first %v", what, len(sp.errs), clip(sp.errs))
	}
	return sp.acked
}

// TestSIGTERMControlledShutdown: SIGTERM of a node, first one that is not the active
// controller and then the active controller, is a controlled shutdown: the node asks the
// controller to move its leaderships away (with replication factor 1 its partitions go
// offline: every other node answers leader −1 for them, not the stopped node), the
// controller grants it before the node exits with status 0, and the node is never fenced
// for a missed heartbeat. Producers to the other partitions, and to the stopped node's
// own (which wait for it), get no error throughout; after its restart the node leads its
// partitions again and every acknowledged record is there.
func TestSIGTERMControlledShutdown(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3})
	const topic = "term"
	leaders := createTopic(t, c, c.Node(1).Addr, topic, 12)
	active := c.ActiveController()
	var victims []*clustertest.Node
	for _, n := range c.Nodes {
		if n != active {
			victims = append(victims, n)
			break
		}
	}
	victims = append(victims, active)
	var allAcked []string

	for _, victim := range victims {
		var own, others []int32
		for p, l := range leaders {
			if l == victim.ID {
				own = append(own, int32(p))
			} else {
				others = append(others, int32(p))
			}
		}
		if len(own) == 0 || len(others) == 0 {
			t.Fatalf("node %d leads %v of %v: want some partitions on it and some elsewhere", victim.ID, own, leaders)
		}
		controller := c.ActiveController()
		ctrlLogBefore := len(controller.Output())
		name := fmt.Sprintf("node%d", victim.ID)
		elsewhere := startProducer(t, c, name+"-others", topic, others)
		waiting := startProducer(t, c, name+"-own", topic, own)
		clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
			return elsewhere.acks() > 0 && waiting.acks() > 0, "the producers got no acknowledgement"
		})

		out, err := victim.Term(40 * time.Second)
		if err != nil {
			t.Fatalf("node %d after SIGTERM: exit %v, want status 0:\n%s", victim.ID, err, clustertest.LastLine(out))
		}
		if !strings.Contains(out, "controlled shutdown: the controller moved this broker's leaderships away") {
			t.Fatalf("node %d stopped without a completed controlled shutdown; last line: %s", victim.ID, clustertest.LastLine(out))
		}
		// Every other node answers no leader (−1) for the stopped node's partitions, and
		// the same live leaders for the rest.
		clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
			for _, n := range c.Brokers() {
				if !n.Running() {
					continue
				}
				ls, err := clustertest.Leaders(n.Addr, topic)
				if err != nil {
					return false, fmt.Sprintf("node %d: %v", n.ID, err)
				}
				for p, l := range ls {
					want := leaders[p]
					if want == victim.ID {
						want = -1
					}
					if l != want {
						return false, fmt.Sprintf("node %d answers leader %d for %s-%d, want %d (node %d stopped)", n.ID, l, topic, p, want, victim.ID)
					}
				}
			}
			return true, ""
		})
		// The controller moved the leaderships for the controlled shutdown, not for a
		// session that expired.
		if controller != victim {
			log := controller.Output()[ctrlLogBefore:]
			if !strings.Contains(log, "starting a controlled shutdown") {
				t.Fatalf("the active controller (node %d) did not log a controlled shutdown of node %d", controller.ID, victim.ID)
			}
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, "fencing broker: no heartbeat") && strings.Contains(line, fmt.Sprintf("broker=%d ", victim.ID)) {
					t.Fatalf("node %d was fenced for missed heartbeats, not moved away by its controlled shutdown: %s", victim.ID, line)
				}
			}
		}
		acked := elsewhere.acks()
		clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
			return elsewhere.acks() > acked+len(others), fmt.Sprintf("no produce to the live partitions acknowledged while node %d is down", victim.ID)
		})

		victim.Start()
		got := c.WaitLeaders(topic)
		for p := range got {
			if got[p] != leaders[p] {
				t.Fatalf("after node %d restarted, %s-%d is led by %d, before by %d", victim.ID, topic, p, got[p], leaders[p])
			}
		}
		ownAcked := waiting.acks()
		clustertest.Eventually(t, 30*time.Second, func() (bool, string) {
			return waiting.acks() > ownAcked, fmt.Sprintf("no produce to node %d's partitions acknowledged after its restart", victim.ID)
		})
		keys := append(elsewhere.finish(t, "producer to the other partitions"), waiting.finish(t, "producer to the stopped node's partitions")...)

		// Every acknowledged record is readable (the topic holds those of earlier rounds too).
		allAcked = append(allAcked, keys...)
		have := map[string]bool{}
		for _, k := range consumeKeys(t, c, victim.Addr, topic, len(allAcked)) {
			have[k] = true
		}
		for _, k := range allAcked {
			if !have[k] {
				t.Fatalf("acknowledged record %s not read back through node %d", k, victim.ID)
			}
		}
		t.Logf("node %d: SIGTERM, %d partitions offline while down, %d records acknowledged", victim.ID, len(own), len(keys))
	}
}
