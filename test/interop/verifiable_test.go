package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/clustertest"
)

const (
	verifiableProducer = "org.apache.kafka.tools.VerifiableProducer" // kafka-verifiable-producer.sh
	verifiableConsumer = "org.apache.kafka.tools.VerifiableConsumer" // kafka-verifiable-consumer.sh
)

// event is one JSON line of VerifiableProducer or VerifiableConsumer.
type event struct {
	Name       string  `json:"name"`
	Topic      string  `json:"topic"`
	Partition  int32   `json:"partition"`
	Offset     int64   `json:"offset"`
	Value      *string `json:"value"`
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		MinOffset int64  `json:"minOffset"`
		MaxOffset int64  `json:"maxOffset"`
	} `json:"partitions"`
}

// javaProc is a running Apache Kafka tool whose stdout lines are handed to onEvent as
// they come.
type javaProc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

func startJava(t *testing.T, onEvent func(event), class string, args ...string) *javaProc {
	t.Helper()
	p := &javaProc{done: make(chan struct{})}
	p.cmd = java.Command(context.Background(), jvm("256m"), class, args...)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Name != "" {
				onEvent(e)
			}
		}
		io.Copy(io.Discard, out)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// stop sends SIGTERM (the tools' shutdown hooks close the client and print their last
// events) and waits for the exit.
func (p *javaProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60 s of SIGTERM; stderr:\n%s", p.cmd.Args, clip(p.stderr.String()))
	}
}

type offsetKey struct {
	p int32
	o int64
}

// TestVerifiableProducerConsumerLeaderBounce: Apache Kafka's VerifiableProducer (acks=-1,
// idempotent) and VerifiableConsumer (a group, committing after every poll) run against
// three kmirror nodes, a topic of three partitions with replication factor 3 and
// min.insync.replicas 2, while the leader of one partition (not the group's coordinator)
// is killed with SIGKILL and restarted, as Kafka's replication system test
// (tests/kafkatest/tests/core/replication_test.py, hard_bounce of the leader) does. The
// producer keeps having writes acknowledged while the node is down and after it is back;
// every acknowledged record (producer_send_success) is consumed (covered by a
// records_consumed range) with the value acknowledged at its partition and offset; no
// value is in the log twice (idempotence across the failover, as the system test checks
// with enable_idempotence); the restarted node is back in every ISR.
func TestVerifiableProducerConsumerLeaderBounce(t *testing.T) {
	needKafka(t)
	c := clustertest.Start(t, clustertest.Spec{Combined: 3, Props: map[string]string{
		"min.insync.replicas":              "2",
		"offsets.topic.replication.factor": "3",
	}})
	bs := c.Node(1).Addr + "," + c.Node(2).Addr + "," + c.Node(3).Addr
	const topic, group = "verifiable", "verifiable-group"
	out := tool(t, "", topicsTool, "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "3",
		"--replication-factor", "3", "--config", "min.insync.replicas=2")
	mustContain(t, "create", out, "Created topic "+topic+".")
	states := waitStates(t, c.Node(1).Addr, []string{topic}, func(_ string, s partState) bool { return s.leader > 0 && len(s.isr) == 3 })

	var mu sync.Mutex
	acked := map[offsetKey]string{}
	consumed := map[offsetKey]string{}
	covered := map[offsetKey]bool{}
	assigned, sendErrors := 0, 0
	cons := startJava(t, func(e event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Name {
		case "partitions_assigned":
			assigned++
		case "record_data":
			if e.Value != nil {
				consumed[offsetKey{e.Partition, e.Offset}] = *e.Value
			}
		case "records_consumed":
			for _, r := range e.Partitions {
				for o := r.MinOffset; o <= r.MaxOffset; o++ {
					covered[offsetKey{r.Partition, o}] = true
				}
			}
		}
	}, verifiableConsumer, "--bootstrap-server", bs, "--topic", topic, "--group-id", group, "--reset-policy", "earliest", "--verbose")
	clustertest.Eventually(t, 90*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return assigned > 0, "the VerifiableConsumer got no partitions_assigned event; stderr:\n" + clip(cons.stderr.String())
	})

	prod := startJava(t, func(e event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Name {
		case "producer_send_success":
			if e.Value != nil {
				acked[offsetKey{e.Partition, e.Offset}] = *e.Value
			}
		case "producer_send_error":
			sendErrors++
		}
	}, verifiableProducer, "--bootstrap-server", bs, "--topic", topic, "--acks", "-1", "--throughput", "200")
	ackedAtLeast := func(what string, n int) {
		t.Helper()
		clustertest.Eventually(t, 120*time.Second, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= n, fmt.Sprintf("%s: %d records acknowledged, want %d; stderr:\n%s", what, len(acked), n, clip(prod.stderr.String()))
		})
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	ackedAtLeast("before the bounce", 300)

	coordinator, err := clustertest.FindCoordinator(c.Node(1).Addr, group, false)
	if err != nil {
		t.Fatal(err)
	}
	victim := states[topic+"-0"].leader
	for _, name := range []string{topic + "-0", topic + "-1", topic + "-2"} {
		if l := states[name].leader; l != coordinator {
			victim = l
			break
		}
	}
	t.Logf("killing node %d (the group's coordinator is node %d) with %d records acknowledged", victim, coordinator, count())
	c.Node(victim).Kill()
	waitStates(t, c.Node(victim%3+1).Addr, []string{topic}, func(_ string, s partState) bool {
		return s.leader > 0 && s.leader != victim && !slices.Contains(s.isr, victim)
	})
	ackedAtLeast("with the leader down", count()+300)
	c.Node(victim).Start()
	waitStates(t, c.Node(victim).Addr, []string{topic}, func(_ string, s partState) bool { return s.leader > 0 && len(s.isr) == 3 })
	ackedAtLeast("after the restart", count()+300)
	prod.stop(t)

	mu.Lock()
	total := len(acked)
	mu.Unlock()
	var last string
	clustertest.Eventually(t, 120*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for k, v := range acked {
			got, ok := consumed[k]
			if ok && got != v {
				t.Fatalf("partition %d offset %d: acknowledged with value %s, consumed with %s", k.p, k.o, v, got)
			}
			if !ok || !covered[k] {
				missing++
				last = fmt.Sprintf("partition %d offset %d (value %s)", k.p, k.o, v)
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d acknowledged records not consumed, e.g. %s; consumer stderr:\n%s", missing, total, last, clip(cons.stderr.String()))
	})
	cons.stop(t)
	mu.Lock()
	defer mu.Unlock()
	at := map[string]offsetKey{}
	for k, v := range consumed {
		if prev, ok := at[v]; ok {
			t.Fatalf("value %s is in the log twice (partition %d offset %d and partition %d offset %d): the idempotent producer's retry was written again", v, prev.p, prev.o, k.p, k.o)
		}
		at[v] = k
	}
	t.Logf("%d records acknowledged (%d send errors), all consumed (%d consumed)", total, sendErrors, len(consumed))
	replicasReadByDumpLog(t, c, topic, 3)
}

