package broker_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/node"
)

// createTopicsRaw sends one CreateTopics of a topic with partitions partitions (RF 1)
// and returns its topic result.
func createTopicsRaw(t *testing.T, cl *kgo.Client, name string, partitions int32) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 60000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("CreateTopics %s: no answer: %v", name, err)
	}
	return resp.Topics[0]
}

// topicPartitions is the partition count Metadata reports for topic, −1 when it does not
// exist.
func topicPartitions(t *testing.T, cl *kgo.Client, topic string) int {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode == kerr.UnknownTopicOrPartition.Code {
		return -1
	}
	return len(resp.Topics[0].Partitions)
}

// lowerFileLimit sets the soft RLIMIT_NOFILE to the descriptors open now plus room, and
// restores it when the test ends.
func lowerFileLimit(t *testing.T, room uint64) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	lim := old
	lim.Cur = uint64(len(ents)) + room
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Error(err)
		}
	})
}

// CreatePartitions adding more partitions than Kafka's controller writes records for one
// operation (MAX_RECORDS_PER_USER_OP, 10000) is refused with POLICY_VIOLATION and changes
// nothing.
func TestCreatePartitionsBeyondMaxRecordsPerUserOp(t *testing.T) {
	b := brokertest.Start(t, nil)
	cl := b.Client()
	createTopic(t, cl, "big", 1, nil)
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "big", 200000
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 60000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Topics[0]
	if got.ErrorCode != kerr.PolicyViolation.Code || got.ErrorMessage == nil || *got.ErrorMessage != "Unable to perform excessively large batch operation." {
		t.Fatalf("CreatePartitions to 200000: error %d %v, want POLICY_VIOLATION with Kafka's message", got.ErrorCode, got.ErrorMessage)
	}
	if n := topicPartitions(t, cl, "big"); n != 1 {
		t.Fatalf("topic big has %d partitions after the refused CreatePartitions, want 1", n)
	}
}

// CreateTopics of more partitions than Kafka's MAX_PARTITIONS_PER_BATCH (10000) is
// refused with POLICY_VIOLATION and creates nothing.
func TestCreateTopicsBeyondMaxPartitionsPerBatch(t *testing.T) {
	b := brokertest.Start(t, nil)
	cl := b.Client()
	got := createTopicsRaw(t, cl, "huge", 10001)
	if got.ErrorCode != kerr.PolicyViolation.Code || got.ErrorMessage == nil || *got.ErrorMessage != "Excessively large number of partitions per request." {
		t.Fatalf("CreateTopics of 10001 partitions: error %d %v, want POLICY_VIOLATION with Kafka's message", got.ErrorCode, got.ErrorMessage)
	}
	if n := topicPartitions(t, cl, "huge"); n != -1 {
		t.Fatalf("topic huge exists with %d partitions after the refused CreateTopics", n)
	}
}

// A CreateTopics whose partitions need more file descriptors than RLIMIT_NOFILE leaves is
// refused with KAFKA_STORAGE_ERROR naming the limit; the topic does not exist, the broker
// keeps serving and restarts on its data.
func TestCreateTopicsBeyondFileLimit(t *testing.T) {
	b := brokertest.Start(t, nil)
	cl := b.Client()
	createTopic(t, cl, "ok", 1, nil)
	lowerFileLimit(t, 400)
	got := createTopicsRaw(t, cl, "many", 3000)
	if got.ErrorCode != kerr.KafkaStorageError.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "RLIMIT_NOFILE") {
		t.Fatalf("CreateTopics of 3000 partitions under a low descriptor limit: error %d %v, want KAFKA_STORAGE_ERROR naming RLIMIT_NOFILE", got.ErrorCode, got.ErrorMessage)
	}
	if n := topicPartitions(t, cl, "many"); n != -1 {
		t.Fatalf("topic many exists with %d partitions after the refused CreateTopics", n)
	}
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "ok", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce after the refused CreateTopics: %v", err)
	}
	b.Restart()
	if err := b.Client().ProduceSync(context.Background(), &kgo.Record{Topic: "ok", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce after the restart: %v", err)
	}
}

// CreatePartitions beyond the descriptor budget is refused with KAFKA_STORAGE_ERROR and
// leaves the topic as it was.
func TestCreatePartitionsBeyondFileLimit(t *testing.T) {
	b := brokertest.Start(t, nil)
	cl := b.Client()
	createTopic(t, cl, "grow", 1, nil)
	lowerFileLimit(t, 400)
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "grow", 3000
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 60000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0]; got.ErrorCode != kerr.KafkaStorageError.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "RLIMIT_NOFILE") {
		t.Fatalf("CreatePartitions to 3000 under a low descriptor limit: error %d %v, want KAFKA_STORAGE_ERROR naming RLIMIT_NOFILE", got.ErrorCode, got.ErrorMessage)
	}
	if n := topicPartitions(t, cl, "grow"); n != 1 {
		t.Fatalf("topic grow has %d partitions after the refused CreatePartitions, want 1", n)
	}
}

