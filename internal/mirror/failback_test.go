package mirror

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// kbroker is a real kmirror broker (internal/broker) running this package's Manager.
type kbroker struct {
	t     *testing.T
	props map[string]string
	b     *broker.Broker
	m     *Manager
	done  chan struct{}
	// wrap, when set, is what the broker runs in place of m (a test's look at the broker
	// before the manager starts)
	wrap func(local *broker.Broker, m *Manager) broker.Mirrors
}

func startBroker(t *testing.T) *kbroker { t.Helper(); return startBrokerWith(t, nil) }

// startBrokerWith is startBroker with extra broker configs.
func startBrokerWith(t *testing.T, extra map[string]string) *kbroker {
	t.Helper()
	kb := &kbroker{t: t, props: map[string]string{
		"listeners":                         "PLAINTEXT://127.0.0.1:0",
		"log.dirs":                          t.TempDir(),
		"offsets.topic.num.partitions":      "2",
		"mirror.state.topic.num.partitions": "3",
		"group.initial.rebalance.delay.ms":  "0",
	}}
	for k, v := range extra {
		kb.props[k] = v
	}
	kb.start()
	t.Cleanup(kb.stop)
	return kb
}

func (kb *kbroker) start() {
	kb.t.Helper()
	cfg, err := config.NewValues(config.Broker, kb.props, false)
	if err != nil {
		kb.t.Fatal(err)
	}
	b, err := broker.New(cfg, testLogger(), func(local *broker.Broker, _ *config.Values, lg *slog.Logger) broker.Mirrors {
		kb.m = NewManager(Options{Local: local, Logger: testLogger(), Config: fastConfig()})
		if kb.wrap != nil {
			return kb.wrap(local, kb.m)
		}
		return kb.m
	})
	if err != nil {
		kb.t.Fatal(err)
	}
	kb.b = b
	kb.done = make(chan struct{})
	go func() { defer close(kb.done); b.Serve() }()
	kb.props["listeners"] = "PLAINTEXT://" + b.Addr()
}

func (kb *kbroker) stop() {
	if kb.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kb.b.Shutdown(ctx)
	<-kb.done
	kb.b = nil
}

func (kb *kbroker) client(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kb.b.Addr())}, opts...)...)
	if err != nil {
		kb.t.Fatal(err)
	}
	kb.t.Cleanup(cl.Close)
	return cl
}

func (kb *kbroker) env() *env { return &env{t: kb.t, m: kb.m} }

func (kb *kbroker) log(topic string, p int32) []batchAt {
	l, err := kb.b.Log(topic, p)
	if err != nil {
		kb.t.Fatal(err)
	}
	return localBatches(kb.t, l)
}

// TestFailback is the reference scenario of spec section 5 on two kmirror brokers: A
// holds 10 records mirrored to B; A takes 3 more that B never gets and goes down; B fails
// over and takes 5; A comes back, mirrors from B: it truncates its 3 divergent records,
// fetches only the delta and ends byte-identical to B; --stop on A makes it writable.
func TestFailback(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	ctx := context.Background()
	produceTo := func(kb *kbroker, n int, tag string) {
		t.Helper()
		cl := kb.client(kgo.DefaultProduceTopic("orders"), kgo.AllowAutoTopicCreation())
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", tag, i))}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", tag, err)
			}
		}
	}
	// a one-partition topic on A
	acl := a.client()
	createTopicOn(t, acl, "orders", 1)
	produceTo(a, 10, "a")

	eb := b.env()
	eb.createMirror("from-a", a.b.Addr())
	eb.startTopics("from-a", "orders")
	eb.waitCaughtUp(acl, "from-a", "orders")

	// B stops receiving; A takes 3 more records and goes down
	eb.pauseTopics("from-a", "orders")
	produceTo(a, 3, "a-divergent")
	a.stop()

	// failover on B, then new writes there
	eb.stopTopics("from-a", "orders")
	produceTo(b, 5, "b")
	bBatches := b.log("orders", 0)

	// A comes back and fails back from B
	a.start()
	ea := a.env()
	ea.createMirror("from-b", b.b.Addr())
	ea.startTopics("from-b", "orders")
	bcl := b.client()
	ea.waitCaughtUp(bcl, "from-b", "orders")

	sameBatches(t, "A after failback", bBatches, a.log("orders", 0))
	noHeldHW(t, a, "orders", 0, "after the failback")
	d := ea.describe("from-b", "orders")[0]
	if d.TruncatedOffset != 10 || d.TruncatedRecords != 3 {
		t.Fatalf("truncation report: %+v", d)
	}
	var delta int64
	for _, bt := range bBatches {
		if bt.offset >= 10 {
			delta += int64(len(bt.data))
		}
	}
	if p := a.m.partitionOf("orders", 0); p.bytesFetched.Load() != delta {
		t.Fatalf("A fetched %d bytes, the delta after the divergence point is %d", p.bytesFetched.Load(), delta)
	}
	// B sees A's mirror of its topic, which is the normal failback case, not a loop
	if ok, _ := a.m.CheckWrite("orders", 0, OpProduce); ok {
		t.Fatal("A must be read-only while mirroring from B")
	}
	ea.stopTopics("from-b", "orders")
	produceTo(a, 2, "a-again")
	if got := a.log("orders", 0); len(got) != len(bBatches)+2+1 { // + PID reset + 2 records
		t.Fatalf("A after its own failover: %d batches, want %d", len(got), len(bBatches)+3)
	}
}

