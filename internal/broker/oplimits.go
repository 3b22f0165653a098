package broker

// Bounds on what one admin request may do, as Apache Kafka's controller bounds them
// (QuorumController.MAX_RECORDS_PER_USER_OP, ReplicationControlManager
// .MAX_PARTITIONS_PER_BATCH), and the file-descriptor budget of the partitions a request
// places on this broker (docs/broker.md, "Resource limits").

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/storage"
)

const (
	// maxRecordsPerUserOp is Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: the
	// metadata records one CreateTopics or CreatePartitions may write.
	maxRecordsPerUserOp = 10000
	// maxPartitionsPerBatch is Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH:
	// the partitions one CreateTopics may create.
	maxPartitionsPerBatch = 10000
)

// The messages Kafka answers with POLICY_VIOLATION: validateTotalNumberOfPartitions, and
// the controller's translation of BoundedListTooLongException.
const (
	msgTooManyPartitions = "Excessively large number of partitions per request."
	msgTooManyRecords    = "Unable to perform excessively large batch operation."
)

// errPartitionsNotOpened: partitions placed on this broker by a topic creation whose
// logs could not be opened (wrapping the cause); the creation was undone.
var errPartitionsNotOpened = errors.New("partitions could not be opened")

// localPartitions counts the replicas of assign (one replica list per partition) placed
// on this broker.
func (b *Broker) localPartitions(assign [][]int32) int {
	n := 0
	for _, replicas := range assign {
		for _, id := range replicas {
			if id == b.nodeID {
				n++
			}
		}
	}
	return n
}

// checkFileBudget fails with *storage.ErrFileLimit (logged at ERROR) when opening the
// partitions of assign placed here would leave too few file descriptors (one segment
// each).
func (b *Broker) checkFileBudget(topic string, assign [][]int32) error {
	n := b.localPartitions(assign)
	if n == 0 {
		return nil
	}
	err := storage.CheckFileBudget(fmt.Sprintf("creating %d partitions of topic %s on this broker", n, topic), n)
	if err != nil {
		b.logger.Error("refusing to create partitions: too few file descriptors", "topic", topic, "partitions", n, "err", err)
	}
	return err
}

// storageFailure maps the errors of createTopic and CreatePartitions that are the log
// directory's (descriptor budget, partitions that could not be opened) to
// KAFKA_STORAGE_ERROR; ok is false for other errors.
func storageFailure(err error) (e *kerr.Error, ok bool) {
	var fl *storage.ErrFileLimit
	if errors.As(err, &fl) || errors.Is(err, errPartitionsNotOpened) {
		return kerr.KafkaStorageError, true
	}
	return nil, false
}
