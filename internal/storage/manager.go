package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kmirror/kmirror/internal/kafka"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Files of a Kafka log directory (LogManager, ReplicaManager and PartitionMetadataFile).
const (
	recoveryPointCheckpoint     = "recovery-point-offset-checkpoint"
	logStartCheckpoint          = "log-start-offset-checkpoint"
	replicationOffsetCheckpoint = "replication-offset-checkpoint"
	cleanerOffsetCheckpoint     = "cleaner-offset-checkpoint"
	cleanShutdownFile           = ".kafka_cleanshutdown"
	partitionMetadataFile       = "partition.metadata"
)

// Manager owns one log directory (Apache Kafka's LogManager): the partition logs in it,
// the recovery-point, log-start, high-watermark (replication-offset) and cleaner-offset
// checkpoints and the clean-shutdown marker.
type Manager struct {
	dir    string
	logger *slog.Logger

	mu          sync.Mutex
	logs        map[kafka.TopicPartition]*Log
	clean       bool                           // the previous shutdown was clean
	recoveryPts map[kafka.TopicPartition]int64 // from the checkpoint, used only after a clean shutdown
	// The log-start and high-watermark checkpoints as read at open: the starting values
	// of the logs opened, and the entries kept for partitions not opened in this run.
	logStarts     map[kafka.TopicPartition]int64
	hws           map[kafka.TopicPartition]int64
	cleanedTo     map[kafka.TopicPartition]int64 // cleaner-offset-checkpoint
	checkpointsMu sync.Mutex
	// Requests for and writes of log-start-offset-checkpoint (checkpointLogStarts):
	// logStartReqs counts requests, logStartsDone the requests the last write covered
	// (checkpointsMu).
	logStartReqs  atomic.Int64
	logStartsDone int64
	// brokerEpoch is written into the clean-shutdown marker (SetBrokerEpoch);
	// prevEpoch is the one read from it at open, −1 when none.
	brokerEpoch, prevEpoch int64
	health                 *dirHealth
}

// cleanShutdown is the content of the clean-shutdown marker (Kafka's
// CleanShutdownFileHandler): the broker epoch of the registration that shut down cleanly.
type cleanShutdown struct {
	Version     int   `json:"version"`
	BrokerEpoch int64 `json:"brokerEpoch"`
}

// OpenManager creates dir if needed and reads its checkpoints; partitions are opened
// later by Open. After a clean shutdown (the marker Close writes) logs are opened from
// their recovery points; otherwise every segment is recovered. An unreadable checkpoint
// is logged at WARN and ignored (an unreadable replication-offset-checkpoint starts every
// external high watermark at its log start, as a missing entry does in Kafka).
func OpenManager(dir string, logger *slog.Logger) (*Manager, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m := &Manager{dir: dir, logger: logger, logs: map[kafka.TopicPartition]*Log{}, brokerEpoch: -1, prevEpoch: -1,
		health: &dirHealth{dir: dir, logger: logger}}
	marker := filepath.Join(dir, cleanShutdownFile)
	m.clean = fileExists(marker)
	if data, err := os.ReadFile(marker); err == nil && len(data) > 0 {
		var cs cleanShutdown
		if json.Unmarshal(data, &cs) == nil {
			m.prevEpoch = cs.BrokerEpoch
		}
	}
	var err error
	if m.recoveryPts, err = readOffsetsCheckpoint(filepath.Join(dir, recoveryPointCheckpoint)); err != nil {
		logger.Warn("ignoring unreadable checkpoint", "err", err)
		m.clean = false
		m.recoveryPts = map[kafka.TopicPartition]int64{}
	}
	if m.logStarts, err = readOffsetsCheckpoint(filepath.Join(dir, logStartCheckpoint)); err != nil {
		logger.Warn("ignoring unreadable checkpoint", "err", err)
		m.logStarts = map[kafka.TopicPartition]int64{}
	}
	if m.hws, err = readOffsetsCheckpoint(filepath.Join(dir, replicationOffsetCheckpoint)); err != nil {
		logger.Warn("ignoring unreadable checkpoint", "err", err)
		m.hws = map[kafka.TopicPartition]int64{}
	}
	if m.cleanedTo, err = readOffsetsCheckpoint(filepath.Join(dir, cleanerOffsetCheckpoint)); err != nil {
		logger.Warn("ignoring unreadable checkpoint", "err", err)
		m.cleanedTo = map[kafka.TopicPartition]int64{}
	}
	if m.clean {
		if err := os.Remove(marker); err != nil {
			return nil, err
		}
		if err := syncDir(dir); err != nil {
			return nil, err
		}
	} else if len(m.recoveryPts) > 0 {
		logger.Warn("log directory was not shut down cleanly; recovering all segments", "dir", dir)
	}
	return m, nil
}

