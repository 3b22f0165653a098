// Package clustertest runs clusters of real `kmirror serve` processes on loopback for
// tests: the binary built once from ./cmd/kmirror (or KMIRROR_BIN), one server.properties
// per node with Apache Kafka's config names (process.roles, controller.quorum.voters,
// a PLAINTEXT and a CONTROLLER listener), every node formatted with `kmirror storage
// format -t ID -c FILE`, short failure-detection timeouts (broker.session.timeout.ms
// 3000, broker.heartbeat.interval.ms 500). A node can be killed (SIGKILL), stopped
// (SIGTERM) and started again on its data and ports. Everything waits on conditions with
// generous deadlines (Eventually), never on fixed sleeps.
//
// A test package using it calls Main from its TestMain (or RemoveBin from its own), so
// that the built binary is removed at the end.
package clustertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafkaproc"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

// Main runs the tests of a package and removes the binary Bin built.
func Main(m *testing.M) {
	code := m.Run()
	RemoveBin()
	os.Exit(code)
}

// RemoveBin removes the binary Bin built, for a TestMain of its own.
func RemoveBin() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// Bin returns the kmirror binary: KMIRROR_BIN if set, else ./cmd/kmirror built once per
// test process into a temporary directory (Main removes it).
func Bin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("KMIRROR_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "kmirror-clustertest-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "kmirror")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/kmirror/kmirror/cmd/kmirror").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/kmirror: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Spec is the shape of a cluster: node IDs 1.. go to the Combined nodes
// (process.roles=broker,controller), then the Controllers (process.roles=controller),
// then the Brokers (process.roles=broker). Every combined and controller node is a voter.
type Spec struct {
	Combined, Controllers, Brokers int
	// Props are server.properties entries for every node, over the defaults (Defaults).
	Props map[string]string
}

// Defaults are the server.properties entries every node gets besides its identity and
// listeners: short failure detection, small internal topics with replication factor 1,
// no initial rebalance delay.
var Defaults = map[string]string{
	"broker.session.timeout.ms":                "3000",
	"broker.heartbeat.interval.ms":             "500",
	"controller.quorum.election.timeout.ms":    "1000",
	"controller.quorum.fetch.timeout.ms":       "2000",
	"group.initial.rebalance.delay.ms":         "0",
	"num.partitions":                           "3",
	"default.replication.factor":               "1",
	"offsets.topic.num.partitions":             "12",
	"offsets.topic.replication.factor":         "1",
	"transaction.state.log.num.partitions":     "6",
	"transaction.state.log.replication.factor": "1",
	"transaction.state.log.min.isr":            "1",
	"mirror.state.topic.num.partitions":        "4",
	"mirror.state.topic.replication.factor":    "1",
	"mirror.metadata.refresh.interval.ms":      "1000",
}

// Cluster is a running cluster of kmirror processes.
type Cluster struct {
	t         testing.TB
	ClusterID string
	Nodes     []*Node // by node ID: Nodes[i].ID == i+1
	Voters    string  // controller.quorum.voters
}

// Node is one kmirror process of a cluster, its directory and its ports; the process may
// be running or not.
type Node struct {
	ID int32
	// Roles is process.roles.
	Roles string
	// Addr is the PLAINTEXT listener, "" on a controller-only node.
	Addr string
	// CtrlAddr is the CONTROLLER listener, "" on a broker-only node.
	CtrlAddr string
	// Dir holds server.properties, the log directory data/ and node.log (the output of
	// every start, appended).
	Dir string
	// Props are the node's server.properties entries; a change is written at the next
	// Start.
	Props map[string]string

	c    *Cluster
	mu   sync.Mutex
	proc *process
}

// process is one run of `kmirror serve`.
type process struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // the exit, once done is closed
}

// Start starts a cluster of the given shape, formatted with one new cluster ID, and waits
// until every broker lists every broker; the processes are killed when the test ends (their
// output is logged if it failed).
func Start(t testing.TB, s Spec) *Cluster {
	t.Helper()
	c := New(t, s)
	for _, n := range c.Nodes {
		n.Spawn()
	}
	for _, n := range c.Nodes {
		n.WaitServing()
	}
	c.WaitBrokers(len(c.Brokers()))
	return c
}

