package broker

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchChunkBytes is the smallest buffer a Fetch reads record batches into.
const fetchChunkBytes = 1 << 20

// fetchChunks holds reusable read buffers (*[]byte) of at least fetchChunkBytes.
var fetchChunks sync.Pool

// fetchBufs hands out the buffers one Fetch response reads record batches into when
// they are not sent as file ranges (the kmsg fallback of fetchparts.go, a partition
// listed twice), carved from pooled chunks, and returns the chunks to the pool once the
// response is encoded (release). It saves allocating (and zeroing) those records.
type fetchBufs struct {
	chunks []*[]byte
	cur    []byte
}

// alloc returns a buffer of exactly n bytes.
func (a *fetchBufs) alloc(n int) []byte {
	if cap(a.cur)-len(a.cur) < n {
		var c *[]byte
		if p, ok := fetchChunks.Get().(*[]byte); ok && cap(*p) >= n {
			c = p
		} else {
			b := make([]byte, 0, max(n, fetchChunkBytes))
			c = &b
		}
		a.chunks = append(a.chunks, c)
		a.cur = (*c)[:0]
	}
	l := len(a.cur)
	a.cur = a.cur[:l+n]
	return a.cur[l : l+n : l+n]
}

// release returns the chunks to the pool; buffers handed out must no longer be used.
func (a *fetchBufs) release() {
	for _, c := range a.chunks {
		fetchChunks.Put(c)
	}
	a.chunks, a.cur = nil, nil
}

// pooledFetch is a Fetch response encoded by kmsg whose record batches live in pooled
// buffers; the wire layer calls Release once it has encoded the response.
type pooledFetch struct {
	*kmsg.FetchResponse
	bufs *fetchBufs
}

// Unwrap returns the FetchResponse (wire's size estimate looks at it).
func (p pooledFetch) Unwrap() kmsg.Response { return p.FetchResponse }

// Release returns the record buffers to the pool (wire.Releaser).
func (p pooledFetch) Release() { p.bufs.release() }
