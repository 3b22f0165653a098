package mirror

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// allowedFrom lists, for each target state, the states it may be entered from (spec
// section 4, "Allowed transitions").
var allowedFrom = map[mirrorproto.State][]mirrorproto.State{
	mirrorproto.StateLogAlignment: {mirrorproto.StateUnknown, mirrorproto.StateStopped, mirrorproto.StateFailed},
	mirrorproto.StateEpochFencing: {mirrorproto.StateMirroring, mirrorproto.StateLogAlignment},
	mirrorproto.StateULERecovery:  {mirrorproto.StateMirroring},
	mirrorproto.StateMirroring: {mirrorproto.StateLogAlignment, mirrorproto.StateEpochFencing,
		mirrorproto.StateULERecovery, mirrorproto.StatePaused, mirrorproto.StateFailed, mirrorproto.StateMirroring},
	mirrorproto.StatePausing: {mirrorproto.StateMirroring},
	mirrorproto.StatePaused:  {mirrorproto.StatePausing},
	mirrorproto.StateStopped: {mirrorproto.StateStopping},
}

// transitionAllowed reports whether from → to is in the table of spec section 4.
func transitionAllowed(from, to mirrorproto.State) bool {
	switch to {
	case mirrorproto.StateFailed:
		return true // FAILED ← any
	case mirrorproto.StateStopping:
		return from != mirrorproto.StateStopped // every state but STOPPED
	}
	for _, s := range allowedFrom[to] {
		if s == from {
			return true
		}
	}
	return false
}

// stateRecord is the persisted state of one mirror partition in __mirror_state (spec
// section 4): the value of the record keyed by (mirror name, topic ID, partition).
type stateRecord struct {
	Version      int               `json:"version"`
	State        mirrorproto.State `json:"state"`
	PrevState    mirrorproto.State `json:"prevState"`
	StateEpoch   int32             `json:"stateEpoch"`
	LeaderEpoch  int32             `json:"leaderEpoch"`
	RetryAttempt int32             `json:"retryAttempt"`
	LastError    string            `json:"lastError,omitempty"`
	// LastMirrorEpoch and LastMirrorOffset are the last mirror position (spec section 5),
	// -1 when none was recorded.
	LastMirrorEpoch  int32 `json:"lastMirrorEpoch"`
	LastMirrorOffset int64 `json:"lastMirrorOffset"`
	// TruncatedOffset (-1 = none) and TruncatedRecords are the last LOG_ALIGNMENT
	// truncation report (spec section 15).
	TruncatedOffset  int64 `json:"truncatedOffset"`
	TruncatedRecords int64 `json:"truncatedRecords"`
	// SkippedOffsets counts offsets skipped because the source log start passed the
	// mirror position (spec section 16).
	SkippedOffsets int64 `json:"skippedOffsets"`
	// Aligned is true once LOG_ALIGNMENT completed and no local write can have happened
	// since (it turns false on STOPPED): then a restart needs no failback truncation.
	Aligned bool `json:"aligned"`
	// StopSourceHW is the source HW last known when the partition was stopped (−1 =
	// unknown): a STOPPED partition reports it as its source offset after a restart, so
	// that describe and the lag metric keep showing what the failover left unmirrored.
	StopSourceHW int64 `json:"stopSourceHW"`
	// StopFrom is the LEO when the running failover began (STOPPING entered; −1 none) and
	// StopEpoch the leader epoch its step 3 raised to (0 none): the log holds from StopFrom
	// on only that failover's markers (the topic is read-only and the fetcher stopped), so
	// a failover resumed after a timeout, an ISR below min.insync.replicas or a leadership
	// change writes only the markers still missing and raises the epoch once.
	StopFrom  int64 `json:"stopFrom"`
	StopEpoch int32 `json:"stopEpoch"`
}

const stateRecordVersion = 1

func newStateRecord() *stateRecord {
	return &stateRecord{
		Version: stateRecordVersion, State: mirrorproto.StateUnknown, PrevState: mirrorproto.StateUnknown,
		LastMirrorEpoch: -1, LastMirrorOffset: -1, TruncatedOffset: -1, StopSourceHW: -1, StopFrom: -1,
	}
}

// stateKey is the key of a __mirror_state record.
type stateKey struct {
	Mirror    string
	TopicID   metadata.TopicID
	Partition int32
}

const stateKeyVersion int16 = 0

// String names the key for logs and errors: mirror/topic ID/partition.
func (k stateKey) String() string {
	return fmt.Sprintf("%s/%s/%d", k.Mirror, metadata.TopicIDString(k.TopicID), k.Partition)
}

// encode returns the key bytes: version int16, mirror name (int16 length + bytes), topic
// ID (16 bytes), partition int32.
func (k stateKey) encode() []byte {
	b := make([]byte, 0, 2+2+len(k.Mirror)+16+4)
	b = binary.BigEndian.AppendUint16(b, uint16(stateKeyVersion))
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Mirror)))
	b = append(b, k.Mirror...)
	b = append(b, k.TopicID[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(k.Partition))
	return b
}

func decodeStateKey(b []byte) (stateKey, error) {
	var k stateKey
	if len(b) < 4 || int16(binary.BigEndian.Uint16(b)) != stateKeyVersion {
		return k, errors.New("bad mirror state key version")
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	if len(b) != 4+n+16+4 {
		return k, fmt.Errorf("bad mirror state key length %d", len(b))
	}
	k.Mirror = string(b[4 : 4+n])
	copy(k.TopicID[:], b[4+n:])
	k.Partition = int32(binary.BigEndian.Uint32(b[4+n+16:]))
	return k, nil
}

func encodeStateRecord(r *stateRecord) []byte {
	b, _ := json.Marshal(r)
	return b
}

func decodeStateRecord(b []byte) (*stateRecord, error) {
	r := newStateRecord()
	if err := json.Unmarshal(b, r); err != nil {
		return nil, err
	}
	if r.Version < 1 {
		return nil, fmt.Errorf("mirror state version %d unknown", r.Version)
	}
	return r, nil
}
