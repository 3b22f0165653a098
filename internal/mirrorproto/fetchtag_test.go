package mirrorproto

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorLeaderEpochRoundTrip: MirrorLeaderEpoch set on a FetchResponse partition
// survives kmsg's encoding at a flexible version, other tags beside it, and a partition
// without it (or with a malformed value) reads as none.
func TestMirrorLeaderEpochRoundTrip(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(16)
	st := kmsg.NewFetchResponseTopic()
	for _, set := range []func(*kmsg.Tags){
		func(tags *kmsg.Tags) { SetMirrorLeaderEpoch(tags, 42); tags.Set(9, []byte{1}) },
		func(*kmsg.Tags) {},
		func(tags *kmsg.Tags) { tags.Set(MirrorLeaderEpochTag, []byte{1, 2}) },
	} {
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = 3, 100
		set(&sp.UnknownTags)
		st.Partitions = append(st.Partitions, sp)
	}
	resp.Topics = append(resp.Topics, st)
	back := kmsg.NewPtrFetchResponse()
	back.SetVersion(16)
	if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	ps := back.Topics[0].Partitions
	if e, ok := MirrorLeaderEpoch(&ps[0].UnknownTags); !ok || e != 42 || ps[0].DivergingEpoch.EndOffset != 100 {
		t.Fatalf("MirrorLeaderEpoch %d (%v), DivergingEpoch end %d; want 42 and 100", e, ok, ps[0].DivergingEpoch.EndOffset)
	}
	for i, sp := range ps[1:] {
		if e, ok := MirrorLeaderEpoch(&sp.UnknownTags); ok {
			t.Fatalf("partition %d: MirrorLeaderEpoch %d, want none", i+1, e)
		}
	}
}
