// Package upgrade proves that a data directory written by the release before clusters
// (one node, no partition assignments in its metadata, leader epochs raised in
// leader-epoch-fences, producer IDs in producer-id-block) starts on this release with every
// record, group offset and mirror state intact. The fixture is built by make-fixture.sh
// with that release's binary.
package upgrade

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/node"
	"github.com/kmirror/kmirror/internal/record"
)

const fixture = "testdata/single-node-da96d91"

// describedPartition is one entry of the fixture's `kmirror mirrors --describe --json`.
type describedPartition struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	DestinationOff   int64  `json:"destination_offset"`
	State            string `json:"state"`
	LastMirrorEpoch  int32  `json:"last_mirror_epoch"`
	LastMirrorOffset int64  `json:"last_mirror_offset"`
}

func TestUpgradeFromSingleNodeRelease(t *testing.T) {
	dir := t.TempDir()
	untar(t, fixture+".tar.gz", dir)
	var want []describedPartition
	data, err := os.ReadFile(fixture + ".describe.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	props := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir, "node.id": "1"}
	for start := 1; start <= 2; start++ { // the upgraded directory starts again the same
		b := startNode(t, props)
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("start %d", start)

		// the failed-over mirror topic: the mirrored records, the failover's marker, then
		// the writes made after it; its mirror states and last mirror positions
		for _, w := range want {
			if end := endOffset(t, cl, w.Topic, w.Partition); end < w.DestinationOff {
				t.Fatalf("%s: %s-%d ends at %d, the release had %d", what, w.Topic, w.Partition, end, w.DestinationOff)
			}
		}
		orders := consume(t, cl, "orders")
		if n := count(orders, "src-"); n != 30 {
			t.Fatalf("%s: %d mirrored records in orders, want 30", what, n)
		}
		if n := count(orders, "dst-"); n != 5 {
			t.Fatalf("%s: %d records written after the failover, want 5", what, n)
		}
		desc := describe(t, cl)
		for _, w := range want {
			got, ok := desc[fmt.Sprintf("%s-%d", w.Topic, w.Partition)]
			if !ok || got.State.String() != w.State || got.LastMirrorEpoch != w.LastMirrorEpoch || got.LastMirrorOffset != w.LastMirrorOffset {
				t.Fatalf("%s: mirror state of %s-%d: %+v, the release had %+v", what, w.Topic, w.Partition, got, w)
			}
		}
		// the failover raised the leader epochs (leader-epoch-fences): never lower now
		for p, epoch := range leaderEpochs(t, cl, "orders") {
			if epoch < 10 {
				t.Fatalf("%s: orders-%d has leader epoch %d, below the failover's 10", what, p, epoch)
			}
		}
		// the ordinary topic and its consumer group
		plain := consume(t, cl, "plain")
		if n := count(plain, "plain-"); n != 20 {
			t.Fatalf("%s: %d records in plain, want 20", what, n)
		}
		offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), "g1")
		if err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			if o, ok := offs.Lookup("plain", p); !ok || o.At != 7 {
				t.Fatalf("%s: group g1 committed %+v on plain-%d, want 7", what, o, p)
			}
		}
		// writable, and producer IDs continue after the release's block
		if start == 1 {
			prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("orders"))
			if err != nil {
				t.Fatal(err)
			}
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte("after-upgrade")}).FirstErr(); err != nil {
				t.Fatalf("produce after the upgrade: %v", err)
			}
			prod.Close()
		}
		init := kmsg.NewPtrInitProducerIDRequest()
		resp, err := init.RequestWith(context.Background(), cl)
		if err != nil || resp.ErrorCode != 0 || resp.ProducerID < 1000 {
			t.Fatalf("%s: InitProducerId after the upgrade: %+v %v (the release handed out IDs below 1000)", what, resp, err)
		}
		cl.Close()
		stopNode(t, b)
	}
}

func count(values []string, prefix string) int {
	n := 0
	for _, v := range values {
		if strings.HasPrefix(v, prefix) {
			n++
		}
	}
	return n
}

func startNode(t *testing.T, props map[string]string) *broker.Broker {
	t.Helper()
	cfg, err := config.NewValues(config.Broker, props, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := node.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("the release's data directory does not start: %v", err)
	}
	go b.Serve()
	props["listeners"] = "PLAINTEXT://" + b.Addr()
	return b
}

func stopNode(t *testing.T, b *broker.Broker) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b.Shutdown(ctx)
}

// consume reads the values of every record of topic from the start to the LEO, with raw
// Fetch requests (control batches skipped), partition after partition.
func consume(t *testing.T, cl *kgo.Client, topic string) []string {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ends.Each(func(o kadm.ListedOffset) {
		for off := int64(0); off < o.Offset; {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.ReplicaID, req.MaxBytes = 12, -1, 1<<20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = o.Partition, off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			kr, err := cl.Request(context.Background(), fetchByName{req})
			if err != nil {
				t.Fatal(err)
			}
			sp := kr.(*kmsg.FetchResponse).Topics[0].Partitions[0]
			if sp.ErrorCode != 0 || len(sp.RecordBatches) == 0 {
				t.Fatalf("fetch %s-%d at %d: error %d, %d bytes", topic, o.Partition, off, sp.ErrorCode, len(sp.RecordBatches))
			}
			for it := record.IterBatches(sp.RecordBatches); it.Next(); {
				b := it.Batch()
				off = b.NextOffset()
				if b.IsControl() {
					continue
				}
				for ri := record.IterRecords(b); ri.Next(); {
					out = append(out, string(ri.Record().Value))
				}
			}
		}
	})
	return out
}

// fetchByName caps a Fetch at version 12, the last addressing topics by name.
type fetchByName struct{ *kmsg.FetchRequest }

// MaxVersion returns 12.
func (fetchByName) MaxVersion() int16 { return 12 }

func endOffset(t *testing.T, cl *kgo.Client, topic string, p int32) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := ends.Lookup(topic, p)
	return o.Offset
}

func leaderEpochs(t *testing.T, cl *kgo.Client, topic string) map[int32]int32 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int32{}
	for _, mt := range resp.Topics {
		for _, mp := range mt.Partitions {
			out[mp.Partition] = mp.LeaderEpoch
		}
	}
	return out
}

func describe(t *testing.T, cl *kgo.Client) map[string]mirrorproto.DescribeClusterMirrorsResponsePartition {
	t.Helper()
	vcl, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.MaxVersions(mirrorproto.ClientVersions()))
	if err != nil {
		t.Fatal(err)
	}
	defer vcl.Close()
	kr, err := vcl.Request(context.Background(), &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: []string{"m1"}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mirrorproto.DescribeClusterMirrorsResponsePartition{}
	for _, m := range kr.(*mirrorproto.DescribeClusterMirrorsResponse).Mirrors {
		for _, tp := range m.Topics {
			for _, p := range tp.Partitions {
				out[fmt.Sprintf("%s-%d", tp.TopicName, p.PartitionIndex)] = p
			}
		}
	}
	return out
}

func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			w, err := os.Create(target)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatal(err)
			}
			w.Close()
		}
	}
}
