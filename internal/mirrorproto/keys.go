// Package mirrorproto encodes and decodes the Cluster Mirroring admin and
// inter-broker RPCs of spec section 10 (KIP-1279), in the style of franz-go's
// kmsg: every request implements kmsg.Request and every response
// kmsg.Response, so a broker decodes them with ReadFrom and a client sends
// them with kgo.Client.Request.
//
// All RPCs are flexible (compact strings and arrays, tagged fields) from
// version 0; version 0 is the only version.
package mirrorproto

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// KeyOffset is added to the KIP-1279 prototype's API keys (94–106) to get the
// keys kmirror serves: Apache Kafka 4.4 has since given 93 and 94 to other
// requests (spec section 10).
const KeyOffset int16 = 1000

// ServedKey returns the API key kmirror serves an RPC at, given the key the
// KIP-1279 prototype gave it. It is the one place the offset is applied, so
// that the RPCs can later also be served at upstream's numbers.
func ServedKey(prototypeKey int16) int16 { return prototypeKey + KeyOffset }

// The table of prototype keys (spec section 10); 97 was unused.
const (
	protoCreateClusterMirror    int16 = 94
	protoStartMirrorTopics      int16 = 95
	protoStopMirrorTopics       int16 = 96
	protoListClusterMirrors     int16 = 98
	protoDescribeClusterMirrors int16 = 99
	protoReadMirrorStates       int16 = 100
	protoWriteMirrorStates      int16 = 101
	protoPauseMirrorTopics      int16 = 102
	protoResumeMirrorTopics     int16 = 103
	protoDeleteClusterMirror    int16 = 104
	protoBumpLeaderEpochs       int16 = 105
	protoRecoverMirrorTopics    int16 = 106
)

// PrototypeKeys maps each mirror RPC's name to the API key the KIP-1279
// prototype gave it. Served keys are ServedKey(PrototypeKeys[name]).
var PrototypeKeys = map[string]int16{
	"CreateClusterMirror":    protoCreateClusterMirror,
	"StartMirrorTopics":      protoStartMirrorTopics,
	"StopMirrorTopics":       protoStopMirrorTopics,
	"ListClusterMirrors":     protoListClusterMirrors,
	"DescribeClusterMirrors": protoDescribeClusterMirrors,
	"ReadMirrorStates":       protoReadMirrorStates,
	"WriteMirrorStates":      protoWriteMirrorStates,
	"PauseMirrorTopics":      protoPauseMirrorTopics,
	"ResumeMirrorTopics":     protoResumeMirrorTopics,
	"DeleteClusterMirror":    protoDeleteClusterMirror,
	"BumpLeaderEpochs":       protoBumpLeaderEpochs,
	"RecoverMirrorTopics":    protoRecoverMirrorTopics,
}

// API describes one served mirror RPC, for the broker's ApiVersions table and
// request dispatch.
type API struct {
	Name       string // RPC name as in the spec, e.g. "DescribeClusterMirrors"
	Key        int16  // served key (prototype key + KeyOffset)
	MinVersion int16  // always 0
	MaxVersion int16  // always 0
}

// APIs returns every served mirror RPC, ordered by key.
func APIs() []API {
	out := make([]API, 0, len(PrototypeKeys))
	for name, k := range PrototypeKeys {
		out = append(out, API{Name: name, Key: ServedKey(k)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// NewRequest returns an empty request (with its defaults set) for a served
// key, or nil if the key is not a mirror RPC. A broker calls SetVersion and
// ReadFrom on it.
func NewRequest(key int16) kmsg.Request {
	switch key - KeyOffset {
	case protoCreateClusterMirror:
		return new(CreateClusterMirrorRequest)
	case protoStartMirrorTopics:
		return NewStartMirrorTopicsRequest()
	case protoStopMirrorTopics:
		return NewStopMirrorTopicsRequest()
	case protoListClusterMirrors:
		return new(ListClusterMirrorsRequest)
	case protoDescribeClusterMirrors:
		return new(DescribeClusterMirrorsRequest)
	case protoReadMirrorStates:
		return new(ReadMirrorStatesRequest)
	case protoWriteMirrorStates:
		return new(WriteMirrorStatesRequest)
	case protoPauseMirrorTopics:
		return NewPauseMirrorTopicsRequest()
	case protoResumeMirrorTopics:
		return NewResumeMirrorTopicsRequest()
	case protoDeleteClusterMirror:
		return NewDeleteClusterMirrorRequest()
	case protoBumpLeaderEpochs:
		return new(BumpLeaderEpochsRequest)
	case protoRecoverMirrorTopics:
		return new(RecoverMirrorTopicsRequest)
	}
	return nil
}

// Versioned holds the version of a mirror request or response and gives it
// the version methods of kmsg.Request/kmsg.Response. Every mirror RPC has
// only version 0, flexible.
type Versioned struct {
	Version int16
}

// SetVersion sets the version to use.
func (v *Versioned) SetVersion(version int16) { v.Version = version }

// GetVersion returns the version in use.
func (v *Versioned) GetVersion() int16 { return v.Version }

// MaxVersion returns 0, the only version of every mirror RPC.
func (v *Versioned) MaxVersion() int16 { return 0 }

// IsFlexible returns true: mirror RPCs are flexible from version 0.
func (v *Versioned) IsFlexible() bool { return true }

// ClientVersions returns the version table a franz-go kgo client needs to
// send mirror RPCs: kversion.Stable() plus every served mirror key at
// version 0. Use it as kgo.MaxVersions(mirrorproto.ClientVersions()). With
// kgo's default table, kgo.Client.Request fails a mirror request locally
// with "request key is unknown"; with this table but a broker whose
// ApiVersions does not list the key, it fails locally with "broker is too
// old" (kgo v1.22); in neither case is anything written to the socket.
func ClientVersions() *kversion.Versions {
	vs := kversion.Stable()
	for _, a := range APIs() {
		vs.SetMaxKeyVersion(a.Key, a.MaxVersion)
	}
	return vs
}
