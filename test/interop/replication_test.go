package interop

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/clustertest"
)

const leaderElectionTool = "org.apache.kafka.tools.LeaderElectionCommand" // kafka-leader-election.sh

// partState is one partition as Metadata answers it.
type partState struct {
	leader        int32
	replicas, isr []int32 // isr sorted
	isrAsAnswered []int32
}

// partStates returns every partition of topics as node addr's Metadata answers it, by
// "topic-partition".
func partStates(addr string, topics ...string) (map[string]partState, error) {
	m, err := clustertest.Metadata(addr, topics...)
	if err != nil {
		return nil, err
	}
	got := map[string]partState{}
	for _, mt := range m.Topics {
		if mt.ErrorCode != 0 || len(mt.Partitions) == 0 {
			return nil, fmt.Errorf("metadata of %s: error %d, %d partitions", *mt.Topic, mt.ErrorCode, len(mt.Partitions))
		}
		for _, mp := range mt.Partitions {
			isr := slices.Clone(mp.ISR)
			slices.Sort(isr)
			got[fmt.Sprintf("%s-%d", *mt.Topic, mp.Partition)] = partState{leader: mp.Leader, replicas: mp.Replicas, isr: isr, isrAsAnswered: mp.ISR}
		}
	}
	return got, nil
}

// waitStates waits until node addr answers, for every partition of topics, a state that
// ok accepts, and returns them.
func waitStates(t *testing.T, addr string, topics []string, ok func(name string, s partState) bool) map[string]partState {
	t.Helper()
	var got map[string]partState
	clustertest.Eventually(t, 90*time.Second, func() (bool, string) {
		var err error
		if got, err = partStates(addr, topics...); err != nil {
			return false, err.Error()
		}
		for name, s := range got {
			if !ok(name, s) {
				return false, fmt.Sprintf("%s: leader %d, replicas %v, ISR %v", name, s.leader, s.replicas, s.isr)
			}
		}
		return len(got) > 0, "no partitions"
	})
	return got
}

var describeRow = regexp.MustCompile(`(?m)^\s*Topic: (\S+)\s+Partition: (\d+)\s+Leader: (\S+)\s+Replicas: (\S*)\s+Isr: (\S*)(.*)$`)

