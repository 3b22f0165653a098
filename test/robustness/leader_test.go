package robustness

import (
	"testing"
)

// TestChaseTheLeader: the leader of a partition is killed with SIGKILL and restarted,
// round after round, under acks=all idempotent writes (RF 3, min ISR 2): another replica
// takes over each time and writes go on, no acknowledged write is lost, no offset holds
// two values, the HW and the consumer never go back, and after the last restart every
// replica is byte-identical with the ISR full.
func TestChaseTheLeader(t *testing.T) {
	e := startEnv(t, false, nil)
	const topic, parts = "chase", 3
	e.createTopic(topic, parts, nil, nil)
	w := startWorkload(e, topic, parts, 2)
	w.waitProgress("before the first kill", 100)
	for round := range rounds(2, 5) {
		l, _ := e.leaderOf(topic, int32(round%parts))
		e.kill(l)
		e.waitNewLeader(topic, int32(round%parts), l)
		w.waitProgress("with the leader down", 100)
		e.start(l)
		e.waitFullISR(topic)
		w.waitProgress("after the restart", 50)
	}
	w.finish()
}
