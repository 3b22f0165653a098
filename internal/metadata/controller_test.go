package metadata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func open(t *testing.T, dir string, clusterID string) *Controller {
	t.Helper()
	c, err := Open(Options{Dir: dir, NodeID: 1, ClusterID: clusterID, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return c
}

func apply(t *testing.T, c *Controller, recs ...Record) *Image {
	t.Helper()
	im, err := c.Apply(context.Background(), recs...)
	if err != nil {
		t.Fatalf("Apply(%+v): %v", recs, err)
	}
	return im
}

func strp(s string) *string { return &s }

// cloneImage deep-copies an image through the snapshot encoding.
func cloneImage(t *testing.T, im *Image) *Image {
	t.Helper()
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, im); err != nil {
		t.Fatal(err)
	}
	f := newFSM(slog.New(slog.DiscardHandler))
	if err := f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	return f.image.Load()
}

func TestBootstrapClusterIDSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, "")
	id := c.Image().ClusterID
	if _, err := ParseTopicID(id); err != nil || len(id) != 22 {
		t.Fatalf("generated cluster ID %q: %v", id, err)
	}
	offset := c.Image().Offset
	if offset == 0 {
		t.Fatal("offset 0 after the ClusterRecord")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	c = open(t, dir, "")
	if got := c.Image(); got.ClusterID != id || got.Offset != offset {
		t.Fatalf("after reopen: cluster ID %q offset %d, want %q %d", got.ClusterID, got.Offset, id, offset)
	}
	c.Close()
	c = open(t, dir, id) // the same explicit ID is accepted
	c.Close()

	_, err := Open(Options{Dir: dir, NodeID: 1, ClusterID: "Ek1c5vPxT9ahIFVBRtd6Jw", Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("Open with another cluster ID: %v", err)
	}

	dir2 := t.TempDir()
	c = open(t, dir2, "Ek1c5vPxT9ahIFVBRtd6Jw")
	defer c.Close()
	if got := c.Image().ClusterID; got != "Ek1c5vPxT9ahIFVBRtd6Jw" {
		t.Fatalf("bootstrap with explicit cluster ID: got %q", got)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, "")
	_, err := Open(Options{Dir: dir, NodeID: 1, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second Open of an open log: %v", err)
	}
	c.Close()

	_, err = Open(Options{Dir: dir, NodeID: 2, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "not a voter") {
		t.Fatalf("Open with another node ID: %v", err)
	}
	if _, err := Open(Options{}); err == nil {
		t.Fatal("Open without Dir succeeded")
	}
}

// populate writes one of every record kind and returns the resulting image.
func populate(t *testing.T, c *Controller) *Image {
	t.Helper()
	ordersID, logsID, goneID := NewTopicID(), NewTopicID(), NewTopicID()
	apply(t, c,
		MirrorRecord{Name: "m1", Configs: map[string]string{"bootstrap.servers": "src:9092"}, SourceClusterID: "src-cluster", CreatedMs: 1700000000000},
		MirrorRecord{Name: "m2", Configs: map[string]string{"bootstrap.servers": "other:9092"}},
	)
	apply(t, c,
		TopicRecord{Name: "orders", ID: ordersID, Partitions: 3, Configs: map[string]string{"cleanup.policy": "compact"},
			Mirror: &MirrorTopic{MirrorName: "m1", Desired: DesiredMirroring, SourceTopicID: ordersID}},
		TopicRecord{Name: "logs", ID: logsID, Partitions: 1},
		TopicRecord{Name: "gone", ID: goneID, Partitions: 1},
		&TopicRecord{Name: "m2-topic", ID: NewTopicID(), Partitions: 2,
			Mirror: &MirrorTopic{MirrorName: "m2", Desired: DesiredStopped}},
	)
	apply(t, c, ConfigRecord{ResourceType: ResourceTopic, ResourceName: "logs", Name: "retention.ms", Value: strp("1000")})
	apply(t, c, ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Name: "cleanup.policy"}) // delete
	apply(t, c,
		ConfigRecord{ResourceType: ResourceBroker, Name: "log.retention.ms", Value: strp("5000")},
		ConfigRecord{ResourceType: ResourceBroker, Name: "num.io.threads", Value: strp("4")},
		ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Name: "log.cleaner.threads", Value: strp("2")},
		ConfigRecord{ResourceType: ResourceClusterMirror, ResourceName: "m1", Name: "fetch.min.bytes", Value: strp("10")},
	)
	apply(t, c, ConfigRecord{ResourceType: ResourceBroker, Name: "num.io.threads"}) // delete
	apply(t, c, PartitionCountRecord{Name: "orders", Partitions: 5})
	apply(t, c, RemoveTopicRecord{ID: goneID})
	apply(t, c, MirrorTopicRecord{Topic: "orders", Mirror: &MirrorTopic{MirrorName: "m1", Desired: DesiredPaused, SourceTopicID: ordersID}})
	im := apply(t, c, RemoveMirrorRecord{Name: "m2"})

	// Spot checks of the result.
	orders, _ := im.Topic("orders")
	if orders.Partitions != 5 || orders.Configs != nil || orders.Mirror.Desired != DesiredPaused || orders.ID != ordersID {
		t.Fatalf("orders = %+v (mirror %+v)", orders, orders.Mirror)
	}
	if logs, _ := im.Topic("logs"); logs.Configs["retention.ms"] != "1000" || logs.Mirror != nil {
		t.Fatalf("logs = %+v", logs)
	}
	if _, ok := im.Topic("gone"); ok {
		t.Fatal("removed topic still present")
	}
	if _, ok := im.TopicByID(goneID); ok {
		t.Fatal("removed topic still present by ID")
	}
	if m2t, _ := im.Topic("m2-topic"); m2t.Mirror != nil {
		t.Fatal("topic of a removed mirror still attached")
	}
	if !reflect.DeepEqual(im.BrokerConfigs, map[string]string{"log.retention.ms": "5000"}) {
		t.Fatalf("broker configs %v", im.BrokerConfigs)
	}
	if im.NodeConfigs["1"]["log.cleaner.threads"] != "2" {
		t.Fatalf("node configs %v", im.NodeConfigs)
	}
	if m1 := im.Mirrors["m1"]; m1.Configs["fetch.min.bytes"] != "10" || m1.SourceClusterID != "src-cluster" {
		t.Fatalf("m1 = %+v", m1)
	}
	if _, ok := im.Mirrors["m2"]; ok {
		t.Fatal("removed mirror still present")
	}
	if mt := im.MirrorTopics("m1"); len(mt) != 1 || mt[0].Name != "orders" {
		t.Fatalf("MirrorTopics(m1) = %v", mt)
	}
	if len(im.Topics) != len(im.TopicsByID) {
		t.Fatalf("%d topics by name, %d by ID", len(im.Topics), len(im.TopicsByID))
	}
	return im
}

func TestStateSurvivesReopen(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		name := "log"
		if snapshot {
			name = "snapshot+tail"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := open(t, dir, "")
			want := populate(t, c)
			if snapshot {
				if err := c.raft.Snapshot().Error(); err != nil {
					t.Fatalf("Snapshot: %v", err)
				}
				want = apply(t, c,
					TopicRecord{Name: "after-snapshot", ID: NewTopicID(), Partitions: 7},
					ConfigRecord{ResourceType: ResourceTopic, ResourceName: "logs", Name: "retention.ms", Value: strp("2000")},
				)
				snaps, err := os.ReadDir(filepath.Join(dir, "snapshots"))
				if err != nil || len(snaps) == 0 {
					t.Fatalf("no snapshot on disk: %v", err)
				}
			}
			want = cloneImage(t, want)
			c.Close()

			c = open(t, dir, "")
			defer c.Close()
			if got := c.Image(); !reflect.DeepEqual(got, want) {
				t.Fatalf("after reopen:\n got %+v\nwant %+v", got, want)
			}
			// The reopened log accepts new records on top.
			if _, err := c.Apply(context.Background(), PartitionCountRecord{Name: "logs", Partitions: 2}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestApplyErrors(t *testing.T) {
	c := open(t, t.TempDir(), "")
	defer c.Close()
	id := NewTopicID()
	apply(t, c,
		MirrorRecord{Name: "m"},
		TopicRecord{Name: "t", ID: id, Partitions: 2},
	)
	before := c.Image()

	cases := []struct {
		name string
		recs []Record
		want error
	}{
		{"topic name exists", []Record{TopicRecord{Name: "t", ID: NewTopicID(), Partitions: 1}}, ErrTopicExists},
		{"topic ID exists", []Record{TopicRecord{Name: "u", ID: id, Partitions: 1}}, ErrTopicExists},
		{"zero topic ID", []Record{TopicRecord{Name: "u", Partitions: 1}}, ErrInvalidRecord},
		{"zero partitions", []Record{TopicRecord{Name: "u", ID: NewTopicID()}}, ErrInvalidPartitions},
		{"mirror topic of unknown mirror", []Record{TopicRecord{Name: "u", ID: NewTopicID(), Partitions: 1,
			Mirror: &MirrorTopic{MirrorName: "nope", Desired: DesiredMirroring}}}, ErrUnknownMirror},
		{"partition decrease", []Record{PartitionCountRecord{Name: "t", Partitions: 1}}, ErrInvalidPartitions},
		{"partition count unchanged", []Record{PartitionCountRecord{Name: "t", Partitions: 2}}, ErrInvalidPartitions},
		{"partitions of unknown topic", []Record{PartitionCountRecord{Name: "x", Partitions: 3}}, ErrUnknownTopic},
		{"remove unknown topic", []Record{RemoveTopicRecord{ID: NewTopicID()}}, ErrUnknownTopic},
		{"config of unknown topic", []Record{ConfigRecord{ResourceType: ResourceTopic, ResourceName: "x", Name: "a", Value: strp("1")}}, ErrUnknownTopic},
		{"config of unknown mirror", []Record{ConfigRecord{ResourceType: ResourceClusterMirror, ResourceName: "x", Name: "a", Value: strp("1")}}, ErrUnknownMirror},
		{"config resource type", []Record{ConfigRecord{ResourceType: 3, ResourceName: "x", Name: "a"}}, ErrInvalidRecord},
		{"broker config name not an ID", []Record{ConfigRecord{ResourceType: ResourceBroker, ResourceName: "b", Name: "a"}}, ErrInvalidRecord},
		{"mirror exists", []Record{MirrorRecord{Name: "m"}}, ErrMirrorExists},
		{"remove unknown mirror", []Record{RemoveMirrorRecord{Name: "x"}}, ErrUnknownMirror},
		{"mirror topic unknown topic", []Record{MirrorTopicRecord{Topic: "x"}}, ErrUnknownTopic},
		{"mirror topic unknown mirror", []Record{MirrorTopicRecord{Topic: "t", Mirror: &MirrorTopic{MirrorName: "x", Desired: DesiredPaused}}}, ErrUnknownMirror},
		{"mirror topic zero desired state", []Record{MirrorTopicRecord{Topic: "t", Mirror: &MirrorTopic{MirrorName: "m"}}}, ErrInvalidRecord},
		{"second cluster ID", []Record{ClusterRecord{ClusterID: "x"}}, ErrInvalidRecord},
		{"batch is atomic", []Record{TopicRecord{Name: "ok", ID: NewTopicID(), Partitions: 1}, RemoveMirrorRecord{Name: "x"}}, ErrUnknownMirror},
		{"duplicate within a batch", []Record{TopicRecord{Name: "d", ID: NewTopicID(), Partitions: 1}, TopicRecord{Name: "d", ID: NewTopicID(), Partitions: 1}}, ErrTopicExists},
	}
	for _, tc := range cases {
		_, err := c.Apply(context.Background(), tc.recs...)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if c.Image() != before {
		t.Fatal("a rejected batch changed the image")
	}

	// Records that depend on earlier records of the same batch are fine.
	im := apply(t, c,
		MirrorRecord{Name: "m3"},
		TopicRecord{Name: "n", ID: NewTopicID(), Partitions: 1, Mirror: &MirrorTopic{MirrorName: "m3", Desired: DesiredMirroring}},
		PartitionCountRecord{Name: "n", Partitions: 4},
	)
	if n, _ := im.Topic("n"); n.Partitions != 4 || n.Mirror.MirrorName != "m3" {
		t.Fatalf("n = %+v", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Apply(ctx, MirrorRecord{Name: "late"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with a cancelled context: %v", err)
	}
	if _, ok := c.Image().Mirrors["late"]; ok {
		t.Fatal("Apply with a cancelled context proposed its records")
	}

	c.Close()
	if _, err := c.Apply(context.Background(), MirrorRecord{Name: "closed"}); !errors.Is(err, ErrNotController) {
		t.Fatalf("Apply after Close: %v", err)
	}
}

func TestSubscribe(t *testing.T) {
	c := open(t, t.TempDir(), "")
	sub := c.Subscribe()
	select {
	case <-sub:
		t.Fatal("signal before any Apply")
	default:
	}
	apply(t, c, MirrorRecord{Name: "a"})
	apply(t, c, MirrorRecord{Name: "b"})
	select {
	case <-sub:
	case <-time.After(10 * time.Second):
		t.Fatal("no signal after Apply")
	}
	select {
	case <-sub:
		t.Fatal("signals did not coalesce")
	default:
	}
	if _, ok := c.Image().Mirrors["b"]; !ok {
		t.Fatal("image after the signal lacks the applied record")
	}
	c.Close()
	if _, ok := <-sub; ok {
		t.Fatal("channel open after Close")
	}
	if _, ok := <-c.Subscribe(); ok {
		t.Fatal("Subscribe after Close returned an open channel")
	}
}

func TestImageImmutable(t *testing.T) {
	c := open(t, t.TempDir(), "")
	defer c.Close()
	old := populate(t, c)
	want := cloneImage(t, old)

	logs, _ := old.Topic("logs")
	apply(t, c,
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Name: "a", Value: strp("1")},
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "logs", Name: "retention.ms", Value: strp("9")},
		ConfigRecord{ResourceType: ResourceBroker, Name: "log.retention.ms", Value: strp("1")},
		ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Name: "log.cleaner.threads"},
		ConfigRecord{ResourceType: ResourceClusterMirror, ResourceName: "m1", Name: "fetch.min.bytes"},
		PartitionCountRecord{Name: "orders", Partitions: 9},
		MirrorTopicRecord{Topic: "orders", Mirror: &MirrorTopic{MirrorName: "m1", Desired: DesiredStopped}},
		TopicRecord{Name: "new", ID: NewTopicID(), Partitions: 1},
		MirrorRecord{Name: "m9"},
	)
	apply(t, c, RemoveTopicRecord{ID: logs.ID}, RemoveMirrorRecord{Name: "m1"})
	if !reflect.DeepEqual(old, want) {
		t.Fatalf("an earlier image changed:\n got %+v\nwant %+v", old, want)
	}
	now := c.Image()
	if n, _ := now.Topic("m2-topic"); n != old.Topics["m2-topic"] {
		t.Fatal("an unchanged topic was copied instead of shared")
	}
}

func TestBatchEncoding(t *testing.T) {
	id := NewTopicID()
	recs := []Record{
		ClusterRecord{ClusterID: "c"},
		&TopicRecord{Name: "t", ID: id, Partitions: 3, Configs: map[string]string{"a": "b"},
			Mirror: &MirrorTopic{MirrorName: "m", Desired: DesiredPaused, SourceTopicID: id}},
		PartitionCountRecord{Name: "t", Partitions: 4},
		RemoveTopicRecord{ID: id},
		ConfigRecord{ResourceType: ResourceClusterMirror, ResourceName: "m", Name: "x", Value: strp("")},
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "t", Name: "x"},
		MirrorRecord{Name: "m", Configs: map[string]string{"bootstrap.servers": "h:1"}, SourceClusterID: "s", CreatedMs: 5},
		RemoveMirrorRecord{Name: "m"},
		MirrorTopicRecord{Topic: "t"},
	}
	data, err := encodeBatch(recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]Record{}, recs...)
	want[1] = *recs[1].(*TopicRecord) // pointers come back as values
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, want)
	}
	for _, bad := range []string{`{"v":2,"records":[]}`, `{"v":1,"records":[{"type":"nope","data":{}}]}`, `not json`} {
		if _, err := decodeBatch([]byte(bad)); err == nil {
			t.Errorf("decodeBatch(%s) succeeded", bad)
		}
	}
}

func TestNewTopicID(t *testing.T) {
	seen := map[TopicID]bool{}
	for range 1000 {
		id := NewTopicID()
		s := TopicIDString(id)
		if id == (TopicID{}) || id == metadataTopicID || len(s) != 22 || s[0] == '-' || seen[id] {
			t.Fatalf("bad topic ID %s", s)
		}
		seen[id] = true
		if back, err := ParseTopicID(s); err != nil || back != id {
			t.Fatalf("ParseTopicID(%s) = %v, %v", s, back, err)
		}
	}
	if _, err := ParseTopicID("short"); err == nil {
		t.Fatal("ParseTopicID accepted a short string")
	}
	if DesiredPaused.String() != "PAUSED" || DesiredState(0).String() != "UNKNOWN(0)" {
		t.Fatal("DesiredState.String")
	}
}

func TestConcurrentApply(t *testing.T) {
	c := open(t, t.TempDir(), "")
	defer c.Close()
	const writers, topics = 4, 10
	errs := make(chan error, writers*topics)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range topics {
				// Every writer creates the same topics: exactly one create of each wins.
				_, err := c.Apply(context.Background(), TopicRecord{Name: fmt.Sprintf("t%d", i), ID: NewTopicID(), Partitions: int32(w + 1)})
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	var ok, exists int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrTopicExists):
			exists++
		default:
			t.Fatalf("Apply: %v", err)
		}
	}
	if im := c.Image(); ok != topics || exists != (writers-1)*topics || len(im.Topics) != topics || len(im.TopicsByID) != topics {
		t.Fatalf("%d created, %d refused, %d topics in the image", ok, exists, len(im.Topics))
	}
}
