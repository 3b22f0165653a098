package quickstart

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/console"
	"github.com/kmirror/kmirror/internal/node"
)

// ClusterProps are the broker settings of both quickstart clusters on top of the
// embedded defaults: a 1 s mirror metadata refresh (spec §9) so that the drill does not
// wait 30 s for group offsets, no initial rebalance delay, and fewer partitions for the
// internal topics so that a laptop starts them in a blink.
func ClusterProps(port int, dir string) map[string]string {
	return map[string]string{
		"node.id":                             "1",
		"listeners":                           "PLAINTEXT://localhost:" + strconv.Itoa(port),
		"log.dirs":                            dir,
		"group.initial.rebalance.delay.ms":    "0",
		"offsets.topic.num.partitions":        "10",
		"mirror.state.topic.num.partitions":   "10",
		"mirror.metadata.refresh.interval.ms": "1000",
	}
}

// cluster is one quickstart cluster: in-process nodes or a child `kmirror serve`.
type cluster struct {
	name  string
	ports []int  // the client listener of each node
	dir   string // data directory (log.dirs; <dir>/node-<i> for each node of a multi-node cluster)

	// in process
	nodes    []*broker.Broker
	consoles []*console.Server // the status console of each node
	done     []chan struct{}

	// child process
	cmd    *exec.Cmd
	exited chan struct{}

	mu       sync.Mutex // guards nodes and done while the nodes start
	stopOnce sync.Once
}

// addr is the bootstrap list of the cluster: host:port of every node, comma-separated.
func (c *cluster) addr() string {
	out := make([]string, len(c.ports))
	for i, p := range c.ports {
		out[i] = "localhost:" + strconv.Itoa(p)
	}
	return strings.Join(out, ",")
}

// seeds is the kgo option for a bootstrap list written by addr.
func seeds(addr string) kgo.Opt { return kgo.SeedBrokers(strings.Split(addr, ",")...) }

// controllerPortOffset puts a multi-node cluster's controller listeners this far above
// its client listeners (9091 → 19091).
const controllerPortOffset = 10000

// startInProcess runs a cluster of n nodes in this process (node.New), each node's log
// written to <its dir>.log: one node as the embedded default (a self-formatting one-node
// cluster on port), or n combined broker and controller nodes on ports port..port+n−1
// with their controller listeners controllerPortOffset above, formatted with one cluster
// ID on their first start.
func startInProcess(name string, port int, dir string, n int) (*cluster, error) {
	c := &cluster{name: name, dir: dir}
	if n <= 1 {
		c.ports = []int{port}
		return c, c.startNode(name, ClusterProps(port, dir), port)
	}
	var voters []string
	for i := 0; i < n; i++ {
		c.ports = append(c.ports, port+i)
		voters = append(voters, fmt.Sprintf("%d@localhost:%d", i+1, port+i+controllerPortOffset))
	}
	clusterID, err := clusterIDOf(dir, n)
	if err != nil {
		return nil, err
	}
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		ndir := filepath.Join(dir, fmt.Sprintf("node-%d", i+1))
		props := ClusterProps(port+i, ndir)
		props["process.roles"] = "broker,controller"
		props["node.id"] = strconv.Itoa(i + 1)
		props["controller.quorum.voters"] = strings.Join(voters, ",")
		props["listeners"] = fmt.Sprintf("PLAINTEXT://localhost:%d,CONTROLLER://localhost:%d", port+i, port+i+controllerPortOffset)
		props["advertised.listeners"] = fmt.Sprintf("PLAINTEXT://localhost:%d", port+i)
		props["controller.listener.names"] = "CONTROLLER"
		props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
		props["inter.broker.listener.name"] = "PLAINTEXT"
		props["broker.session.timeout.ms"] = "3000"
		props["broker.heartbeat.interval.ms"] = "500"
		if err := format(ndir, clusterID, int32(i+1)); err != nil {
			return nil, err
		}
		// every node waits in New for the quorum: start them together
		go func() { errs <- c.startNode(fmt.Sprintf("%s node %d", name, i+1), props, port+i) }()
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.stop()
		return nil, first
	}
	return c, nil
}

// clusterIDOf is the cluster ID of a multi-node quickstart cluster: node 1's when it was
// formatted by an earlier run, else a new one.
func clusterIDOf(dir string, n int) (string, error) {
	for i := 1; i <= n; i++ {
		m, err := config.ReadMetaProperties(filepath.Join(dir, fmt.Sprintf("node-%d", i)))
		if err == nil {
			return m.ClusterID, nil
		}
	}
	return config.RandomUUID(), nil
}

