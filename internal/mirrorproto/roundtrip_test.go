package mirrorproto

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func sp(s string) *string { return &s }

var id1 = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
var id2 = [16]byte{0xff, 0xee, 1}

// Compile-time checks: every request and response is usable by kgo.
var (
	_ kmsg.Request  = (*CreateClusterMirrorRequest)(nil)
	_ kmsg.Response = (*CreateClusterMirrorResponse)(nil)
	_ kmsg.Request  = (*StartMirrorTopicsRequest)(nil)
	_ kmsg.Response = (*StartMirrorTopicsResponse)(nil)
	_ kmsg.Request  = (*StopMirrorTopicsRequest)(nil)
	_ kmsg.Response = (*StopMirrorTopicsResponse)(nil)
	_ kmsg.Request  = (*ListClusterMirrorsRequest)(nil)
	_ kmsg.Response = (*ListClusterMirrorsResponse)(nil)
	_ kmsg.Request  = (*DescribeClusterMirrorsRequest)(nil)
	_ kmsg.Response = (*DescribeClusterMirrorsResponse)(nil)
	_ kmsg.Request  = (*ReadMirrorStatesRequest)(nil)
	_ kmsg.Response = (*ReadMirrorStatesResponse)(nil)
	_ kmsg.Request  = (*WriteMirrorStatesRequest)(nil)
	_ kmsg.Response = (*WriteMirrorStatesResponse)(nil)
	_ kmsg.Request  = (*PauseMirrorTopicsRequest)(nil)
	_ kmsg.Response = (*PauseMirrorTopicsResponse)(nil)
	_ kmsg.Request  = (*ResumeMirrorTopicsRequest)(nil)
	_ kmsg.Response = (*ResumeMirrorTopicsResponse)(nil)
	_ kmsg.Request  = (*DeleteClusterMirrorRequest)(nil)
	_ kmsg.Response = (*DeleteClusterMirrorResponse)(nil)
	_ kmsg.Request  = (*BumpLeaderEpochsRequest)(nil)
	_ kmsg.Response = (*BumpLeaderEpochsResponse)(nil)
	_ kmsg.Request  = (*RecoverMirrorTopicsRequest)(nil)
	_ kmsg.Response = (*RecoverMirrorTopicsResponse)(nil)
)

type message interface {
	Key() int16
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}

func topicResults() []TopicResult {
	return []TopicResult{{Name: "orders", ErrorCode: 0}, {Name: "x", ErrorCode: TopicAlreadyInClusterMirror, ErrorMessage: sp("x is in m2")}}
}

var state1 = MirrorState{
	MirrorName: "m", TopicID: id1, Partition: 3, State: StateFailed, PreviousState: StateMirroring,
	StateEpoch: 7, LeaderEpoch: 4, RetryAttempt: -1, ErrorMessage: sp("The source topic is deleted."),
	LastMirrorEpoch: 12, LastMirrorOffset: 1 << 40,
}

// state2 carries kmirror's whole record (tagged field 0).
var state2 = MirrorState{
	MirrorName: "m", TopicID: id2, Partition: 1, State: StateStopped, PreviousState: StateStopping,
	StateEpoch: 9, LeaderEpoch: 11, LastMirrorEpoch: 5, LastMirrorOffset: 100, Record: []byte(`{"version":1,"state":7}`),
}

