package mirrorproto

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error codes of spec section 10, as kmirror's own mirror RPCs carry them:
// the KIP-1279 prototype's code + 1000. The prototype numbered them 134 and
// 136–146 (135 unused); Apache Kafka 4.4 has since given 134–136 to
// GROUP_DELETION_FAILED, STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED and
// CONTROLLER_ID_NOT_REGISTERED, hence the offset. Standard Kafka RPCs refuse
// with POLICY_VIOLATION (44) and a message starting with the name instead.
const (
	// ReadOnlyTopic (READ_ONLY_TOPIC): a write to a mirror topic that is not STOPPED.
	ReadOnlyTopic int16 = 1134
	// ClusterMirrorAlreadyExists (CLUSTER_MIRROR_ALREADY_EXISTS): create of an existing mirror name.
	ClusterMirrorAlreadyExists int16 = 1136
	// UnknownClusterMirror (UNKNOWN_CLUSTER_MIRROR): no mirror of that name.
	UnknownClusterMirror int16 = 1137
	// TopicAlreadyInClusterMirror (TOPIC_ALREADY_IN_CLUSTER_MIRROR): start of a topic another mirror owns.
	TopicAlreadyInClusterMirror int16 = 1138
	// TopicNotInClusterMirror (TOPIC_NOT_IN_CLUSTER_MIRROR): the topic is not a mirror topic of that mirror.
	TopicNotInClusterMirror int16 = 1139
	// MirrorTopicAlreadyPaused (MIRROR_TOPIC_ALREADY_PAUSED): pause of a PAUSED topic.
	MirrorTopicAlreadyPaused int16 = 1140
	// MirrorTopicNotPaused (MIRROR_TOPIC_NOT_PAUSED): resume of a topic that is not PAUSED.
	MirrorTopicNotPaused int16 = 1141
	// MirrorTopicBeingStopped (MIRROR_TOPIC_BEING_STOPPED): an operation refused while STOPPING.
	MirrorTopicBeingStopped int16 = 1142
	// ClusterMirrorNotEmpty (CLUSTER_MIRROR_NOT_EMPTY): delete of a mirror with topics not STOPPED.
	ClusterMirrorNotEmpty int16 = 1143
	// ClusterMirrorAuthorizationFailed (CLUSTER_MIRROR_AUTHORIZATION_FAILED): no right on the ClusterMirror resource.
	ClusterMirrorAuthorizationFailed int16 = 1144
	// InvalidClusterMirrorStates (INVALID_CLUSTER_MIRROR_STATES): the mirror state forbids the
	// operation, or moved since StateValidationOffset.
	InvalidClusterMirrorStates int16 = 1145
	// MirrorTopicNotStopped (MIRROR_TOPIC_NOT_STOPPED): the operation needs a STOPPED topic.
	MirrorTopicNotStopped int16 = 1146
)

// PrototypeErrorCodeOffset is added to the prototype's error codes to get
// the codes above.
const PrototypeErrorCodeOffset int16 = 1000

var errorNames = map[int16]string{
	ReadOnlyTopic:                    "READ_ONLY_TOPIC",
	ClusterMirrorAlreadyExists:       "CLUSTER_MIRROR_ALREADY_EXISTS",
	UnknownClusterMirror:             "UNKNOWN_CLUSTER_MIRROR",
	TopicAlreadyInClusterMirror:      "TOPIC_ALREADY_IN_CLUSTER_MIRROR",
	TopicNotInClusterMirror:          "TOPIC_NOT_IN_CLUSTER_MIRROR",
	MirrorTopicAlreadyPaused:         "MIRROR_TOPIC_ALREADY_PAUSED",
	MirrorTopicNotPaused:             "MIRROR_TOPIC_NOT_PAUSED",
	MirrorTopicBeingStopped:          "MIRROR_TOPIC_BEING_STOPPED",
	ClusterMirrorNotEmpty:            "CLUSTER_MIRROR_NOT_EMPTY",
	ClusterMirrorAuthorizationFailed: "CLUSTER_MIRROR_AUTHORIZATION_FAILED",
	InvalidClusterMirrorStates:       "INVALID_CLUSTER_MIRROR_STATES",
	MirrorTopicNotStopped:            "MIRROR_TOPIC_NOT_STOPPED",
}

// Name returns the Kafka error name of code: a mirror error above, else the
// standard name from franz-go's kerr ("NONE" for 0), else "UNKNOWN_ERROR_<code>".
func Name(code int16) string {
	if n, ok := errorNames[code]; ok {
		return n
	}
	if code == 0 {
		return "NONE"
	}
	if e := kerr.TypedErrorForCode(code); e != nil && (e != kerr.UnknownServerError || code == kerr.UnknownServerError.Code) {
		return e.Message
	}
	return fmt.Sprintf("UNKNOWN_ERROR_%d", code)
}

// CodeForName returns the mirror error code for a spec error name, and false
// for any other name.
func CodeForName(name string) (int16, bool) {
	for c, n := range errorNames {
		if n == name {
			return c, true
		}
	}
	return 0, false
}

// Error is a non-zero error code with its message, as returned by a mirror RPC.
type Error struct {
	Code    int16
	Message string // ErrorMessage from the response, may be empty
}

// Error renders "NAME: message" (or "NAME" without a message).
func (e *Error) Error() string {
	if e.Message == "" {
		return Name(e.Code)
	}
	return Name(e.Code) + ": " + e.Message
}

// ErrorFor returns nil for code 0, else an *Error with the message (nil
// message allowed).
func ErrorFor(code int16, message *string) error {
	if code == 0 {
		return nil
	}
	e := &Error{Code: code}
	if message != nil {
		e.Message = *message
	}
	return e
}