// format writes dir's meta.properties (kmirror storage format) unless it has one.
func format(dir, clusterID string, nodeID int32) error {
	if _, err := config.ReadMetaProperties(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return config.WriteMetaProperties(dir, &config.MetaProperties{Version: 1, ClusterID: clusterID, NodeID: nodeID, DirectoryID: config.RandomUUID()})
}

// consolePortOffset puts a quickstart node's status console this far above its client
// listener (9094 → http://localhost:9194), as kmirror serve's embedded defaults do.
const consolePortOffset = 100

// startNode runs one node in this process on props, its log written to <log.dirs>.log,
// with its status console on localhost:port+consolePortOffset (a free port when that one
// is taken).
func (c *cluster) startNode(name string, props map[string]string, port int) error {
	dir := props["log.dirs"]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cfg, err := config.NewValues(config.Broker, props, false)
	if err != nil {
		logf.Close()
		return err
	}
	logger := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b, err := node.New(cfg, logger)
	if err != nil {
		logf.Close()
		return fmt.Errorf("%s cluster: %w", name, err)
	}
	cs, err := console.Start("localhost:"+strconv.Itoa(port+consolePortOffset), b, logger, console.Options{})
	if err != nil {
		cs, err = console.Start("localhost:0", b, logger, console.Options{})
	}
	if err != nil {
		b.Shutdown(context.Background())
		logf.Close()
		return fmt.Errorf("%s cluster: %s: %w", name, console.ConfigKey, err)
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.nodes, c.consoles, c.done = append(c.nodes, b), append(c.consoles, cs), append(c.done, done)
	c.mu.Unlock()
	go func() {
		defer close(done)
		defer logf.Close()
		_ = b.Serve()
	}()
	return nil
}

// startChild runs `<exe> serve --config <dir>.properties` as a child process with its
// output in <dir>.log and waits until it answers Metadata.
func startChild(ctx context.Context, name string, port int, dir, exe string, env []string) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	props := ClusterProps(port, dir)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%s\n", k, props[k])
	}
	propsFile := dir + ".properties"
	if err := os.WriteFile(propsFile, []byte(sb.String()), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "serve", "--config", propsFile)
	cmd.Stdout, cmd.Stderr, cmd.Env = logf, logf, env
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s cluster: %w", name, err)
	}
	c := &cluster{name: name, ports: []int{port}, dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		defer close(c.exited)
		defer logf.Close()
		_ = cmd.Wait()
	}()
	if err := c.waitReady(ctx); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// waitReady polls Metadata until the child answers, for at most 30 s.
func (c *cluster) waitReady(ctx context.Context) error {
	cl, err := kgo.NewClient(seeds(c.addr()), kgo.DialTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("%s cluster exited at start; see %s.log", c.name, c.dir)
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s cluster did not answer on %s within 30 s: %v", c.name, c.addr(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill sends SIGKILL to a child cluster and reaps it: no flush, no checkpoint, exactly
// like a machine that loses power after the page cache reached the disk.
func (c *cluster) kill() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// stop shuts a cluster down cleanly: an in-process broker through Shutdown (in-flight
// requests answered, logs flushed, checkpoints written), a child through SIGTERM.
func (c *cluster) stop() { c.stopOnce.Do(c.doStop) }

func (c *cluster) doStop() {
	if len(c.nodes) > 0 {
		// the whole cluster stops: no controlled shutdowns (the quorum goes with it)
		var wg sync.WaitGroup
		for i := range c.nodes {
			wg.Add(1)
			go func() { defer wg.Done(); c.stopNode(i) }()
		}
		wg.Wait()
		return
	}
	if c.cmd != nil {
		_ = c.cmd.Process.Signal(os.Interrupt)
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			c.kill()
		}
	}
}

// stopNode shuts node i down cleanly (in-flight requests answered, logs flushed,
// checkpoints written).
func (c *cluster) stopNode(i int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.consoles[i].Close(ctx)
	c.nodes[i].Stop(ctx)
	<-c.done[i]
}

// consoleURL is the status console of the cluster's first node, "" for a child cluster.
func (c *cluster) consoleURL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.consoles) == 0 {
		return ""
	}
	return c.consoles[0].URL()
}

// portFree reports whether localhost:port can be bound.
func portFree(port int) bool {
	l, err := net.Listen("tcp", "localhost:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// freePort returns a port the kernel just handed out on localhost.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// dataDirs returns <data>/source and <data>/destination.
func dataDirs(data string) (src, dst string) {
	return filepath.Join(data, "source"), filepath.Join(data, "destination")
}