func createTopicOn(t *testing.T, cl *kgo.Client, name string, partitions int32) {
	t.Helper()
	req := kmsgCreateTopic(name, partitions)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic %s: %v %+v", name, err, resp)
	}
}

// mirroredPair starts a source and a destination broker, creates the one-partition topic
// on the source with n records (values "0".."n-1") and mirrors it to the destination
// under mirror, started with start (the topic's name or a pattern), caught up.
func mirroredPair(t *testing.T, topic string, n int, mirror, start string) (src, dst *kbroker, scl *kgo.Client, ed *env) {
	t.Helper()
	src, dst = startBroker(t), startBroker(t)
	scl = src.client()
	createTopicOn(t, scl, topic, 1)
	produceN(t, scl, topic, 0, 0, n)
	ed = dst.env()
	ed.createMirror(mirror, src.b.Addr())
	ed.startTopics(mirror, start)
	ed.waitCaughtUp(scl, mirror, topic)
	return src, dst, scl, ed
}

func kmsgCreateTopic(name string, partitions int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	return req
}

// TestMirrorLoop: A mirrors from B while B mirrors the same topic from A: A's partition
// fails non-retryably in LOG_ALIGNMENT and A's log is left untouched. StartMirrorTopics
// refuses such a start (TestStartRefusesLoop), so A records the desired state directly,
// as two starts racing on both clusters would.
func TestMirrorLoop(t *testing.T) {
	a, b, _, _ := mirroredPair(t, "orders", 1, "from-a", "orders")
	ea := a.env()
	ea.createMirror("from-b", b.b.Addr())
	tt := a.b.Metadata().Image().Topics["orders"]
	st := &sourceTopic{name: "orders", id: tt.ID, partitions: make([]kmsg.MetadataResponseTopicPartition, tt.Partitions)}
	if err := a.m.startTopic(context.Background(), "from-b", st, nil); err != nil {
		t.Fatal(err)
	}
	a.m.reconcile()
	ea.waitState("from-b", "orders", mirrorproto.StateFailed)
	d := ea.describe("from-b", "orders")[0]
	if d.RetryAttempt != mirrorproto.RetryAttemptNonRetryable || d.ErrorMessage == nil || !strings.Contains(*d.ErrorMessage, "Mirror loop") {
		t.Fatalf("loop: %+v", d)
	}
	if d.DestinationOffset != 1 {
		t.Fatalf("A's log changed: LEO %d", d.DestinationOffset)
	}
	noHeldHW(t, a, "orders", 0, "FAILED in LOG_ALIGNMENT")
}

// noHeldHW fails the test when the HW of kb's topic-partition is held (the hold of
// LOG_ALIGNMENT on an untrusted log must be gone once the partition left that wait) or
// below the LEO.
func noHeldHW(t *testing.T, kb *kbroker, topic string, p int32, when string) {
	t.Helper()
	part, err := kb.m.local.Partition(topic, p)
	if err != nil {
		t.Fatal(err)
	}
	if part.HighWatermarkHeld() {
		t.Fatalf("%s-%d %s: HW still held", topic, p, when)
	}
	if hw, leo := part.Log().HighWatermark(), part.Log().LogEndOffset(); hw != leo {
		t.Fatalf("%s-%d %s: HW %d, LEO %d", topic, p, when, hw, leo)
	}
}
