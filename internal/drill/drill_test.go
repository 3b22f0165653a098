package drill_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/drill"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// values reads every record value of topic on b.
func values(t *testing.T, ctx context.Context, b *brokertest.Broker, topic string) map[string]bool {
	t.Helper()
	adm := kadm.NewClient(b.Client())
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	out := map[string]bool{}
	next := map[int32]int64{}
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
			t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				out[string(r.Value)] = true
			}
		})
	}
}

// TestDrillBetweenKmirrorClusters runs the drill between two kmirror brokers: with --keep
// the report's RPO equals the records on the source missing on the destination, counted
// here by reading both topics; without it the drill topic is gone from both afterwards.
func TestDrillBetweenKmirrorClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src := brokertest.Start(t, nil)
	dst := brokertest.Start(t, nil)
	resp, err := dst.Client(kgo.MaxVersions(mirrorproto.ClientVersions())).Request(ctx, &mirrorproto.CreateClusterMirrorRequest{MirrorName: "dr",
		Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: src.Addr()}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*mirrorproto.CreateClusterMirrorResponse); r.ErrorCode != 0 {
		t.Fatal(mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage))
	}
	opts := func(b *brokertest.Broker) []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(b.Addr())} }
	o := drill.Options{Source: opts(src), Destination: opts(dst), Mirror: "dr", Topic: "drill-kept", Partitions: 3, Rate: 200, Duration: 2 * time.Second, Keep: true}
	rep, err := drill.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	onSrc, onDst := values(t, ctx, src, o.Topic), values(t, ctx, dst, o.Topic)
	missing := 0
	for v := range onSrc {
		if !onDst[v] {
			missing++
		}
	}
	if rep.Acked != len(onSrc) || rep.Lost != missing || rep.Acked < 100 {
		t.Errorf("report: acked %d lost %d; counted: %d records on the source, %d of them missing on the destination", rep.Acked, rep.Lost, len(onSrc), missing)
	}
	if !onDst["drill-first-write"] || rep.StopToWrite <= 0 {
		t.Errorf("no first write on the destination: %+v", rep)
	}
	if rep.Consumed == 0 || rep.Duplicates > rep.Consumed {
		t.Errorf("group: %+v", rep)
	}
	for v := range onDst {
		if _, err := strconv.Atoi(v); err != nil && v != "drill-first-write" {
			t.Errorf("unexpected record %q on the destination", v)
		}
	}

	o.Topic, o.Keep = "drill-gone", false
	if _, err := drill.Run(ctx, o); err != nil {
		t.Fatal(err)
	}
	for side, b := range map[string]*brokertest.Broker{"source": src, "destination": dst} {
		tds, err := kadm.NewClient(b.Client()).ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tds.Has(o.Topic) {
			t.Errorf("%s still has %s after the drill", side, o.Topic)
		}
	}
}
