package robustness

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestFollowerCutOff: a follower whose inter-broker paths (to and from every other
// broker, through toxiproxy) drop every byte falls out of the ISR of the partitions it
// follows while the acks=all writes go on with the two other replicas (min ISR 2); once
// the paths are healed it catches up and rejoins the ISR, and no acknowledged write is
// lost, with every replica byte-identical at the end.
func TestFollowerCutOff(t *testing.T) {
	e := startEnv(t, true, nil)
	const topic, parts = "cutoff", 3
	e.createTopic(topic, parts, nil, nil)
	// A controlled shutdown and restart leave node 3 leading nothing (no automatic
	// rebalance within the test): cutting it off is cutting off a follower.
	e.term(3)
	e.start(3)
	e.waitState(topic, "node 3 back in the ISR, leading nothing", func(_ int32, s partState) bool {
		return s.Leader != 3 && slices.Equal(s.ISR, s.Replicas)
	})
	w := startWorkload(e, topic, parts, 2)
	w.waitProgress("before the cut", 100)
	for range rounds(1, 4) {
		e.mesh.isolate(t, 3)
		t.Log("node 3's inter-broker paths blackholed")
		e.waitState(topic, "node 3 out of the ISR", func(_ int32, s partState) bool {
			return !slices.Contains(s.ISR, 3) && len(s.ISR) == 2
		})
		w.waitProgress("with node 3 cut off", 150)
		e.mesh.healAll()
		t.Log("healed")
		e.waitFullISR(topic)
		w.waitProgress("after healing", 50)
	}
	w.finish()
}

// TestOneReplicaLeft: when a leader's inter-broker paths to both followers are cut, the
// ISR of the partitions it leads shrinks to the leader alone, below min.insync.replicas 2:
// acks=all produces are refused with NOT_ENOUGH_REPLICAS before the append (and never
// read later) and the HW does not move, while the other partitions go on with their two
// other replicas; once one follower's paths are healed it rejoins, and writes are
// acknowledged again. An acks=1 produce is appended meanwhile (min ISR binds acks=all
// only).
func TestOneReplicaLeft(t *testing.T) {
	e := startEnv(t, true, nil)
	const topic, parts = "minisr", 3
	e.createTopic(topic, parts, nil, nil)
	w := startWorkload(e, topic, parts, 1)
	w.waitProgress("before the cut", 100)
	l, _ := e.leaderOf(topic, 0)
	var others []int32
	for _, n := range e.c.Nodes {
		if n.ID != l {
			others = append(others, n.ID)
			e.mesh.blackhole(t, l, n.ID)
			e.mesh.blackhole(t, n.ID, l)
		}
	}
	t.Logf("the paths between node %d and nodes %v blackholed", l, others)
	var led []int32 // the partitions node l leads, whose ISR becomes {l}
	e.waitState(topic, fmt.Sprintf("node %d alone in the ISR of the partitions it leads", l), func(p int32, s partState) bool {
		if s.Leader != l {
			return true
		}
		if !slices.Contains(led, p) {
			led = append(led, p)
		}
		return slices.Equal(s.ISR, []int32{l})
	})
	hw := map[int32]int64{}
	for _, p := range led {
		var ok bool
		deadline := time.Now().Add(waitLong)
		for hw[p], ok = listHW(t.Context(), e, l, topic, p, -1); !ok; hw[p], ok = listHW(t.Context(), e, l, topic, p, -1) {
			if time.Now().After(deadline) {
				t.Fatalf("no HW of %s-%d from node %d", topic, p, l)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The workload's writes to the other partitions go on, with the two other replicas.
	w.waitProgress("with the ISR of the leader's partitions below min ISR", 50)
	refused := 0
	for i := range rounds(20, 5) {
		p := led[i%len(led)]
		r := w.probe(l, p)
		if r.err == nil {
			t.Errorf("an acks=all produce to %s-%d with the ISR {%d} was acknowledged at offset %d", topic, p, l, r.offset)
		} else if !errors.Is(r.err, kerr.NotEnoughReplicas) {
			t.Errorf("an acks=all produce to %s-%d with the ISR {%d} answered %v, want NOT_ENOUGH_REPLICAS", topic, p, l, r.err)
		} else {
			refused++
		}
		if h, ok := listHW(t.Context(), e, l, topic, p, -1); ok && h != hw[p] {
			t.Errorf("%s-%d's HW moved from %d to %d with the ISR below min.insync.replicas", topic, p, hw[p], h)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d acks=all produces refused with NOT_ENOUGH_REPLICAS", refused)
	// min.insync.replicas binds acks=all only: an acks=1 write is appended (and lost if
	// the leader fails before a follower has it).
	cl := e.rawClient(l, 1)
	if r := rawProduce(t.Context(), cl, topic, led[0], "acks1-alone"); r.err != nil {
		t.Errorf("an acks=1 produce to %s-%d with the ISR {%d} answered %v, want it appended", topic, led[0], l, r.err)
	}
	cl.Close()
	// One follower comes back: min ISR is met again.
	e.mesh.heal(l, others[0])
	e.mesh.heal(others[0], l)
	t.Logf("the paths between node %d and node %d healed", l, others[0])
	e.waitState(topic, "a second replica back in the ISR", func(p int32, s partState) bool {
		return !slices.Contains(led, p) || slices.Equal(s.ISR, slices.Sorted(slices.Values([]int32{l, others[0]})))
	})
	for _, p := range led {
		waitProbeAcked(t, w, l, p)
	}
	w.waitProgress("with two replicas in every ISR", 100)
	e.mesh.healAll()
	w.finish()
}

// waitProbeAcked waits until a probe to node id's partition p is acknowledged.
func waitProbeAcked(t *testing.T, w *workload, id, p int32) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		r := w.probe(id, p)
		if r.err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no acks=all produce to node %d acknowledged after healing: %v", id, r.err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