// roundTripCases fills every field, tagged ones included, of every type.
func roundTripCases() []message {
	descPart := NewDescribeClusterMirrorsResponsePartition(1)
	return []message{
		&CreateClusterMirrorRequest{MirrorName: "my-mirror", Config: []CreateClusterMirrorRequestConfig{{"bootstrap.servers", "a:9092"}, {"mirror.security.protocol", "PLAINTEXT"}}},
		&CreateClusterMirrorResponse{ThrottleTimeMs: 5, ErrorCode: ClusterMirrorAlreadyExists, ErrorMessage: sp("exists")},
		&CreateClusterMirrorResponse{},
		&StartMirrorTopicsRequest{MirrorName: "m", Topics: []StartMirrorTopicsRequestTopic{{id1, "orders", 6}, {TopicName: "b"}},
			IncludePatterns: []string{".*", "a.+"}, ExcludePatterns: []string{"__.*"}, StateValidationOffset: 42},
		NewStartMirrorTopicsRequest(),
		&StartMirrorTopicsRequest{MirrorName: "m", IncludePatterns: []string{}, StateValidationOffset: -1},
		&StartMirrorTopicsResponse{ThrottleTimeMs: 1, Topics: topicResults()},
		&StopMirrorTopicsRequest{MirrorName: "m", Topics: []TopicName{{"orders"}}, Patterns: []string{".*"}, StateValidationOffset: 0},
		NewStopMirrorTopicsRequest(),
		&StopMirrorTopicsResponse{ErrorCode: UnknownClusterMirror, ErrorMessage: sp("no mirror m")},
		&ListClusterMirrorsRequest{IncludeTopicNames: true},
		&ListClusterMirrorsResponse{Mirrors: []ListClusterMirrorsResponseMirror{
			{MirrorName: "m", SourceBootstrap: "src:9092", SourceClusterID: "abc", TopicCount: 2, TopicNames: []string{"a", "b"}},
			{MirrorName: "n", SourceBootstrap: "s2:9092"},
		}},
		&DescribeClusterMirrorsRequest{MirrorNames: []string{"m"}, IncludeAuthorizedOperations: true, ClusterID: sp("dest-cluster"),
			LastMirrorEpochLookups: []DescribeClusterMirrorsLookup{{TopicID: id1, Partitions: []int32{0, 1, 2}}, {TopicID: id2}}},
		&DescribeClusterMirrorsRequest{},
		&DescribeClusterMirrorsRequest{MirrorNames: []string{"m"}, LeadersOnly: true},
		&DescribeClusterMirrorsResponse{ThrottleTimeMs: 3, MaxRetryAttempts: 20,
			Mirrors: []DescribeClusterMirrorsResponseMirror{
				{MirrorName: "m", SourceBootstrap: "src:9092", SourceClusterID: "abc", Topics: []DescribeClusterMirrorsResponseTopic{
					{TopicName: "orders", TopicID: id1, Partitions: []DescribeClusterMirrorsResponsePartition{
						{PartitionIndex: 0, SourceOffset: 100, DestinationOffset: 90, Lag: 10, State: StateMirroring, LastMirrorEpoch: -1, LastMirrorOffset: -1, TruncatedOffset: 15, TruncatedRecords: 5, SkippedOffsets: 7},
						descPart,
						{PartitionIndex: 2, State: StateFailed, RetryAttempt: 3, ErrorMessage: sp("boom"), TruncatedOffset: -1},
					}},
				}, SyncTasks: []DescribeClusterMirrorsSyncTask{
					{Task: "group-offsets", LastSuccessMs: 1700000000000, LastErrorMs: -1, ErrorCount: 0},
					{Task: "topic-configs", LastSuccessMs: -1, LastErrorMs: 1700000000001, LastError: sp("source down"), ErrorCount: 4},
				}},
				{ErrorCode: UnknownClusterMirror, MirrorName: "zz", ErrorMessage: sp("unknown mirror zz")},
			},
			LookupResults: []DescribeClusterMirrorsLookupResult{{TopicID: id1, Partitions: []DescribeClusterMirrorsLookupPartition{{0, 5, 1000}, {1, -1, -1}}}},
		},
		NewDescribeClusterMirrorsResponse(),
		&ReadMirrorStatesRequest{Mirrors: []ReadMirrorStatesRequestMirror{{MirrorName: "m", Topics: []MirrorStateTopic{{id1, []int32{3}}}}, {MirrorName: "all"}}},
		&ReadMirrorStatesResponse{States: []ReadMirrorStatesResponseState{{MirrorState: state1}, {MirrorState: state2}, {ErrorCode: 16, MirrorState: MirrorState{MirrorName: "m", TopicID: id2, State: StateUnknown, PreviousState: StateUnknown}}}},
		&WriteMirrorStatesRequest{States: []WriteMirrorStatesRequestState{{MirrorState: state1}, {MirrorState: state2}, {MirrorState: state1, Tombstone: true}}},
		&WriteMirrorStatesResponse{Results: []WriteMirrorStatesResponseResult{{MirrorName: "m", TopicID: id1, Partition: 3, ErrorCode: 74, ErrorMessage: sp("fenced"), StateEpoch: 8}}},
		&PauseMirrorTopicsRequest{MirrorName: "m", Topics: []TopicName{{"a"}, {"b"}}, StateValidationOffset: -1},
		&PauseMirrorTopicsResponse{Topics: topicResults()},
		&ResumeMirrorTopicsRequest{MirrorName: "m", Topics: []TopicName{{"a"}}, StateValidationOffset: 99},
		&ResumeMirrorTopicsResponse{Topics: topicResults()},
		&DeleteClusterMirrorRequest{MirrorName: "m", StateValidationOffset: -1},
		&DeleteClusterMirrorResponse{ErrorCode: ClusterMirrorNotEmpty, ErrorMessage: sp("orders is MIRRORING")},
		&BumpLeaderEpochsRequest{Topics: []BumpLeaderEpochsRequestTopic{{TopicID: id1, Partitions: []BumpLeaderEpochsRequestPartition{{0, 22}, {1, 23}}}}},
		&BumpLeaderEpochsResponse{Topics: []BumpLeaderEpochsResponseTopic{{TopicID: id1, Partitions: []BumpLeaderEpochsResponsePartition{{0, 0, 22}, {1, 6, -1}}}}},
		&RecoverMirrorTopicsRequest{MirrorName: "m", Topics: []TopicName{{"orders"}}},
		&RecoverMirrorTopicsRequest{MirrorName: "m", LeadersOnly: true},
		&RecoverMirrorTopicsResponse{Topics: []RecoverMirrorTopicsResponseTopic{{Name: "orders", Partitions: []int32{0, 2}}, {Name: "nope", ErrorCode: TopicNotInClusterMirror, ErrorMessage: sp("nope")}}},
	}
}