// partitionDir is <dir>/<topic>-<partition>.
func (m *Manager) partitionDir(tp kafka.TopicPartition) string {
	return filepath.Join(m.dir, tp.String())
}

// Open opens (recovering) or creates the log of topic/partition in
// <dir>/<topic>-<partition>. A new log gets partition.metadata ("version: 0" and the
// base64url topic ID, Kafka's PartitionMetadataFile); an existing one must carry the
// same topic ID. With cfg.ExternalHighWatermark the log's high watermark starts at its
// replication-offset-checkpoint entry clamped to [log start, LEO] (the log start without
// one), as Kafka's Partition.createLogIfNotExists does. Opening an already open partition
// returns it.
func (m *Manager) Open(topic string, partition int32, topicID [16]byte, cfg Config) (*Log, error) {
	tp := kafka.TopicPartition{Topic: topic, Partition: partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.logs[tp]; l != nil {
		if l.topicID != topicID {
			return nil, fmt.Errorf("storage: %s-%d is open with another topic ID", topic, partition)
		}
		return l, nil
	}
	dir := m.partitionDir(tp)
	metaPath := filepath.Join(dir, partitionMetadataFile)
	if data, err := os.ReadFile(metaPath); err == nil {
		id, err := parsePartitionMetadata(data)
		if err != nil {
			return nil, fmt.Errorf("storage: %s: %w", metaPath, err)
		}
		if id != topicID {
			return nil, fmt.Errorf("storage: %s holds topic ID %s, not %s: %w", metaPath, encodeTopicID(id), encodeTopicID(topicID), ErrTopicIDMismatch)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := WriteFileAtomic(metaPath, []byte("version: 0\ntopic_id: "+encodeTopicID(topicID)+"\n")); err != nil {
			return nil, err
		}
		if err := syncDir(m.dir); err != nil {
			return nil, err
		}
	}
	rp := int64(-1)
	if m.clean {
		if v, ok := m.recoveryPts[tp]; ok {
			rp = v
		}
	}
	ls, ok := m.logStarts[tp]
	if !ok {
		ls = -1
	}
	hw, ok := m.hws[tp]
	if !ok {
		hw = -1
	}
	if m.health.offline() {
		return nil, ErrLogDirOffline
	}
	l, err := openLog(dir, topicID, cfg, m.logger.With("topic", topic, "partition", partition), rp, ls, hw)
	if err != nil {
		return nil, err
	}
	l.health = m.health
	l.persistLogStart = m.checkpointLogStarts
	if ck, ok := m.cleanedTo[tp]; ok && ck <= l.LogEndOffset() {
		// Beyond the LEO (a tail lost since) the whole log is dirty again, as in
		// Kafka's LogCleanerManager.cleanableOffsets; Clean never starts below the log start.
		l.cleanedTo.Store(ck)
	}
	m.logs[tp] = l
	return l, nil
}

// encodeTopicID is Kafka's Uuid.toString: unpadded base64url.
func encodeTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func parsePartitionMetadata(data []byte) ([16]byte, error) {
	var id [16]byte
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || strings.TrimSpace(lines[0]) != "version: 0" || !strings.HasPrefix(lines[1], "topic_id: ") {
		return id, errors.New("malformed partition.metadata")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(strings.TrimPrefix(lines[1], "topic_id: ")))
	if err != nil || len(raw) != 16 {
		return id, errors.New("malformed topic_id in partition.metadata")
	}
	copy(id[:], raw)
	return id, nil
}

// Get returns the open log of topic/partition, or nil.
func (m *Manager) Get(topic string, partition int32) *Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.logs[kafka.TopicPartition{Topic: topic, Partition: partition}]
}

// Has reports whether the log of tp is open or its directory exists.
func (m *Manager) Has(tp kafka.TopicPartition) bool {
	m.mu.Lock()
	open := m.logs[tp] != nil
	m.mu.Unlock()
	return open || fileExists(m.partitionDir(tp))
}

// Delete closes the log of topic/partition and removes its directory (open or not).
func (m *Manager) Delete(topic string, partition int32) error {
	tp := kafka.TopicPartition{Topic: topic, Partition: partition}
	m.mu.Lock()
	l := m.logs[tp]
	delete(m.logs, tp)
	delete(m.recoveryPts, tp)
	delete(m.logStarts, tp)
	delete(m.hws, tp)
	delete(m.cleanedTo, tp)
	m.mu.Unlock()
	if l != nil {
		if err := l.Delete(); err != nil {
			return err
		}
	} else if err := os.RemoveAll(m.partitionDir(tp)); err != nil {
		return err
	}
	return syncDir(m.dir)
}

// Existing lists the partition directories (<topic>-<partition>) found in the log
// directory, sorted.
func (m *Manager) Existing() ([]kafka.TopicPartition, error) {
	ents, err := os.ReadDir(m.dir)
	if err != nil {
		return nil, err
	}
	var out []kafka.TopicPartition
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		i := strings.LastIndexByte(name, '-')
		if i <= 0 {
			continue
		}
		p, err := strconv.ParseInt(name[i+1:], 10, 32)
		if err != nil || p < 0 {
			continue
		}
		out = append(out, kafka.TopicPartition{Topic: name[:i], Partition: int32(p)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

func (m *Manager) openLogs() map[kafka.TopicPartition]*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[kafka.TopicPartition]*Log, len(m.logs))
	for tp, l := range m.logs {
		out[tp] = l
	}
	return out
}

// BackgroundConfig holds the periods of Manager.RunBackground in ms (broker configs);
// a non-positive period disables its task.
type BackgroundConfig struct {
	RetentionCheckMs          int64 // log.retention.check.interval.ms
	FlushCheckMs              int64 // log.flush.scheduler.interval.ms
	HighWatermarkCheckpointMs int64 // replica.high.watermark.checkpoint.interval.ms
	// ProducerExpirationCheckMs (producer.id.expiration.check.interval.ms) is how often
	// producers idle for ProducerExpirationMs (producer.id.expiration.ms) are removed.
	ProducerExpirationCheckMs int64
	ProducerExpirationMs      int64
}

// RunBackground runs, until ctx is done, the log directory's periodic tasks (Kafka's
// LogManager and ReplicaManager schedulers): retention, then the log-start checkpoint;
// time-based flushes; the high-watermark checkpoint (replication-offset-checkpoint); and
// the removal of expired producers.
func (m *Manager) RunBackground(ctx context.Context, c BackgroundConfig) {
	tick := func(ms int64) <-chan time.Time {
		if ms <= 0 {
			return nil
		}
		t := time.NewTicker(time.Duration(ms) * time.Millisecond)
		context.AfterFunc(ctx, t.Stop)
		return t.C
	}
	retention, flush := tick(c.RetentionCheckMs), tick(c.FlushCheckMs)
	hwCheckpoint, expiry := tick(c.HighWatermarkCheckpointMs), tick(c.ProducerExpirationCheckMs)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-retention:
			for tp, l := range m.openLogs() {
				if n, err := l.ApplyRetention(now.UnixMilli()); err != nil && !errors.Is(err, ErrClosed) {
					m.logger.Error("retention failed", "topic", tp.Topic, "partition", tp.Partition, "err", err)
				} else if n > 0 {
					m.logger.Info("deleted segments by retention", "topic", tp.Topic, "partition", tp.Partition,
						"segments", n, "logStartOffset", l.LogStartOffset())
				}
			}
			if err := m.writeCheckpoints(m.openLogs(), false); err != nil {
				m.health.fail(fmt.Errorf("writing checkpoints: %w", err))
			}
		case now := <-flush:
			for tp, l := range m.openLogs() {
				if err := l.maybeTimeFlush(now); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrLogDirOffline) {
					m.health.fail(fmt.Errorf("flushing %s-%d: %w", tp.Topic, tp.Partition, err))
				}
			}
		case <-hwCheckpoint:
			if err := m.checkpointHighWatermarks(m.openLogs()); err != nil {
				m.health.fail(fmt.Errorf("writing the high-watermark checkpoint: %w", err))
			}
		case now := <-expiry:
			for tp, l := range m.openLogs() {
				if n := l.RemoveExpiredProducers(now.UnixMilli(), c.ProducerExpirationMs); n > 0 {
					m.logger.Info("removed expired producer IDs", "topic", tp.Topic, "partition", tp.Partition, "producers", n)
				}
			}
		}
	}
}

