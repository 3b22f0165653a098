package mirror

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// TestPrefetchDroppedOnStateChange: the source holds the first prefetched Fetch (the
// first one at an offset above 0, sent before the previous response was appended) while
// topic "a" of the fetcher's two topics is paused. Once released, the prefetched answer
// holds batches of "a" that must not be appended: "a" stays at its paused LEO while "b"
// catches up, and after resume both are byte-identical to the source (no gap, no batch
// twice).
func TestPrefetchDroppedOnStateChange(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "a", "b"))
	addrs := c.ListenAddrs()
	for range 10 { // ten batches per topic: one per fetch with fetch.max.bytes=1024
		produce(t, addrs, "a", 20)
		produce(t, addrs, "b", 20)
	}
	release := make(chan struct{})
	held := make(chan struct{})
	holding := false
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if holding {
			return nil, nil, false
		}
		for _, ft := range kr.(*kmsg.FetchRequest).Topics {
			for _, fp := range ft.Partitions {
				if fp.FetchOffset > 0 {
					holding = true
					close(held)
					c.SleepControl(func() { <-release })
					return nil, nil, false
				}
			}
		}
		return nil, nil, false
	})
	e := newEnv(t)
	e.createMirror("m1", addrs[0], "fetch.max.bytes", "1024")
	e.startTopics("m1", "a", "b")
	<-held

	e.pauseTopics("m1", "a")
	e.waitState("m1", "a", mirrorproto.StatePaused)
	pausedAt := e.localLog("a", 0).LogEndOffset()
	close(release)
	e.waitCaughtUp(src, "m1", "b")
	if got := e.localLog("a", 0).LogEndOffset(); got != pausedAt {
		t.Fatalf("paused topic a moved from %d to %d: the prefetched response was appended", pausedAt, got)
	}
	if end := sourceEnds(t, src, "a")[0]; pausedAt >= end {
		t.Fatalf("a was complete (%d of %d) before the pause: the test did not catch a prefetch in flight", pausedAt, end)
	}

	e.resumeTopics("m1", "a")
	e.waitCaughtUp(src, "m1", "a")
	for _, topic := range []string{"a", "b"} {
		sameBatches(t, fmt.Sprintf("%s-0", topic), sourceBatches(t, src, topic, 0), localBatches(t, e.localLog(topic, 0)))
	}
}

// TestFetchSizeGrowsWhileFull covers the adaptive per-partition fetch size: a backlog on
// one partition is fetched with a PartitionMaxBytes that grows from fetch.max.bytes while
// the source holds more than a response returned, up to fetch.response.max.bytes, and
// falls back to fetch.max.bytes once the mirror is caught up and the responses are empty.
// Batches of about 1.5 KiB fill a 2 KiB fetch only three quarters minus a little: growth
// by fullness stalled at 2 KiB here.
func TestFetchSizeGrowsWhileFull(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "a"))
	addrs := c.ListenAddrs()
	for range 128 { // 128 uncompressed batches of about 1.5 KiB: 1+2+4+…+32 KiB of full responses come before the first at 64 KiB
		produce(t, addrs, "a", 60, kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	var mu sync.Mutex
	var seen []int32 // PartitionMaxBytes of every Fetch, in order
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, ft := range kr.(*kmsg.FetchRequest).Topics {
			for _, fp := range ft.Partitions {
				mu.Lock()
				seen = append(seen, fp.PartitionMaxBytes)
				mu.Unlock()
			}
		}
		return nil, nil, false
	})
	e := newEnv(t)
	e.createMirror("m1", addrs[0], "fetch.max.bytes", "1024", "fetch.response.max.bytes", "65536", "fetch.wait.max.ms", "20")
	e.startTopics("m1", "a")
	e.waitCaughtUp(src, "m1", "a")
	mu.Lock()
	sizes := slices.Clone(seen)
	mu.Unlock()
	if grown := slices.Max(sizes); grown != 65536 {
		t.Fatalf("the largest PartitionMaxBytes was %d, want fetch.response.max.bytes 65536 (sizes %v)", grown, sizes)
	}
	if len(sizes) >= 128 {
		t.Fatalf("%d fetches for 128 batches: the fetch size did not grow (sizes %v)", len(sizes), sizes)
	}
	eventually(t, func() string { mu.Lock(); defer mu.Unlock(); return fmt.Sprintf("sizes %v", seen) }, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1] == 1024
	})
}