// replicasReadByDumpLog waits until the three replicas of each partition of topic are
// byte-identical (segment checksums), then has Apache Kafka's kafka-dump-log read every
// replica's segments with --deep-iteration: each one parses to the same batches (none for
// a partition the producer's sticky partitioner left empty).
func replicasReadByDumpLog(t *testing.T, c *clustertest.Cluster, topic string, partitions int32) {
	t.Helper()
	for p := range partitions {
		size := 0
		clustertest.Eventually(t, 60*time.Second, func() (bool, string) {
			var first string
			first, size, _ = c.Nodes[0].LogDigest(topic, p)
			for _, n := range c.Nodes[1:] {
				if d, _, ok := n.LogDigest(topic, p); !ok || d != first {
					return false, fmt.Sprintf("node %d's replica of %s-%d differs from node %d's", n.ID, topic, p, c.Nodes[0].ID)
				}
			}
			return true, ""
		})
		var dumps []string
		for _, n := range c.Nodes {
			segs, _ := filepath.Glob(filepath.Join(n.Props["log.dirs"], fmt.Sprintf("%s-%d", topic, p), "*.log"))
			if len(segs) == 0 {
				t.Fatalf("node %d holds no segment of %s-%d", n.ID, topic, p)
			}
			sort.Strings(segs)
			out := tool(t, "", dumpLogTool, "--files", strings.Join(segs, ","), "--deep-iteration")
			var batches []string
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "baseOffset:") {
					// the batch, without its file position (segments may roll differently)
					batches = append(batches, line[:strings.Index(line+" position:", " position:")])
				}
			}
			if (len(batches) == 0) != (size == 0) || strings.Contains(out, "Found an exception") {
				t.Fatalf("kafka-dump-log on node %d's %s-%d:\n%s", n.ID, topic, p, out)
			}
			dumps = append(dumps, strings.Join(batches, "\n"))
		}
		for i := 1; i < len(dumps); i++ {
			if dumps[i] != dumps[0] {
				t.Fatalf("kafka-dump-log reads node %d's %s-%d differently from node %d's", c.Nodes[i].ID, topic, p, c.Nodes[0].ID)
			}
		}
	}
}
