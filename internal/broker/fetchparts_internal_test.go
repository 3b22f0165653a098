package broker

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/storage"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestEncodeFetchPartsMatchesKmsg: for many random Fetch responses in every version
// kmirror serves (4–16), the parts of encodeFetchParts, with file ranges read in, are
// byte for byte kmsg's AppendTo of the same response with the records in memory.
func TestEncodeFetchPartsMatchesKmsg(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "records"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	file := make([]byte, 1<<20)
	for i := range file {
		file[i] = byte(rng.IntN(256))
	}
	if _, err := f.Write(file); err != nil {
		t.Fatal(err)
	}
	for version := int16(4); version <= 16; version++ {
		for iter := 0; iter < 300; iter++ {
			resp, ranges := randomFetchResponse(rng, version, f, file)
			if !fetchPartsOK(resp) {
				t.Fatalf("v%d: random response rejected by fetchPartsOK", version)
			}
			rangeOf := func(st *kmsg.FetchResponseTopic, sp *kmsg.FetchResponseTopicPartition) (storage.FileRange, bool) {
				r, ok := ranges[kafka.TopicIDPartition{Topic: st.Topic, TopicID: st.TopicID, Partition: sp.Partition}]
				return r, ok
			}
			var prefix []byte
			if iter%2 == 1 {
				prefix = []byte("left alone") // the encoder appends to what buf holds
			}
			buf, parts := encodeFetchParts(prefix, resp, rangeOf)
			if !bytes.HasPrefix(buf, []byte(string(prefix))) {
				t.Fatalf("v%d: buffer prefix overwritten", version)
			}
			got := materializeParts(t, parts)
			// kmsg encodes the same response with the ranges' bytes in RecordBatches.
			for i := range resp.Topics {
				st := &resp.Topics[i]
				for j := range st.Partitions {
					if r, ok := rangeOf(st, &st.Partitions[j]); ok {
						st.Partitions[j].RecordBatches = file[r.Pos : r.Pos+r.Len]
					}
				}
			}
			want := resp.AppendTo(nil)
			if !bytes.Equal(got, want) {
				t.Fatalf("v%d iteration %d: parts encode %d bytes, kmsg %d; first difference at %d",
					version, iter, len(got), len(want), firstDiff(got, want))
			}
			// And the bytes decode back to the response.
			back := kmsg.NewPtrFetchResponse()
			back.SetVersion(version)
			if err := back.ReadFrom(got); err != nil {
				t.Fatalf("v%d: kmsg cannot decode the parts: %v", version, err)
			}
		}
	}
}

// TestFetchPartsOKRejects: responses with tagged fields the encoder does not write take
// the kmsg path.
func TestFetchPartsOKRejects(t *testing.T) {
	base := func() *kmsg.FetchResponse {
		r := kmsg.NewPtrFetchResponse()
		r.SetVersion(16)
		st := kmsg.NewFetchResponseTopic()
		st.Partitions = append(st.Partitions, kmsg.NewFetchResponseTopicPartition())
		r.Topics = append(r.Topics, st)
		return r
	}
	if !fetchPartsOK(base()) {
		t.Fatal("plain response rejected")
	}
	tagged := base()
	mirrorproto.SetMirrorLeaderEpoch(&tagged.Topics[0].Partitions[0].UnknownTags, 7)
	if !fetchPartsOK(tagged) {
		t.Fatal("response with a partition's MirrorLeaderEpoch rejected")
	}
	for name, change := range map[string]func(*kmsg.FetchResponse){
		"version 3":     func(r *kmsg.FetchResponse) { r.SetVersion(3) },
		"version 17":    func(r *kmsg.FetchResponse) { r.SetVersion(17) },
		"NodeEndpoints": func(r *kmsg.FetchResponse) { r.Brokers = append(r.Brokers, kmsg.NewFetchResponseBroker()) },
		"CurrentLeader": func(r *kmsg.FetchResponse) { r.Topics[0].Partitions[0].CurrentLeader.LeaderID = 1 },
		"SnapshotID":    func(r *kmsg.FetchResponse) { r.Topics[0].Partitions[0].SnapshotID.Epoch = 1 },
		"unknown tags":  func(r *kmsg.FetchResponse) { r.UnknownTags.Set(9, []byte{1}) },
		"topic tags":    func(r *kmsg.FetchResponse) { r.Topics[0].UnknownTags.Set(9, nil) },
	} {
		r := base()
		change(r)
		if fetchPartsOK(r) {
			t.Errorf("%s: accepted by fetchPartsOK", name)
		}
	}
}

// randomFetchResponse builds a response of version with random fields; about half of
// the partitions with records get a range of f (whose bytes are file) instead.
func randomFetchResponse(rng *rand.Rand, version int16, f *os.File, file []byte) (*kmsg.FetchResponse, map[kafka.TopicIDPartition]storage.FileRange) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	resp.ThrottleMillis = rng.Int32()
	resp.ErrorCode = int16(rng.IntN(100))
	resp.SessionID = rng.Int32()
	ranges := map[kafka.TopicIDPartition]storage.FileRange{}
	for t := rng.IntN(4); t > 0; t-- {
		st := kmsg.NewFetchResponseTopic()
		if version <= 12 {
			st.Topic = randomString(rng, rng.IntN(300))
		} else {
			for i := range st.TopicID {
				st.TopicID[i] = byte(rng.IntN(256))
			}
		}
		for p := rng.IntN(5); p > 0; p-- {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = int32(len(st.Partitions))
			sp.ErrorCode = int16(rng.IntN(3))
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = rng.Int64(), rng.Int64(), rng.Int64()-1<<62
			switch rng.IntN(3) {
			case 0: // null
			case 1:
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			default:
				for a := rng.IntN(4) + 1; a > 0; a-- {
					sp.AbortedTransactions = append(sp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: rng.Int64(), FirstOffset: rng.Int64()})
				}
			}
			if rng.IntN(4) == 0 {
				sp.PreferredReadReplica = rng.Int32N(10)
			}
			if version >= 12 && rng.IntN(5) == 0 {
				sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = rng.Int32N(1000), rng.Int64N(1<<40)
			}
			if rng.IntN(4) == 0 {
				mirrorproto.SetMirrorLeaderEpoch(&sp.UnknownTags, rng.Int32N(1000))
			}
			switch rng.IntN(5) {
			case 0:
				sp.RecordBatches = nil
			case 1:
				sp.RecordBatches = []byte{}
			case 2:
				sp.RecordBatches = file[:rng.IntN(200)]
			default:
				// Lengths across the uvarint size boundaries (127/128, 16383/16384, …).
				n := []int64{1, 126, 127, 128, 16382, 16383, 16384, rng.Int64N(1 << 19)}[rng.IntN(8)]
				pos := rng.Int64N(int64(len(file)) - n)
				ranges[kafka.TopicIDPartition{Topic: st.Topic, TopicID: st.TopicID, Partition: sp.Partition}] = storage.FileRange{File: f, Pos: pos, Len: n, LastOffset: -1}
				sp.RecordBatches = nil // ignored when a range is present
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, ranges
}

func randomString(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return string(b)
}

// materializeParts concatenates the parts, reading file parts at their positions.
func materializeParts(t *testing.T, parts []wire.Part) []byte {
	t.Helper()
	var out []byte
	for _, p := range parts {
		if p.File == nil {
			out = append(out, p.Bytes...)
			continue
		}
		b := make([]byte, p.Len)
		if _, err := p.File.ReadAt(b, p.Pos); err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
