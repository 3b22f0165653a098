package storage

import (
	"encoding/binary"
	"sort"

	"github.com/kmirror/kmirror/internal/record"
)

// numBatchesToRetain is Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: the number of
// recent batches per producer kept for duplicate detection.
const numBatchesToRetain = 5

// AbortedTxn is one entry of Kafka's transaction index (.txnindex): an aborted
// transaction of ProducerID spanning [FirstOffset, LastOffset] (LastOffset is the ABORT
// marker's offset) and the LSO right after it completed.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// OpenTxn is an ongoing transaction: its producer and the offset of its first batch.
type OpenTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64
}

// ProducerEntry is the state of one producer ID, as returned by DescribeProducers
// (Kafka's ProducerStateEntry). CurrentTxnStartOffset is −1 without an open transaction.
type ProducerEntry struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64
}

type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	maxTs                   int64
}

type producerEntry struct {
	epoch            int16
	batches          [numBatchesToRetain]batchMeta
	n, head          int // batches[head] is the oldest of n retained
	lastTs           int64
	coordinatorEpoch int32
}

func (e *producerEntry) last() *batchMeta {
	if e.n == 0 {
		return nil
	}
	return &e.batches[(e.head+e.n-1)%numBatchesToRetain]
}

func (e *producerEntry) add(m batchMeta) {
	if e.n < numBatchesToRetain {
		e.batches[(e.head+e.n)%numBatchesToRetain] = m
		e.n++
		return
	}
	e.batches[e.head] = m
	e.head = (e.head + 1) % numBatchesToRetain
}

// findDuplicate returns the retained batch with the same epoch and sequence range
// (Kafka's ProducerStateEntry.findDuplicateBatch).
func (e *producerEntry) findDuplicate(epoch int16, firstSeq, lastSeq int32) *batchMeta {
	if epoch != e.epoch {
		return nil
	}
	for i := 0; i < e.n; i++ {
		m := &e.batches[(e.head+i)%numBatchesToRetain]
		if m.firstSeq == firstSeq && m.lastSeq == lastSeq {
			return m
		}
	}
	return nil
}

// producerState follows Kafka's ProducerStateManager: producer entries, ongoing
// transactions and the LSO. It is owned by the appender (Log.mu).
type producerState struct {
	producers map[int64]*producerEntry
	open      map[int64]OpenTxn
	// unreplicated holds the transactions whose marker is at or above the high
	// watermark (Kafka's unreplicatedTxns): decided, but unstable for the LSO until the
	// HW passes the marker, or a read_committed consumer could read a transaction whose
	// marker a new leader does not have.
	unreplicated []completedTxn
}

// completedTxn is a transaction whose marker is at marker.
type completedTxn struct{ first, marker int64 }

func newProducerState() *producerState {
	return &producerState{producers: map[int64]*producerEntry{}, open: map[int64]OpenTxn{}}
}

func (p *producerState) reset() {
	clear(p.producers)
	clear(p.open)
	p.unreplicated = p.unreplicated[:0]
}

// checkLeader validates a client batch against the producer's state (Kafka's
// ProducerAppendInfo.checkProducerEpoch and checkSequence). A duplicate of a retained
// batch returns it.
func (p *producerState) checkLeader(b record.Batch) (*batchMeta, error) {
	pid := b.ProducerID()
	if pid < 0 {
		return nil, nil
	}
	e := p.producers[pid]
	if e == nil {
		return nil, nil // unknown producer: any sequence (Kafka ≥ 2.5)
	}
	epoch, first, last := b.ProducerEpoch(), b.BaseSequence(), b.LastSequence()
	if b.IsControl() {
		if epoch < e.epoch {
			return nil, ErrInvalidProducerEpoch
		}
		return nil, nil
	}
	if dup := e.findDuplicate(epoch, first, last); dup != nil {
		return dup, nil
	}
	if epoch < e.epoch {
		return nil, ErrInvalidProducerEpoch
	}
	if epoch != e.epoch {
		if first != 0 && e.epoch != -1 {
			return nil, ErrOutOfOrderSequence
		}
		return nil, nil
	}
	lm := e.last()
	if lm == nil {
		return nil, nil
	}
	if !(first == lm.lastSeq+1 || (first == 0 && lm.lastSeq == 1<<31-1)) {
		return nil, ErrOutOfOrderSequence
	}
	return nil, nil
}

// checkEpoch validates only the producer epoch of b (a coordinator's batch: Kafka's
// ProducerAppendInfo with AppendOrigin.COORDINATOR skips the sequence checks).
func (p *producerState) checkEpoch(b record.Batch) error {
	if pid := b.ProducerID(); pid >= 0 {
		if e := p.producers[pid]; e != nil && b.ProducerEpoch() < e.epoch {
			return ErrInvalidProducerEpoch
		}
	}
	return nil
}