// writeCheckpoints writes log-start-offset-checkpoint for logs and, when withRecovery is
// set (at Close, after every log is closed and so flushed), recovery-point-offset-checkpoint.
func (m *Manager) writeCheckpoints(logs map[kafka.TopicPartition]*Log, withRecovery bool) error {
	m.checkpointsMu.Lock()
	defer m.checkpointsMu.Unlock()
	if err := m.writeLogStarts(logs); err != nil {
		return err
	}
	if !withRecovery {
		return nil
	}
	var kept map[kafka.TopicPartition]int64
	if m.clean {
		kept = m.recoveryPts // otherwise stale: those logs were recovered in full
	}
	return m.writeOffsets(recoveryPointCheckpoint, kept, logs, func(l *Log) int64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.recoveryPoint
	})
}

// checkpointLogStarts writes log-start-offset-checkpoint with the log start of every
// open log as it is at the call or later, the way a log advancing its log start makes it
// durable (Kafka checkpoints it in LogManager.checkpointLogStartOffsetsInDir). Concurrent
// callers share one write: a caller whose request an in-progress write did not cover
// waits for the next, which covers every request made before it began.
func (m *Manager) checkpointLogStarts() error {
	req := m.logStartReqs.Add(1)
	m.checkpointsMu.Lock()
	defer m.checkpointsMu.Unlock()
	if m.logStartsDone >= req {
		return nil
	}
	if err := m.writeLogStarts(m.openLogs()); err != nil {
		m.health.fail(fmt.Errorf("writing the log start offset checkpoint: %w", err))
		return err
	}
	return nil
}