func TestRoundTrip(t *testing.T) {
	for i, m := range roundTripCases() {
		b := m.AppendTo(nil)
		got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(message)
		if err := got.ReadFrom(b); err != nil {
			t.Fatalf("case %d (%T): ReadFrom: %v", i, m, err)
		}
		if !reflect.DeepEqual(m, got) {
			t.Errorf("case %d (%T): round trip differs\nwant %+v\n got %+v", i, m, m, got)
		}
		if again := got.AppendTo(nil); !bytes.Equal(b, again) {
			t.Errorf("case %d (%T): re-encoding differs", i, m)
		}
		// Every strict prefix must fail to decode, never panic.
		for n := 0; n < len(b); n++ {
			if err := got.ReadFrom(b[:n]); err == nil {
				t.Errorf("case %d (%T): prefix of %d/%d bytes decoded without error", i, m, n, len(b))
				break
			}
		}
	}
}

func TestEveryKeyHasRequestAndResponse(t *testing.T) {
	apis := APIs()
	if len(apis) != 12 {
		t.Fatalf("got %d APIs, want 12", len(apis))
	}
	for _, a := range apis {
		if a.Key != PrototypeKeys[a.Name]+1000 {
			t.Errorf("%s: key %d", a.Name, a.Key)
		}
		req := NewRequest(a.Key)
		if req == nil {
			t.Fatalf("%s: no request for key %d", a.Name, a.Key)
		}
		resp := req.ResponseKind()
		if req.Key() != a.Key || resp.Key() != a.Key || resp.RequestKind().Key() != a.Key {
			t.Errorf("%s: keys %d/%d, want %d", a.Name, req.Key(), resp.Key(), a.Key)
		}
		if !req.IsFlexible() || req.MaxVersion() != 0 || !resp.IsFlexible() {
			t.Errorf("%s: not flexible v0", a.Name)
		}
		// An empty request round-trips too.
		if err := req.ReadFrom(req.AppendTo(nil)); err != nil {
			t.Errorf("%s: empty request: %v", a.Name, err)
		}
	}
	if NewRequest(97+KeyOffset) != nil || NewRequest(99) != nil {
		t.Error("NewRequest answered a key that is not a mirror RPC")
	}
}

