package robustness

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestZombieLeaderPaused: a leader paused with SIGSTOP past broker.session.timeout.ms is
// fenced and replaced while it sleeps; produces sent to it during the pause (on a
// connection it accepted before) and right after SIGCONT are handled by a broker that
// still believes it leads. None of its acks=all answers is a success, and no record it
// took — acks=all or acks=1 — is ever readable: its tail is truncated when it follows the
// new leader. The workload loses no acknowledged write and the replicas end
// byte-identical.
func TestZombieLeaderPaused(t *testing.T) {
	e := startEnv(t, false, nil)
	const topic, parts = "zombie", 3
	e.createTopic(topic, parts, nil, nil)
	w := startWorkload(e, topic, parts, 2)
	w.waitProgress("before the pause", 100)
	for round := range rounds(1, 3) {
		p := int32(round % parts)
		z, _ := e.leaderOf(topic, p)
		// Connect before the pause: a paused process accepts no new connections.
		clAll, cl1 := e.rawClient(z, -1), e.rawClient(z, 1)
		for i, cl := range []*kgo.Client{clAll, cl1} {
			v := fmt.Sprintf("zombie-warmup-%d-%d", round, i)
			// Only the acks=all warm-up is an acknowledged write the cluster must keep: the
			// acks=1 one may be lost with the pause that follows (its leader had not
			// replicated it yet), as in Kafka, and its offset taken by a later write.
			if r := rawProduce(context.Background(), cl, topic, p, v); r.err == nil && cl == clAll {
				w.ack(pos{p, r.offset}, v)
			}
		}
		e.pause(z)
		e.waitNewLeader(topic, p, z)
		w.waitProgress("with the leader paused", 100)
		// Requests queued in the paused process's socket, handled the moment it resumes.
		var mu sync.Mutex
		var results []probeResult
		var acks1 []string
		accepted1 := 0
		var wg sync.WaitGroup
		send := func(acks int16, v string) {
			defer wg.Done()
			cl := clAll
			if acks == 1 {
				cl = cl1
			}
			r := rawProduce(context.Background(), cl, topic, p, v)
			mu.Lock()
			defer mu.Unlock()
			if acks == 1 {
				acks1 = append(acks1, v)
				if r.err == nil {
					accepted1++
				}
			} else {
				results = append(results, r)
			}
		}
		for i := range 5 {
			wg.Add(2)
			go send(-1, fmt.Sprintf("zombie-%d-all-%d", round, i))
			go send(1, fmt.Sprintf("zombie-%d-one-%d", round, i))
		}
		time.Sleep(500 * time.Millisecond) // let the requests reach the socket
		e.resume(z)
		for i := range 10 {
			wg.Add(2)
			go send(-1, fmt.Sprintf("zombie-%d-all-after-%d", round, i))
			go send(1, fmt.Sprintf("zombie-%d-one-after-%d", round, i))
			time.Sleep(50 * time.Millisecond)
		}
		wg.Wait()
		answers := map[string]int{}
		for _, r := range results {
			if r.err == nil {
				t.Errorf("the zombie leader %d acknowledged acks=all %q at %s-%d offset %d", z, r.value, topic, p, r.offset)
			}
			answers[fmt.Sprint(r.err)]++
			w.mustNotRead("sent to a fenced leader", r.value)
		}
		t.Logf("the zombie's acks=all answers: %v; %d of %d acks=1 produces answered without an error", answers, accepted1, len(acks1))
		w.mustNotRead("sent with acks=1 to a fenced leader", acks1...)
		e.waitFullISR(topic)
		w.waitProgress("after the zombie rejoined", 50)
	}
	w.finish()
}