// apply updates the state with a batch appended at its (final) offsets, leader and
// follower alike. For an ABORT marker closing an open transaction it returns the
// aborted transaction for the transaction index.
func (p *producerState) apply(b record.Batch) (AbortedTxn, bool) {
	if b.IsControl() {
		typ, err := b.ControlType()
		if b.RecordCount() == 0 {
			// A marker emptied by a log cleaner (a mirror copies the source's cleaned
			// segments). Kafka's cleaner empties one only once no batch of its
			// transaction is left in the log, so nothing of it is readable there any
			// more: close it as aborted, or a mirror that copied the transaction's data
			// before the source cleaned it keeps it open and its LSO stuck for good
			// (Kafka's ProducerStateManager skips such a batch; its followers never
			// lag a whole delete.retention.ms behind a cleaned leader the way a paused
			// mirror does).
			typ, err = record.ControlAbort, nil
		}
		if err != nil {
			return AbortedTxn{}, false
		}
		switch typ {
		case record.ControlMirrorPIDReset:
			// Spec section 5 step 5: drop every producer state learned so far. Open
			// transactions stay tracked so that the LSO stays right until their markers.
			clear(p.producers)
			return AbortedTxn{}, false
		case record.ControlAbort, record.ControlCommit:
		default:
			return AbortedTxn{}, false
		}
		e := p.touch(b)
		if e == nil {
			return AbortedTxn{}, false
		}
		pid := b.ProducerID()
		if v := controlValue(b); len(v) >= 6 {
			e.coordinatorEpoch = int32(binary.BigEndian.Uint32(v[2:]))
		}
		txn, ok := p.open[pid]
		if !ok {
			return AbortedTxn{}, false
		}
		marker := b.BaseOffset()
		lso := marker + 1
		for opid, o := range p.open {
			if opid != pid && o.FirstOffset < lso {
				lso = o.FirstOffset
			}
		}
		delete(p.open, pid)
		p.unreplicated = append(p.unreplicated, completedTxn{first: txn.FirstOffset, marker: marker})
		if typ == record.ControlAbort {
			return AbortedTxn{ProducerID: pid, FirstOffset: txn.FirstOffset, LastOffset: marker, LastStableOffset: lso}, true
		}
		return AbortedTxn{}, false
	}
	e := p.touch(b)
	if e == nil {
		return AbortedTxn{}, false
	}
	pid := b.ProducerID()
	if b.BaseSequence() != record.NoSequence {
		e.add(batchMeta{b.BaseSequence(), b.LastSequence(), b.BaseOffset(), b.LastOffset(), b.MaxTimestamp()})
	}
	if b.IsTransactional() {
		if _, ok := p.open[pid]; !ok {
			p.open[pid] = OpenTxn{ProducerID: pid, ProducerEpoch: b.ProducerEpoch(), FirstOffset: b.BaseOffset()}
		}
	}
	return AbortedTxn{}, false
}

// touch returns the entry of b's producer, forgetting its sequences when b carries a new
// producer epoch and recording b's max timestamp; nil when b has no producer ID.
func (p *producerState) touch(b record.Batch) *producerEntry {
	pid := b.ProducerID()
	if pid < 0 {
		return nil
	}
	e := p.entry(pid)
	if b.ProducerEpoch() != e.epoch {
		e.epoch, e.n, e.head = b.ProducerEpoch(), 0, 0
	}
	e.lastTs = b.MaxTimestamp()
	return e
}

func (p *producerState) entry(pid int64) *producerEntry {
	e := p.producers[pid]
	if e == nil {
		e = &producerEntry{epoch: -1, lastTs: -1}
		p.producers[pid] = e
	}
	return e
}

// evictBefore removes producers whose retained batches all lie below logStart and which
// have no open transaction (Kafka's ProducerStateManager.truncateHead), and the
// completed transactions whose marker is below it (onLogStartOffsetIncremented).
func (p *producerState) evictBefore(logStart int64) {
	for pid, e := range p.producers {
		if _, open := p.open[pid]; open {
			continue
		}
		if l := e.last(); l == nil || l.lastOffset < logStart {
			delete(p.producers, pid)
		}
	}
	p.completeBelow(logStart)
}

// completeBelow forgets the unreplicated transactions whose marker is below offset (the
// high watermark or the log start: Kafka's removeUnreplicatedTransactions); it reports
// whether any was.
func (p *producerState) completeBelow(offset int64) bool {
	n := 0
	for _, t := range p.unreplicated {
		if t.marker >= offset {
			p.unreplicated[n] = t
			n++
		}
	}
	changed := n != len(p.unreplicated)
	p.unreplicated = p.unreplicated[:n]
	return changed
}

// removeExpired removes the producers without an open transaction whose last batch's
// timestamp is expirationMs or more before nowMs (Kafka's
// ProducerStateManager.removeExpiredProducers with producer.id.expiration.ms). It
// returns how many it removed.
func (p *producerState) removeExpired(nowMs, expirationMs int64) int {
	n := 0
	for pid, e := range p.producers {
		if _, open := p.open[pid]; !open && nowMs-e.lastTs >= expirationMs {
			delete(p.producers, pid)
			n++
		}
	}
	return n
}

// firstUnstable is the first offset of the oldest transaction that is open or whose
// marker the high watermark has not passed (Kafka's firstUnstableOffset).
func (p *producerState) firstUnstable() (int64, bool) {
	first, ok := int64(0), false
	for _, o := range p.open {
		if !ok || o.FirstOffset < first {
			first, ok = o.FirstOffset, true
		}
	}
	for _, t := range p.unreplicated {
		if !ok || t.first < first {
			first, ok = t.first, true
		}
	}
	return first, ok
}

func (p *producerState) openTxns() []OpenTxn {
	out := make([]OpenTxn, 0, len(p.open))
	for _, o := range p.open {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out
}

func (p *producerState) entries() []ProducerEntry {
	out := make([]ProducerEntry, 0, len(p.producers))
	for pid, e := range p.producers {
		pe := ProducerEntry{ProducerID: pid, ProducerEpoch: e.epoch, LastSequence: -1,
			LastTimestamp: e.lastTs, CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnStartOffset: -1}
		if l := e.last(); l != nil {
			pe.LastSequence = l.lastSeq
		}
		if o, ok := p.open[pid]; ok {
			pe.CurrentTxnStartOffset = o.FirstOffset
		}
		out = append(out, pe)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}

// controlValue returns the value of a control batch's first record, or nil.
func controlValue(b record.Batch) []byte {
	it := record.IterRecords(b)
	if !it.Next() {
		return nil
	}
	return it.Record().Value
}
