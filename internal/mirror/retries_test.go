package mirror

import (
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// gateListener is a source broker's listener that an outage closes: cut closes every
// connection accepted so far and every new one at once, until restore.
type gateListener struct {
	net.Listener
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func (g *gateListener) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		down := g.down
		if !down {
			g.conns[c] = true
		}
		g.mu.Unlock()
		if !down {
			return c, nil
		}
		c.Close()
	}
}

func (g *gateListener) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = true
	for c := range g.conns {
		c.Close()
	}
	clear(g.conns)
}

func (g *gateListener) restore() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = false
}

// TestRetriesRecoverAcrossSourceOutages: the partitions of a mirror go through 30 short
// outages of their source (every connection to it closed) with no new data on the
// source. In each they go FAILED and retry; once the source is back and a fetch
// succeeds, without data, each is MIRRORING with retry attempt 0 again, so the next
// outage starts from the initial backoff and none stays FAILED for good. (A partition
// used to reset its retry count only when a fetch brought data: after a dozen outages
// it ran out of mirror.failed.retry.max.attempts and stayed FAILED with the source
// healthy.) The eight partitions retry side by side: in every outage at least four are
// seen in LOG_ALIGNMENT at once, waiting for their lookups on the unreachable source
// (driven one after another, one at a time was).
func TestRetriesRecoverAcrossSourceOutages(t *testing.T) {
	var gate *gateListener
	c, src := newKfake(t, kfake.SeedTopics(8, "outages"), kfake.ListenFn(func(network, addr string) (net.Listener, error) {
		l, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		gate = &gateListener{Listener: l, conns: map[net.Conn]bool{}}
		return gate, nil
	}))
	produce(t, c.ListenAddrs(), "outages", 400)
	cfg := fastConfig()
	cfg.RetryMaxAttempts = 12
	e := newEnvWith(t, cfg)
	e.createMirror("m1", c.ListenAddrs()[0], "request.timeout.ms", "1000", "fetch.backoff.ms", "20")
	e.startTopics("m1", "outages")
	e.waitCaughtUp(src, "m1", "outages")
	ends := sourceEnds(t, src, "outages")

	for outage := range 30 {
		gate.cut()
		failed := map[int32]bool{}
		retried, together := false, 0
		var last []mirrorproto.DescribeClusterMirrorsResponsePartition
		eventually(t, func() string {
			return fmt.Sprintf("outage %d: not every partition FAILED and retried, or at most %d retrying at once: %+v", outage, together, last)
		}, func() bool {
			last = e.describe("m1", "outages")
			aligning := 0
			for _, p := range last {
				switch p.State {
				case mirrorproto.StateFailed:
					failed[p.PartitionIndex] = true
					retried = retried || p.RetryAttempt >= 1
				case mirrorproto.StateLogAlignment:
					aligning++
				}
			}
			together = max(together, aligning)
			// one after another, a single partition at a time would be in LOG_ALIGNMENT
			return len(failed) == len(ends) && retried && together >= 4
		})
		gate.restore()
		eventually(t, func() string {
			return fmt.Sprintf("outage %d: not every partition MIRRORING at retry 0 after the source came back: %+v", outage, last)
		}, func() bool {
			last = e.describe("m1", "outages")
			for _, p := range last {
				if p.State != mirrorproto.StateMirroring || p.RetryAttempt != 0 || p.DestinationOffset != ends[p.PartitionIndex] {
					return false
				}
			}
			return len(last) == len(ends)
		})
	}
}
