package partition

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/record"
	"github.com/kmirror/kmirror/internal/storage"
)

const self = 1

// images builds successive metadata images by hand, offsets growing.
type images struct{ offset uint64 }

func (g *images) next(topics ...*metadata.Topic) *metadata.Image {
	g.offset++
	im := &metadata.Image{Offset: g.offset, Topics: map[string]*metadata.Topic{}, TopicsByID: map[metadata.TopicID]*metadata.Topic{}}
	for _, t := range topics {
		im.Topics[t.Name] = t
		im.TopicsByID[t.ID] = t
	}
	return im
}

func topic(name string, id metadata.TopicID, regs ...*metadata.PartitionRegistration) *metadata.Topic {
	return &metadata.Topic{Name: name, ID: id, Partitions: int32(len(regs)), Registrations: regs}
}

func reg(leader, epoch int32, replicas ...int32) *metadata.PartitionRegistration {
	return &metadata.PartitionRegistration{Replicas: replicas, ISR: replicas, Leader: leader, LeaderEpoch: epoch}
}

func newManager(t *testing.T, dir string, changes *[]Change) *ReplicaManager {
	t.Helper()
	logs, err := storage.OpenManager(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	return NewReplicaManager(Options{NodeID: self, Logs: logs,
		Config:   func(*metadata.Topic) storage.Config { return replicatedConfig() },
		OnChange: func(c Change) { *changes = append(*changes, c) }})
}

func names(ps []*Partition) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

func batch() record.Batch {
	return record.Build(record.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: 1}, []record.KV{{Key: []byte("k"), Value: []byte("v")}})
}

// TestApplyRoles applies the images of a topic's life to a broker that leads one
// partition, follows another and hosts nothing of a third: roles, leader epochs, writes
// refused to non-leaders, a leadership moving away and the topic's deletion.
func TestApplyRoles(t *testing.T) {
	dir := t.TempDir()
	var changes []Change
	rm := newManager(t, dir, &changes)
	var g images
	id := metadata.NewTopicID()
	if err := rm.Apply(g.next(topic("t", id, reg(self, 3, self), reg(2, 0, 2, self), reg(2, 0, 2)))); err != nil {
		t.Fatal(err)
	}
	p0, p1 := rm.Get("t", 0), rm.Get("t", 1)
	if p0 == nil || p1 == nil || rm.Get("t", 2) != nil {
		t.Fatalf("hosted: %v", names(rm.Partitions()))
	}
	if !p0.IsLeader() || p0.LeaderEpoch() != 3 || p1.IsLeader() {
		t.Fatalf("roles: p0 leader=%v epoch %d, p1 leader=%v", p0.IsLeader(), p0.LeaderEpoch(), p1.IsLeader())
	}
	if len(changes) != 1 || !slices.Equal(names(changes[0].Leaders), []string{"t-0"}) {
		t.Fatalf("changes %+v", changes)
	}
	if _, err := rm.Leader("t", 1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Leader of a followed partition: %v", err)
	}
	if _, err := rm.Leader("t", 2); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Leader of a partition hosted elsewhere: %v", err)
	}
	if _, err := rm.Leader("nope", 0); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("Leader of an unknown topic: %v", err)
	}
	if _, err := p1.AppendAsLeader(batch(), -1, false); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("append to a follower: %v", err)
	}
	info, err := p0.AppendAsLeader(batch(), -1, false)
	if err != nil || info.FirstOffset != 0 {
		t.Fatalf("append to the leader: %+v %v", info, err)
	}
	if e := p0.Log().EpochForOffset(0); e != 3 {
		t.Fatalf("batch stamped with epoch %d, want the registration's 3", e)
	}
	for _, tc := range []struct {
		epoch int32
		want  error
	}{{-1, nil}, {3, nil}, {2, ErrFencedLeaderEpoch}, {4, ErrUnknownLeaderEpoch}} {
		if err := p0.CheckLeader(tc.epoch); !errors.Is(err, tc.want) {
			t.Errorf("CheckLeader(%d): %v, want %v", tc.epoch, err, tc.want)
		}
	}

	// Leadership of partition 0 moves to broker 2; partition 1 comes here.
	changes = nil
	rm.Apply(g.next(topic("t", id, reg(2, 4, 2, self), reg(self, 1, 2, self), reg(2, 0, 2))))
	if p0.IsLeader() || !p1.IsLeader() || p1.LeaderEpoch() != 1 {
		t.Fatal("roles after the leadership moves")
	}
	if len(changes) != 1 || !slices.Equal(names(changes[0].Leaders), []string{"t-1"}) || !slices.Equal(names(changes[0].Resigned), []string{"t-0"}) {
		t.Fatalf("changes %+v", changes)
	}
	if err := p0.CheckLeader(-1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("CheckLeader on the old leader: %v", err)
	}

	// The topic is deleted: logs and directories go.
	rm.Apply(g.next())
	if len(rm.Partitions()) != 0 {
		t.Fatalf("hosted after delete: %v", names(rm.Partitions()))
	}
	if _, err := os.Stat(filepath.Join(dir, "t-0")); !os.IsNotExist(err) {
		t.Fatalf("t-0 directory after delete: %v", err)
	}
}

