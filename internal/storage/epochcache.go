package storage

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
)

// leaderEpochCheckpoint is the file name of Kafka's LeaderEpochCheckpointFile.
const leaderEpochCheckpoint = "leader-epoch-checkpoint"

// leaderEpochFences is kmirror's file of epoch raises without records (same text format).
const leaderEpochFences = "leader-epoch-fences"

// EpochEntry is one leader-epoch cache entry: the first offset written in Epoch.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache follows Apache Kafka's LeaderEpochFileCache: entries ordered by epoch and
// start offset, checkpointed to leader-epoch-checkpoint on every change.
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

// truncateFromEnd removes entries starting at or after end (Kafka's truncateFromEnd);
// keepAtEnd=true keeps entries starting exactly at end (used by recovery: data
// directories written before leader-epoch-fences existed hold epochs raised without
// records as cache entries at the LEO, and those must survive a restart).
func (c *epochCache) truncateFromEnd(end int64, keepAtEnd bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].StartOffset > end || (!keepAtEnd && c.entries[n-1].StartOffset == end)) {
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

// endOffsetFor follows LeaderEpochFileCache.endOffsetFor: for the latest epoch the LEO;
// otherwise the largest epoch <= requested (or requested itself when it is below every
// entry) and the start offset of the next larger epoch; (−1, −1) when requested is above
// every entry, negative, or the cache is empty.
func (c *epochCache) endOffsetFor(requested int32, leo int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if requested < 0 || n == 0 {
		return -1, -1
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
