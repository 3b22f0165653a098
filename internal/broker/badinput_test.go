package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/record"
)

// liveTraffic is a producer and a consumer that keep working on their own topic while
// bad input is thrown at the broker.
type liveTraffic struct {
	produced, consumed atomic.Int64
	mu                 sync.Mutex
	err                error
}

func (l *liveTraffic) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
}

func startLiveTraffic(t *testing.T, b *brokertest.Broker) *liveTraffic {
	createTopic(t, b.Client(), "live", 2, nil)
	l := &liveTraffic{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	p := b.Client(kgo.DefaultProduceTopic("live"), kgo.RequiredAcks(kgo.AllISRAcks()))
	c := b.Client(kgo.ConsumeTopics("live"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				l.fail(fmt.Errorf("live producer: %w", err))
				return
			}
			l.produced.Add(1)
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			fs := c.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachError(func(topic string, p int32, err error) { l.fail(fmt.Errorf("live consumer %s-%d: %w", topic, p, err)) })
			l.consumed.Add(int64(fs.NumRecords()))
		}
	}()
	return l
}

// progress asserts that the live producer and consumer both move forward and saw no
// error (polling with a generous deadline).
func (l *liveTraffic) progress(t *testing.T) {
	t.Helper()
	p0, c0 := l.produced.Load(), l.consumed.Load()
	deadline := time.Now().Add(30 * time.Second)
	for l.produced.Load() < p0+5 || l.consumed.Load() < c0+5 {
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("live traffic stalled: produced %d→%d, consumed %d→%d", p0, l.produced.Load(), c0, l.consumed.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// produceRaw sends a Produce v9 of one partition holding records and returns the
// partition's error code.
func produceRaw(t *testing.T, c *rawConn, topic string, records []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.request(req).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// stillServes asserts that a fresh connection gets an ApiVersions answer.
func stillServes(t *testing.T, b *brokertest.Broker) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
	if r := dialRaw(t, b.Addr()).request(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 || len(r.ApiKeys) == 0 {
		t.Fatalf("ApiVersions after bad input: error %d, %d keys", r.ErrorCode, len(r.ApiKeys))
	}
}

func validBatch() record.Batch {
	return record.Build(record.BatchHeader{Timestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.KV{{Key: []byte("k"), Value: []byte("some value")}, {Value: []byte("another")}})
}

// TestBadInput throws each kind of bad input at the broker while a producer and a
// consumer keep working: every case gets Kafka's error or a closed connection, the
// live traffic keeps going, and new connections are still served.
func TestBadInput(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"auto.create.topics.enable": "false"})
	live := startLiveTraffic(t, b)
	live.progress(t)
	createTopic(t, b.Client(), "target", 1, nil)
	rng := rand.New(rand.NewPCG(1, 2))

	cases := []struct {
		name string
		run  func(t *testing.T, c *rawConn)
	}{
		{"random bytes", func(t *testing.T, c *rawConn) {
			junk := make([]byte, 4096)
			for i := range junk {
				junk[i] = byte(rng.Uint32())
			}
			c.write(junk)
			c.nc.(*net.TCPConn).CloseWrite()
			c.expectClosed()
		}},
		{"random frame body", func(t *testing.T, c *rawConn) {
			junk := make([]byte, 1004)
			binary.BigEndian.PutUint32(junk, 1000)
			for i := 4; i < len(junk); i++ {
				junk[i] = byte(rng.Uint32())
			}
			c.write(junk)
			c.expectClosed()
		}},
		{"frame claiming 2 GiB", func(t *testing.T, c *rawConn) {
			c.write([]byte{0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 12})
			c.expectClosed()
		}},
		{"negative frame size", func(t *testing.T, c *rawConn) {
			c.write([]byte{0x80, 0, 0, 0, 0, 3, 0, 12})
			c.expectClosed()
		}},
		{"unknown API key", func(t *testing.T, c *rawConn) {
			c.write(frame(9999, 0, 1, false, nil))
			c.expectClosed()
		}},
		{"unsupported version", func(t *testing.T, c *rawConn) {
			c.write(frame(3, 99, 1, false, []byte{0, 0, 0, 0}))
			c.expectClosed()
		}},
		{"truncated body", func(t *testing.T, c *rawConn) {
			// Metadata v12 whose topic array claims more entries than the frame holds.
			c.write(frame(3, 12, 1, true, []byte{0x10}))
			c.expectClosed()
		}},
		{"bad CRC", func(t *testing.T, c *rawConn) {
			bt := validBatch()
			bt[len(bt)-1] ^= 0xff
			if code := produceRaw(t, c, "target", bt); code != kerr.CorruptMessage.Code {
				t.Fatalf("error %d, want CORRUPT_MESSAGE", code)
			}
		}},
		{"control batch from a client", func(t *testing.T, c *rawConn) {
			bt := record.Build(record.BatchHeader{Attributes: record.ControlBit, Timestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
				[]record.KV{{Key: record.ControlKey(0), Value: []byte{0, 0, 0, 0, 0, 0}}})
			if code := produceRaw(t, c, "target", bt); code != kerr.InvalidRecord.Code {
				t.Fatalf("error %d, want INVALID_RECORD", code)
			}
		}},
		{"two batches in one partition", func(t *testing.T, c *rawConn) {
			two := append(append([]byte{}, validBatch()...), validBatch()...)
			if code := produceRaw(t, c, "target", two); code != kerr.InvalidRecord.Code {
				t.Fatalf("error %d, want INVALID_RECORD", code)
			}
		}},
		{"missing topic with auto-creation off", func(t *testing.T, c *rawConn) {
			if code := produceRaw(t, c, "no-such-topic", validBatch()); code != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("error %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
			}
			md, err := kadm.NewClient(b.Client()).ListTopics(context.Background(), "no-such-topic")
			if err != nil || md["no-such-topic"].Err != kerr.UnknownTopicOrPartition {
				t.Fatalf("metadata for the missing topic: %v %v (auto-created?)", err, md["no-such-topic"].Err)
			}
		}},
		{"invalid config value", func(t *testing.T, c *rawConn) {
			adm := kadm.NewClient(b.Client())
			bad := "not-a-number"
			cr, err := adm.CreateTopics(context.Background(), 1, 1, map[string]*string{"retention.ms": &bad}, "badcfg")
			if err != nil || cr["badcfg"].Err != kerr.InvalidConfig {
				t.Fatalf("CreateTopics retention.ms=%s: %v %v", bad, err, cr["badcfg"].Err)
			}
			ar, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "cleanup.policy", Value: &bad}}, "target")
			if err != nil || len(ar) != 1 || ar[0].Err != kerr.InvalidConfig {
				t.Fatalf("IncrementalAlterConfigs cleanup.policy=%s: %v %+v", bad, err, ar)
			}
			// The good connection still answers after the refusals.
			if code := produceRaw(t, c, "target", validBatch()); code != 0 {
				t.Fatalf("valid produce after config refusals: error %d", code)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, dialRaw(t, b.Addr()))
			live.progress(t)
			stillServes(t, b)
		})
	}
}

// TestApiVersionsFallback: ApiVersions at versions 0–4 are answered in kind with the
// registry's table (apis.go), and an unknown version is answered as v0 with
// UNSUPPORTED_VERSION and the version table, as Kafka does, keeping the connection open.
func TestApiVersionsFallback(t *testing.T) {
	b := brokertest.Start(t, nil)
	want, _ := broker.ServedAPIs(b.Broker)
	c := dialRaw(t, b.Addr())
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
		r := c.request(req).(*kmsg.ApiVersionsResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("ApiVersions v%d: error %d", v, r.ErrorCode)
		}
		if got := apiRanges(r.ApiKeys); !slices.Equal(got, apiRanges(want)) {
			t.Fatalf("ApiVersions v%d answers %v; the registry serves %v", v, got, apiRanges(want))
		}
	}
	// v99, flexible header: the answer is a v0 body.
	c.write(frame(18, 99, 42, true, []byte{0, 0, 0}))
	corr, body, err := c.readFrame()
	if err != nil || corr != 42 {
		t.Fatalf("ApiVersions v99: %v, correlation %d", err, corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("v0 decoding of the v99 answer: %v", err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || !slices.Equal(apiRanges(resp.ApiKeys), apiRanges(want)) {
		t.Fatalf("ApiVersions v99: error %d, %d keys; want UNSUPPORTED_VERSION with the table", resp.ErrorCode, len(resp.ApiKeys))
	}
	// The connection stays usable.
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	if r := c.request(md).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
		t.Fatalf("Metadata after the fallback: %d brokers", len(r.Brokers))
	}
}

// apiRanges is an ApiVersions table as "key:min-max" strings.
func apiRanges(keys []kmsg.ApiVersionsResponseApiKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%d:%d-%d", k.ApiKey, k.MinVersion, k.MaxVersion))
	}
	return out
}
