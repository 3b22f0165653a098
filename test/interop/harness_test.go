package interop

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// kafkaVersion is the Apache Kafka release the suite fetches (KAFKA_VERSION overrides).
const kafkaVersion = "4.3.1"

var (
	enabled   = os.Getenv("KMIRROR_INTEROP") == "1"
	libsDir   string // .cache/kafka-VERSION/libs
	workDir   string // per-run scratch: log4j2 config, Kafka data
	log4jConf string

	sourceOnce sync.Once
	source     *kafkaBroker
	sourceErr  error
)

func TestMain(m *testing.M) {
	if !enabled {
		os.Exit(m.Run()) // every test skips through needKafka
	}
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "interop setup:", err)
		os.Exit(1)
	}
	code := m.Run()
	if source != nil {
		source.stop()
	}
	if code == 0 {
		os.RemoveAll(workDir)
	} else {
		fmt.Fprintln(os.Stderr, "interop: scratch kept in", workDir)
	}
	os.Exit(code)
}

func setup() error {
	v := os.Getenv("KAFKA_VERSION")
	if v == "" {
		v = kafkaVersion
	}
	out, err := exec.Command("./fetch-kafka.sh", v).Output()
	if err != nil {
		return fmt.Errorf("fetch-kafka.sh: %w", err)
	}
	libsDir = strings.TrimSpace(string(out))
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("java not found (Apache Kafka 4.x needs Java 17+)")
	}
	if workDir, err = os.MkdirTemp("", "kmirror-interop-"); err != nil {
		return err
	}
	log4jConf = filepath.Join(workDir, "log4j2.yaml")
	return os.WriteFile(log4jConf, []byte(`Configuration:
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
`), 0o644)
}

// needKafka skips the test unless the suite is enabled (KMIRROR_INTEROP=1).
func needKafka(t *testing.T) {
	t.Helper()
	if !enabled {
		t.Skip("interop suite: set KMIRROR_INTEROP=1 (make interop) to run against Apache Kafka")
	}
}

// javaCmd builds `java -cp libs/* class args...` with a small heap and fast startup.
func javaCmd(ctx context.Context, heap, class string, args ...string) *exec.Cmd {
	a := []string{"-Xmx" + heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + log4jConf, "-cp", filepath.Join(libsDir, "*"), class}
	return exec.CommandContext(ctx, "java", append(a, args...)...)
}

// tool runs one of Apache Kafka's command-line tools by class name and returns its
// stdout; a non-zero exit fails the test with both streams.
func tool(t *testing.T, stdin string, class string, args ...string) string {
	t.Helper()
	out, errOut, err := toolErr(t, stdin, class, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", shortClass(class), strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// toolErr is tool without failing: stdout, stderr and the exit error.
func toolErr(t *testing.T, stdin string, class string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := javaCmd(ctx, "256m", class, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	t.Logf("%s %s -> exit %v\n%s", shortClass(class), strings.Join(args, " "), err, clip(so.String()))
	return so.String(), se.String(), err
}

func shortClass(c string) string { return c[strings.LastIndex(c, ".")+1:] }

func clip(s string) string {
	if len(s) > 4000 {
		return s[:4000] + "\n…"
	}
	return s
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// kafkaBroker is a single-node KRaft Apache Kafka broker (process.roles=broker,controller)
// on loopback, run with `java -cp libs/* kafka.Kafka server.properties`.
type kafkaBroker struct {
	Addr string
	dir  string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// kafkaSource returns the suite's shared Apache Kafka broker, starting it on first use.
func kafkaSource(t *testing.T) *kafkaBroker {
	t.Helper()
	needKafka(t)
	sourceOnce.Do(func() { source, sourceErr = startKafka(filepath.Join(workDir, "kafka")) })
	if sourceErr != nil {
		t.Fatalf("start Apache Kafka: %v", sourceErr)
	}
	return source
}

func startKafka(dir string) (*kafkaBroker, error) {
	pb, err := freePort()
	if err != nil {
		return nil, err
	}
	pc, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(pb)
	props := strings.Join([]string{
		"process.roles=broker,controller",
		"node.id=1",
		"controller.quorum.bootstrap.servers=127.0.0.1:" + strconv.Itoa(pc),
		"listeners=PLAINTEXT://" + addr + ",CONTROLLER://127.0.0.1:" + strconv.Itoa(pc),
		"advertised.listeners=PLAINTEXT://" + addr,
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + filepath.Join(dir, "data"),
		"num.partitions=1",
		"offsets.topic.replication.factor=1",
		"offsets.topic.num.partitions=4",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"transaction.state.log.num.partitions=4",
		"group.initial.rebalance.delay.ms=0",
		"log.cleaner.backoff.ms=200",
		"auto.create.topics.enable=false",
	}, "\n") + "\n"
	conf := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(conf, []byte(props), 0o644); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := javaCmd(ctx, "256m", "kafka.tools.StorageTool", "format",
		"-t", "kmirror-interop-cluster1", "-c", conf, "--standalone").CombinedOutput()
	if err != nil {
		// A cluster ID must be a base64 UUID; ask the tool for one if ours was refused.
		uuid, uerr := javaCmd(ctx, "256m", "kafka.tools.StorageTool", "random-uuid").Output()
		if uerr != nil {
			return nil, fmt.Errorf("format: %v\n%s", err, out)
		}
		out, err = javaCmd(ctx, "256m", "kafka.tools.StorageTool", "format",
			"-t", strings.TrimSpace(string(uuid)), "-c", conf, "--standalone").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("format: %v\n%s", err, out)
		}
	}
	logf, err := os.Create(filepath.Join(dir, "kafka.log"))
	if err != nil {
		return nil, err
	}
	cmd := javaCmd(context.Background(), "512m", "kafka.Kafka", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	k := &kafkaBroker{Addr: addr, dir: dir, cmd: cmd, log: logf, done: make(chan struct{})}
	go func() { cmd.Wait(); close(k.done) }()
	// Ready when the PLAINTEXT listener accepts and answers a Metadata request (bounded).
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-k.done:
			return nil, fmt.Errorf("kafka.Kafka exited: %s", k.tail())
		default:
		}
		if ready(addr) {
			return k, nil
		}
		if time.Now().After(deadline) {
			k.stop()
			return nil, fmt.Errorf("kafka.Kafka never became ready: %s", k.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (k *kafkaBroker) tail() string {
	b, _ := os.ReadFile(filepath.Join(k.dir, "kafka.log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// stop sends SIGTERM (Kafka's controlled shutdown) and waits; SIGKILL after a bound.
func (k *kafkaBroker) stop() {
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(60 * time.Second):
		k.cmd.Process.Kill()
		<-k.done
	}
	k.log.Close()
}