// A partition whose log cannot be opened (here its directory's path is taken by a file)
// fails its topic's creation with KAFKA_STORAGE_ERROR naming the partition, and the
// creation is undone: no topic, no log of its other partitions; once the path is free
// the topic can be created.
func TestCreateTopicWithUnopenablePartitionIsUndone(t *testing.T) {
	b := brokertest.Start(t, nil)
	cl := b.Client()
	blocker := filepath.Join(b.Dir, "blocked-1")
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := createTopicsRaw(t, cl, "blocked", 3)
	if got.ErrorCode != kerr.KafkaStorageError.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "blocked-1") {
		t.Fatalf("CreateTopics with an unopenable partition: error %d %v, want KAFKA_STORAGE_ERROR naming blocked-1", got.ErrorCode, got.ErrorMessage)
	}
	if n := topicPartitions(t, cl, "blocked"); n != -1 {
		t.Fatalf("topic blocked exists with %d partitions after its creation failed", n)
	}
	for _, p := range []string{"blocked-0", "blocked-2"} {
		if _, err := os.Stat(filepath.Join(b.Dir, p)); !os.IsNotExist(err) {
			t.Fatalf("log directory %s left behind by the undone creation (stat: %v)", p, err)
		}
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	createTopic(t, cl, "blocked", 3, nil)
	b.Restart()
	if n := topicPartitions(t, b.Client(), "blocked"); n != 3 {
		t.Fatalf("topic blocked has %d partitions after the restart, want 3", n)
	}
}

// A data directory holding more segments than RLIMIT_NOFILE allows is refused at start
// with one error naming the limit and the value needed, not half-opened. The broker
// starts in a child process whose hard limit is lowered too (a broker raises its soft
// limit to the hard one), as under `ulimit -n`.
func TestStartRefusesDataDirBeyondFileLimit(t *testing.T) {
	if props := os.Getenv("KMIRROR_LIMITS_CHILD_PROPS"); props != "" {
		startUnderLowFileLimit(t, props)
		return
	}
	b := brokertest.Start(t, nil)
	createTopic(t, b.Client(), "wide", 200, nil)
	b.Stop()
	props, err := json.Marshal(b.Props)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartRefusesDataDirBeyondFileLimit$", "-test.v")
	cmd.Env = append(os.Environ(), "KMIRROR_LIMITS_CHILD_PROPS="+string(props))
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "start error:") {
		t.Fatalf("the child broker did not report a start error:\n%s", out)
	}
	if !strings.Contains(string(out), "RLIMIT_NOFILE") || !strings.Contains(string(out), "raise it to at least") {
		t.Fatalf("start error does not name RLIMIT_NOFILE and the value needed:\n%s", out)
	}
}

// startUnderLowFileLimit is the child of TestStartRefusesDataDirBeyondFileLimit: it
// lowers both RLIMIT_NOFILE limits to room for about 75 segments and starts a broker on
// the data of props, failing when it starts.
func startUnderLowFileLimit(t *testing.T, props string) {
	var p map[string]string
	if err := json.Unmarshal([]byte(props), &p); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	lim := syscall.Rlimit{Cur: uint64(len(ents)) + 300, Max: uint64(len(ents)) + 300}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.NewValues(config.Broker, p, false)
	if err != nil {
		t.Fatal(err)
	}
	br, err := node.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		br.Shutdown(context.Background())
		t.Fatal("a broker started on a data directory of 200 partitions under a limit for about 75")
	}
	t.Log("start error:", err)
}

// The broker's listeners apply max.connections.per.ip: with a limit of 2, among
// connections from 127.0.0.1 that each send ApiVersions, the third is closed unanswered
// while the first two are served.
func TestBrokerMaxConnectionsPerIP(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"max.connections.per.ip": "2"})
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
	var conns []*rawConn
	for i := 0; i < 2; i++ {
		c := dialRaw(t, b.Addr())
		if r := c.request(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
			t.Fatalf("connection %d within max.connections.per.ip: ApiVersions error %d", i, r.ErrorCode)
		}
		conns = append(conns, c)
	}
	c := dialRaw(t, b.Addr())
	c.write(frame(req.Key(), req.GetVersion(), 1, req.IsFlexible(), req.AppendTo(nil)))
	if _, _, err := c.readFrame(); err == nil {
		t.Fatal("a third connection from 127.0.0.1 was answered with max.connections.per.ip=2")
	}
	if r := conns[0].request(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("a connection within the limit after the refused one: ApiVersions error %d", r.ErrorCode)
	}
}
