package robustness

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// TestUncleanElection: with unclean.leader.election.enable=true on the topic, a leader
// cut off from both followers (ISR shrunk to itself) that takes acks=1 writes and is then
// killed leaves its partitions to an out-of-sync replica, elected uncleanly. Losing writes
// is allowed there; what must hold is that every partition gets a leader again, the ISR
// fills up, and after the old leader returns every replica is byte-identical (the old
// leader's divergent tail — its acks=1 writes — truncated and never read).
func TestUncleanElection(t *testing.T) {
	e := startEnv(t, true, nil)
	const topic, parts = "unclean", 3
	e.createTopic(topic, parts, nil, map[string]string{"unclean.leader.election.enable": "true"})
	w := startWorkload(e, topic, parts, 1)
	w.loose = true
	w.waitProgress("before the cut", 100)
	for round := range rounds(1, 3) {
		p := int32(round % parts)
		l, _ := e.leaderOf(topic, p)
		e.mesh.isolate(t, l)
		t.Logf("node %d's inter-broker paths blackholed", l)
		e.waitState(topic, fmt.Sprintf("node %d alone in its partition's ISR", l), func(q int32, s partState) bool {
			return q != p || slices.Equal(s.ISR, []int32{l})
		})
		// acks=1 writes the followers never get.
		cl := e.rawClient(l, 1)
		taken := 0
		for i := range 20 {
			v := fmt.Sprintf("unclean-%d-%d", round, i)
			if r := rawProduce(context.Background(), cl, topic, p, v); r.err == nil {
				taken++
			} else if i == 0 {
				t.Logf("node %d answered an acks=1 produce with %v", l, r.err)
			}
			// Lost with the unclean election: the new leader never had them.
			w.mustNotRead("taken with acks=1 by a leader cut off from its followers, then replaced uncleanly", v)
		}
		cl.Close()
		t.Logf("node %d took %d acks=1 writes alone", l, taken)
		e.kill(l)
		e.mesh.healAll()
		e.waitNewLeader(topic, p, l)
		w.waitProgress("after the unclean election", 20)
		e.start(l)
		e.waitFullISR(topic)
	}
	w.finish()
}
