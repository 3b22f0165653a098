package wire

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionRange is the inclusive range of versions served for one API key.
type VersionRange struct{ Min, Max int16 }

// Versions is kmirror's version table: the APIs served and their version ranges. kmsg
// knows only maximum versions, so minimums follow Apache Kafka 4.x (which removed the
// oldest versions), kept low enough for the Java, librdkafka and franz-go clients of the
// last five years. Mirror RPCs (internal/mirrorproto) are added by the broker with
// Register. APIs not listed here (ACLs, KIP-848, share groups) are not
// advertised, so clients fall back or report them as unsupported.
type Versions struct {
	ranges map[int16]VersionRange
}

// DefaultVersions returns the table of standard Kafka APIs kmirror serves.
func DefaultVersions() *Versions {
	v := &Versions{ranges: map[int16]VersionRange{}}
	for key, r := range map[int16]VersionRange{
		0:  {3, 11}, // Produce (v12+ adds nothing clients need; v13 uses topic IDs)
		1:  {4, 16}, // Fetch (v13+ topic IDs, v12+ diverging epochs)
		2:  {1, 8},  // ListOffsets
		3:  {0, 12}, // Metadata
		8:  {2, 9},  // OffsetCommit
		9:  {1, 9},  // OffsetFetch
		10: {0, 4},  // FindCoordinator (v4 batched keys)
		11: {0, 9},  // JoinGroup
		12: {0, 4},  // Heartbeat
		13: {0, 5},  // LeaveGroup
		14: {0, 5},  // SyncGroup
		15: {0, 5},  // DescribeGroups
		16: {0, 5},  // ListGroups
		18: {0, 4},  // ApiVersions
		19: {2, 7},  // CreateTopics
		20: {1, 6},  // DeleteTopics
		21: {0, 2},  // DeleteRecords
		22: {0, 5},  // InitProducerId
		23: {2, 4},  // OffsetForLeaderEpoch
		24: {0, 3},  // AddPartitionsToTxn (client form; v4+ is the batched broker form)
		25: {0, 3},  // AddOffsetsToTxn
		26: {0, 3},  // EndTxn (v5 is KIP-890 part 2)
		28: {0, 3},  // TxnOffsetCommit (v5 is KIP-890 part 2)
		32: {1, 4},  // DescribeConfigs
		33: {0, 2},  // AlterConfigs
		37: {0, 3},  // CreatePartitions
		42: {0, 2},  // DeleteGroups
		44: {0, 1},  // IncrementalAlterConfigs
		47: {0, 0},  // OffsetDelete
		60: {0, 1},  // DescribeCluster
		61: {0, 0},  // DescribeProducers
		65: {0, 0},  // DescribeTransactions
		66: {0, 1},  // ListTransactions
	} {
		v.ranges[key] = r
	}
	return v
}

// NewVersions returns a table serving exactly ranges (a listener that serves other APIs
// than the broker's, such as the controller listener).
func NewVersions(ranges map[int16]VersionRange) *Versions {
	v := &Versions{ranges: map[int16]VersionRange{}}
	for k, r := range ranges {
		v.ranges[k] = r
	}
	return v
}

// Register adds or replaces the range served for key.
func (v *Versions) Register(key int16, r VersionRange) { v.ranges[key] = r }

// Lookup returns the range for key.
func (v *Versions) Lookup(key int16) (VersionRange, bool) {
	r, ok := v.ranges[key]
	return r, ok
}

// Supported reports whether key is served at version.
func (v *Versions) Supported(key, version int16) bool {
	r, ok := v.ranges[key]
	return ok && version >= r.Min && version <= r.Max
}

// APIKeys returns the table in ApiVersions response form, sorted by key.
func (v *Versions) APIKeys() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(v.ranges))
	for k, r := range v.ranges {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r.Min, MaxVersion: r.Max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}
