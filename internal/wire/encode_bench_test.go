package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkEncodeFetch encodes a Fetch response of 16 partitions × 1 MiB of records,
// the shape of a 16 MiB consumer fetch (bench/broker).
func BenchmarkEncodeFetch(b *testing.B) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "bench"
	for p := 0; p < 16; p++ {
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.RecordBatches = make([]byte, 1<<20)
		t.Partitions = append(t.Partitions, sp)
	}
	resp.Topics = append(resp.Topics, t)
	b.SetBytes(16 << 20)
	for i := 0; i < b.N; i++ {
		out := encodeResponse(1, true, resp)
		putBuf(out)
	}
}
