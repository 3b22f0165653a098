// Package kafkaproc runs Apache Kafka from its jars, for the interoperability suite
// (test/interop) and the benchmark against Apache Kafka (bench/versus): `java -cp libs/*
// class ...` commands with a WARN-level log configuration, and brokers on loopback: a
// single-node KRaft broker (process.roles=broker,controller) and multi-node KRaft clusters
// of such nodes (cluster.go), formatted with kafka.tools.StorageTool, or — for releases
// before 4.0 — a ZooKeeper-based broker (zookeeper.connect, broker.id) next to a ZooKeeper
// server started from the same jars; run with kafka.Kafka, ready once it answers a
// Metadata request, stopped with SIGTERM (or killed with SIGKILL, and restarted on its
// data).
//
// The jars are not fetched here: test/interop/fetch-kafka.sh downloads them once and prints
// their directory, which the caller passes as Java.Libs.
package kafkaproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Log4j2YAML is the log4j2 configuration every JVM gets: WARN and above, to stderr, in
// the pattern of Apache Kafka's own log4j2.yaml.
const Log4j2YAML = `Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
`

// Java runs classes from Apache Kafka's jars.
type Java struct {
	// Libs is the directory of Apache Kafka's jars (.cache/kafka-VERSION/libs, printed
	// by test/interop/fetch-kafka.sh).
	Libs string
	// Log4j2 is the path of the log4j2 configuration file given to every JVM.
	Log4j2 string
}

// NewJava writes Log4j2YAML to dir/log4j2.yaml (dir must exist) and returns a Java that
// runs classes from libs with it. The error is the file write's.
func NewJava(libs, dir string) (Java, error) {
	j := Java{Libs: libs, Log4j2: filepath.Join(dir, "log4j2.yaml")}
	return j, os.WriteFile(j.Log4j2, []byte(Log4j2YAML), 0o644)
}

