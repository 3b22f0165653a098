package storage

// TEMPORARY (replaced by the stored high watermark of h-storage at merge).

import (
	"sync"
	"sync/atomic"
)

var hwStub sync.Map // *Log → *atomic.Int64

func (l *Log) hwCell() *atomic.Int64 {
	v, _ := hwStub.LoadOrStore(l, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// HighWatermark is the stored high watermark.
func (l *Log) HighWatermark() int64 { return l.hwCell().Load() }

// UpdateHighWatermark sets the high watermark (clamped to [log start, LEO]).
func (l *Log) UpdateHighWatermark(hw int64) {
	hw = min(max(hw, l.LogStartOffset()), l.LogEndOffset())
	l.hwCell().Store(hw)
	l.notify()
}

// MaybeIncrementHighWatermark raises the high watermark to hw (clamped) if above it.
func (l *Log) MaybeIncrementHighWatermark(hw int64) bool {
	hw = min(max(hw, l.LogStartOffset()), l.LogEndOffset())
	c := l.hwCell()
	for {
		cur := c.Load()
		if hw <= cur {
			return false
		}
		if c.CompareAndSwap(cur, hw) {
			l.notify()
			return true
		}
	}
}
