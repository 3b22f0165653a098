package metadata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// fsm is the raft state machine: it applies record batches to the current image and
// publishes each new image atomically. Raft calls Apply and Restore from one goroutine.
type fsm struct {
	image atomic.Pointer[Image]
	log   *slog.Logger

	mu     sync.Mutex
	subs   []chan struct{}
	closed bool
}

func newFSM(log *slog.Logger) *fsm {
	f := &fsm{log: log}
	f.image.Store(emptyImage())
	return f
}

// Apply applies one raft log entry (one record batch). It returns the new *Image, or the
// error that rejected the whole batch (the image then stays as it was).
func (f *fsm) Apply(l *raft.Log) any {
	recs, err := decodeBatch(l.Data)
	if err != nil {
		f.log.Error("skipping undecodable metadata log entry", "index", l.Index, "err", err)
		return err
	}
	next, err := applyBatch(f.image.Load(), l.Index, recs)
	if err != nil {
		return err
	}
	f.image.Store(next)
	f.notify()
	return next
}

// Snapshot captures the current image; images are immutable, so no copy is needed.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return imageSnapshot{f.image.Load()}, nil
}

// Restore replaces the image by the one in a snapshot written by imageSnapshot.Persist.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s snapshotFile
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return fmt.Errorf("decode metadata snapshot: %w", err)
	}
	im, err := s.image()
	if err != nil {
		return err
	}
	f.image.Store(im)
	f.notify()
	return nil
}

func (f *fsm) subscribe() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{}, 1)
	if f.closed {
		close(ch)
		return ch
	}
	f.subs = append(f.subs, ch)
	return ch
}

// notify signals every subscriber without blocking; a pending signal absorbs new ones.
func (f *fsm) notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// closeSubs closes every subscriber channel; raft must be shut down first.
func (f *fsm) closeSubs() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	for _, ch := range f.subs {
		close(ch)
	}
	f.subs = nil
}

// snapshotVersion is the version of the snapshot encoding: 2 adds broker registrations,
// partition registrations and the next producer ID; version 1 snapshots (written before
// clusters) are read with every partition unassigned. The replication fields of a
// partition registration (adding and removing replicas, ELR, last-known ELR) were added
// to version 2 as optional fields: a snapshot written before them reads with them empty,
// as the log's records do (TestReplayLogBeforeReplication).
const snapshotVersion = 2

// snapshotFile is the JSON form of a whole image in a raft snapshot.
type snapshotFile struct {
	Version        int                          `json:"v"`
	Offset         uint64                       `json:"offset"`
	ClusterID      string                       `json:"clusterId"`
	Topics         []*Topic                     `json:"topics"`
	Mirrors        []*Mirror                    `json:"mirrors"`
	BrokerConfigs  map[string]string            `json:"brokerConfigs,omitempty"`
	NodeConfigs    map[string]map[string]string `json:"nodeConfigs,omitempty"`
	Brokers        []*BrokerRegistration        `json:"brokers,omitempty"`
	NextProducerID int64                        `json:"nextProducerId,omitempty"`
	// ACLs (added to version 2 as an optional field: older snapshots read with none).
	ACLs []*AccessControlEntryRecord `json:"acls,omitempty"`
	// ScramCredentials was added to version 2 as an optional field.
	ScramCredentials map[string]map[int8]*ScramCredential `json:"scramCredentials,omitempty"`
}

func (s *snapshotFile) image() (*Image, error) {
	if s.Version != 1 && s.Version != snapshotVersion {
		return nil, fmt.Errorf("decode metadata snapshot: unsupported version %d", s.Version)
	}
	im := emptyImage()
	im.Offset = s.Offset
	im.ClusterID = s.ClusterID
	im.NextProducerID = s.NextProducerID
	im.ScramCredentials = s.ScramCredentials
	for _, t := range s.Topics {
		if t.Partitions < 1 || (len(t.Registrations) != 0 && len(t.Registrations) != int(t.Partitions)) {
			return nil, fmt.Errorf("decode metadata snapshot: topic %q has %d partitions and %d registrations", t.Name, t.Partitions, len(t.Registrations))
		}
		if len(t.Registrations) == 0 {
			t.Registrations = unassigned(t.Partitions)
		}
		im.Topics[t.Name] = t
		im.TopicsByID[t.ID] = t
	}
	for _, b := range s.Brokers {
		im.Brokers[b.ID] = b
	}
	for _, m := range s.Mirrors {
		im.Mirrors[m.Name] = m
	}
	for _, a := range s.ACLs {
		im.ACLs[a.ID] = a
	}
	if s.BrokerConfigs != nil {
		im.BrokerConfigs = s.BrokerConfigs
	}
	if s.NodeConfigs != nil {
		im.NodeConfigs = s.NodeConfigs
	}
	return im, nil
}

// imageSnapshot writes one image as a snapshotFile.
type imageSnapshot struct{ im *Image }

func (s imageSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeSnapshot(sink, s.im); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (imageSnapshot) Release() {}

// writeSnapshot writes im to w as a snapshotFile.
func writeSnapshot(w io.Writer, im *Image) error {
	f := snapshotFile{
		Version:        snapshotVersion,
		Offset:         im.Offset,
		ClusterID:      im.ClusterID,
		BrokerConfigs:  im.BrokerConfigs,
		NodeConfigs:    im.NodeConfigs,
		NextProducerID: im.NextProducerID,

		ScramCredentials: im.ScramCredentials,
	}
	for _, id := range im.BrokerIDs() {
		f.Brokers = append(f.Brokers, im.Brokers[id])
	}
	for _, name := range im.TopicNames() {
		f.Topics = append(f.Topics, im.Topics[name])
	}
	for _, m := range im.Mirrors {
		f.Mirrors = append(f.Mirrors, m)
	}
	slices.SortFunc(f.Mirrors, func(a, b *Mirror) int { return strings.Compare(a.Name, b.Name) })
	for _, a := range im.ACLs {
		f.ACLs = append(f.ACLs, a)
	}
	slices.SortFunc(f.ACLs, func(a, b *AccessControlEntryRecord) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	if err := json.NewEncoder(w).Encode(&f); err != nil {
		return fmt.Errorf("write metadata snapshot: %w", err)
	}
	return nil
}
