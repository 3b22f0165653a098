package mirror

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
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
