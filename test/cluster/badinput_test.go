package cluster

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// refused starts n and waits for it to exit by itself: it must exit non-zero with its
// reason as its last line, one line starting "Error: " that holds each of wants.
func refused(t *testing.T, n *clustertest.Node, what string, wants ...string) string {
	t.Helper()
	n.Spawn()
	out, err, exited := n.Wait(60 * time.Second)
	if !exited {
		n.Kill()
		t.Fatalf("%s: node %d still runs after 60 s; last line: %s", what, n.ID, clustertest.LastLine(out))
	}
	line := clustertest.LastLine(out)
	if err == nil {
		t.Fatalf("%s: node %d exited with status 0; last line: %s", what, n.ID, line)
	}
	if !strings.HasPrefix(line, "Error: ") || strings.Count(out, "Error: ") != 1 {
		t.Fatalf("%s: node %d's last line is not its one error line: %q", what, n.ID, line)
	}
	for _, w := range wants {
		if !strings.Contains(line, w) {
			t.Fatalf("%s: node %d's error does not say %q: %s", what, n.ID, w, line)
		}
	}
	t.Logf("%s: %s", what, line)
	return line
}

// healthy checks that the cluster is as it was: every broker lists the brokers want and
// no other, each at its own address; the active controller is still before; records
// produced through each broker are read back through each.
func healthy(t *testing.T, c *clustertest.Cluster, want []int32, before *clustertest.Node, round string) {
	t.Helper()
	for _, b := range c.Brokers() {
		m, err := clustertest.Metadata(b.Addr)
		if err != nil {
			t.Fatalf("%s: Metadata through node %d: %v", round, b.ID, err)
		}
		var ids []int32
		for _, mb := range m.Brokers {
			ids = append(ids, mb.NodeID)
			if addr := fmt.Sprintf("%s:%d", mb.Host, mb.Port); addr != c.Node(mb.NodeID).Addr {
				t.Fatalf("%s: node %d lists broker %d at %s, want %s", round, b.ID, mb.NodeID, addr, c.Node(mb.NodeID).Addr)
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, want) {
			t.Fatalf("%s: node %d lists brokers %v, want %v", round, b.ID, ids, want)
		}
	}
	if now := c.ActiveController(); now != before {
		t.Fatalf("%s: the active controller changed from node %d to node %d", round, before.ID, now.ID)
	}
	topic := "healthy-" + strings.ReplaceAll(round, " ", "-")
	createTopic(t, c, c.Node(1).Addr, topic, 4)
	var keys []string
	for _, b := range c.Brokers() {
		k := keyRange(fmt.Sprintf("%s-%d", topic, b.ID), 8)
		produceSync(t, c.Client([]string{b.Addr}), topic, k)
		keys = append(keys, k...)
	}
	for _, b := range c.Brokers() {
		sameKeys(t, fmt.Sprintf("%s: records through node %d", round, b.ID), consumeKeys(t, c, b.Addr, topic, len(keys)), keys)
	}
}

// TestBadNodesRefused: against a running cluster of three combined nodes and a
// broker-only node, each bad node is refused with a one-line error that says what is
// wrong, and the cluster is unharmed (same brokers at the same addresses, same active
// controller, records produced and read through every broker):
//   - a broker-only node formatted with another cluster ID, and a voter restarted on a
//     log directory formatted with another cluster ID;
//   - a node of the 3-voter config whose log directory is not formatted (the message names
//     `kmirror storage format`);
//   - a controller whose node.id controller.quorum.voters does not name (a config error
//     naming the key; `kmirror storage format` refuses it too);
//   - a second broker with the node.id of a running one (another broker is registered
//     with that node.id).
func TestBadNodesRefused(t *testing.T) {
	c := clustertest.Start(t, clustertest.Spec{Combined: 3, Brokers: 1})
	all := []int32{1, 2, 3, 4}
	active := c.ActiveController()
	healthy(t, c, all, active, "at start")

	other := clustertest.RandomUUID(t)
	n5 := c.NewNode(5, "broker", nil)
	n5.Format(other)
	refused(t, n5, "broker-only node of another cluster", "formatted for another cluster")

	var voter *clustertest.Node
	for _, n := range c.Nodes[:3] {
		if n != active {
			voter = n
			break
		}
	}
	if out, err := voter.Term(40 * time.Second); err != nil {
		t.Fatalf("SIGTERM node %d: %v; last line: %s", voter.ID, err, clustertest.LastLine(out))
	}
	ownDir := voter.Props["log.dirs"]
	voter.Props["log.dirs"] = filepath.Join(t.TempDir(), "other-cluster")
	voter.Format(other)
	refused(t, voter, fmt.Sprintf("voter %d restarted on a log directory of another cluster", voter.ID), "cluster")
	voter.Props["log.dirs"] = filepath.Join(t.TempDir(), "unformatted")
	refused(t, voter, fmt.Sprintf("voter %d restarted on an unformatted log directory", voter.ID), "kmirror storage format", "not formatted")
	voter.Props["log.dirs"] = ownDir
	voter.Start()
	c.WaitBrokers(len(all))
	healthy(t, c, all, active, "after the bad voters")

	n6 := c.NewNode(6, "broker", nil)
	refused(t, n6, "unformatted broker-only node", "kmirror storage format", "not formatted")

	n7 := c.NewNode(7, "broker,controller", nil)
	n7.WriteConfig()
	refused(t, n7, "controller not named by controller.quorum.voters", "controller.quorum.voters", "node id 7")
	if out, err := exec.Command(clustertest.Bin(t), "storage", "format", "-t", c.ClusterID, "-c", n7.Config()).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "controller.quorum.voters") {
		t.Fatalf("kmirror storage format of a controller not named by controller.quorum.voters: %v\n%s", err, out)
	}

	dup := c.NewNode(4, "broker", nil)
	dup.Format(c.ClusterID)
	refused(t, dup, "second broker with node.id 4", "another broker is registered with that node.id")
	if !c.Node(4).Running() {
		t.Fatal("node 4 stopped when a second node with its node.id tried to register")
	}
	healthy(t, c, all, active, "after the bad brokers")
}
