package interop

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/clustertest"
)

const metadataQuorumTool = "org.apache.kafka.tools.MetadataQuorumCommand" // kafka-metadata-quorum.sh

var describeLeader = regexp.MustCompile(`Partition:\s*(\d+)\s+Leader:\s*(-?\d+)`)

// describeLeaders parses kafka-topics --describe: partition → leader.
func describeLeaders(t *testing.T, out string, partitions int) []int32 {
	t.Helper()
	leaders := make([]int32, partitions)
	seen := 0
	for _, m := range describeLeader.FindAllStringSubmatch(out, -1) {
		p, _ := strconv.Atoi(m[1])
		l, _ := strconv.Atoi(m[2])
		if p >= partitions {
			t.Fatalf("--describe lists partition %d of %d:\n%s", p, partitions, out)
		}
		leaders[p] = int32(l)
		seen++
	}
	if seen != partitions {
		t.Fatalf("--describe lists %d partitions, want %d:\n%s", seen, partitions, out)
	}
	return leaders
}

var (
	quorumField = regexp.MustCompile(`(?m)^(\w+):\s*(.*)$`)
	quorumID    = regexp.MustCompile(`"id": (\d+)`)
)

// quorumStatus runs kafka-metadata-quorum --bootstrap-server addr describe --status and
// checks that it names the cluster's ID, the voters and the observers given, and a
// leader among the voters, which it returns.
func quorumStatus(t *testing.T, c *clustertest.Cluster, addr string, voters, observers []int32) int32 {
	t.Helper()
	out := tool(t, "", metadataQuorumTool, "--bootstrap-server", addr, "describe", "--status")
	fields := map[string]string{}
	for _, m := range quorumField.FindAllStringSubmatch(out, -1) {
		fields[m[1]] = strings.TrimSpace(m[2])
	}
	ids := func(field string) []int32 {
		var got []int32
		for _, m := range quorumID.FindAllStringSubmatch(fields[field], -1) {
			n, _ := strconv.Atoi(m[1])
			got = append(got, int32(n))
		}
		slices.Sort(got)
		return got
	}
	if fields["ClusterId"] != c.ClusterID {
		t.Fatalf("kafka-metadata-quorum through %s: ClusterId %q, want %s:\n%s", addr, fields["ClusterId"], c.ClusterID, out)
	}
	if got := ids("CurrentVoters"); !slices.Equal(got, voters) {
		t.Fatalf("kafka-metadata-quorum through %s: CurrentVoters %v, want %v:\n%s", addr, got, voters, out)
	}
	if got := ids("CurrentObservers"); !slices.Equal(got, observers) {
		t.Fatalf("kafka-metadata-quorum through %s: CurrentObservers %v, want %v:\n%s", addr, got, observers, out)
	}
	leader, err := strconv.Atoi(fields["LeaderId"])
	if err != nil || !slices.Contains(voters, int32(leader)) {
		t.Fatalf("kafka-metadata-quorum through %s: LeaderId %q, want one of %v:\n%s", addr, fields["LeaderId"], voters, out)
	}
	return int32(leader)
}

