package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/clustertest"
	"github.com/twmb/franz-go/pkg/kadm"
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

// TestDeleteRecordsSurvivesKill: records deleted by DeleteRecords (through kadm) stay
// deleted when the broker is killed with SIGKILL right after the answer and restarted on
// its data: ListOffsets earliest answers the new log start offset and a consumer from
// the start reads only the records at or above it. (The log start used to live in
// memory until the retention tick or a clean shutdown, so the deleted records came back.)
func TestDeleteRecordsSurvivesKill(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 1})
	n := c.Node(1)
	createTopic(t, c, n.Addr, "deleted", 1)
	keys := keyRange("k", 100)
	cl := c.Client([]string{n.Addr})
	produceSync(t, cl, "deleted", keys)
	cl.Close()

	adm := kadm.NewClient(c.Client([]string{n.Addr}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var to kadm.Offsets
	to.Add(kadm.Offset{Topic: "deleted", Partition: 0, At: 60})
	res, err := adm.DeleteRecords(ctx, to)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	if r, _ := res.Lookup("deleted", 0); r.LowWatermark != 60 {
		t.Fatalf("DeleteRecords low watermark %d, want 60", r.LowWatermark)
	}
	adm.Close()
	n.Kill()
	n.Start()
	c.WaitLeaders("deleted")

	adm = kadm.NewClient(c.Client([]string{n.Addr}))
	defer adm.Close()
	starts, err := adm.ListStartOffsets(ctx, "deleted")
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("ListOffsets earliest after the restart: %v", err)
	}
	if o, _ := starts.Lookup("deleted", 0); o.Offset != 60 {
		t.Fatalf("ListOffsets earliest after kill -9 and restart: %d, want the log start 60 set by DeleteRecords", o.Offset)
	}
	sameKeys(t, "records read from the start after the restart", consumeKeys(t, c, n.Addr, "deleted", 40), keys[60:])
}
