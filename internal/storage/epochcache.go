package storage

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
)

// leaderEpochCheckpoint is the file name of Kafka's LeaderEpochCheckpointFile.
const leaderEpochCheckpoint = "leader-epoch-checkpoint"

// leaderEpochFences is kmirror's file of epoch raises without records (same text format).
const leaderEpochFences = "leader-epoch-fences"

// leaderEpochTruncations is kmirror's file of the epochs whose batches a truncation
// dropped, with the truncation point (same text format).
const leaderEpochTruncations = "leader-epoch-truncations"

// EpochEntry is one leader-epoch cache entry: the first offset written in Epoch.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache follows Apache Kafka's LeaderEpochFileCache: entries ordered by epoch and
// start offset, checkpointed to its file on every change. A Log keeps two: the cache of
// batch epochs (leader-epoch-checkpoint) and the raises without records
// (leader-epoch-fences).
type epochCache struct {
	mu      sync.RWMutex
	path    string
	entries []EpochEntry
}

func newEpochCache(dir, name string) *epochCache {
	return &epochCache{path: filepath.Join(dir, name)}
}

// load reads the checkpoint, keeping only a strictly increasing prefix.
func (c *epochCache) load() error {
	lines, err := readCheckpoint(c.path, 2)
	if err != nil {
		return err
	}
	c.entries = c.entries[:0]
	for _, f := range lines {
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return fmt.Errorf("%s: malformed entry %v", c.path, f)
		}
		if n := len(c.entries); n > 0 && (int32(e) <= c.entries[n-1].Epoch || o < c.entries[n-1].StartOffset) {
			break
		}
		c.entries = append(c.entries, EpochEntry{int32(e), o})
	}
	return nil
}

func (c *epochCache) flush() error {
	lines := make([]string, len(c.entries))
	for i, e := range c.entries {
		lines[i] = fmt.Sprintf("%d %d", e.Epoch, e.StartOffset)
	}
	return writeCheckpoint(c.path, lines)
}

func (c *epochCache) latest() int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

func (c *epochCache) snapshot() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]EpochEntry(nil), c.entries...)
}

// epochFor is the epoch of the latest entry starting at or before offset, −1 when none
// (Kafka's LeaderEpochFileCache.epochForOffset).
func (c *epochCache) epochFor(offset int64) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	epoch := int32(-1)
	for _, e := range c.entries {
		if e.StartOffset > offset {
			break
		}
		epoch = e.Epoch
	}
	return epoch
}

// assign adds (epoch, start) when epoch is above the latest epoch; as Kafka's assign,
// entries starting at or after start are replaced. It reports whether anything changed.
func (c *epochCache) assign(epoch int32, start int64) bool {
	if epoch < 0 || start < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 && epoch <= c.entries[n-1].Epoch {
		return false
	}
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= start {
		n--
	}
	c.entries = append(c.entries[:n], EpochEntry{epoch, start})
	return true
}

// truncateFromEnd removes entries starting at or after end (Kafka's truncateFromEnd).
func (c *epochCache) truncateFromEnd(end int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart drops entries before start, keeping the last of them re-based at
// start (Kafka's truncateFromStart).
func (c *epochCache) truncateFromStart(start int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= start {
		i++
	}
	if i == 0 {
		return false
	}
	last := c.entries[i-1]
	if i == 1 && last.StartOffset == start {
		return false
	}
	last.StartOffset = start
	c.entries = append([]EpochEntry{last}, c.entries[i:]...)
	return true
}

// clampTo moves entries starting after end to end, keeping only the highest epoch of
// those at end: the fences' form of truncateFromEnd, which never lowers the latest
// epoch. It reports whether anything changed.
func (c *epochCache) clampTo(end int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	if n == 0 || c.entries[n-1].StartOffset <= end {
		return false
	}
	top := c.entries[n-1].Epoch
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	c.entries = append(c.entries[:n], EpochEntry{top, end})
	return true
}

// rangeEnd is, for an epoch that is an entry, where its range ends: the next entry's
// start, or leo for the latest.
func (c *epochCache) rangeEnd(epoch int32, leo int64) (int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, e := range c.entries {
		if e.Epoch == epoch {
			if i+1 < len(c.entries) {
				return c.entries[i+1].StartOffset, true
			}
			return leo, true
		}
	}
	return 0, false
}

// firstAbove is the first entry whose epoch is above epoch.
func (c *epochCache) firstAbove(epoch int32) (EpochEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range c.entries {
		if e.Epoch > epoch {
			return e, true
		}
	}
	return EpochEntry{}, false
}

// startingAt is a copy of the entries starting at or after offset.
func (c *epochCache) startingAt(offset int64) []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i := len(c.entries)
	for i > 0 && c.entries[i-1].StartOffset >= offset {
		i--
	}
	return append([]EpochEntry(nil), c.entries[i:]...)
}

