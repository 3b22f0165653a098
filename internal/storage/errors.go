package storage

import "errors"

// Errors returned by Log; each maps 1:1 to the Kafka error code of the same name.
var (
	// ErrOffsetOutOfRange is OFFSET_OUT_OF_RANGE: an offset below the log start offset or
	// above the LEO.
	ErrOffsetOutOfRange = errors.New("OFFSET_OUT_OF_RANGE: offset is outside the log")
	// ErrOutOfOrderSequence is OUT_OF_ORDER_SEQUENCE_NUMBER: a sequence gap for a known
	// producer, or a new producer epoch not starting at sequence 0.
	ErrOutOfOrderSequence = errors.New("OUT_OF_ORDER_SEQUENCE_NUMBER: out of order sequence number")
	// ErrInvalidProducerEpoch is INVALID_PRODUCER_EPOCH: the batch's producer epoch is
	// older than the producer's current epoch (fenced).
	ErrInvalidProducerEpoch = errors.New("INVALID_PRODUCER_EPOCH: producer epoch is fenced")
	// ErrCorrupt is CORRUPT_MESSAGE; it wraps the record package error that caused it.
	ErrCorrupt = errors.New("CORRUPT_MESSAGE: corrupt record batch")
	// ErrInvalidOffset rejects a follower append whose batch base offset is below the LEO
	// or below the end of the previous batch of the same append. Kafka has no wire code
	// for it (UnexpectedAppendOffsetException, a replica fetcher error); the mirror
	// fetcher treats it as a malformed fetch (spec section 3: partition to FAILED).
	ErrInvalidOffset = errors.New("INVALID_OFFSET: batch base offset is below the log end offset")
	// ErrClosed is returned by operations on a closed or deleted log (a topic deleted
	// while a request was reading it); the broker answers UNKNOWN_TOPIC_OR_PARTITION, as
	// Kafka does for a partition that is no longer hosted.
	ErrClosed = errors.New("storage: log is closed")
	// ErrTopicIDMismatch is returned by Manager.Open when the partition directory's
	// partition.metadata names another topic ID (a directory left by an earlier topic of
	// the same name).
	ErrTopicIDMismatch = errors.New("storage: partition directory belongs to another topic ID")
)
