package storage

import (
	"math/rand"
	"os"
	"testing"
)

// TestLogProperties runs random sequences of leader appends, follower appends,
// truncations, clean reopens and crashes (a segment file cut at a random position),
// checking after each step: offsets strictly increasing, the LEO consistent with the
// data, every read returning valid whole batches, the epoch cache monotonic.
func TestLogProperties(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		cfg := smallConfig()
		cfg.SegmentBytes = int64(600 + rng.Intn(3000))
		cfg.IndexIntervalBytes = int32(1 + rng.Intn(400))
		l := openT(t, dir, cfg)
		epoch := int32(0)
		for step := 0; step < 120; step++ {
			switch op := rng.Intn(20); {
			case op < 9:
				b := mkBatch(t, batchOpts{n: 1 + rng.Intn(5), ts: int64(step), valueSize: rng.Intn(200), codec: int8([]int{0, 0, 1, 4}[rng.Intn(4)])})
				if rng.Intn(5) == 0 {
					epoch++
				}
				if _, err := l.AppendAsLeader(b, epoch, -1); err != nil {
					t.Fatalf("seed %d step %d: leader append: %v", seed, step, err)
				}
			case op < 14:
				var buf []byte
				next := l.LogEndOffset()
				for k := rng.Intn(4); k >= 0; k-- {
					next += int64(rng.Intn(3)) * int64(rng.Intn(50))
					if rng.Intn(6) == 0 {
						epoch++
					}
					b := mkBatch(t, batchOpts{base: next, n: 1 + rng.Intn(4), epoch: epoch, valueSize: rng.Intn(100)})
					next = b.NextOffset()
					buf = append(buf, b...)
				}
				if _, err := l.AppendAsFollower(buf); err != nil {
					t.Fatalf("seed %d step %d: follower append: %v", seed, step, err)
				}
			case op < 16:
				leo := l.LogEndOffset()
				to := l.LogStartOffset() + rng.Int63n(leo-l.LogStartOffset()+1)
				if err := l.TruncateTo(to); err != nil {
					t.Fatalf("seed %d step %d: truncate: %v", seed, step, err)
				}
				if l.LogEndOffset() > to && to < leo {
					t.Fatalf("seed %d step %d: LEO %d after TruncateTo(%d)", seed, step, l.LogEndOffset(), to)
				}
			case op < 18:
				leo := l.LogEndOffset()
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l = openT(t, dir, cfg)
				// A truncation into a gap leaves the LEO past the data; a restart
				// recomputes it from the data, never higher.
				if l.LogEndOffset() > leo {
					t.Fatalf("seed %d step %d: LEO %d after reopen, was %d", seed, step, l.LogEndOffset(), leo)
				}
			case op < 19:
				// Crash: cut the active segment at a random position, reopen.
				l.Close()
				segs := segmentFiles(t, dir, ".log")
				last := segs[len(segs)-1]
				if st, _ := os.Stat(last); st.Size() > 0 {
					os.Truncate(last, rng.Int63n(st.Size()))
				}
				l = openT(t, dir, cfg)
			default:
				if lst := l.LogStartOffset(); l.LogEndOffset() > lst && rng.Intn(2) == 0 {
					if err := l.AdvanceLogStartOffset(lst + rng.Int63n(l.LogEndOffset()-lst)); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkInvariants(t, l, seed, step)
		}
		l.Close()
	}
}

func checkInvariants(t *testing.T, l *Log, seed int64, step int) {
	t.Helper()
	bs := readAllBatches(t, l)
	prev := int64(-1)
	for _, b := range bs {
		if b.BaseOffset() <= prev {
			t.Fatalf("seed %d step %d: offsets not increasing: %d after %d", seed, step, b.BaseOffset(), prev)
		}
		prev = b.LastOffset()
	}
	if prev >= l.LogEndOffset() {
		t.Fatalf("seed %d step %d: batch ends at %d, LEO %d", seed, step, prev, l.LogEndOffset())
	}
	if l.LogStartOffset() > l.LogEndOffset() {
		t.Fatalf("seed %d step %d: log start %d > LEO %d", seed, step, l.LogStartOffset(), l.LogEndOffset())
	}
	es := l.EpochEntries()
	for i := 1; i < len(es); i++ {
		if es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset < es[i-1].StartOffset {
			t.Fatalf("seed %d step %d: epoch cache not monotonic: %v", seed, step, es)
		}
	}
	for _, e := range es {
		if e.StartOffset > l.LogEndOffset() {
			t.Fatalf("seed %d step %d: epoch entry %v past LEO %d", seed, step, e, l.LogEndOffset())
		}
	}
	// Every batch's epoch is covered by the cache entry in force at its offset.
	for _, b := range bs {
		if b.BaseOffset() < l.LogStartOffset() {
			continue
		}
		e, _ := l.EndOffsetForEpoch(b.LeaderEpoch())
		if e > b.LeaderEpoch() {
			t.Fatalf("seed %d step %d: epoch %d answered with %d", seed, step, b.LeaderEpoch(), e)
		}
	}
}
