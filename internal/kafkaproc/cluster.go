package kafkaproc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ClusterConfig is a multi-node KRaft cluster to start: Nodes processes, each broker and
// controller (process.roles=broker,controller, node IDs 1..Nodes), with a static voter
// set (controller.quorum.voters).
type ClusterConfig struct {
	// Dir holds one directory per node, Dir/node-ID (server.properties, data, kafka.log).
	Dir string
	// Nodes is the number of nodes, every one a voter.
	Nodes int
	// JVM and ToolJVM are as in BrokerConfig.
	JVM, ToolJVM []string
	// Props are server.properties lines ("key=value") added after the base ones of
	// ClusterNodeProperties.
	Props []string
	// ClusterID is as in BrokerConfig.
	ClusterID string
	// ReadyTimeout bounds each node's start → first Metadata answer; 0 means 2 minutes.
	ReadyTimeout time.Duration
}

// ClusterNodeProperties returns the base server.properties of node id of a multi-node
// KRaft cluster (broker and controller in one process) with its PLAINTEXT listener on
// addr, its controller listener on ctrl, the static voters ("id@host:port,...") and its
// log directory logDir: Apache Kafka's defaults for the internal topics (replication
// factor 3, transaction.state.log.min.isr 2), no initial rebalance delay, no topic
// auto-creation, short broker session and election timeouts so that a killed node is
// fenced in seconds. extra lines follow the base ones.
func ClusterNodeProperties(id int32, addr, ctrl, voters, logDir string, extra ...string) string {
	lines := append([]string{
		"process.roles=broker,controller",
		fmt.Sprintf("node.id=%d", id),
		"controller.quorum.voters=" + voters,
		"listeners=PLAINTEXT://" + addr + ",CONTROLLER://" + ctrl,
		"advertised.listeners=PLAINTEXT://" + addr,
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + logDir,
		"group.initial.rebalance.delay.ms=0",
		"auto.create.topics.enable=false",
		"broker.session.timeout.ms=3000",
		"broker.heartbeat.interval.ms=500",
		"controller.quorum.election.timeout.ms=1000",
		"controller.quorum.fetch.timeout.ms=2000",
	}, extra...)
	return strings.Join(lines, "\n") + "\n"
}

// Cluster is a multi-node Apache Kafka cluster started by StartCluster.
type Cluster struct {
	// Nodes by node ID: Nodes[i].ID == i+1.
	Nodes []*Node
}

// Node is one node of a Cluster; its process may be running or not.
type Node struct {
	ID int32
	// Addr is the PLAINTEXT listener, "127.0.0.1:port", the same across restarts.
	Addr string
	// Dir holds server.properties, kafka.log (every run's output, appended) and the log
	// directory LogDir.
	Dir    string
	LogDir string

	j            Java
	jvm          []string
	conf         string
	readyTimeout time.Duration

	mu sync.Mutex
	b  *Broker // the current run, nil when stopped
}

// StartCluster writes and formats c.Nodes nodes (free loopback ports, kept across
// restarts), starts them all and waits until each answers Metadata and every node's
// Metadata lists every broker. On an error the nodes started are stopped.
func StartCluster(j Java, c ClusterConfig) (*Cluster, error) {
	cl := &Cluster{}
	var voters []string
	ctrls := make([]string, c.Nodes)
	for i := range c.Nodes {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		ctrl, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		id := int32(i + 1)
		dir := filepath.Join(c.Dir, fmt.Sprintf("node-%d", id))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		n := &Node{ID: id, Addr: addr, Dir: dir, LogDir: filepath.Join(dir, "data"), j: j, jvm: c.JVM,
			conf: filepath.Join(dir, "server.properties"), readyTimeout: c.ReadyTimeout}
		cl.Nodes = append(cl.Nodes, n)
		ctrls[i] = ctrl
		voters = append(voters, fmt.Sprintf("%d@%s", id, ctrl))
	}
	clusterID := c.ClusterID
	for i, n := range cl.Nodes {
		props := ClusterNodeProperties(n.ID, n.Addr, ctrls[i], strings.Join(voters, ","), n.LogDir, c.Props...)
		if err := os.WriteFile(n.conf, []byte(props), 0o644); err != nil {
			return nil, err
		}
		if err := format(j, c.ToolJVM, clusterID, n.conf); err != nil {
			return nil, fmt.Errorf("node %d: %w", n.ID, err)
		}
		if i == 0 { // the ID the first node got (c.ClusterID, or a random one if refused)
			id, err := metaClusterID(n.LogDir)
			if err != nil {
				return nil, err
			}
			clusterID = id
		}
	}
	// every node at once: none answers Metadata before a quorum of controllers runs
	errs := make([]error, len(cl.Nodes))
	var wg sync.WaitGroup
	for i, n := range cl.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.Start() }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			cl.Stop()
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	if err := cl.WaitBrokers(c.ReadyTimeout); err != nil {
		cl.Stop()
		return nil, err
	}
	return cl, nil
}

// metaClusterID reads cluster.id from the meta.properties StorageTool wrote in logDir.
func metaClusterID(logDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(logDir, "meta.properties"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "cluster.id="); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no cluster.id in %s/meta.properties", logDir)
}

// Bootstrap returns the PLAINTEXT listeners of every node, comma-separated.
func (c *Cluster) Bootstrap() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return strings.Join(addrs, ",")
}

// Addrs returns the PLAINTEXT listeners of every node.
func (c *Cluster) Addrs() []string { return strings.Split(c.Bootstrap(), ",") }

// WaitBrokers waits until every running node's Metadata lists every node as a broker,
// for at most timeout (0: 2 minutes).
func (c *Cluster) WaitBrokers(timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	deadline := time.Now().Add(timeout)
	for {
		missing := ""
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			if got := brokerCount(n.Addr); got != len(c.Nodes) {
				missing = fmt.Sprintf("node %d lists %d of %d brokers", n.ID, got, len(c.Nodes))
				break
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not formed within %s: %s", timeout, missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// brokerCount is the number of brokers addr's Metadata lists, −1 when it does not answer.
func brokerCount(addr string) int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return -1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return -1
	}
	return len(resp.Brokers)
}

// Stop stops every running node with SIGTERM, in parallel.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Stop() }()
	}
	wg.Wait()
}

// Start starts the node's process on its formatted directory and waits until it answers
// Metadata; a node already running is left alone.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.b != nil {
		return nil
	}
	b := &Broker{Addr: n.Addr, LogPath: filepath.Join(n.Dir, "kafka.log"),
		java: n.j, jvm: n.jvm, class: "kafka.Kafka", args: []string{n.conf}, ready: Ready, timeout: n.readyTimeout}
	if err := b.start(); err != nil {
		return err
	}
	n.b = b
	return nil
}

// Running reports whether the node's process runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.b == nil {
		return false
	}
	select {
	case <-n.b.Done():
		n.b = nil
		return false
	default:
		return true
	}
}

// Stop stops the node with SIGTERM (Kafka's controlled shutdown, Broker.Stop); a stopped
// node is left alone.
func (n *Node) Stop() { n.end((*Broker).Stop) }

// Kill kills the node with SIGKILL (Broker.Kill); a stopped node is left alone.
func (n *Node) Kill() { n.end((*Broker).Kill) }

func (n *Node) end(how func(*Broker)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.b != nil {
		how(n.b)
		n.b = nil
	}
}

// Tail returns the last 3000 bytes of the node's kafka.log.
func (n *Node) Tail() string {
	b := Broker{LogPath: filepath.Join(n.Dir, "kafka.log")}
	return b.Tail()
}
