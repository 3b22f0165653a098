// Package kafka holds the value types every layer of kmirror shares, as Apache Kafka's
// org.apache.kafka.common does: a partition named by topic name, or by topic ID.
package kafka

import "strconv"

// TopicPartition names one partition by topic name (Kafka's TopicPartition). It is
// comparable and is the map key of every per-partition table.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is "topic-partition", Kafka's spelling (and the partition's log directory name).
func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.Itoa(int(tp.Partition))
}

// TopicIDPartition names one partition by topic ID and name (Kafka's TopicIdPartition).
// Requests that carry only one of the two (Fetch before v13 names topics, v13+ sends IDs)
// leave the other zero.
type TopicIDPartition struct {
	TopicID   [16]byte
	Topic     string
	Partition int32
}
