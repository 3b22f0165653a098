package mirrorproto

import "fmt"

// State is a mirror partition state byte (spec section 4), as carried in
// DescribeClusterMirrors, ReadMirrorStates and WriteMirrorStates.
type State int8

// Mirror partition states (spec section 4).
const (
	StateUnknown      State = -1 // UNKNOWN: no state known yet (not a real state)
	StateLogAlignment State = 0  // LOG_ALIGNMENT: loop check, failback lookup, truncation
	StateEpochFencing State = 1  // EPOCH_FENCING: raising the local leader epoch so DLE ≥ SLE
	StateULERecovery  State = 2  // ULE_RECOVERY: recovering from an unclean leader election on the source
	StateMirroring    State = 3  // MIRRORING: fetcher running, topic read-only
	StatePausing      State = 4  // PAUSING: fetcher being removed after a pause request
	StatePaused       State = 5  // PAUSED: no fetching, no metadata sync, still read-only
	StateStopping     State = 6  // STOPPING: the failover sequence is running
	StateStopped      State = 7  // STOPPED: detached, an ordinary writable topic
	StateFailed       State = 8  // FAILED: an error; retried unless RetryAttempt is -1
)

var stateNames = [...]string{
	"LOG_ALIGNMENT", "EPOCH_FENCING", "ULE_RECOVERY", "MIRRORING", "PAUSING",
	"PAUSED", "STOPPING", "STOPPED", "FAILED",
}

// String returns the spec name of the state ("UNKNOWN" for -1), or
// "STATE(<n>)" for a byte outside the table.
func (s State) String() string {
	if s == StateUnknown {
		return "UNKNOWN"
	}
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("STATE(%d)", int8(s))
}

// ParseState returns the state named name (a spec name such as "MIRRORING").
func ParseState(name string) (State, bool) {
	if name == "UNKNOWN" {
		return StateUnknown, true
	}
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return StateUnknown, false
}

// ConfigResourceTypeClusterMirror is the DescribeConfigs /
// IncrementalAlterConfigs resource type of a cluster mirror's configuration
// (CLUSTER_MIRROR, spec section 10), 64 as in the KIP-1279 prototype. It does
// not collide with Apache Kafka's ConfigResource.Type values (UNKNOWN 0,
// TOPIC 2, BROKER 4, BROKER_LOGGER 8, CLIENT_METRICS 16, GROUP 32), nor with
// franz-go kmsg v1.15's ConfigResourceType enum.
const ConfigResourceTypeClusterMirror int8 = 64

// RetryAttemptNonRetryable is the RetryAttempt of a FAILED partition that is
// not retried (source topic deleted, source cluster ID changed, mirror loop).
const RetryAttemptNonRetryable int32 = -1

// DefaultMaxRetryAttempts is the default of mirror.failed.retry.max.attempts
// (spec section 11), used when a response does not report the broker's value.
const DefaultMaxRetryAttempts int32 = 20
