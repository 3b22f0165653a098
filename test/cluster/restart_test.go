package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// TestBrokerRestartAfterKillUnfenced: a broker-only node that hosts partitions, killed
// with SIGKILL, left down until the controller has fenced it and started again on its
// data, is unfenced and serves, five times over, alternating between two brokers. (It
// used to wait forever in its first round: the metadata applied while its partitions
// opened never reached its replica manager, whose offset its heartbeats report.)
func TestBrokerRestartAfterKillUnfenced(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Controllers: 1, Brokers: 2})
	createTopic(t, c, c.Node(2).Addr, "restart", 2)
	for round := range 5 {
		n := c.Node(int32(2 + round%2))
		n.Kill()
		clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
			m, err := clustertest.Metadata(c.Node(5 - n.ID).Addr)
			if err != nil {
				return false, err.Error()
			}
			return len(m.Brokers) == 1, fmt.Sprintf("round %d: %d brokers listed with node %d killed", round, len(m.Brokers), n.ID)
		})
		n.Start()
		c.WaitBrokers(2)
	}
}
