package broker

import (
	"bytes"
	"testing"
)

// TestFetchBufsDisjoint: buffers handed out by one fetchBufs never overlap, have exactly
// the length asked for and no spare capacity, also across chunks and after release.
func TestFetchBufsDisjoint(t *testing.T) {
	var a fetchBufs
	for round := 0; round < 2; round++ {
		var got [][]byte
		for i, n := range []int{100, fetchChunkBytes - 50, 3 * fetchChunkBytes, 0, 7, fetchChunkBytes} {
			b := a.alloc(n)
			if len(b) != n || cap(b) != n {
				t.Fatalf("alloc(%d): len %d cap %d", n, len(b), cap(b))
			}
			for j := range b {
				b[j] = byte(i + 1)
			}
			got = append(got, b)
		}
		for i, b := range got {
			if want := bytes.Repeat([]byte{byte(i + 1)}, len(b)); !bytes.Equal(b, want) {
				t.Fatalf("round %d: buffer %d was overwritten", round, i)
			}
		}
		a.release()
	}
}