// describeRows parses the partition rows of kafka-topics --describe (and its filtered
// forms): "topic-partition" → the row's fields after Partition.
func describeRows(out string) map[string]map[string]string {
	rows := map[string]map[string]string{}
	for _, m := range describeRow.FindAllStringSubmatch(out, -1) {
		f := map[string]string{"Leader": m[3], "Replicas": m[4], "Isr": m[5]}
		for _, kv := range strings.Split(strings.TrimSpace(m[6]), "\t") {
			if k, v, ok := strings.Cut(kv, ":"); ok {
				f[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
		rows[m[1]+"-"+m[2]] = f
	}
	return rows
}

// listed runs kafka-topics --describe with filter (e.g. --under-replicated-partitions)
// and returns the partitions it lists, sorted.
func listed(t *testing.T, addr, filter string) []string {
	t.Helper()
	out := tool(t, "", topicsTool, "--bootstrap-server", addr, "--describe", filter)
	var names []string
	for name := range describeRows(out) {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func ids(s []int32) string {
	var parts []string
	for _, id := range s {
		parts = append(parts, strconv.Itoa(int(id)))
	}
	return strings.Join(parts, ",")
}

// TestKafkaTopicsReplicaStates: kafka-topics (Apache Kafka 4.x) against three kmirror
// nodes, with topics rf3 (replication factor 3, min.insync.replicas 2), rf2 (RF 2, min
// ISR 2) and rf1 (RF 1, min ISR 1), three partitions each. --describe shows every
// partition's Leader, Replicas and Isr as Metadata answers them, and the Elr and
// LastKnownElr columns (empty: kmirror has no KIP-966 elections); while all nodes run,
// --under-replicated-partitions, --under-min-isr-partitions and --unavailable-partitions
// list nothing. With the node leading an rf1 partition killed (SIGKILL), they list exactly
// the partitions Kafka's TopicCommand rules pick from Kafka's answers: under-replicated,
// every rf3 partition and each rf2 partition with a replica on the node (ISR shorter than
// the replicas); under-min-isr, those rf2 partitions and the rf1 partition (no leader);
// unavailable, the rf1 partition alone. --describe shows that partition with Leader none
// and the killed node still in its ISR (the last ISR member stays, as in Kafka's KRaft
// controller) and the node in no other ISR. After the node restarts every list is empty
// again.
func TestKafkaTopicsReplicaStates(t *testing.T) {
	needKafka(t)
	c := clustertest.Start(t, clustertest.Spec{Combined: 3, Props: map[string]string{"min.insync.replicas": "2"}})
	n1 := c.Node(1).Addr
	create := func(topic string, rf, minIsr int) {
		out := tool(t, "", topicsTool, "--bootstrap-server", n1, "--create", "--topic", topic, "--partitions", "3",
			"--replication-factor", strconv.Itoa(rf), "--config", fmt.Sprintf("min.insync.replicas=%d", minIsr))
		mustContain(t, "create "+topic, out, "Created topic "+topic+".")
	}
	create("rf3", 3, 2)
	create("rf2", 2, 2)
	create("rf1", 1, 1)
	topics := []string{"rf1", "rf2", "rf3"}
	full := waitStates(t, n1, topics, func(_ string, s partState) bool {
		return s.leader >= 0 && len(s.isr) == len(s.replicas)
	})

	out := tool(t, "", topicsTool, "--bootstrap-server", c.Node(2).Addr, "--describe")
	rows := describeRows(out)
	for name, s := range full {
		r, ok := rows[name]
		if !ok {
			t.Fatalf("--describe lacks %s:\n%s", name, out)
		}
		if r["Leader"] != strconv.Itoa(int(s.leader)) || r["Replicas"] != ids(s.replicas) || r["Isr"] != ids(s.isrAsAnswered) {
			t.Fatalf("--describe %s: %v; Metadata answers leader %d, replicas %v, ISR %v", name, r, s.leader, s.replicas, s.isr)
		}
		if e, ok := r["Elr"]; !ok || e != "" {
			t.Fatalf("--describe %s: Elr %q (present %v), want an empty column:\n%s", name, e, ok, out)
		}
		if e, ok := r["LastKnownElr"]; !ok || e != "" {
			t.Fatalf("--describe %s: LastKnownElr %q (present %v), want an empty column:\n%s", name, e, ok, out)
		}
	}
	for _, f := range []string{"--under-replicated-partitions", "--under-min-isr-partitions", "--unavailable-partitions"} {
		if got := listed(t, n1, f); len(got) != 0 {
			t.Fatalf("all nodes running: %s lists %v, want none", f, got)
		}
	}

	// The victim leads rf1-0 and is not node 1 (which the tools ask).
	victim := full["rf1-0"].leader
	if victim == 1 {
		victim = full["rf1-1"].leader
		if victim == 1 {
			victim = full["rf1-2"].leader
		}
	}
	var underRep, underMin, unavailable []string
	for name, s := range full {
		has := slices.Contains(s.replicas, victim)
		switch {
		case strings.HasPrefix(name, "rf3"):
			underRep = append(underRep, name)
		case strings.HasPrefix(name, "rf2") && has:
			underRep = append(underRep, name)
			underMin = append(underMin, name)
		case strings.HasPrefix(name, "rf1") && has:
			underMin = append(underMin, name)
			unavailable = append(unavailable, name)
		}
	}
	for _, s := range [][]string{underRep, underMin, unavailable} {
		sort.Strings(s)
	}
	t.Logf("killing node %d; want under-replicated %v, under-min-isr %v, unavailable %v", victim, underRep, underMin, unavailable)
	c.Node(victim).Kill()
	ask := c.Node(1).Addr
	waitStates(t, ask, topics, func(name string, s partState) bool {
		if slices.Equal(s.replicas, []int32{victim}) {
			return s.leader < 0
		}
		return s.leader >= 0 && s.leader != victim && !slices.Contains(s.isr, victim)
	})

	out = tool(t, "", topicsTool, "--bootstrap-server", ask, "--describe")
	rows = describeRows(out)
	for name, r := range rows {
		if slices.Contains(unavailable, name) {
			if r["Leader"] != "none" || r["Isr"] != strconv.Itoa(int(victim)) {
				t.Fatalf("--describe %s with its only replica %d down: %v, want Leader none and Isr %d:\n%s", name, victim, r, victim, out)
			}
			continue
		}
		if slices.Contains(strings.Split(r["Isr"], ","), strconv.Itoa(int(victim))) {
			t.Fatalf("--describe %s: node %d killed but in the ISR: %v", name, victim, r)
		}
	}
	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{"--under-replicated-partitions", underRep},
		{"--under-min-isr-partitions", underMin},
		{"--unavailable-partitions", unavailable},
	} {
		if got := listed(t, ask, tc.filter); !slices.Equal(got, tc.want) {
			t.Fatalf("node %d killed: %s lists %v, want %v", victim, tc.filter, got, tc.want)
		}
	}

	c.Node(victim).Start()
	waitStates(t, ask, topics, func(_ string, s partState) bool {
		return s.leader >= 0 && len(s.isr) == len(s.replicas)
	})
	for _, f := range []string{"--under-replicated-partitions", "--under-min-isr-partitions", "--unavailable-partitions"} {
		if got := listed(t, ask, f); len(got) != 0 {
			t.Fatalf("node %d restarted: %s lists %v, want none", victim, f, got)
		}
	}
}

// TestKafkaLeaderElection: kafka-leader-election (Apache Kafka 4.x) against three
// combined kmirror nodes and a broker-only one. After node 3, the preferred leader of
// partitions of a topic with replication factor 3, is killed and restarted (its
// partitions led by others), --election-type preferred --topic --partition moves one
// partition back ("Successfully completed leader election (PREFERRED)"), a second run of
// it reports "Valid replica already elected", and --all-topic-partitions moves the others
// back without naming that one, after which every partition is led by its first replica.
// For --election-type unclean: a partition of replication factor 2 whose leader was
// killed after its follower had left the ISR (the follower killed, then restarted) has no
// leader; --topic --partition elects the out-of-sync replica ("Successfully completed
// leader election (UNCLEAN)", ISR that replica alone); --all-topic-partitions then elects
// exactly the other partitions left without a leader, if any, and exits 0.
func TestKafkaLeaderElection(t *testing.T) {
	needKafka(t)
	c := clustertest.Start(t, clustertest.Spec{Combined: 3, Brokers: 1, Props: map[string]string{"auto.leader.rebalance.enable": "false"}})
	all := strings.Join([]string{c.Node(1).Addr, c.Node(2).Addr, c.Node(3).Addr, c.Node(4).Addr}, ",")
	running := func() string {
		for _, n := range c.Brokers() {
			if n.Running() {
				return n.Addr
			}
		}
		t.Fatal("no node runs")
		return ""
	}
	elect := func(args ...string) string {
		return tool(t, "", leaderElectionTool, append([]string{"--bootstrap-server", all}, args...)...)
	}
	tool(t, "", topicsTool, "--bootstrap-server", all, "--create", "--topic", "pref", "--partitions", "8", "--replication-factor", "3")
	full := waitStates(t, running(), []string{"pref"}, func(_ string, s partState) bool {
		return s.leader >= 0 && len(s.isr) == 3
	})
	var moved []string
	for name, s := range full {
		if s.replicas[0] == 3 {
			moved = append(moved, name)
		}
	}
	sort.Strings(moved)
	if len(moved) < 2 {
		t.Fatalf("node 3 is the preferred leader of %v, want at least two partitions of %v", moved, full)
	}
	c.Node(3).Kill()
	waitStates(t, running(), []string{"pref"}, func(_ string, s partState) bool { return s.leader >= 0 && s.leader != 3 })
	c.Node(3).Start()
	waitStates(t, running(), []string{"pref"}, func(_ string, s partState) bool { return len(s.isr) == 3 && s.leader != 3 })

	first := moved[0]
	part := first[strings.LastIndex(first, "-")+1:]
	out := elect("--election-type", "preferred", "--topic", "pref", "--partition", part)
	mustContain(t, "preferred election of "+first, out, "Successfully completed leader election (PREFERRED) for partitions "+first)
	waitStates(t, running(), []string{"pref"}, func(name string, s partState) bool { return name != first || s.leader == 3 })
	out = elect("--election-type", "preferred", "--topic", "pref", "--partition", part)
	mustContain(t, "second preferred election of "+first, out, "Valid replica already elected for partitions "+first)

	out = elect("--election-type", "preferred", "--all-topic-partitions")
	mustContain(t, "preferred election of all partitions", out, "Successfully completed leader election (PREFERRED) for partitions")
	for _, name := range moved[1:] {
		mustContain(t, "preferred election of all partitions", out, name)
	}
	if regexp.MustCompile(regexp.QuoteMeta(first) + `\b`).MatchString(out) {
		t.Fatalf("--all-topic-partitions reports %s, already led by its preferred replica:\n%s", first, out)
	}
	waitStates(t, running(), []string{"pref"}, func(_ string, s partState) bool { return s.leader == s.replicas[0] })

	// Unclean: a partition of RF 2 with node 4 (broker-only) as a replica, so that both of
	// its replicas can be down with the quorum intact.
	tool(t, "", topicsTool, "--bootstrap-server", all, "--create", "--topic", "unclean", "--partitions", "4", "--replication-factor", "2",
		"--config", "min.insync.replicas=1")
	states := waitStates(t, running(), []string{"unclean"}, func(_ string, s partState) bool { return s.leader >= 0 && len(s.isr) == 2 })
	var target string
	var leader, follower int32
	for _, name := range []string{"unclean-0", "unclean-1", "unclean-2", "unclean-3"} {
		if s := states[name]; slices.Contains(s.replicas, 4) {
			target, leader, follower = name, s.leader, s.replicas[0]+s.replicas[1]-s.leader
			break
		}
	}
	if target == "" {
		t.Fatalf("no partition of unclean has a replica on node 4: %v", states)
	}
	pair := []int32{min(leader, follower), max(leader, follower)}
	var others []string // the other partitions on the same two nodes: left without a leader too
	for name, s := range states {
		r := slices.Clone(s.replicas)
		slices.Sort(r)
		if name != target && slices.Equal(r, pair) {
			others = append(others, name)
		}
	}
	t.Logf("%s: leader %d, follower %d; others on the same nodes %v", target, leader, follower, others)
	c.Node(follower).Kill()
	waitStates(t, running(), []string{"unclean"}, func(name string, s partState) bool {
		return name != target || slices.Equal(s.isr, []int32{leader})
	})
	c.Node(leader).Kill()
	c.Node(follower).Start()
	c.WaitBrokers(3)
	waitStates(t, running(), []string{"unclean"}, func(name string, s partState) bool {
		return (name != target && !slices.Contains(others, name)) || s.leader < 0
	})
	out = elect("--election-type", "unclean", "--topic", "unclean", "--partition", target[len("unclean-"):])
	mustContain(t, "unclean election of "+target, out, "Successfully completed leader election (UNCLEAN) for partitions "+target)
	waitStates(t, running(), []string{"unclean"}, func(name string, s partState) bool {
		return name != target || (s.leader == follower && slices.Equal(s.isr, []int32{follower}))
	})
	out = elect("--election-type", "unclean", "--all-topic-partitions")
	if len(others) == 0 && strings.Contains(out, "Successfully completed") {
		t.Fatalf("unclean election of all partitions, none without a leader, elected some:\n%s", out)
	}
	for _, name := range others {
		mustContain(t, "unclean election of all partitions", out, "Successfully completed leader election (UNCLEAN)", name)
	}
	c.Node(leader).Start()
}