// TestAwaitLeader waits for a leadership that a later image brings, and stops waiting
// at once when an image gives it to another broker.
func TestAwaitLeader(t *testing.T) {
	var changes []Change
	rm := newManager(t, t.TempDir(), &changes)
	var g images
	id := metadata.NewTopicID()
	rm.Apply(g.next(topic("t", id, reg(metadata.NoLeader, 0, self))))
	done := make(chan error, 1)
	go func() {
		_, err := rm.AwaitLeader(context.Background(), "t", 0)
		done <- err
	}()
	rm.Apply(g.next(topic("t", id, reg(self, 1, self))))
	if err := <-done; err != nil {
		t.Fatalf("AwaitLeader: %v", err)
	}
	rm.Apply(g.next(topic("t", id, reg(2, 2, 2, self))))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := rm.AwaitLeader(ctx, "t", 0); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("AwaitLeader of a partition led elsewhere: %v", err)
	}
}

// TestOpenFailureLeavesNoState: a log that cannot be opened is left out (and reported),
// other partitions are served, and the next Apply opens it once the cause is gone.
func TestOpenFailureLeavesNoState(t *testing.T) {
	dir := t.TempDir()
	var changes []Change
	rm := newManager(t, dir, &changes)
	var g images
	id := metadata.NewTopicID()
	// a file where the partition directory must go
	if err := os.WriteFile(filepath.Join(dir, "t-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	im := g.next(topic("t", id, reg(self, 0, self), reg(self, 0, self)))
	if err := rm.Apply(im); err == nil {
		t.Fatal("Apply reported no error for a log that cannot be opened")
	}
	if rm.Get("t", 0) == nil || rm.Get("t", 1) != nil {
		t.Fatalf("hosted: %v", names(rm.Partitions()))
	}
	os.Remove(filepath.Join(dir, "t-1"))
	if err := rm.Apply(g.next(im.Topics["t"])); err != nil {
		t.Fatal(err)
	}
	if p := rm.Get("t", 1); p == nil || !p.IsLeader() {
		t.Fatal("t-1 not opened by the next Apply")
	}
}

// TestRecreatedTopicReplacesStaleDirectory: a directory holding another topic ID (the
// topic was deleted and recreated while the broker was down) is deleted and the new
// topic's log created.
func TestRecreatedTopicReplacesStaleDirectory(t *testing.T) {
	dir := t.TempDir()
	var changes []Change
	rm := newManager(t, dir, &changes)
	var g images
	rm.Apply(g.next(topic("t", metadata.NewTopicID(), reg(self, 0, self))))
	if _, err := rm.Get("t", 0).AppendAsLeader(batch(), -1, false); err != nil {
		t.Fatal(err)
	}
	rm.opts.Logs.Close()

	restarted := newManager(t, dir, &changes) // a restart after the topic was recreated
	if err := restarted.Apply(g.next(topic("t", metadata.NewTopicID(), reg(self, 0, self)))); err != nil {
		t.Fatal(err)
	}
	if p := restarted.Get("t", 0); p == nil || p.Log().LogEndOffset() != 0 {
		t.Fatal("the recreated topic did not get a fresh log")
	}
}

// TestDeleteStray deletes directories the image gives this broker no replica of, and
// keeps unassigned partitions (a release before clusters).
func TestDeleteStray(t *testing.T) {
	dir := t.TempDir()
	var changes []Change
	rm := newManager(t, dir, &changes)
	for _, d := range []string{"gone-0", "elsewhere-0", "mine-0", "old-0", "__cluster_metadata-0"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	var g images
	im := g.next(
		topic("elsewhere", metadata.NewTopicID(), reg(2, 0, 2)),
		topic("mine", metadata.NewTopicID(), reg(self, 0, self)),
		topic("old", metadata.NewTopicID(), &metadata.PartitionRegistration{Leader: metadata.NoLeader}),
	)
	if err := rm.DeleteStray(im, func(topic string) bool { return topic == "__cluster_metadata" }); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{"gone-0": false, "elsewhere-0": false, "mine-0": true, "old-0": true, "__cluster_metadata-0": true} {
		_, err := os.Stat(filepath.Join(dir, d))
		if got := err == nil; got != want {
			t.Errorf("%s exists: %v, want %v", d, got, want)
		}
	}
}
