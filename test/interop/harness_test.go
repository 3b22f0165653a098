package interop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/clustertest"
	"github.com/kmirror/kmirror/internal/kafkaproc"
)

// kafkaVersion is the Apache Kafka release the suite fetches (KAFKA_VERSION overrides).
const kafkaVersion = "4.3.1"

var (
	enabled = os.Getenv("KMIRROR_INTEROP") == "1"
	java    kafkaproc.Java // .cache/kafka-VERSION/libs and the log4j2 config in workDir
	workDir string         // per-run scratch: log4j2 config, Kafka data

	sourceOnce sync.Once
	source     *kafkaproc.Broker
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
	clustertest.RemoveBin()
	if source != nil {
		source.Stop()
	}
	if kafkaClusterRun != nil {
		kafkaClusterRun.Stop()
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
	libs := strings.TrimSpace(string(out))
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("java not found (Apache Kafka 4.x needs Java 17+)")
	}
	if workDir, err = os.MkdirTemp("", "kmirror-interop-"); err != nil {
		return err
	}
	java, err = kafkaproc.NewJava(libs, workDir)
	return err
}

// needKafka skips the test unless the suite is enabled (KMIRROR_INTEROP=1).
func needKafka(t *testing.T) {
	t.Helper()
	if !enabled {
		t.Skip("interop suite: set KMIRROR_INTEROP=1 (make interop) to run against Apache Kafka")
	}
}

// jvm are the JVM options of every JVM of the suite: a small heap and fast startup.
func jvm(heap string) []string {
	return []string{"-Xmx" + heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
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
	cmd := java.Command(ctx, jvm("256m"), class, args...)
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

// kafkaSource returns the suite's shared Apache Kafka broker, starting it on first use.
// The broker is a single-node KRaft Apache Kafka broker on loopback (kafkaproc) with
// small internal topics and a fast log cleaner.
func kafkaSource(t *testing.T) *kafkaproc.Broker {
	t.Helper()
	needKafka(t)
	sourceOnce.Do(func() {
		source, sourceErr = kafkaproc.StartBroker(java, kafkaproc.BrokerConfig{
			Dir:     filepath.Join(workDir, "kafka"),
			JVM:     jvm("512m"),
			ToolJVM: jvm("256m"),
			Props: []string{
				"num.partitions=1",
				"offsets.topic.num.partitions=4",
				"transaction.state.log.num.partitions=4",
				"log.cleaner.backoff.ms=200",
			},
			ClusterID:    "kmirror-interop-cluster1",
			ReadyTimeout: 90 * time.Second,
		})
	})
	if sourceErr != nil {
		t.Fatalf("start Apache Kafka: %v", sourceErr)
	}
	return source
}
