package mirror

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
)

// testLocal is a destination broker for tests: a real kmirror broker (internal/broker)
// in this process, on a loopback port and a temporary directory, running this package's
// Manager with the test's broker config.
type testLocal struct {
	*broker.Broker
	t    testing.TB
	m    *Manager
	done chan struct{}
}

func testLogger() *slog.Logger {
	if os.Getenv("MIRROR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(ioDiscard{}, nil))
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }

// openTestLocal starts a broker on props (listeners and log.dirs set by the caller; the
// port it got is pinned in props, so that a restart comes back on it).
func openTestLocal(t testing.TB, props map[string]string, mcfg BrokerConfig) *testLocal {
	t.Helper()
	cfg, err := config.NewValues(config.Broker, props, false)
	if err != nil {
		t.Fatal(err)
	}
	l := &testLocal{t: t, done: make(chan struct{})}
	b, err := broker.New(cfg, testLogger(), func(local *broker.Broker, _ *config.Values, _ *slog.Logger) broker.Mirrors {
		l.m = NewManager(Options{Local: local, Logger: testLogger(), Config: mcfg})
		return l.m
	})
	if err != nil {
		t.Fatalf("broker.New: %v", err)
	}
	l.Broker = b
	go func() { defer close(l.done); b.Serve() }()
	props["listeners"] = "PLAINTEXT://" + b.Addr()
	return l
}

func (l *testLocal) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l.Shutdown(ctx)
	<-l.done
}

// env is a destination broker with a running mirror Manager.
type env struct {
	t     *testing.T
	dir   string
	cfg   BrokerConfig
	props map[string]string // the broker's server.properties, port pinned after the first start
	local *testLocal
	m     *Manager
}

func fastConfig() BrokerConfig {
	c := DefaultBrokerConfig()
	c.RefreshIntervalMs = 300
	c.RetryInitialBackoffMs = 20
	c.RetryMaxBackoffMs = 200
	c.StateTopicPartitions = 5
	return c
}

func newEnv(t *testing.T) *env { return newEnvWith(t, fastConfig()) }

// newEnvWith starts a destination broker whose mirror manager runs with cfg.
func newEnvWith(t *testing.T, cfg BrokerConfig) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), cfg: cfg}
	e.props = map[string]string{
		"listeners":                         "PLAINTEXT://127.0.0.1:0",
		"log.dirs":                          e.dir,
		"offsets.topic.num.partitions":      "2",
		"mirror.state.topic.num.partitions": fmt.Sprint(cfg.StateTopicPartitions),
		"group.initial.rebalance.delay.ms":  "0",
	}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *env) start() {
	e.t.Helper()
	e.local = openTestLocal(e.t, e.props, e.cfg)
	e.m = e.local.m
}

func (e *env) stop() {
	if e.local != nil {
		e.local.close()
		e.local = nil
		e.m = nil
	}
}

// restart shuts the broker down and starts it again on the same data and port.
func (e *env) restart() {
	e.stop()
	e.start()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) createMirror(name, bootstrap string, extra ...string) {
	e.t.Helper()
	req := &mirrorproto.CreateClusterMirrorRequest{MirrorName: name,
		Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: bootstrap}}}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Config = append(req.Config, mirrorproto.CreateClusterMirrorRequestConfig{Name: extra[i], Value: extra[i+1]})
	}
	resp := e.m.CreateClusterMirror(ctxT(e.t), req)
	if resp.ErrorCode != 0 {
		e.t.Fatalf("CreateClusterMirror: %v", mirrorproto.ErrorFor(resp.ErrorCode, resp.ErrorMessage))
	}
}

// startResp sends StartMirrorTopics for names: those with "." or "*" as include
// patterns, the others as topic names; it returns the response as is.
func (e *env) startResp(mirror string, names ...string) *mirrorproto.StartMirrorTopicsResponse {
	req := mirrorproto.NewStartMirrorTopicsRequest()
	req.MirrorName = mirror
	for _, n := range names {
		if strings.ContainsAny(n, ".*") {
			req.IncludePatterns = append(req.IncludePatterns, n)
		} else {
			req.Topics = append(req.Topics, mirrorproto.StartMirrorTopicsRequestTopic{TopicName: n})
		}
	}
	return e.m.StartMirrorTopics(ctxT(e.t), req)
}

// startTopics is startResp that fails the test on any error.
func (e *env) startTopics(mirror string, names ...string) {
	e.t.Helper()
	resp := e.startResp(mirror, names...)
	e.mustTopics("StartMirrorTopics", resp.ErrorCode, resp.ErrorMessage, resp.Topics, -1)
}

