package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/clustertest"
)

// mirrorsCLI runs `kmirror mirrors --bootstrap-server addr args…` (the binary the cluster
// runs) and returns its standard output, or an error carrying its standard error.
func mirrorsCLI(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, clustertest.Bin(t), append([]string{"mirrors", "--bootstrap-server", addr}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kmirror mirrors --bootstrap-server %s %s: %v: %s", addr, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// mustMirrorsCLI is mirrorsCLI failing the test on a non-zero exit; it checks that the
// output holds want.
func mustMirrorsCLI(t *testing.T, want, addr string, args ...string) {
	t.Helper()
	out, err := mirrorsCLI(t, addr, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, want) {
		t.Fatalf("kmirror mirrors %s through %s printed %q, want a line %q", strings.Join(args, " "), addr, out, want)
	}
}

// mirrorRow is one object of `kmirror mirrors --describe --json` (docs/operations.md).
type mirrorRow struct {
	Mirror            string  `json:"mirror"`
	Topic             string  `json:"topic"`
	Partition         int32   `json:"partition"`
	SourceOffset      *int64  `json:"source_offset"`
	DestinationOffset *int64  `json:"destination_offset"`
	Lag               *int64  `json:"lag"`
	State             string  `json:"state"`
	Error             *string `json:"error"`
	LastMirrorEpoch   *int32  `json:"last_mirror_epoch"`
	LastMirrorOffset  *int64  `json:"last_mirror_offset"`
	TruncatedTo       *int64  `json:"truncated_to"`
	TruncatedRecords  int64   `json:"truncated_records"`
}

func (r mirrorRow) String() string {
	v := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	s := fmt.Sprintf("%s-%d %s src %s dst %s lag %s", r.Topic, r.Partition, r.State, v(r.SourceOffset), v(r.DestinationOffset), v(r.Lag))
	if r.Error != nil {
		s += " error " + *r.Error
	}
	return s
}

// describeMirror is `kmirror mirrors --describe --mirror NAME --json` through addr, by
// partition of topic.
func describeMirror(t *testing.T, addr, mirror, topic string) (map[int32]mirrorRow, error) {
	t.Helper()
	out, err := mirrorsCLI(t, addr, "--describe", "--mirror", mirror, "--json")
	if err != nil {
		return nil, err
	}
	var rows []mirrorRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		return nil, fmt.Errorf("--describe --json printed %q: %v", out, err)
	}
	m := map[int32]mirrorRow{}
	for _, r := range rows {
		if r.Mirror == mirror && r.Topic == topic {
			m[r.Partition] = r
		}
	}
	return m, nil
}

// waitMirroring waits until describe through addr shows every partition of topic
// MIRRORING with lag 0 and its destination offset at the source's end offset (what
// sourceEnds answers, asked anew each try), and returns the rows.
func waitMirroring(t *testing.T, addr, mirror, topic string, partitions int32, sourceEnds func() (map[int32]int64, error)) map[int32]mirrorRow {
	t.Helper()
	var rows map[int32]mirrorRow
	clustertest.Eventually(t, 90*time.Second, func() (bool, string) {
		ends, err := sourceEnds()
		if err != nil {
			return false, fmt.Sprintf("source end offsets: %v", err)
		}
		if rows, err = describeMirror(t, addr, mirror, topic); err != nil {
			return false, err.Error()
		}
		for p := range partitions {
			r, ok := rows[p]
			switch {
			case !ok:
				return false, fmt.Sprintf("describe of %s through %s lists no %s-%d", mirror, addr, topic, p)
			case r.State != "MIRRORING" || r.Lag == nil || *r.Lag != 0 || r.DestinationOffset == nil || *r.DestinationOffset != ends[p]:
				return false, fmt.Sprintf("describe of %s through %s: %v; the source's end offset is %d", mirror, addr, r, ends[p])
			}
		}
		return true, ""
	})
	return rows
}

// startClusters formats and starts clusters of the given shapes side by side, each with
// its own cluster ID, and waits until every broker of each lists its brokers.
func startClusters(t *testing.T, specs ...clustertest.Spec) (*clustertest.Cluster, *clustertest.Cluster) {
	t.Helper()
	var cs []*clustertest.Cluster
	for _, s := range specs {
		cs = append(cs, clustertest.New(t, s))
	}
	for _, c := range cs {
		for _, n := range c.Nodes {
			n.Spawn()
		}
	}
	for _, c := range cs {
		for _, n := range c.Nodes {
			n.WaitServing()
		}
		c.WaitBrokers(len(c.Brokers()))
	}
	return cs[0], cs[1]
}

// TestMirrorDescribeWithNodeDown: `kmirror mirrors --describe` through a live node of a
// 3-node destination answers while another node is down but not yet fenced (its session,
// 30 s here, has not expired, so the image still lists it as a live broker that leads its
// partitions): the live nodes describe the partitions they lead, MIRRORING and caught up,
// the down node's partitions are described from their persisted states, and the nodes
// asked stay up. The node asked used to crash on the down node's missing answer (a nil
// response in mirror.Manager.DescribeClusterMirrors' merge of the sync tasks).
func TestMirrorDescribeWithNodeDown(t *testing.T) {
	const topic, partitions = "orders", 6
	a, b := startClusters(t, clustertest.Spec{Combined: 1}, clustertest.Spec{Combined: 3, Props: map[string]string{"broker.session.timeout.ms": "30000"}})
	createTopic(t, a, a.Node(1).Addr, topic, partitions)
	produceSync(t, a.Client(nil, kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), topic, keyRange("k", 60))
	cfg := filepath.Join(t.TempDir(), "from-a.properties")
	if err := os.WriteFile(cfg, []byte("bootstrap.servers="+a.Bootstrap()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMirrorsCLI(t, "Created cluster mirror from-a.", b.Node(1).Addr, "--create", "--mirror", "from-a", "--mirror-config", cfg)
	mustMirrorsCLI(t, "Started mirroring topic orders in mirror from-a.", b.Node(2).Addr, "--start", "--mirror", "from-a", "--topics", topic)
	ends := func() (map[int32]int64, error) { return endOffsets(a.Node(1).Addr, topic) }
	waitMirroring(t, b.Node(3).Addr, "from-a", topic, partitions, ends)
	leaders := b.WaitLeaders(topic)
	aEnds, err := ends()
	if err != nil {
		t.Fatal(err)
	}

	down := b.Node(3)
	down.Kill()
	// unfenced reports whether node 1 still answers the down node as the leader of its
	// partitions: its session has not expired.
	unfenced := func() bool {
		ls, err := clustertest.Leaders(b.Node(1).Addr, topic)
		return err == nil && slices.Equal(ls, leaders)
	}
	if !unfenced() {
		t.Fatalf("node 3 was fenced at once after kill -9 (session timeout 30 s); this test needs it unfenced")
	}
	n := b.Node(1)
	rows, err := describeMirror(t, n.Addr, "from-a", topic)
	if err != nil {
		t.Fatalf("describe through node 1 while node 3 is down: %v", err)
	}
	if !n.Running() {
		t.Fatalf("node 1 exited answering a describe while node 3 is down:\n%s", n.Output())
	}
	if len(rows) != partitions {
		t.Fatalf("describe through node 1 while node 3 is down lists %d partitions of %s, want %d", len(rows), topic, partitions)
	}
	for p, l := range leaders {
		r := rows[int32(p)]
		if l == down.ID {
			continue
		}
		if r.State != "MIRRORING" || r.DestinationOffset == nil || *r.DestinationOffset != aEnds[int32(p)] {
			t.Fatalf("describe through node 1 while node 3 is down: %v (led by live node %d), want MIRRORING at A's end offset %d", r, l, aEnds[int32(p)])
		}
	}
	if !unfenced() {
		t.Fatalf("node 3 was fenced before the describe ended: it did not run while it was down and unfenced")
	}
}
