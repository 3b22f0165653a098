package mirror

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
	replica "github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/record"
)

// StateTopic is the compacted internal topic holding mirror partition states (spec
// section 4).
const StateTopic = "__mirror_state"

// stateStore persists mirror partition states in __mirror_state. Records are keyed by
// (mirror name, topic ID, partition); the partition of a key is FNV-1a(key) mod the
// partition count. The value is a versioned JSON stateRecord; a nil value (tombstone)
// deletes the key.
type stateStore struct {
	local Local
}

// partitions is the partition count of __mirror_state, 0 while it does not exist.
func (s *stateStore) partitions() int32 {
	if t, ok := s.local.Metadata().Image().Topic(StateTopic); ok {
		return t.Partitions
	}
	return 0
}

// exists reports whether __mirror_state exists.
func (s *stateStore) exists() bool { return s.partitions() > 0 }

// ensure creates __mirror_state (cleanup.policy=compact, want partitions) when missing.
func (s *stateStore) ensure(ctx context.Context, want int32) error {
	if s.exists() {
		return nil
	}
	err := s.local.CreateTopic(ctx, StateTopic, metadata.NewTopicID(), want,
		map[string]string{"cleanup.policy": "compact"}, nil)
	if err != nil && !s.exists() { // another broker creating it at the same time is fine
		return fmt.Errorf("create %s: %w", StateTopic, err)
	}
	return nil
}

// partitionFor is the partition of __mirror_state that holds key, −1 when the topic does
// not exist.
func (s *stateStore) partitionFor(key []byte) int32 {
	n := s.partitions()
	if n == 0 {
		return -1
	}
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(n))
}

// write appends the record for k (nil r = tombstone).
func (s *stateStore) write(k stateKey, r *stateRecord) error {
	key := k.encode()
	var val []byte
	if r != nil {
		val = encodeStateRecord(r)
	}
	p := s.partitionFor(key)
	if p < 0 {
		return fmt.Errorf("%s does not exist", StateTopic)
	}
	log, err := s.local.Log(StateTopic, p)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	b := record.Build(record.BatchHeader{
		Timestamp: now, ProducerID: record.NoProducerID, ProducerEpoch: -1, BaseSequence: record.NoSequence,
	}, []record.KV{{Key: key, Value: val}})
	epoch := log.LeaderEpoch()
	_, err = log.AppendAsLeader(b, epoch, now)
	return err
}

// load reads every partition of __mirror_state and returns the latest record per key
// (tombstoned keys absent).
func (s *stateStore) load() (map[stateKey]*stateRecord, error) {
	out := map[stateKey]*stateRecord{}
	for p := int32(0); p < s.partitions(); p++ {
		log, err := s.local.Log(StateTopic, p)
		if errors.Is(err, replica.ErrNotLeader) {
			continue // another broker coordinates it
		}
		if err != nil {
			return nil, err
		}
		off, end := log.LogStartOffset(), log.LogEndOffset()
		for off < end {
			data, err := log.Read(off, 1<<20, end, true)
			if err != nil {
				return nil, fmt.Errorf("read %s-%d at %d: %w", StateTopic, p, off, err)
			}
			if len(data) == 0 {
				break
			}
			next := off
			for len(data) > 0 {
				b, rest, err := record.Next(data)
				if err != nil {
					break
				}
				data = rest
				next = b.NextOffset()
				if b.IsControl() {
					continue
				}
				recs, err := batchRecords(b)
				if err != nil {
					return nil, fmt.Errorf("%s-%d at %d: %w", StateTopic, p, b.BaseOffset(), err)
				}
				for _, r := range recs {
					k, err := decodeStateKey(r.Key)
					if err != nil {
						continue
					}
					if r.Value == nil {
						delete(out, k)
						continue
					}
					v, err := decodeStateRecord(r.Value)
					if err != nil {
						continue
					}
					out[k] = v
				}
			}
			if next <= off {
				break
			}
			off = next
		}
	}
	return out, nil
}

// batchRecords decodes the records of an uncompressed batch written by this package.
func batchRecords(b record.Batch) ([]kmsg.Record, error) {
	if b.Compression() != 0 {
		return nil, errors.New("compressed mirror state batch")
	}
	raw := b.Records()
	n := int(b.RecordCount())
	out := make([]kmsg.Record, 0, n)
	for i := 0; i < n; i++ {
		length, used := binary.Varint(raw)
		if used <= 0 || length < 0 || int(length) > len(raw)-used {
			return nil, errors.New("truncated record")
		}
		total := used + int(length)
		var r kmsg.Record
		if err := r.ReadFrom(raw[:total]); err != nil {
			return nil, err
		}
		out = append(out, r)
		raw = raw[total:]
	}
	return out, nil
}