// asTopicNames is names as the TopicName list of Stop/Pause/Resume requests (the reverse
// of rpc.go's topicNames).
func asTopicNames(names []string) []mirrorproto.TopicName {
	out := make([]mirrorproto.TopicName, 0, len(names))
	for _, n := range names {
		out = append(out, mirrorproto.TopicName{TopicName: n})
	}
	return out
}

// mustTopics fails the test on a top-level or per-topic error of a topic RPC, or when
// want ≥ 0 and the response holds another number of topics.
func (e *env) mustTopics(rpc string, code int16, msg *string, topics []mirrorproto.TopicResult, want int) {
	e.t.Helper()
	if code != 0 {
		e.t.Fatalf("%s: %v", rpc, mirrorproto.ErrorFor(code, msg))
	}
	if want >= 0 && len(topics) != want {
		e.t.Fatalf("%s: %d topics in the response, want %d: %+v", rpc, len(topics), want, topics)
	}
	for _, tr := range topics {
		if tr.ErrorCode != 0 {
			e.t.Fatalf("%s %s: %v", rpc, tr.Name, mirrorproto.ErrorFor(tr.ErrorCode, tr.ErrorMessage))
		}
	}
}

// stopTopics stops (fails over) topics of mirror and fails the test on any error.
func (e *env) stopTopics(mirror string, names ...string) {
	e.t.Helper()
	req := mirrorproto.NewStopMirrorTopicsRequest()
	req.MirrorName, req.Topics = mirror, asTopicNames(names)
	resp := e.m.StopMirrorTopics(ctxT(e.t), req)
	e.mustTopics("StopMirrorTopics", resp.ErrorCode, resp.ErrorMessage, resp.Topics, -1)
}

// pauseTopics pauses topics of mirror and fails the test on any error.
func (e *env) pauseTopics(mirror string, names ...string) {
	e.t.Helper()
	req := mirrorproto.NewPauseMirrorTopicsRequest()
	req.MirrorName, req.Topics = mirror, asTopicNames(names)
	resp := e.m.PauseMirrorTopics(ctxT(e.t), req)
	e.mustTopics("PauseMirrorTopics", resp.ErrorCode, resp.ErrorMessage, resp.Topics, len(names))
}

// resumeTopics resumes topics of mirror and fails the test on any error.
func (e *env) resumeTopics(mirror string, names ...string) {
	e.t.Helper()
	req := mirrorproto.NewResumeMirrorTopicsRequest()
	req.MirrorName, req.Topics = mirror, asTopicNames(names)
	resp := e.m.ResumeMirrorTopics(ctxT(e.t), req)
	e.mustTopics("ResumeMirrorTopics", resp.ErrorCode, resp.ErrorMessage, resp.Topics, len(names))
}

// describe returns the partitions of topic in mirror.
func (e *env) describe(mirror, topic string) []mirrorproto.DescribeClusterMirrorsResponsePartition {
	resp := e.m.DescribeClusterMirrors(context.Background(), &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: []string{mirror}})
	for _, m := range resp.Mirrors {
		for _, t := range m.Topics {
			if t.TopicName == topic {
				return t.Partitions
			}
		}
	}
	return nil
}

