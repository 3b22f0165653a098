// Package storage is kmirror's partition log in Apache Kafka's on-disk layout
// (architecture section 3): a directory per partition holding segments named by their
// 20-digit base offset (.log, .index, .timeindex, .txnindex), leader-epoch-checkpoint,
// partition.metadata and, for raised and truncated leader epochs, kmirror's
// leader-epoch-fences and leader-epoch-truncations, plus the log directory's checkpoint
// files written by Manager.
//
// It follows Apache Kafka's UnifiedLog, LogSegment, LogLoader, ProducerStateManager and
// LeaderEpochFileCache. Batches are stored byte for byte; records are decoded only by
// OffsetForTimestamp and MaxTimestamp.
package storage

import (
	"math"
	"strings"
)

// Config holds per-log settings; field comments give the Kafka topic config names.
// Start from DefaultConfig: non-positive sizes, intervals and segment.ms take their
// defaults, but RetentionMs and RetentionBytes are used as given (0 deletes every
// inactive segment, −1 is unlimited).
type Config struct {
	SegmentBytes          int64 // segment.bytes, default 1 GiB
	SegmentMs             int64 // segment.ms, default 7 days
	RetentionMs           int64 // retention.ms, default 7 days; -1 = unlimited
	RetentionBytes        int64 // retention.bytes, default -1 (unlimited)
	IndexIntervalBytes    int32 // index.interval.bytes, default 4096
	SegmentIndexBytes     int32 // segment.index.bytes, default 10 MiB
	FlushIntervalMessages int64 // flush.messages, default MaxInt64 (rely on the OS)
	FlushIntervalMs       int64 // flush.ms, default MaxInt64

	// Log compaction (docs/compaction.md, Kafka's LogCleaner).
	CleanupPolicy          string  // cleanup.policy: "delete" (also when empty), "compact" or "compact,delete"
	DeleteRetentionMs      int64   // delete.retention.ms, default 1 day: how long tombstones survive
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio in [0, 1], default 0.5
	MinCompactionLagMs     int64   // min.compaction.lag.ms, default 0
	MaxCompactionLagMs     int64   // max.compaction.lag.ms, default MaxInt64

	// ExternalHighWatermark hands the high watermark to the log's owner, for a
	// replicated partition: it moves up only by Log.UpdateHighWatermark (the partition
	// layer's ISR rule, cluster.md §2) and by Kafka's clamps (truncation, log start), and
	// a log opened with it by Manager.Open starts at its replication-offset-checkpoint
	// entry. False, the zero value and DefaultConfig's: the HW follows the LEO (every
	// append, truncation and open sets HW = LEO), for logs used without a partition layer;
	// the broker opens every log with it set. Not a topic config.
	ExternalHighWatermark bool
}

// DefaultConfig returns Kafka's topic config defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * 3600 * 1000,
		RetentionMs:            7 * 24 * 3600 * 1000,
		RetentionBytes:         -1,
		IndexIntervalBytes:     4096,
		SegmentIndexBytes:      10 << 20,
		FlushIntervalMessages:  math.MaxInt64,
		FlushIntervalMs:        math.MaxInt64,
		CleanupPolicy:          "delete",
		DeleteRetentionMs:      24 * 3600 * 1000,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLagMs:     math.MaxInt64,
	}
}

// compact reports whether cleanup.policy includes compact.
func (c Config) compact() bool { return policyHas(c.CleanupPolicy, "compact") }

// deletes reports whether cleanup.policy includes delete (retention applies); an empty
// policy means delete.
func (c Config) deletes() bool {
	return strings.TrimSpace(c.CleanupPolicy) == "" || policyHas(c.CleanupPolicy, "delete")
}

func policyHas(list, p string) bool {
	for _, v := range strings.Split(list, ",") {
		if strings.TrimSpace(v) == p {
			return true
		}
	}
	return false
}

// sanitize replaces unusable values with defaults so that a bad config never panics.
func (c Config) sanitize() Config {
	d := DefaultConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	c.SegmentBytes = min(c.SegmentBytes, math.MaxInt32) // positions in .index are int32
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.SegmentIndexBytes < indexEntrySize*2 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.FlushIntervalMessages <= 0 {
		c.FlushIntervalMessages = d.FlushIntervalMessages
	}
	if c.FlushIntervalMs <= 0 {
		c.FlushIntervalMs = d.FlushIntervalMs
	}
	if c.DeleteRetentionMs < 0 {
		c.DeleteRetentionMs = d.DeleteRetentionMs
	}
	if c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1 {
		c.MinCleanableDirtyRatio = d.MinCleanableDirtyRatio
	}
	if c.MinCompactionLagMs < 0 {
		c.MinCompactionLagMs = 0
	}
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = d.MaxCompactionLagMs
	}
	return c
}