// has reports whether epoch is an entry.
func (c *epochCache) has(epoch int32) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range c.entries {
		if e.Epoch == epoch {
			return true
		}
	}
	return false
}

// undefinedEpoch is Kafka's UNDEFINED_EPOCH (and UNDEFINED_EPOCH_OFFSET).
const undefinedEpoch = -1

// endOffsetFor follows LeaderEpochFileCache.endOffsetFor: for the latest epoch the LEO;
// otherwise the largest epoch <= requested (or requested itself when it is below every
// entry, another negative epoch included) and the start offset of the next larger
// epoch; (−1, −1) for UNDEFINED_EPOCH, when requested is above every entry, or the cache
// is empty.
func (c *epochCache) endOffsetFor(requested int32, leo int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if requested == undefinedEpoch || n == 0 {
		return undefinedEpoch, undefinedEpoch
	}
	if c.entries[n-1].Epoch == requested {
		return requested, leo
	}
	// first entry with epoch > requested
	hi := 0
	for hi < n && c.entries[hi].Epoch <= requested {
		hi++
	}
	if hi == n {
		return -1, -1
	}
	if hi == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

// epochDrops holds, for each epoch whose every batch a truncation dropped (its cache
// entry removed), the truncation point: where that history ended for a reader who had
// seen the dropped batches (Log.EndOffsetForEpoch). Kafka needs no such record: its
// epochs grow with the offsets, so the next entry's start answers a dropped epoch; a
// mirror partition's batch epochs (the source's) can sit below an epoch it raised.
type epochDrops struct {
	mu   sync.RWMutex
	path string
	at   map[int32]int64
}

func newEpochDrops(dir string) *epochDrops {
	return &epochDrops{path: filepath.Join(dir, leaderEpochTruncations), at: map[int32]int64{}}
}

func (d *epochDrops) load() error {
	lines, err := readCheckpoint(d.path, 2)
	if err != nil {
		return err
	}
	d.at = map[int32]int64{}
	for _, f := range lines {
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return fmt.Errorf("%s: malformed entry %v", d.path, f)
		}
		d.at[int32(e)] = o
	}
	return nil
}

func (d *epochDrops) flush() error {
	d.mu.RLock()
	epochs := make([]int32, 0, len(d.at))
	for e := range d.at {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	lines := make([]string, len(epochs))
	for i, e := range epochs {
		lines[i] = fmt.Sprintf("%d %d", e, d.at[e])
	}
	d.mu.RUnlock()
	return writeCheckpoint(d.path, lines)
}

func (d *epochDrops) get(epoch int32) (int64, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	at, ok := d.at[epoch]
	return at, ok
}

// record notes the epochs of dropped entries as ending at at (the earliest point wins).
// It reports whether anything changed.
func (d *epochDrops) record(dropped []EpochEntry, at int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := false
	for _, e := range dropped {
		if old, ok := d.at[e.Epoch]; !ok || at < old {
			d.at[e.Epoch] = at
			changed = true
		}
	}
	return changed
}

// forget removes epoch's point; it reports whether there was one.
func (d *epochDrops) forget(epoch int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.at[epoch]
	delete(d.at, epoch)
	return ok
}

// clamp moves every point into [start, end]: a later truncation to end cut that history
// there too, and below the log start there is nothing to go back to (Kafka's
// truncateFromStart re-bases the first entry the same way). It reports whether anything
// changed.
func (d *epochDrops) clamp(start, end int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := false
	for e, at := range d.at {
		if v := min(max(at, start), end); v != at {
			d.at[e] = v
			changed = true
		}
	}
	return changed
}