// writeLogStarts writes log-start-offset-checkpoint for logs (and the kept entries of
// the partitions not open). checkpointsMu held.
func (m *Manager) writeLogStarts(logs map[kafka.TopicPartition]*Log) error {
	covered := m.logStartReqs.Load() // every request made so far stored its log start before
	if err := m.writeOffsets(logStartCheckpoint, m.logStarts, logs, (*Log).LogStartOffset); err != nil {
		return err
	}
	m.logStartsDone = covered
	return nil
}

// checkpointCleanerOffsets writes cleaner-offset-checkpoint: each open log's first
// dirty offset, and the kept entries of the partitions not open (Kafka's
// LogCleanerManager.updateCheckpoints).
func (m *Manager) checkpointCleanerOffsets(logs map[kafka.TopicPartition]*Log) error {
	m.checkpointsMu.Lock()
	defer m.checkpointsMu.Unlock()
	return m.writeOffsets(cleanerOffsetCheckpoint, m.cleanedTo, logs, func(l *Log) int64 { return l.cleanedTo.Load() })
}

// checkpointHighWatermarks writes replication-offset-checkpoint, the high watermark of
// every log (Kafka's ReplicaManager.checkpointHighWatermarks).
func (m *Manager) checkpointHighWatermarks(logs map[kafka.TopicPartition]*Log) error {
	m.checkpointsMu.Lock()
	defer m.checkpointsMu.Unlock()
	return m.writeOffsets(replicationOffsetCheckpoint, m.hws, logs, (*Log).HighWatermark)
}

