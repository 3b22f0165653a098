package kafkaproc

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNewJavaAndCommand(t *testing.T) {
	dir := t.TempDir()
	j, err := NewJava("/opt/kafka/libs", dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "log4j2.yaml"))
	if err != nil || string(b) != Log4j2YAML {
		t.Fatalf("log4j2.yaml: %q, %v", b, err)
	}
	cmd := j.Command(context.Background(), []string{"-Xmx256m", "-XX:+UseSerialGC"}, "kafka.tools.StorageTool", "random-uuid")
	want := []string{"java", "-Xmx256m", "-XX:+UseSerialGC", "-Dlog4j2.configurationFile=" + filepath.Join(dir, "log4j2.yaml"),
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", "/opt/kafka/libs/*", "kafka.tools.StorageTool", "random-uuid"}
	if !slices.Equal(cmd.Args, want) {
		t.Fatalf("args %q, want %q", cmd.Args, want)
	}
}

func TestServerProperties(t *testing.T) {
	p := ServerProperties("127.0.0.1:9092", "127.0.0.1:9093", "/d/data", []string{"SASL_SSL://127.0.0.1:9094"}, "num.partitions=1")
	lines := strings.Split(strings.TrimSuffix(p, "\n"), "\n")
	for _, l := range []string{
		"process.roles=broker,controller",
		"controller.quorum.bootstrap.servers=127.0.0.1:9093",
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
		"advertised.listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
		"log.dirs=/d/data",
		"auto.create.topics.enable=false",
	} {
		if !slices.Contains(lines, l) {
			t.Errorf("missing %q in\n%s", l, p)
		}
	}
	if lines[len(lines)-1] != "num.partitions=1" {
		t.Errorf("extra line not last:\n%s", p)
	}
}

func TestServerPropertiesZK(t *testing.T) {
	p := ServerPropertiesZK(2, "127.0.0.1:2181", "127.0.0.1:9092", "/d/data", "unclean.leader.election.enable=true")
	lines := strings.Split(strings.TrimSuffix(p, "\n"), "\n")
	for _, l := range []string{
		"broker.id=2",
		"zookeeper.connect=127.0.0.1:2181",
		"listeners=PLAINTEXT://127.0.0.1:9092",
		"advertised.listeners=PLAINTEXT://127.0.0.1:9092",
		"log.dirs=/d/data",
	} {
		if !slices.Contains(lines, l) {
			t.Errorf("missing %q in\n%s", l, p)
		}
	}
	if slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "process.roles=") }) {
		t.Errorf("a ZooKeeper-based broker has no process.roles:\n%s", p)
	}
	if lines[len(lines)-1] != "unclean.leader.election.enable=true" {
		t.Errorf("extra line not last:\n%s", p)
	}
}

func TestClusterNodeProperties(t *testing.T) {
	p := ClusterNodeProperties(2, "127.0.0.1:9092", "127.0.0.1:9093", "1@127.0.0.1:9001,2@127.0.0.1:9093", "/d/data", "min.insync.replicas=2")
	lines := strings.Split(strings.TrimSuffix(p, "\n"), "\n")
	for _, l := range []string{
		"process.roles=broker,controller",
		"node.id=2",
		"controller.quorum.voters=1@127.0.0.1:9001,2@127.0.0.1:9093",
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
		"advertised.listeners=PLAINTEXT://127.0.0.1:9092",
		"log.dirs=/d/data",
	} {
		if !slices.Contains(lines, l) {
			t.Errorf("missing %q in\n%s", l, p)
		}
	}
	if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "replication.factor=1") }) {
		t.Errorf("a cluster node keeps Kafka's replication factor 3 for internal topics:\n%s", p)
	}
	if lines[len(lines)-1] != "min.insync.replicas=2" {
		t.Errorf("extra line not last:\n%s", p)
	}
}
