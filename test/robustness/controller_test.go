package robustness

import (
	"slices"
	"testing"
)

// TestControllerKilledDuringISRChurn: a follower's inter-broker paths are cut and healed
// over and over, so that its partitions' leaders keep proposing ISR shrinks and
// expansions (AlterPartition), and the active controller is killed with SIGKILL just as
// an expansion is proposed. The controller that takes over handles the leaders' pending
// and later changes: the ISR shrinks and fills up again, no acknowledged write is lost,
// leader ∈ ISR ⊆ replicas and the epochs hold throughout, and every replica ends
// byte-identical.
func TestControllerKilledDuringISRChurn(t *testing.T) {
	e := startEnv(t, true, nil)
	const topic, parts = "churn", 3
	e.createTopic(topic, parts, nil, nil)
	ctrl := e.c.ActiveController().ID
	flap := ctrl%3 + 1 // another node, made to lead nothing (a controlled restart)
	e.term(flap)
	e.start(flap)
	e.waitState(topic, "the flapping node back in the ISR, leading nothing", func(_ int32, s partState) bool {
		return s.Leader != flap && slices.Equal(s.ISR, s.Replicas)
	})
	w := startWorkload(e, topic, parts, 2)
	w.waitProgress("before the churn", 100)
	outOfISR := func(what string) {
		e.waitState(topic, what, func(_ int32, s partState) bool { return !slices.Contains(s.ISR, flap) })
	}
	backInISR := func(what string) {
		e.waitState(topic, what, func(_ int32, s partState) bool {
			return slices.Contains(s.ISR, flap) && s.Leader >= 0 && e.generation(s.Leader) >= 0
		})
	}
	for round := range rounds(1, 3) {
		if c := e.c.ActiveController().ID; c != ctrl {
			ctrl = c
		}
		if ctrl == flap {
			t.Fatalf("round %d: the active controller is the flapping node %d", round, flap)
		}
		t.Logf("round %d: node %d flaps, node %d is the active controller", round, flap, ctrl)
		e.mesh.isolate(t, flap)
		outOfISR("the flapping node out of the ISR")
		e.mesh.healAll()
		e.kill(ctrl) // as the leaders propose adding the flapping node back
		backInISR("the flapping node back in the ISR, the controller down")
		w.waitProgress("with the controller down", 50)
		e.mesh.isolate(t, flap)
		outOfISR("the flapping node out of the ISR under the new controller")
		e.mesh.healAll()
		backInISR("the flapping node back in the ISR under the new controller")
		e.start(ctrl)
		e.waitFullISR(topic)
		w.waitProgress("after the old controller's restart", 50)
		// The restarted node leads nothing now: it flaps next, and whoever is the active
		// controller is killed.
		flap, ctrl = ctrl, e.c.ActiveController().ID
	}
	w.finish()
}

// TestRollingRestart: every node in turn is stopped with SIGTERM (a controlled shutdown:
// its leaderships move first) and started again, under the workload: franz-go's
// producers never get an error they would not retry, no acknowledged write is lost, and
// every replica ends byte-identical with the ISR full.
func TestRollingRestart(t *testing.T) {
	e := startEnv(t, false, nil)
	const topic, parts = "rolling", 3
	e.createTopic(topic, parts, nil, nil)
	w := startWorkload(e, topic, parts, 2)
	w.waitProgress("before the restarts", 100)
	for range rounds(1, 3) {
		for _, n := range e.c.Nodes {
			e.term(n.ID)
			w.waitProgress("with a node stopped", 50)
			e.start(n.ID)
			e.waitFullISR(topic)
			w.waitProgress("after the restart", 50)
		}
	}
	w.noProduceErrors()
	w.finish()
}