// writeOffsets writes the "<topic> <partition> <offset>" checkpoint name: value of each of
// logs, and the entries of kept for partitions not open in this run. checkpointsMu held.
func (m *Manager) writeOffsets(name string, kept map[kafka.TopicPartition]int64, logs map[kafka.TopicPartition]*Log, value func(*Log) int64) error {
	var lines []string
	m.mu.Lock()
	for tp, v := range kept {
		if logs[tp] == nil {
			lines = append(lines, fmt.Sprintf("%s %d %d", tp.Topic, tp.Partition, v))
		}
	}
	m.mu.Unlock()
	for tp, l := range logs {
		lines = append(lines, fmt.Sprintf("%s %d %d", tp.Topic, tp.Partition, value(l)))
	}
	sort.Strings(lines)
	return writeCheckpoint(filepath.Join(m.dir, name), lines)
}

// Close flushes and closes every log (each writing a producer snapshot at its LEO), then
// writes recovery-point-offset-checkpoint, log-start-offset-checkpoint,
// replication-offset-checkpoint and cleaner-offset-checkpoint and marks the directory cleanly shut down
// (.kafka_cleanshutdown), so the next OpenManager skips recovery.
func (m *Manager) Close() error {
	m.mu.Lock()
	logs := m.logs
	m.logs = map[kafka.TopicPartition]*Log{}
	m.mu.Unlock()
	var first error
	for _, l := range logs {
		if err := l.Close(); err != nil && first == nil {
			first = err
		}
	}
	if m.health.offline() {
		// nothing more is written: the next start recovers every segment
		return fmt.Errorf("log directory %s closed offline: %w", m.dir, ErrLogDirOffline)
	}
	if first != nil {
		return first
	}
	m.mu.Lock()
	for tp, l := range logs {
		m.logStarts[tp] = l.LogStartOffset()
		m.recoveryPts[tp] = l.recoveryPoint
		m.hws[tp] = l.HighWatermark()
	}
	m.mu.Unlock()
	if err := m.writeCheckpoints(logs, true); err != nil {
		return err
	}
	if err := m.checkpointHighWatermarks(logs); err != nil {
		return err
	}
	if err := m.checkpointCleanerOffsets(logs); err != nil {
		return err
	}
	marker, _ := json.Marshal(cleanShutdown{BrokerEpoch: m.brokerEpoch})
	return WriteFileAtomic(filepath.Join(m.dir, cleanShutdownFile), marker)
}

// SetBrokerEpoch records the broker epoch that Close writes into the clean-shutdown
// marker.
func (m *Manager) SetBrokerEpoch(epoch int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.brokerEpoch = epoch
}

// PreviousBrokerEpoch is the broker epoch the last clean shutdown recorded, −1 after an
// unclean one or none (Kafka's BrokerRegistration PreviousBrokerEpoch).
func (m *Manager) PreviousBrokerEpoch() int64 { return m.prevEpoch }

// readOffsetsCheckpoint reads a "<topic> <partition> <offset>" checkpoint file.
func readOffsetsCheckpoint(path string) (map[kafka.TopicPartition]int64, error) {
	lines, err := readCheckpoint(path, 3)
	if err != nil {
		return nil, err
	}
	out := make(map[kafka.TopicPartition]int64, len(lines))
	for _, f := range lines {
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: malformed line %v", path, f)
		}
		out[kafka.TopicPartition{Topic: f[0], Partition: int32(p)}] = o
	}
	return out, nil
}