// New writes and formats the nodes of a cluster without starting them.
func New(t testing.TB, s Spec) *Cluster {
	t.Helper()
	c := &Cluster{t: t, ClusterID: RandomUUID(t)}
	total := s.Combined + s.Controllers + s.Brokers
	ports := FreePorts(t, 2*total)
	var voters []string
	for i := 0; i < total; i++ {
		n := &Node{ID: int32(i + 1), c: c, Dir: t.TempDir()}
		switch {
		case i < s.Combined:
			n.Roles = "broker,controller"
		case i < s.Combined+s.Controllers:
			n.Roles = "controller"
		default:
			n.Roles = "broker"
		}
		if strings.Contains(n.Roles, "broker") {
			n.Addr = "127.0.0.1:" + strconv.Itoa(ports[2*i])
		}
		if strings.Contains(n.Roles, "controller") {
			n.CtrlAddr = "127.0.0.1:" + strconv.Itoa(ports[2*i+1])
			voters = append(voters, fmt.Sprintf("%d@%s", n.ID, n.CtrlAddr))
		}
		c.Nodes = append(c.Nodes, n)
	}
	c.Voters = strings.Join(voters, ",")
	for _, n := range c.Nodes {
		n.Props = NodeProps(n.ID, n.Roles, n.Addr, n.CtrlAddr, c.Voters, filepath.Join(n.Dir, "data"), s.Props)
		n.Format(c.ClusterID)
	}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			n.Kill()
		}
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d (%s) log, last lines:\n%s", n.ID, n.Roles, tail(n.Log(), 80))
			}
		}
	})
	return c
}

// NewNode returns a node that is not one of the cluster's nodes but is configured to join
// it: node.id id, process.roles roles, new ports and directory, the cluster's voters and
// extra props; it is neither formatted (Format) nor started, and is killed when the test
// ends.
func (c *Cluster) NewNode(id int32, roles string, extra map[string]string) *Node {
	c.t.Helper()
	ports := FreePorts(c.t, 2)
	n := &Node{ID: id, Roles: roles, c: c, Dir: c.t.TempDir()}
	if strings.Contains(roles, "broker") {
		n.Addr = "127.0.0.1:" + strconv.Itoa(ports[0])
	}
	if strings.Contains(roles, "controller") {
		n.CtrlAddr = "127.0.0.1:" + strconv.Itoa(ports[1])
	}
	n.Props = NodeProps(id, roles, n.Addr, n.CtrlAddr, c.Voters, filepath.Join(n.Dir, "data"), extra)
	c.t.Cleanup(func() {
		n.Kill()
		if c.t.Failed() {
			c.t.Logf("extra node %d (%s) log, last lines:\n%s", n.ID, n.Roles, tail(n.Log(), 40))
		}
	})
	return n
}

