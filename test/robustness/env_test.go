package robustness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clustertest"
)

func TestMain(m *testing.M) { clustertest.Main(m) }

// long reports whether the full matrix runs (make robustness: KMIRROR_ROBUSTNESS=1): more
// fault rounds and longer faults. Without it every scenario runs a bounded version, the
// one `go test ./...` (CI) runs.
func long() bool { return os.Getenv("KMIRROR_ROBUSTNESS") != "" }

// rounds is n in the bounded run and n·k in the long one.
func rounds(n, k int) int {
	if long() {
		return n * k
	}
	return n
}

// props are the server.properties of the matrix's nodes (cluster.md §4): short failure
// detection, and replica lag that is noticed within seconds.
func props(extra map[string]string) map[string]string {
	p := map[string]string{
		"replica.lag.time.max.ms":      "2000",
		"broker.session.timeout.ms":    "3000",
		"broker.heartbeat.interval.ms": "500",
		"replica.fetch.backoff.ms":     "500",
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// waitLong bounds the waits for a cluster to recover from a fault.
const waitLong = 120 * time.Second

// env is a cluster under test with its fault helpers: which nodes are paused, and a
// generation per node that changes at every start (the sampler forgets what a node's
// earlier process answered).
type env struct {
	t    *testing.T
	c    *clustertest.Cluster
	mesh *mesh // nil when the inter-broker paths are direct

	mu     sync.Mutex
	paused map[int32]bool
	gen    map[int32]int
}

// startEnv starts a 3-node cluster of combined nodes, its inter-broker paths through a
// mesh of proxies when proxied.
func startEnv(t *testing.T, proxied bool, extra map[string]string) *env {
	t.Helper()
	e := &env{t: t, paused: map[int32]bool{}, gen: map[int32]int{}}
	if proxied {
		e.c, e.mesh = newMeshCluster(t, 3, props(extra))
	} else {
		e.c = clustertest.Start(t, clustertest.Spec{Combined: 3, Props: props(extra)})
	}
	t.Cleanup(func() {
		// A stopped process does not die of SIGKILL until it is continued.
		for _, n := range e.c.Nodes {
			if e.isPaused(n.ID) {
				e.signal(n.ID, syscall.SIGCONT)
			}
		}
	})
	return e
}

func (e *env) node(id int32) *clustertest.Node { return e.c.Node(id) }

func (e *env) isPaused(id int32) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.paused[id]
}

// generation is node id's process generation, −1 when it is not running or paused.
func (e *env) generation(id int32) int {
	if !e.node(id).Running() {
		return -1
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.paused[id] {
		return -1
	}
	return e.gen[id]
}

// kill kills node id with SIGKILL.
func (e *env) kill(id int32) {
	e.t.Logf("kill -9 node %d", id)
	e.node(id).Kill()
}

// start starts node id again on its data and waits until it serves.
func (e *env) start(id int32) {
	e.t.Logf("start node %d", id)
	e.mu.Lock()
	e.gen[id]++
	e.mu.Unlock()
	e.node(id).Start()
}

// term stops node id with SIGTERM (a controlled shutdown) and waits for it to exit.
func (e *env) term(id int32) {
	e.t.Logf("SIGTERM node %d", id)
	if out, err := e.node(id).Term(90 * time.Second); err != nil {
		e.t.Errorf("node %d exited with %v after SIGTERM:\n%s", id, err, clustertest.LastLine(out))
	}
}

func (e *env) signal(id int32, sig syscall.Signal) {
	pid := e.pid(id)
	if pid <= 0 {
		e.t.Fatalf("node %d has no process to signal", id)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		e.t.Fatalf("signal %v to node %d: %v", sig, id, err)
	}
}

// pid reads node id's process ID from /proc by its config path (clustertest keeps the
// process to itself).
func (e *env) pid(id int32) int {
	cfg := e.node(id).Config()
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := splitNul(b)
		if len(args) >= 4 && args[1] == "serve" && slices.Contains(args, cfg) {
			return pid
		}
	}
	return -1
}

func splitNul(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return out
}

// pause stops node id with SIGSTOP.
func (e *env) pause(id int32) {
	e.t.Logf("SIGSTOP node %d", id)
	e.mu.Lock()
	e.paused[id] = true
	e.mu.Unlock()
	e.signal(id, syscall.SIGSTOP)
}

// resume continues node id with SIGCONT.
func (e *env) resume(id int32) {
	e.t.Logf("SIGCONT node %d", id)
	e.signal(id, syscall.SIGCONT)
	e.mu.Lock()
	e.paused[id] = false
	e.gen[id]++
	e.mu.Unlock()
}

// live are the nodes that run and are not paused.
func (e *env) live() []*clustertest.Node {
	var out []*clustertest.Node
	for _, n := range e.c.Nodes {
		if e.generation(n.ID) >= 0 {
			out = append(out, n)
		}
	}
	return out
}

// partState is one partition as a broker's Metadata answers it.
type partState struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

// partitions asks node id's Metadata for topic's partitions.
func (e *env) partitions(id int32, topic string) (map[int32]partState, error) {
	m, err := clustertest.Metadata(e.node(id).Addr, topic)
	if err != nil {
		return nil, err
	}
	if len(m.Topics) != 1 {
		return nil, fmt.Errorf("%d topics answered", len(m.Topics))
	}
	if err := kerr.ErrorForCode(m.Topics[0].ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32]partState{}
	for _, p := range m.Topics[0].Partitions {
		out[p.Partition] = partState{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: slices.Sorted(slices.Values(p.Replicas)), ISR: slices.Sorted(slices.Values(p.ISR))}
	}
	return out, nil
}

// waitState waits until every live node answers, for every partition of topic, a state
// cond accepts.
func (e *env) waitState(topic string, what string, cond func(p int32, s partState) bool) {
	e.t.Helper()
	clustertest.Eventually(e.t, waitLong, func() (bool, string) {
		for _, n := range e.live() {
			ps, err := e.partitions(n.ID, topic)
			if err != nil {
				return false, fmt.Sprintf("%s: node %d: %v", what, n.ID, err)
			}
			if len(ps) == 0 {
				return false, fmt.Sprintf("%s: node %d lists no partitions", what, n.ID)
			}
			for p, s := range ps {
				if !cond(p, s) {
					return false, fmt.Sprintf("%s: node %d answers %s-%d %+v", what, n.ID, topic, p, s)
				}
			}
		}
		return true, ""
	})
}

// waitFullISR waits until every partition of topic has a live leader and every replica
// in its ISR, as every live node answers.
func (e *env) waitFullISR(topic string) {
	e.t.Helper()
	e.waitState(topic, "full ISR", func(_ int32, s partState) bool {
		return s.Leader >= 0 && e.generation(s.Leader) >= 0 && slices.Equal(s.ISR, s.Replicas)
	})
}

// leaderOf is partition p's leader and epoch as the first live node answers.
func (e *env) leaderOf(topic string, p int32) (int32, int32) {
	e.t.Helper()
	var l, ep int32
	clustertest.Eventually(e.t, waitLong, func() (bool, string) {
		live := e.live()
		if len(live) == 0 {
			return false, "no live node"
		}
		ps, err := e.partitions(live[0].ID, topic)
		if err != nil {
			return false, err.Error()
		}
		s := ps[p]
		if s.Leader < 0 || e.generation(s.Leader) < 0 {
			return false, fmt.Sprintf("%s-%d led by %d", topic, p, s.Leader)
		}
		l, ep = s.Leader, s.LeaderEpoch
		return true, ""
	})
	return l, ep
}

// waitNewLeader waits until every live node names a live leader of p other than old.
func (e *env) waitNewLeader(topic string, p, old int32) int32 {
	e.t.Helper()
	var l int32
	e.waitState(topic, fmt.Sprintf("a leader of %s-%d other than %d", topic, p, old), func(q int32, s partState) bool {
		if q != p {
			return true
		}
		l = s.Leader
		return s.Leader >= 0 && s.Leader != old && e.generation(s.Leader) >= 0
	})
	return l
}

// createTopic creates topic with RF 3 and min.insync.replicas 2 (and configs), either
// with parts partitions placed by the controller or, when assign is given, with those
// replica lists.
func (e *env) createTopic(topic string, parts int32, assign [][]int32, configs map[string]string) {
	e.t.Helper()
	cl := e.c.Client(nil)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions, rt.ReplicationFactor = parts, 3
	if assign != nil {
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		for i, rs := range assign {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(i), rs
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
	}
	cfgs := map[string]string{"min.insync.replicas": "2"}
	for k, v := range configs {
		cfgs[k] = v
	}
	for k, v := range cfgs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) == 1 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		e.t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	e.waitFullISR(topic)
}

// endOffsets are the high watermarks of topic's partitions (ListOffsets latest through
// franz-go, retried).
func (e *env) endOffsets(topic string) map[int32]int64 {
	e.t.Helper()
	adm := kadm.NewClient(e.c.Client(nil))
	out := map[int32]int64{}
	clustertest.Eventually(e.t, waitLong, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lo, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		if err := lo.Error(); err != nil {
			return false, err.Error()
		}
		lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return true, ""
	})
	return out
}

// rawClient is a franz-go client for raw requests to node id alone (no retries); its
// Produce requests go with acks (franz-go rewrites a request's acks to its client's).
func (e *env) rawClient(id int32, acks int16) *kgo.Client {
	e.t.Helper()
	a := kgo.AllISRAcks()
	switch acks {
	case 1:
		a = kgo.LeaderAck()
	case 0:
		a = kgo.NoAck()
	}
	return e.c.Client([]string{e.node(id).Addr}, kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second),
		kgo.RequiredAcks(a), kgo.DisableIdempotentWrite())
}