// TestWireBytes pins the flexible encoding of two small messages by hand.
func TestWireBytes(t *testing.T) {
	got := (&ListClusterMirrorsRequest{IncludeTopicNames: true}).AppendTo(nil)
	if want := []byte{1, 0}; !bytes.Equal(got, want) {
		t.Errorf("ListClusterMirrorsRequest = %x, want %x", got, want)
	}
	got = (&DescribeClusterMirrorsRequest{ClusterID: sp("ab")}).AppendTo(nil)
	// empty compact array, false, 1 tag: tag 0, size 3, compact string "ab"
	if want := []byte{1, 0, 1, 0, 3, 3, 'a', 'b'}; !bytes.Equal(got, want) {
		t.Errorf("DescribeClusterMirrorsRequest = %x, want %x", got, want)
	}
	got = NewStopMirrorTopicsRequest().AppendTo(nil)
	// "" name, empty topics, no tags (StateValidationOffset -1 is the default).
	if want := []byte{1, 1, 0}; !bytes.Equal(got, want) {
		t.Errorf("StopMirrorTopicsRequest = %x, want %x", got, want)
	}
}

func TestUnknownTagsSkipped(t *testing.T) {
	// ListClusterMirrorsRequest with an unknown tag 7 of 2 bytes.
	var v ListClusterMirrorsRequest
	if err := v.ReadFrom([]byte{1, 1, 7, 2, 0xaa, 0xbb}); err != nil || !v.IncludeTopicNames {
		t.Fatalf("got %+v, %v", v, err)
	}
	// A tag whose size runs past the end is an error.
	if err := v.ReadFrom([]byte{1, 1, 7, 5, 0xaa}); err == nil {
		t.Fatal("short tag decoded")
	}
}

func TestErrorNames(t *testing.T) {
	cases := map[int16]string{
		0: "NONE", 1134: "READ_ONLY_TOPIC", 1136: "CLUSTER_MIRROR_ALREADY_EXISTS", 1146: "MIRROR_TOPIC_NOT_STOPPED",
		44: "POLICY_VIOLATION", 3: "UNKNOWN_TOPIC_OR_PARTITION", -1: "UNKNOWN_SERVER_ERROR", 1135: "UNKNOWN_ERROR_1135",
	}
	for code, want := range cases {
		if got := Name(code); got != want {
			t.Errorf("Name(%d) = %q, want %q", code, got, want)
		}
	}
	for code, name := range errorNames {
		if c, ok := CodeForName(name); !ok || c != code || code-PrototypeErrorCodeOffset < 134 || code-PrototypeErrorCodeOffset > 146 {
			t.Errorf("%s: %d", name, code)
		}
	}
	if err := ErrorFor(UnknownClusterMirror, sp("no mirror m")); err.Error() != "UNKNOWN_CLUSTER_MIRROR: no mirror m" {
		t.Errorf("got %q", err)
	}
	if ErrorFor(0, sp("x")) != nil {
		t.Error("ErrorFor(0) != nil")
	}
}

func TestStates(t *testing.T) {
	for s := StateUnknown; s <= StateFailed; s++ {
		p, ok := ParseState(s.String())
		if !ok || p != s {
			t.Errorf("%d: %q", s, s.String())
		}
	}
	if StateStopped.String() != "STOPPED" || State(9).String() != "STATE(9)" {
		t.Error("bad state names")
	}
}