// eventually polls cond until it holds, failing the test with what() after a generous
// bound (a hang guard, not a timing assertion).
func eventually(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition never held: %s", what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCaughtUp waits until every partition of topic is MIRRORING with the LEO at the
// source end offset.
func (e *env) waitCaughtUp(src *kgo.Client, mirror, topic string) {
	e.t.Helper()
	ends := sourceEnds(e.t, src, topic)
	var last []mirrorproto.DescribeClusterMirrorsResponsePartition
	eventually(e.t, func() string { return fmt.Sprintf("%s: source ends %v, describe %+v", topic, ends, last) }, func() bool {
		last = e.describe(mirror, topic)
		if len(last) != len(ends) {
			return false
		}
		for _, p := range last {
			if p.State != mirrorproto.StateMirroring || p.DestinationOffset != ends[p.PartitionIndex] {
				return false
			}
		}
		return true
	})
}

func (e *env) waitState(mirror, topic string, want mirrorproto.State) {
	e.t.Helper()
	var last []mirrorproto.DescribeClusterMirrorsResponsePartition
	eventually(e.t, func() string { return fmt.Sprintf("%s: want %s, describe %+v", topic, want, last) }, func() bool {
		last = e.describe(mirror, topic)
		if len(last) == 0 {
			return false
		}
		for _, p := range last {
			if p.State != want {
				return false
			}
		}
		return true
	})
}

// sourceEnds returns the end offset (HW) of every partition of topic on the source.
func sourceEnds(t *testing.T, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	return listOffsets(t, cl, topic, -1)
}

func listOffsets(t *testing.T, cl *kgo.Client, topic string, ts int64) map[int32]int64 {
	t.Helper()
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(context.Background(), cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("source metadata: %v", err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range mresp.Topics[0].Partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p.Partition
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("source ListOffsets: %v", err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("source ListOffsets %s-%d: %v", topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// partitionLeader returns the source leader of topic/partition from Metadata.
func partitionLeader(t *testing.T, cl *kgo.Client, topic string, partition int32) int32 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("source metadata: %v", err)
	}
	for _, mt := range resp.Topics {
		for _, p := range mt.Partitions {
			if p.Partition == partition {
				return p.Leader
			}
		}
	}
	t.Fatalf("source metadata: no %s-%d", topic, partition)
	return -1
}

// batchAt is one record batch and its base offset.
type batchAt struct {
	offset int64
	data   []byte
}

// sourceBatches reads every batch of topic/partition from the source with raw Fetch
// requests (READ_UNCOMMITTED), from its log start to its HW.
func sourceBatches(t *testing.T, cl *kgo.Client, topic string, partition int32) []batchAt {
	t.Helper()
	start := listOffsets(t, cl, topic, -2)[partition]
	end := listOffsets(t, cl, topic, -1)[partition]
	leader := partitionLeader(t, cl, topic, partition)
	var out []batchAt
	off := start
	for off < end {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 10
		req.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = partition
		fp.FetchOffset = off
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		pin := &fetchByName{req}
		kresp, err := cl.Broker(int(leader)).Request(context.Background(), pin)
		if err != nil {
			t.Fatalf("source fetch: %v", err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			t.Fatalf("source fetch %s-%d at %d: %v", topic, partition, off, kerr.ErrorForCode(rp.ErrorCode))
		}
		batches := splitBatches(rp.RecordBatches)
		if len(batches) == 0 {
			t.Fatalf("source fetch %s-%d at %d returned nothing below HW %d", topic, partition, off, end)
		}
		for _, b := range batches {
			if b.offset+int64(record.Batch(b.data).LastOffsetDelta()) < off {
				continue
			}
			out = append(out, b)
			off = record.Batch(b.data).NextOffset()
		}
	}
	return out
}

// localBatches reads every batch of a local log from its log start to its LEO.
func localBatches(t *testing.T, l *storage.Log) []batchAt {
	t.Helper()
	var out []batchAt
	off, end := l.LogStartOffset(), l.LogEndOffset()
	for off < end {
		data, err := l.Read(off, 1<<20, end, true)
		if err != nil {
			t.Fatalf("local read at %d: %v", off, err)
		}
		batches := splitBatches(data)
		if len(batches) == 0 {
			break
		}
		for _, b := range batches {
			out = append(out, b)
			off = record.Batch(b.data).NextOffset()
		}
	}
	return out
}

func splitBatches(data []byte) []batchAt {
	var out []batchAt
	for len(data) > 0 {
		b, rest, err := record.Next(data)
		if err != nil {
			break
		}
		out = append(out, batchAt{offset: b.BaseOffset(), data: append([]byte(nil), b...)})
		data = rest
	}
	return out
}

// sameBatches fails unless got and want hold the same (offset, bytes) sequence.
func sameBatches(t *testing.T, what string, want, got []batchAt) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d batches on the source, %d on the destination", what, len(want), len(got))
	}
	for i := range want {
		if want[i].offset != got[i].offset || !bytes.Equal(want[i].data, got[i].data) {
			t.Fatalf("%s: batch %d differs: source offset %d (%d bytes), destination offset %d (%d bytes)",
				what, i, want[i].offset, len(want[i].data), got[i].offset, len(got[i].data))
		}
	}
}

func (e *env) localLog(topic string, p int32) *storage.Log {
	e.t.Helper()
	part, err := e.m.local.Partition(topic, p)
	if err != nil {
		e.t.Fatal(err)
	}
	return part.Log()
}

// fetchByName caps a test's Fetch at version 12, the last addressing topics by name.
type fetchByName struct{ *kmsg.FetchRequest }

// MaxVersion returns 12.
func (fetchByName) MaxVersion() int16 { return 12 }
