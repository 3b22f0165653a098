package metadata

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// metadataTopicID is Apache Kafka's Uuid.METADATA_TOPIC_ID (0, 1), reserved for
// __cluster_metadata.
var metadataTopicID = TopicID{15: 1}

// NewTopicID returns a random version-4 UUID as a topic ID, never the zero UUID, never
// Kafka's METADATA_TOPIC_ID and never one whose text form starts with '-', like Apache
// Kafka's Uuid.randomUuid.
func NewTopicID() TopicID {
	for {
		var id TopicID
		rand.Read(id[:])          // never returns an error: since Go 1.24 it crashes instead
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // IETF variant
		if id == (TopicID{}) || id == metadataTopicID || TopicIDString(id)[0] == '-' {
			continue
		}
		return id
	}
}

// TopicIDString returns the text form of a topic ID or cluster ID: 22 characters of
// base64url without padding, as Apache Kafka's Uuid.toString.
func TopicIDString(id TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// ParseTopicID parses the text form written by TopicIDString (Kafka's Uuid.fromString).
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("invalid topic ID %q: want 22 base64url characters", s)
	}
	copy(id[:], b)
	return id, nil
}

// newClusterID returns a random cluster ID in the form of kafka-storage random-uuid.
func newClusterID() string { return TopicIDString(NewTopicID()) }
