// Package storage is kmirror's partition log in Apache Kafka's on-disk layout
// (architecture section 3): a directory per partition holding segments named by their
// 20-digit base offset (.log, .index, .timeindex, .txnindex), leader-epoch-checkpoint and
// partition.metadata, plus the log directory's checkpoint files written by Manager.
//
// It follows Apache Kafka's UnifiedLog, LogSegment, LogLoader, ProducerStateManager and
// LeaderEpochFileCache. Batches are stored byte for byte; records are decoded only by
// OffsetForTimestamp and MaxTimestamp.
package storage

import "math"

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
}

// DefaultConfig returns Kafka's topic config defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:          1 << 30,
		SegmentMs:             7 * 24 * 3600 * 1000,
		RetentionMs:           7 * 24 * 3600 * 1000,
		RetentionBytes:        -1,
		IndexIntervalBytes:    4096,
		SegmentIndexBytes:     10 << 20,
		FlushIntervalMessages: math.MaxInt64,
		FlushIntervalMs:       math.MaxInt64,
	}
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
	return c
}