// Command returns `java jvmOpts... -Dlog4j2.configurationFile=Log4j2
// -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp Libs/* class args...` (the second for
// the slf4j 1.7 simple binding that test/interop/pom-broker.xml gives brokers before 4.0),
// killed if ctx is done before it exits (as exec.CommandContext).
func (j Java) Command(ctx context.Context, jvmOpts []string, class string, args ...string) *exec.Cmd {
	a := append([]string{}, jvmOpts...)
	a = append(a, "-Dlog4j2.configurationFile="+j.Log4j2, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", filepath.Join(j.Libs, "*"), class)
	return exec.CommandContext(ctx, "java", append(a, args...)...)
}

// FreeAddr returns a loopback host:port ("127.0.0.1:N") from FreePorts; the error is the
// listen error.
func FreeAddr() (string, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
}

// handedOut is every port FreePorts returned in this process.
var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// FreePorts returns n distinct loopback ports that were free a moment ago and that it
// never returned before in this process: brokers whose configs are written before any
// of them binds (or one broker's several listeners) do not get one port twice, as the
// kernel may hand a just-closed port out again. The error is the listen error.
func FreePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l) // held until the end, so that the next Listen picks another port
		p := l.Addr().(*net.TCPAddr).Port
		if handedOut[p] {
			continue
		}
		handedOut[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// Ready reports whether the broker at addr (host:port) accepts a TCP connection within
// a second and answers a Metadata request within two seconds listing at least one broker.
// It works for any Kafka-protocol broker, kmirror included.
func Ready(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err == nil && len(resp.Brokers) > 0
}

// BrokerConfig is a broker to start: a single-node KRaft broker, or with ZooKeeper set
// a ZooKeeper-based one.
type BrokerConfig struct {
	// ZooKeeper is the host:port of a ZooKeeper server (StartZooKeeper): the broker is
	// then ZooKeeper-based (Apache Kafka before 4.0), registered as broker.id NodeID, with
	// no storage formatting (ClusterID and ToolJVM are unused).
	ZooKeeper string
	// NodeID is broker.id of a ZooKeeper-based broker; 0 means 1.
	NodeID int
	// Dir holds server.properties, the log directory Dir/data and the broker's stdout
	// and stderr, Dir/kafka.log. It is created if missing.
	Dir string
	// JVM are the JVM options of kafka.Kafka (heap, GC, ...), before the log4j2 and
	// class-path options.
	JVM []string
	// ToolJVM are the JVM options of the kafka.tools.StorageTool runs that format Dir.
	ToolJVM []string
	// Props are server.properties lines ("key=value") added after the base ones of
	// ServerProperties.
	Props []string
	// ClusterID is the cluster ID to format with; when empty, or when
	// StorageTool refuses it, the ID comes from `StorageTool random-uuid`.
	ClusterID string
	// ReadyTimeout bounds process start → first Metadata answer; 0 means 2 minutes.
	ReadyTimeout time.Duration
	// Listeners are listeners beside PLAINTEXT, "NAME://127.0.0.1:port" each, named as
	// their security protocol (SSL, SASL_PLAINTEXT, SASL_SSL); their settings
	// (listener.name.<name>.…, sasl.enabled.mechanisms) go in Props. KRaft only.
	Listeners []string
}

// formatTimeout bounds each StorageTool run.
const formatTimeout = 2 * time.Minute

// ServerProperties returns the base server.properties of a single-node KRaft broker
// (broker and controller in one process) with its PLAINTEXT listener on addr, its
// controller listener on ctrl (both host:port) and its log directory logDir, one
// "key=value" per line: replication factor 1 for the internal topics, no initial
// rebalance delay, no topic auto-creation, everything else at Apache Kafka's defaults
// (no forced fsync). listeners are more listeners as BrokerConfig.Listeners, advertised
// as they are; extra lines follow the base ones.
func ServerProperties(addr, ctrl, logDir string, listeners []string, extra ...string) string {
	more, protocols := "", ""
	for _, l := range listeners {
		name, _, _ := strings.Cut(l, "://")
		more += "," + l
		protocols += "," + name + ":" + name
	}
	lines := append([]string{
		"process.roles=broker,controller",
		"node.id=1",
		"controller.quorum.bootstrap.servers=" + ctrl,
		"listeners=PLAINTEXT://" + addr + ",CONTROLLER://" + ctrl + more,
		"advertised.listeners=PLAINTEXT://" + addr + more,
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT" + protocols,
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + logDir,
		"offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
		"auto.create.topics.enable=false",
	}, extra...)
	return strings.Join(lines, "\n") + "\n"
}

// ServerPropertiesZK returns the base server.properties of a ZooKeeper-based broker
// (Apache Kafka before 4.0): broker.id nodeID, zookeeper.connect zk, its PLAINTEXT
// listener on addr and its log directory logDir, with the same internal-topic and group
// settings as ServerProperties and a short ZooKeeper session (a killed broker's
// partitions move within seconds). extra lines follow the base ones.
func ServerPropertiesZK(nodeID int, zk, addr, logDir string, extra ...string) string {
	lines := append([]string{
		fmt.Sprintf("broker.id=%d", nodeID),
		"zookeeper.connect=" + zk,
		"zookeeper.session.timeout.ms=6000",
		"listeners=PLAINTEXT://" + addr,
		"advertised.listeners=PLAINTEXT://" + addr,
		"log.dirs=" + logDir,
		"offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
		"auto.create.topics.enable=false",
	}, extra...)
	return strings.Join(lines, "\n") + "\n"
}

// Broker is a running kafka.Kafka (or ZooKeeper) process started by StartBroker (or
// StartZooKeeper).
type Broker struct {
	// Addr is the PLAINTEXT listener, "127.0.0.1:port".
	Addr string
	// Cmd is the JVM's command; Cmd.Process gives its pid.
	Cmd *exec.Cmd
	// LogPath is the file holding the JVM's stdout and stderr.
	LogPath string
	// Started is when the JVM was started (after formatting).
	Started time.Time
	// Startup is Started → first Metadata answer (see Ready).
	Startup time.Duration

	done chan struct{}
	// what Restart runs again
	java    Java
	jvm     []string
	class   string
	args    []string
	ready   func(addr string) bool
	timeout time.Duration
}

// StartBroker starts a broker: for a KRaft one it formats c.Dir (server.properties from
// ServerProperties with c.Props, two free loopback ports) with kafka.tools.StorageTool
// format --standalone; a ZooKeeper-based one (c.ZooKeeper) gets ServerPropertiesZK and one
// free port. It starts kafka.Kafka and waits until it answers Metadata (Ready, polled
// every 10 ms). Formatting is not part of Startup. The error says which step failed, with
// the tool's output or the tail of the broker's log; a broker that does not become ready
// within c.ReadyTimeout is stopped.
func StartBroker(j Java, c BrokerConfig) (*Broker, error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(c.Dir, "server.properties")
	var props string
	if c.ZooKeeper != "" {
		props = ServerPropertiesZK(max(c.NodeID, 1), c.ZooKeeper, addr, filepath.Join(c.Dir, "data"), c.Props...)
	} else {
		ctrl, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		props = ServerProperties(addr, ctrl, filepath.Join(c.Dir, "data"), c.Listeners, c.Props...)
	}
	if err := os.WriteFile(conf, []byte(props), 0o644); err != nil {
		return nil, err
	}
	if c.ZooKeeper == "" {
		if err := format(j, c.ToolJVM, c.ClusterID, conf, "--standalone"); err != nil {
			return nil, err
		}
	}
	b := &Broker{Addr: addr, LogPath: filepath.Join(c.Dir, "kafka.log"),
		java: j, jvm: c.JVM, class: "kafka.Kafka", args: []string{conf}, ready: Ready, timeout: c.ReadyTimeout}
	return b, b.start()
}

// StartZooKeeper starts a standalone ZooKeeper server (org.apache.zookeeper's
// QuorumPeerMain, from the jars of an Apache Kafka release before 4.0) on a free loopback
// port with its data in dir, ready once it accepts a TCP connection. Its Addr is the
// zookeeper.connect of BrokerConfig.ZooKeeper.
func StartZooKeeper(j Java, dir string, jvm []string) (*Broker, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	conf := filepath.Join(dir, "zookeeper.properties")
	props := strings.Join([]string{"dataDir=" + filepath.Join(dir, "data"), "clientPort=" + port,
		"clientPortAddress=" + host, "admin.enableServer=false", "maxClientCnxns=0"}, "\n") + "\n"
	if err := os.WriteFile(conf, []byte(props), 0o644); err != nil {
		return nil, err
	}
	b := &Broker{Addr: addr, LogPath: filepath.Join(dir, "zookeeper.log"), java: j, jvm: jvm,
		class: "org.apache.zookeeper.server.quorum.QuorumPeerMain", args: []string{conf}, ready: listening, timeout: time.Minute}
	return b, b.start()
}

// listening reports whether addr accepts a TCP connection within a second.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// start runs the process and waits until it is ready; one that is not within its ready
// timeout is stopped.
func (b *Broker) start() error {
	b.done = make(chan struct{})
	logf, err := os.OpenFile(b.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	b.Cmd = b.java.Command(context.Background(), b.jvm, b.class, b.args...)
	b.Cmd.Stdout, b.Cmd.Stderr = logf, logf
	b.Started = time.Now()
	if err := b.Cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", b.class, err)
	}
	done := b.done
	go func() { b.Cmd.Wait(); logf.Close(); close(done) }()
	limit := b.timeout
	if limit <= 0 {
		limit = 2 * time.Minute
	}
	deadline := b.Started.Add(limit)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited: %s", b.class, b.Tail())
		default:
		}
		if b.ready(b.Addr) {
			b.Startup = time.Since(b.Started)
			return nil
		}
		if time.Now().After(deadline) {
			b.Stop()
			return fmt.Errorf("%s was not ready within %s: %s", b.class, limit, b.Tail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Restart starts the stopped or killed process again on its configuration and data (same
// address) and waits until it is ready, as StartBroker does.
func (b *Broker) Restart() error {
	<-b.done
	return b.start()
}

// Kill sends SIGKILL (kill -9: no controlled shutdown, no flush) and waits for the JVM to
// exit.
func (b *Broker) Kill() {
	b.Cmd.Process.Kill()
	<-b.done
}

// format runs StorageTool format on conf (with the extra format arguments) with
// clusterID, or with a random UUID from StorageTool when clusterID is empty or refused.
func format(j Java, toolJVM []string, clusterID, conf string, extra ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), formatTimeout)
	defer cancel()
	run := func(id string) ([]byte, error) {
		args := append([]string{"format", "-t", id, "-c", conf}, extra...)
		return j.Command(ctx, toolJVM, "kafka.tools.StorageTool", args...).CombinedOutput()
	}
	var refused error
	if clusterID != "" {
		out, err := run(clusterID)
		if err == nil {
			return nil
		}
		refused = fmt.Errorf("StorageTool format: %v\n%s", err, out)
	}
	uuid, err := j.Command(ctx, toolJVM, "kafka.tools.StorageTool", "random-uuid").Output()
	if err != nil {
		if refused != nil {
			return refused
		}
		return fmt.Errorf("StorageTool random-uuid: %w", err)
	}
	if out, err := run(strings.TrimSpace(string(uuid))); err != nil {
		return fmt.Errorf("StorageTool format: %v\n%s", err, out)
	}
	return nil
}

// Done is closed once the JVM has exited.
func (b *Broker) Done() <-chan struct{} { return b.done }

// Stop sends SIGTERM (Kafka's controlled shutdown) and waits for the JVM to exit, killing
// it after 60 seconds.
func (b *Broker) Stop() {
	b.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(60 * time.Second):
		b.Cmd.Process.Kill()
		<-b.done
	}
}

// Tail returns the last 3000 bytes of the broker's log (LogPath), "" if unreadable.
func (b *Broker) Tail() string {
	bs, _ := os.ReadFile(b.LogPath)
	if len(bs) > 3000 {
		bs = bs[len(bs)-3000:]
	}
	return string(bs)
}
