package robustness

import (
	"testing"
)

// TestChaseTheLeader: the leader of a partition is killed with SIGKILL and restarted,
// round after round, under acks=all idempotent writes (RF 3, min ISR 2), with 20–40 ms
// of latency on every inter-broker path (toxiproxy) so that the followers trail the
// leader when it dies: another replica takes over each time and writes go on, no
// acknowledged write is lost, no offset holds two values, the HW and the consumer never
// go back, and after the last restart every replica is byte-identical with the ISR full.
func TestChaseTheLeader(t *testing.T) {
	e := startEnv(t, true, nil)
	e.mesh.latency(t, 30, 10)
	const topic, parts = "chase", 3
	e.createTopic(topic, parts, nil, nil)
	w := startWorkload(e, topic, parts, 2)
	w.waitProgress("before the first kill", 100)
	for round := range rounds(2, 4) {
		l, _ := e.leaderOf(topic, int32(round%parts))
		e.kill(l)
		e.waitNewLeader(topic, int32(round%parts), l)
		w.waitProgress("with the leader down", 100)
		e.start(l)
		e.waitFullISR(topic)
		t.Logf("node %d back in the ISR", l)
		w.waitProgress("after the restart", 50)
	}
	w.finish()
}

// TestTwoLeaderKills: the leader of a partition is killed, and its successor killed a few
// seconds later, right after the first is restarted (three combined nodes keep their
// metadata quorum with one node down at a time), with 20–40 ms of latency on every
// inter-broker path: each may hold an unreplicated tail of writes it never acknowledged,
// which it truncates when it follows again. No acknowledged write is lost, no offset
// holds two values, and every replica ends byte-identical.
func TestTwoLeaderKills(t *testing.T) {
	e := startEnv(t, true, nil)
	e.mesh.latency(t, 30, 10)
	const topic, parts = "twokills", 3
	e.createTopic(topic, parts, nil, nil)
	w := startWorkload(e, topic, parts, 2)
	w.waitProgress("before the kills", 100)
	for round := range rounds(1, 4) {
		p := int32(round % parts)
		l1, _ := e.leaderOf(topic, p)
		e.kill(l1)
		l2 := e.waitNewLeader(topic, p, l1)
		w.waitProgress("after the first kill", 20)
		e.start(l1)
		e.kill(l2)
		e.waitNewLeader(topic, p, l2)
		w.waitProgress("after the second kill", 20)
		e.start(l2)
		e.waitFullISR(topic)
		w.waitProgress("after both restarts", 50)
	}
	w.finish()
}
