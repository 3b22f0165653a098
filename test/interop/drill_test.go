package interop

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/drill"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// drillValues reads every record value of topic at addr (control records skipped).
func drillValues(t *testing.T, ctx context.Context, addr, topic string) map[string]bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out, next := map[string]bool{}, map[int32]int64{}
	for {
		done := true
		for p, lo := range ends[topic] {
			done = done && next[p] >= lo.Offset
		}
		if done {
			return out
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s at %s: %v", topic, addr, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out[string(r.Value)] = true
			}
		})
	}
}

// TestDrillFromApacheKafka runs `kmirror drill`'s drill with an Apache Kafka source and a
// kmirror destination: the report's RPO equals the records on the source missing on the
// destination, counted here from both topics (kept); a second drill leaves its topic on
// neither cluster.
func TestDrillFromApacheKafka(t *testing.T) {
	src := kafkaSource(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dst := brokertest.Start(t, nil)
	resp, err := dst.Client(kgo.MaxVersions(mirrorproto.ClientVersions())).Request(ctx, &mirrorproto.CreateClusterMirrorRequest{MirrorName: "drill-from-kafka",
		Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: src.Addr}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*mirrorproto.CreateClusterMirrorResponse); r.ErrorCode != 0 {
		t.Fatal(mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage))
	}
	o := drill.Options{Source: []kgo.Opt{kgo.SeedBrokers(src.Addr)}, Destination: []kgo.Opt{kgo.SeedBrokers(dst.Addr())},
		Mirror: "drill-from-kafka", Topic: "drill-kafka-kept", Partitions: 3, Rate: 200, Duration: 2 * time.Second, Keep: true}
	rep, err := drill.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	onSrc, onDst := drillValues(t, ctx, src.Addr, o.Topic), drillValues(t, ctx, dst.Addr(), o.Topic)
	missing := 0
	for v := range onSrc {
		if !onDst[v] {
			missing++
		}
	}
	if rep.Acked != len(onSrc) || rep.Lost != missing || rep.Acked < 100 || !onDst["drill-first-write"] {
		t.Errorf("report %+v; counted: %d records on the source, %d of them missing on the destination", rep, len(onSrc), missing)
	}

	o.Topic, o.Keep = "drill-kafka-gone", false
	if _, err := drill.Run(ctx, o); err != nil {
		t.Fatal(err)
	}
	for side, addr := range map[string]string{"Apache Kafka source": src.Addr, "destination": dst.Addr()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		tds, err := kadm.NewClient(cl).ListTopics(ctx)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		if tds.Has(o.Topic) {
			t.Errorf("the %s still has %s after the drill", side, o.Topic)
		}
	}
}
