package mirror

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

func newKfake(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c, cl
}

func produce(t *testing.T, addrs []string, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%17)), Value: []byte(fmt.Sprintf("value-%d-%s", i, topic)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func TestByteIdentity(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(3, "orders"))
	addrs := c.ListenAddrs()
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	for i, codec := range codecs {
		produce(t, addrs, "orders", 400, kgo.ProducerBatchCompression(codec))
		if i%2 == 0 {
			produce(t, addrs, "orders", 100, kgo.ProducerBatchCompression(codec), kgo.DisableIdempotentWrite())
		}
	}
	e := newEnv(t)
	e.createMirror("m1", addrs[0])
	e.startTopics("m1", ".*")
	e.waitCaughtUp(src, "m1", "orders")

	im := e.local.Metadata().Image()
	lt, ok := im.Topic("orders")
	if !ok || lt.Mirror == nil || lt.Mirror.MirrorName != "m1" {
		t.Fatalf("orders is not a mirror topic: %+v", lt)
	}
	srcMeta := sourceTopicID(t, src, "orders")
	if lt.ID != srcMeta {
		t.Fatalf("topic IDs differ: source %x, destination %x", srcMeta, lt.ID)
	}
	for p := int32(0); p < 3; p++ {
		sameBatches(t, fmt.Sprintf("orders-%d", p), sourceBatches(t, src, "orders", p), localBatches(t, e.localLog("orders", p)))
	}
	// more data while mirroring continues
	produce(t, addrs, "orders", 300, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	e.waitCaughtUp(src, "m1", "orders")
	for p := int32(0); p < 3; p++ {
		sameBatches(t, fmt.Sprintf("orders-%d", p), sourceBatches(t, src, "orders", p), localBatches(t, e.localLog("orders", p)))
	}
	for _, d := range e.describe("m1", "orders") {
		if d.Lag != 0 || d.SourceOffset != d.DestinationOffset {
			t.Fatalf("partition %d: lag %d, source %d, destination %d", d.PartitionIndex, d.Lag, d.SourceOffset, d.DestinationOffset)
		}
	}
	if ok, msg := e.m.CheckWrite("orders", 0, OpProduce); ok || msg == "" {
		t.Fatalf("a MIRRORING topic must be read-only: ok=%v %q", ok, msg)
	}
	_ = mirrorproto.StateMirroring
}

func sourceTopicID(t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	src := &source{cl: cl}
	m, err := src.metadata(context.Background(), []string{topic})
	if err != nil || m.topics[topic] == nil {
		t.Fatalf("source metadata: %v", err)
	}
	return m.topics[topic].id
}
