package broker

// Fetch v4–16 for consumers (ReplicaID −1): MinBytes/MaxWaitMs long polls that park on
// the partitions' change notifications, MaxBytes and per-partition limits (the first
// non-empty partition returns at least one whole batch), read_committed up to the LSO
// with AbortedTransactions, topic IDs (v13+), OFFSET_OUT_OF_RANGE, LastFetchedEpoch →
// DivergingEpoch (v12+). Follows Kafka's ReplicaManager.fetchMessages and
// Partition.fetchRecords.
//
// Fetch sessions (KIP-227) are served as Kafka does: fetchsession.go.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/storage"
)

func (b *Broker) handleFetch(ctx context.Context, req *kmsg.FetchRequest) kmsg.Response {
	b.sessionsOnce.Do(func() { b.sessions = newFetchSessionCache(b.fetchSessionSlots()) })
	fc := b.sessions.newContext(req, time.Now().UnixMilli())
	if fc.kind == fetchSessionError {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = fc.errCode
		return resp
	}
	d := &fetchData{}
	resp := b.fetchLongPoll(ctx, fc.req, d)
	resp = b.sessions.finish(fc, resp, time.Now().UnixMilli(), d.hasRecords)
	resp.SetVersion(req.Version)
	if fetchPartsOK(resp) {
		return streamedFetch{resp, d}
	}
	d.materialize(resp)
	return pooledFetch{resp, &d.bufs}
}

// fetchLongPoll reads the partitions of req, waiting up to MaxWaitMs for MinBytes. The
// records of the response returned are file ranges and buffers held by d.
func (b *Broker) fetchLongPoll(ctx context.Context, req *kmsg.FetchRequest, d *fetchData) *kmsg.FetchResponse {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	for {
		waits := b.fetchWaitChannels(req)
		resp, bytes, anyError := b.fetchOnce(req, d)
		if bytes >= int(req.MinBytes) || anyError || req.MaxWaitMillis <= 0 {
			return resp
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return resp
		}
		d.release() // resp is dropped: it is read again
		if !waitAny(ctx, waits, remaining) {
			// Timed out or the connection/server is closing: answer with what we have.
			resp, _, _ = b.fetchOnce(req, d)
			return resp
		}
	}
}

// fetchWaitChannels collects the change notifications of the requested partitions,
// taken before reading so that no append between read and wait is missed.
func (b *Broker) fetchWaitChannels(req *kmsg.FetchRequest) []<-chan struct{} {
	var chans []<-chan struct{}
	for _, rt := range req.Topics {
		ts := b.fetchTopic(req.Version, rt)
		if ts == nil {
			continue
		}
		for _, rp := range rt.Partitions {
			if l := ts.log(rp.Partition); l != nil {
				chans = append(chans, l.Changed())
			}
		}
	}
	return chans
}

// waitAny waits until one channel is closed (true), or timeout / ctx (false).
func waitAny(ctx context.Context, chans []<-chan struct{}, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	woke := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	for _, c := range chans {
		go func(c <-chan struct{}) {
			select {
			case <-c:
				select {
				case woke <- struct{}{}:
				default:
				}
			case <-done:
			}
		}(c)
	}
	select {
	case <-woke:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (b *Broker) fetchTopic(version int16, rt kmsg.FetchRequestTopic) *topicState {
	if version >= 13 {
		return b.topicByID(rt.TopicID)
	}
	return b.topicState(rt.Topic)
}

// fetchOnce reads every requested partition once. It returns the response, the number
// of record bytes in it, and whether any partition carries an error or a diverging
// epoch (those are answered at once).
func (b *Broker) fetchOnce(req *kmsg.FetchRequest, d *fetchData) (*kmsg.FetchResponse, int, bool) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 52428800
	}
	readCommitted := req.IsolationLevel == 1
	total := 0
	anyError := false
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		ts := b.fetchTopic(req.Version, rt)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			// Records are never null on the wire: librdkafka rejects a size of -1.
			sp.RecordBatches = []byte{}
			l := ts.log(rp.Partition)
			if l == nil {
				if ts == nil && req.Version >= 13 {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				} else {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				}
				anyError = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			k := rangeKey{rt.Topic, rt.TopicID, rp.Partition}
			n, stop := b.fetchPartition(l, d, k, rp, readCommitted, maxBytes-total, total == 0, &sp)
			total += n
			anyError = anyError || stop
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total, anyError
}

// fetchPartition fills sp for one partition and returns the record bytes added and
// whether the partition must be answered at once (error or diverging epoch). The
// records are kept in d as a file range under k (read into a buffer when k has one
// already: a partition listed twice).
func (b *Broker) fetchPartition(l *storage.Log, d *fetchData, k rangeKey, rp kmsg.FetchRequestTopicPartition, readCommitted bool, budget int, first bool, sp *kmsg.FetchResponseTopicPartition) (int, bool) {
	epoch := l.LeaderEpoch()
	hw, lso := l.HighWatermarkAndLSO()
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, lso, l.LogStartOffset()
	if rp.CurrentLeaderEpoch >= 0 {
		if rp.CurrentLeaderEpoch < epoch {
			sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			return 0, true
		}
		if rp.CurrentLeaderEpoch > epoch {
			sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			return 0, true
		}
	}
	if rp.LastFetchedEpoch >= 0 {
		e, end := l.EndOffsetForEpoch(rp.LastFetchedEpoch)
		if e < rp.LastFetchedEpoch || end < rp.FetchOffset {
			sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = e, end
			return 0, true
		}
	}
	maxOffset := hw
	if readCommitted {
		maxOffset = lso
	}
	limit := int(rp.PartitionMaxBytes)
	if budget < limit {
		limit = budget
	}
	if limit < 0 {
		limit = 0
	}
	r, err := l.ReadRange(rp.FetchOffset, int32(limit), maxOffset, first)
	if err == nil && r.Len > 0 && !d.addRange(k, r) {
		var data []byte
		data, err = r.ReadInto(d.bufs.alloc(int(r.Len)))
		r.Release()
		sp.RecordBatches = data
	}
	if err != nil {
		switch {
		case errors.Is(err, storage.ErrOffsetOutOfRange) && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < l.LeaderEpoch():
			// truncated (and fenced, storage TruncateToFenced) since the check above:
			// the consumer validates its position instead of resetting it
			sp.ErrorCode = kerr.FencedLeaderEpoch.Code
		case errors.Is(err, storage.ErrOffsetOutOfRange):
			sp.ErrorCode = kerr.OffsetOutOfRange.Code
		case errors.Is(err, storage.ErrClosed): // deleted while we read it
			sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			sp.ErrorCode = kerr.KafkaStorageError.Code
			b.logger.Error("reading log", "dir", l.Dir(), "err", err)
		}
		sp.RecordBatches = []byte{}
		return 0, true
	}
	if readCommitted && r.Len > 0 {
		// The last offset comes from the batch headers read in the file by ReadRange.
		sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		for _, a := range l.AbortedTransactions(rp.FetchOffset, r.LastOffset+1) {
			sp.AbortedTransactions = append(sp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	return int(r.Len), false
}