// TestKafkaToolsOnCluster: Apache Kafka's own tools against a cluster of three kmirror
// processes (combined broker and controller nodes), each tool pointed at one node and
// another node checking what it did: kafka-topics creates a topic of 12 partitions with
// replication factor 1 through node 1 and --describe through every node shows the same
// leaders spread over all three nodes; kafka-metadata-quorum describe --status through
// every node names one leader among CurrentVoters 1, 2, 3; kafka-configs alters a topic
// config through node 3 and describes it through node 1; the console producer writes
// through every node and the console consumer (the Java client) reads everything through
// every node; kafka-consumer-groups --describe through node 2 shows the offsets of a
// group consumed through node 3.
func TestKafkaToolsOnCluster(t *testing.T) {
	needKafka(t)
	c := clustertest.Start(t, clustertest.Spec{Combined: 3})
	n1, n2, n3 := c.Node(1).Addr, c.Node(2).Addr, c.Node(3).Addr
	bs := func(addr string, args ...string) []string {
		return append([]string{"--bootstrap-server", addr}, args...)
	}

	out := tool(t, "", topicsTool, bs(n1, "--create", "--topic", "spread", "--partitions", "12", "--replication-factor", "1")...)
	mustContain(t, "create", out, "Created topic spread.")
	c.WaitLeaders("spread")
	var leaders []int32
	for _, addr := range []string{n1, n2, n3} {
		out = tool(t, "", topicsTool, bs(addr, "--describe", "--topic", "spread")...)
		mustContain(t, "describe through "+addr, out, "PartitionCount: 12", "ReplicationFactor: 1")
		got := describeLeaders(t, out, 12)
		if leaders != nil && !slices.Equal(got, leaders) {
			t.Fatalf("--describe through %s: leaders %v, through node 1 %v", addr, got, leaders)
		}
		leaders = got
	}
	spread := slices.Clone(leaders)
	slices.Sort(spread)
	if spread = slices.Compact(spread); !slices.Equal(spread, []int32{1, 2, 3}) {
		t.Fatalf("the 12 partitions are led by nodes %v (%v), want all of 1, 2, 3", spread, leaders)
	}

	var leaderID int32
	for _, addr := range []string{n1, n2, n3} {
		id := quorumStatus(t, c, addr, []int32{1, 2, 3}, nil)
		if leaderID != 0 && id != leaderID {
			t.Fatalf("kafka-metadata-quorum through %s: LeaderId %d, through node 1 %d", addr, id, leaderID)
		}
		leaderID = id
	}

	out = tool(t, "", configsTool, bs(n3, "--entity-type", "topics", "--entity-name", "spread", "--alter", "--add-config", "retention.ms=7654321")...)
	mustContain(t, "alter through node 3", out, "Completed updating config for topic spread.")
	var last string
	eventually(t, func() string { return "describe through node 1:\n" + last }, func() bool {
		last = tool(t, "", configsTool, bs(n1, "--entity-type", "topics", "--entity-name", "spread", "--describe")...)
		return strings.Contains(last, "retention.ms=7654321")
	})

	var want []string
	for i, addr := range []string{n1, n2, n3} {
		var in strings.Builder
		for j := range 20 {
			k := fmt.Sprintf("java-%d-%02d", i+1, j)
			fmt.Fprintf(&in, "%s:v-%s\n", k, k)
			want = append(want, k)
		}
		tool(t, in.String(), consoleProducer, bs(addr, "--topic", "spread", "--producer-property", "acks=all",
			"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")...)
	}
	slices.Sort(want)
	for i, addr := range []string{n1, n2, n3} {
		args := bs(addr, "--topic", "spread", "--from-beginning", "--max-messages", strconv.Itoa(len(want)), "--timeout-ms", "60000",
			"--formatter-property", "print.key=true", "--formatter-property", "print.value=false")
		if i == 2 {
			args = append(args, "--group", "cluster-console")
		}
		out = tool(t, "", consoleConsumer, args...)
		got := strings.Fields(out)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("console consumer through %s read %d records, want the %d produced:\n%s", addr, len(got), len(want), out)
		}
	}

	out = tool(t, "", groupsTool, bs(n2, "--describe", "--group", "cluster-console")...)
	rows := groupRows(t, out)
	var total int64
	for p := range 12 {
		r, ok := rows[fmt.Sprintf("spread/%d", p)]
		if !ok {
			t.Fatalf("kafka-consumer-groups --describe through node 2 lacks spread/%d:\n%s", p, out)
		}
		if r[0] != r[1] || r[2] != 0 {
			t.Fatalf("spread/%d: current offset %d, log end offset %d, lag %d; want the group at the end:\n%s", p, r[0], r[1], r[2], out)
		}
		total += r[1]
	}
	if total != int64(len(want)) {
		t.Fatalf("the log end offsets add up to %d, want %d records:\n%s", total, len(want), out)
	}
}

// TestKafkaToolsControllerFailover: on a cluster of three controller-only and two
// broker-only kmirror nodes, kafka-metadata-quorum through a broker names the active
// controller, the three voters and the two brokers as observers; after that controller
// is killed with SIGKILL it names another one, and kafka-topics creates a topic through
// one broker, describes it through the other and deletes it.
func TestKafkaToolsControllerFailover(t *testing.T) {
	needKafka(t)
	c := clustertest.Start(t, clustertest.Spec{Controllers: 3, Brokers: 2})
	b4, b5 := c.Node(4).Addr, c.Node(5).Addr
	leader := quorumStatus(t, c, b4, []int32{1, 2, 3}, []int32{4, 5})
	c.Node(leader).Kill()
	var next int32
	eventually(t, func() string { return fmt.Sprintf("kafka-metadata-quorum still names the killed node %d", leader) }, func() bool {
		if q, err := clustertest.DescribeQuorum(b5); err != nil || q.LeaderID == leader {
			return false
		}
		next = quorumStatus(t, c, b5, []int32{1, 2, 3}, []int32{4, 5})
		return next != leader
	})
	t.Logf("active controller %d killed; kafka-metadata-quorum names %d", leader, next)

	out := tool(t, "", topicsTool, "--bootstrap-server", b5, "--create", "--topic", "after-failover", "--partitions", "4", "--replication-factor", "1")
	mustContain(t, "create through broker 5", out, "Created topic after-failover.")
	c.WaitLeaders("after-failover")
	out = tool(t, "", topicsTool, "--bootstrap-server", b4, "--describe", "--topic", "after-failover")
	spread := describeLeaders(t, out, 4)
	slices.Sort(spread)
	if spread = slices.Compact(spread); !slices.Equal(spread, []int32{4, 5}) {
		t.Fatalf("after-failover is led by %v, want both brokers 4 and 5:\n%s", spread, out)
	}
	tool(t, "", topicsTool, "--bootstrap-server", b4, "--delete", "--topic", "after-failover")
	var last string
	eventually(t, func() string { return "after-failover still listed through broker 5:\n" + last }, func() bool {
		last = tool(t, "", topicsTool, "--bootstrap-server", b5, "--list")
		return !strings.Contains(last, "after-failover")
	})
}