// NodeProps is the server.properties of a node: its identity, listeners (PLAINTEXT on
// addr, CONTROLLER on ctrl; either "" for a role without it), the voters and log
// directory, then Defaults, then extra.
func NodeProps(id int32, roles, addr, ctrl, voters, logDir string, extra map[string]string) map[string]string {
	p := map[string]string{
		"process.roles":                  roles,
		"node.id":                        strconv.Itoa(int(id)),
		"controller.quorum.voters":       voters,
		"controller.listener.names":      "CONTROLLER",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                       logDir,
	}
	var ls []string
	if addr != "" {
		ls = append(ls, "PLAINTEXT://"+addr)
		p["advertised.listeners"] = "PLAINTEXT://" + addr
		p["inter.broker.listener.name"] = "PLAINTEXT"
	}
	if ctrl != "" {
		ls = append(ls, "CONTROLLER://"+ctrl)
	}
	p["listeners"] = strings.Join(ls, ",")
	for k, v := range Defaults {
		p[k] = v
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// RandomUUID is the output of `kmirror storage random-uuid`.
func RandomUUID(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(Bin(t), "storage", "random-uuid").Output()
	if err != nil {
		t.Fatalf("kmirror storage random-uuid: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// FreePorts is kafkaproc.FreePorts (one set of handed-out ports for the kmirror and the
// Apache Kafka processes of a test), failing t on a listen error.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := kafkaproc.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// Config is the path of the node's server.properties.
func (n *Node) Config() string { return filepath.Join(n.Dir, "server.properties") }

// IsBroker reports whether the node has the broker role.
func (n *Node) IsBroker() bool { return n.Addr != "" }

// WriteConfig writes Props to server.properties.
func (n *Node) WriteConfig() {
	n.c.t.Helper()
	if err := os.WriteFile(n.Config(), []byte(Properties(n.Props)), 0o644); err != nil {
		n.c.t.Fatal(err)
	}
}

// Properties renders props as a server.properties file, keys sorted.
func Properties(props map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return b.String()
}

// Format writes the node's config and runs `kmirror storage format -t clusterID -c
// server.properties`; a failure fails the test.
func (n *Node) Format(clusterID string) {
	n.c.t.Helper()
	n.WriteConfig()
	out, err := exec.Command(Bin(n.c.t), "storage", "format", "-t", clusterID, "-c", n.Config()).CombinedOutput()
	if err != nil {
		n.c.t.Fatalf("kmirror storage format node %d: %v\n%s", n.ID, err, out)
	}
}

// Spawn writes the config and starts `kmirror serve --config server.properties` without
// waiting for it (a quorum elects no leader until a majority runs).
func (n *Node) Spawn() {
	n.c.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		n.c.t.Fatalf("node %d is already running", n.ID)
	}
	n.WriteConfig()
	logf, err := os.OpenFile(filepath.Join(n.Dir, "node.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.c.t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== kmirror serve, node %d, %s\n", n.ID, time.Now().Format(time.RFC3339Nano))
	p := &process{out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(Bin(n.c.t), "serve", "--config", n.Config())
	w := &teeWriter{a: p.out, b: logf}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		n.c.t.Fatalf("start node %d: %v", n.ID, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	n.proc = p
}

// Start starts the node and waits until it serves.
func (n *Node) Start() {
	n.c.t.Helper()
	n.Spawn()
	n.WaitServing()
}

// serveTimeout bounds a node's start to serving.
const serveTimeout = 90 * time.Second

// WaitServing waits until the running node logs that it serves ("kmirror broker serving"
// or "kmirror controller serving") and, with the broker role, accepts connections; it
// fails the test with the node's output if the node exits first or takes longer than 90
// s.
func (n *Node) WaitServing() {
	n.c.t.Helper()
	p := n.current()
	if p == nil {
		n.c.t.Fatalf("node %d is not running", n.ID)
	}
	deadline := time.Now().Add(serveTimeout)
	for {
		out := p.out.String()
		if strings.Contains(out, "kmirror broker serving") || strings.Contains(out, "kmirror controller serving") {
			if !n.IsBroker() {
				return
			}
			if conn, err := net.DialTimeout("tcp", n.Addr, time.Second); err == nil {
				conn.Close()
				return
			}
		}
		select {
		case <-p.done:
			n.c.t.Fatalf("node %d exited at start (%v):\n%s", n.ID, p.err, tail(out, 40))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.c.t.Fatalf("node %d did not serve within %v:\n%s", n.ID, serveTimeout, tail(out, 40))
		}
	}
}

func (n *Node) current() *process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Running reports whether the node's process runs.
func (n *Node) Running() bool {
	p := n.current()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill kills the node's process with SIGKILL and waits until it is gone; a stopped node
// is left alone.
func (n *Node) Kill() {
	n.stop(syscall.SIGKILL, 0)
}

// Pause stops the node's process with SIGSTOP (it keeps its sockets and state but does
// nothing until Resume); a stopped node is left alone.
func (n *Node) Pause() {
	if p := n.current(); p != nil {
		p.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() {
	if p := n.current(); p != nil {
		p.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// BrokerEpoch is the broker epoch the node's current process last registered with, as
// it logged it ("registered with the controller ... brokerEpoch=N"); −1 before that.
func (n *Node) BrokerEpoch() int64 {
	epoch := int64(-1)
	for _, line := range strings.Split(n.Output(), "\n") {
		if !strings.Contains(line, "registered with the controller") {
			continue
		}
		if _, v, ok := strings.Cut(line, "brokerEpoch="); ok {
			if e, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64); err == nil {
				epoch = e
			}
		}
	}
	return epoch
}

// Term sends SIGTERM and waits (up to timeout) for the process to exit, returning its
// output and exit error (nil for exit status 0). A process still running at the timeout
// is killed and the test fails.
func (n *Node) Term(timeout time.Duration) (string, error) {
	n.c.t.Helper()
	return n.stop(syscall.SIGTERM, timeout)
}

func (n *Node) stop(sig syscall.Signal, timeout time.Duration) (string, error) {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p == nil {
		return "", nil
	}
	p.cmd.Process.Signal(sig)
	if timeout > 0 {
		select {
		case <-p.done:
		case <-time.After(timeout):
			p.cmd.Process.Kill()
			<-p.done
			n.c.t.Errorf("node %d did not exit within %v of %v", n.ID, timeout, sig)
		}
	}
	<-p.done
	return p.out.String(), p.err
}

// Wait waits up to timeout for the running node to exit by itself and returns its output
// and exit error; exited is false if it still runs (it is left running).
func (n *Node) Wait(timeout time.Duration) (out string, exitErr error, exited bool) {
	p := n.current()
	if p == nil {
		return "", nil, false
	}
	select {
	case <-p.done:
		n.mu.Lock()
		if n.proc == p {
			n.proc = nil
		}
		n.mu.Unlock()
		return p.out.String(), p.err, true
	case <-time.After(timeout):
		return p.out.String(), nil, false
	}
}

// Output is what the node's current (or last waited-for) process printed so far; "" when
// it is not running.
func (n *Node) Output() string {
	if p := n.current(); p != nil {
		return p.out.String()
	}
	return ""
}

// Log is the node's node.log: the output of every start.
func (n *Node) Log() string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "node.log"))
	return string(b)
}

// Brokers are the nodes with the broker role.
func (c *Cluster) Brokers() []*Node {
	var bs []*Node
	for _, n := range c.Nodes {
		if n.IsBroker() {
			bs = append(bs, n)
		}
	}
	return bs
}

// Node returns the node with the given ID.
func (c *Cluster) Node(id int32) *Node {
	c.t.Helper()
	if id < 1 || int(id) > len(c.Nodes) {
		c.t.Fatalf("no node %d in the cluster", id)
	}
	return c.Nodes[id-1]
}

// Bootstrap is the PLAINTEXT listeners of the running brokers, comma-separated.
func (c *Cluster) Bootstrap() string {
	var as []string
	for _, n := range c.Brokers() {
		if n.Running() {
			as = append(as, n.Addr)
		}
	}
	return strings.Join(as, ",")
}

// Client returns a franz-go client bootstrapped from seeds (host:port each; the running
// brokers when none), closed when the test ends.
func (c *Cluster) Client(seeds []string, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	if len(seeds) == 0 {
		seeds = strings.Split(c.Bootstrap(), ",")
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// waitTimeout is the default deadline of the cluster's waits.
const waitTimeout = 60 * time.Second

// Eventually calls cond every 100 ms until it returns true, failing the test after timeout
// with what it says about the last try.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Metadata asks node addr for the metadata of topics (all topics when none), with no
// retries and a 5 s deadline.
func Metadata(addr string, topics ...string) (*kmsg.MetadataResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	if len(topics) > 0 {
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
	}
	return req.RequestWith(ctx, cl.SeedBrokers()[0])
}

// WaitBrokers waits until every running broker's Metadata lists n brokers.
func (c *Cluster) WaitBrokers(n int) {
	c.t.Helper()
	Eventually(c.t, waitTimeout, func() (bool, string) {
		for _, b := range c.Brokers() {
			if !b.Running() {
				continue
			}
			m, err := Metadata(b.Addr)
			if err != nil {
				return false, fmt.Sprintf("Metadata from node %d: %v", b.ID, err)
			}
			if len(m.Brokers) != n {
				return false, fmt.Sprintf("node %d lists %d brokers, want %d", b.ID, len(m.Brokers), n)
			}
		}
		return true, ""
	})
}

// Leaders returns the leader of every partition of topic as node addr's Metadata
// answers it (−1 for none), or an error (the request's or the topic's).
func Leaders(addr, topic string) ([]int32, error) {
	m, err := Metadata(addr, topic)
	if err != nil {
		return nil, err
	}
	if len(m.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics answered", topic, len(m.Topics))
	}
	mt := m.Topics[0]
	if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	ls := make([]int32, len(mt.Partitions))
	for _, p := range mt.Partitions {
		if int(p.Partition) >= len(ls) {
			return nil, fmt.Errorf("metadata of %s: partition %d of %d", topic, p.Partition, len(ls))
		}
		ls[p.Partition] = p.Leader
	}
	return ls, nil
}

// WaitLeaders waits until every running broker answers the same leaders for every
// partition of topic, each a live node (no −1), and returns them.
func (c *Cluster) WaitLeaders(topic string) []int32 {
	c.t.Helper()
	var leaders []int32
	Eventually(c.t, waitTimeout, func() (bool, string) {
		leaders = nil
		for _, b := range c.Brokers() {
			if !b.Running() {
				continue
			}
			ls, err := Leaders(b.Addr, topic)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", b.ID, err)
			}
			for p, l := range ls {
				if l < 0 || !c.Node(l).Running() {
					return false, fmt.Sprintf("node %d: %s-%d led by %d", b.ID, topic, p, l)
				}
			}
			if leaders != nil && !slices.Equal(ls, leaders) {
				return false, fmt.Sprintf("node %d answers leaders %v, another node %v", b.ID, ls, leaders)
			}
			leaders = ls
		}
		return leaders != nil, "no running broker"
	})
	return leaders
}

// Quorum is what DescribeQuorum answers about the metadata quorum.
type Quorum struct {
	LeaderID    int32
	LeaderEpoch int32
	Voters      []int32
	Observers   []int32
}

// DescribeQuorum sends DescribeQuorum for __cluster_metadata-0 to addr (a broker or a
// controller listener).
func DescribeQuorum(addr string) (Quorum, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return Quorum{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return Quorum{}, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return Quorum{}, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return Quorum{}, errors.New("DescribeQuorum: no __cluster_metadata-0 in the answer")
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return Quorum{}, err
	}
	q := Quorum{LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch}
	for _, v := range p.CurrentVoters {
		q.Voters = append(q.Voters, v.ReplicaID)
	}
	for _, o := range p.Observers {
		q.Observers = append(q.Observers, o.ReplicaID)
	}
	sort.Slice(q.Voters, func(i, j int) bool { return q.Voters[i] < q.Voters[j] })
	sort.Slice(q.Observers, func(i, j int) bool { return q.Observers[i] < q.Observers[j] })
	return q, nil
}

// ActiveController waits until a running broker's DescribeQuorum names a leader that is a
// running node, and returns it.
func (c *Cluster) ActiveController() *Node {
	c.t.Helper()
	var leader *Node
	Eventually(c.t, waitTimeout, func() (bool, string) {
		for _, b := range c.Brokers() {
			if !b.Running() {
				continue
			}
			q, err := DescribeQuorum(b.Addr)
			if err != nil {
				return false, fmt.Sprintf("DescribeQuorum through node %d: %v", b.ID, err)
			}
			if q.LeaderID < 1 || int(q.LeaderID) > len(c.Nodes) || !c.Nodes[q.LeaderID-1].Running() {
				return false, fmt.Sprintf("DescribeQuorum through node %d: leader %d", b.ID, q.LeaderID)
			}
			leader = c.Nodes[q.LeaderID-1]
			return true, ""
		}
		return false, "no running broker"
	})
	return leader
}

// FindCoordinator returns the node ID of group's coordinator as addr answers
// FindCoordinator, or the error it answered.
func FindCoordinator(addr, group string, txn bool) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	if txn {
		req.CoordinatorType = 1
	}
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return -1, err
	}
	if len(resp.Coordinators) == 1 {
		co := resp.Coordinators[0]
		if err := kerr.ErrorForCode(co.ErrorCode); err != nil {
			return -1, err
		}
		return co.NodeID, nil
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	return resp.NodeID, nil
}

// LastLine is the last non-empty line of out.
func LastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// syncBuffer is a goroutine-safe output sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// teeWriter writes to both; b's errors are ignored (the log file is a convenience).
type teeWriter struct {
	a *syncBuffer
	b *os.File
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.b.Write(p)
	return w.a.Write(p)
}
