package broker

// Fetch for consumers (ReplicaID −1) and followers (ReplicaState, replication.md):
// MinBytes/MaxWaitMs long polls that park on
// the partitions' change notifications, MaxBytes and per-partition limits (the first
// non-empty partition returns at least one whole batch), read_committed up to the LSO
// with AbortedTransactions, topic IDs (v13+), OFFSET_OUT_OF_RANGE, LastFetchedEpoch →
// DivergingEpoch (v12+), MirrorLeaderEpoch on followers' fetches of mirror partitions
// (mirrorproto). Follows Kafka's ReplicaManager.fetchMessages and
// Partition.fetchRecords.
//
// Fetch sessions (KIP-227) are served as Kafka does: fetchsession.go.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/kafka"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/storage"
)

func init() {
	// Sessions from v7, diverging epochs from v12, topic IDs from v13.
	register(kmsg.Fetch, 4, 16, (*Broker).handleFetch)
}

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
		resp, bytes, anyError := b.fetchOnce(ctx, req, d)
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
			resp, _, _ = b.fetchOnce(ctx, req, d)
			return resp
		}
	}
}

// fetchWaitChannels collects the change notifications of the requested partitions,
// taken before reading so that no append between read and wait is missed, and the
// replica manager's, so that a leadership change wakes the wait too.
func (b *Broker) fetchWaitChannels(req *kmsg.FetchRequest) []<-chan struct{} {
	chans := []<-chan struct{}{b.rm.Changed()}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if part, err := b.fetchPartitionOf(req.Version, rt, rp.Partition); err == nil {
				chans = append(chans, part.Log().Changed())
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

// fetchPartitionOf returns the partition a fetch names (by topic ID from v13) when this
// broker leads it.
func (b *Broker) fetchPartitionOf(version int16, rt kmsg.FetchRequestTopic, p int32) (*partition.Partition, error) {
	if version >= 13 {
		return b.leaderByID(rt.TopicID, p)
	}
	return b.leader(rt.Topic, p)
}

// fetchOnce reads every requested partition once. It returns the response, the number
// of record bytes in it, and whether any partition carries an error or a diverging
// epoch (those are answered at once).
func (b *Broker) fetchOnce(ctx context.Context, req *kmsg.FetchRequest, d *fetchData) (*kmsg.FetchResponse, int, bool) {
	listener := b.listenerOf(ctx)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 52428800
	}
	readCommitted := req.IsolationLevel == 1
	fetcher := followerOf(req)
	// Kafka's handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster, a
	// consumer READ on each topic; the others are TOPIC_AUTHORIZATION_FAILED.
	followerAllowed := fetcher.ok && b.authorizeCluster(ctx, acl.OpClusterAction)
	total := 0
	anyError := false
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		allowed := followerAllowed
		if !fetcher.ok {
			name := rt.Topic
			if req.Version >= 13 {
				if t := b.rm.Image().TopicsByID[rt.TopicID]; t != nil {
					name = t.Name
				}
			}
			allowed = name == "" || b.authorize(ctx, acl.OpRead, acl.ResourceTopic, name)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			// Records are never null on the wire: librdkafka rejects a size of -1.
			sp.RecordBatches = []byte{}
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				anyError = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			part, err := b.fetchPartitionOf(req.Version, rt, rp.Partition)
			if err != nil {
				switch {
				case req.Version >= 13 && errors.Is(err, partition.ErrUnknownTopicOrPartition) && b.rm.Image().TopicsByID[rt.TopicID] == nil:
					sp.ErrorCode = kerr.UnknownTopicID.Code
				default:
					sp.ErrorCode = partitionError(err).Code
				}
				if errors.Is(err, partition.ErrNotLeader) && req.Version >= 12 {
					name := rt.Topic
					if req.Version >= 13 {
						name = b.rm.Image().TopicsByID[rt.TopicID].Name
					}
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = b.currentLeader(name, rp.Partition)
					b.addFetchLeader(resp, sp.CurrentLeader.LeaderID, listener)
				}
				anyError = true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			k := kafka.TopicIDPartition{Topic: rt.Topic, TopicID: rt.TopicID, Partition: rp.Partition}
			n, stop := b.fetchPartition(part, d, k, rp, fetcher, readCommitted, maxBytes-total, total == 0, &sp)
			total += n
			anyError = anyError || stop
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total, anyError
}

// mirroredTopic reports whether topic is a mirror topic that is not stopped: its
// batches carry the source's leader epochs.
func (b *Broker) mirroredTopic(topic string) bool {
	t := b.meta.Image().Topics[topic]
	return t != nil && t.Mirror != nil && t.Mirror.Desired != metadata.DesiredStopped
}

// follower is the replica a follower Fetch comes from (ReplicaState from v15, ReplicaId
// before); ok false for a consumer's fetch.
type follower struct {
	id    int32
	epoch int64 // its broker epoch, −1 before v15
	ok    bool
}

func followerOf(req *kmsg.FetchRequest) follower {
	if req.Version >= 15 {
		return follower{id: req.ReplicaState.ID, epoch: req.ReplicaState.Epoch, ok: req.ReplicaState.ID >= 0}
	}
	return follower{id: req.ReplicaID, epoch: -1, ok: req.ReplicaID >= 0}
}

// fetchPartition fills sp for one partition and returns the record bytes added and
// whether the partition must be answered at once (error or diverging epoch). The
// records are kept in d as a file range under k (read into a buffer when k has one
// already: a partition listed twice). A consumer reads up to the high watermark (the LSO
// for read_committed); a follower reads up to the LEO, and its fetch offset is recorded
// as its LEO (Kafka's Partition.fetchRecords for a follower: the HW answered is the one
// before that update).
func (b *Broker) fetchPartition(part *partition.Partition, d *fetchData, k kafka.TopicIDPartition, rp kmsg.FetchRequestTopicPartition, from follower, readCommitted bool, budget int, first bool, sp *kmsg.FetchResponseTopicPartition) (int, bool) {
	l := part.Log()
	hw, lso := part.HighWatermarkAndLSO()
	leo := l.LogEndOffset()
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, lso, l.LogStartOffset()
	err := part.CheckLeader(rp.CurrentLeaderEpoch)
	if err == nil && from.ok {
		err = part.CheckFollower(from.id, from.epoch)
	}
	if err != nil {
		sp.ErrorCode = partitionError(err).Code
		if errors.Is(err, partition.ErrNotReplica) && rp.CurrentLeaderEpoch >= 0 {
			// Kafka's followerReplicaOrThrow: the (replica, leader epoch) pair is not
			// known yet (a reassignment may be adding it), so the follower retries.
			sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
		}
		return 0, true
	}
	if rp.LastFetchedEpoch >= 0 {
		e, end := l.EndOffsetForEpoch(rp.LastFetchedEpoch)
		if e < rp.LastFetchedEpoch || end < rp.FetchOffset {
			sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = e, end
			return 0, true
		}
	}
	maxOffset := hw
	switch {
	case from.ok:
		maxOffset = leo
	case readCommitted:
		maxOffset = lso
	}
	if from.ok && rp.FetchOffset >= l.LogStartOffset() && rp.FetchOffset <= leo {
		// Recorded before the read, with the LEO read before it (an offset out of range
		// is not: the read answers OFFSET_OUT_OF_RANGE and the follower resolves it).
		if err := part.UpdateFollowerFetchState(partition.FollowerFetch{ReplicaID: from.id, BrokerEpoch: from.epoch,
			FetchOffset: rp.FetchOffset, LogStartOffset: rp.LogStartOffset, LeaderLEO: leo, NowMs: time.Now().UnixMilli()}); err != nil {
			sp.ErrorCode = partitionError(err).Code
			return 0, true
		}
	}
	if from.ok && b.mirroredTopic(part.Topic()) {
		// MirrorLeaderEpoch (spec section 6), taken before the read: the follower appends
		// the batches up to it and fetches again for any appended after it.
		if e := l.LatestEpoch(); e >= 0 {
			mirrorproto.SetMirrorLeaderEpoch(&sp.UnknownTags, e)
		}
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
		case errors.Is(err, storage.ErrOffsetOutOfRange) && rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < part.LeaderEpoch():
			// truncated (and fenced, storage TruncateToFenced) since the check above:
			// the consumer validates its position instead of resetting it
			sp.ErrorCode = kerr.FencedLeaderEpoch.Code
		case errors.Is(err, storage.ErrOffsetOutOfRange):
			sp.ErrorCode = kerr.OffsetOutOfRange.Code
		case errors.Is(err, storage.ErrClosed): // deleted while we read it
			sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case errors.Is(err, storage.ErrLogDirOffline): // logged once when it went offline
			sp.ErrorCode = kerr.KafkaStorageError.Code
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

// addFetchLeader adds leader id's endpoint to a Fetch v16+ response (KIP-951
// NodeEndpoints), once.
func (b *Broker) addFetchLeader(resp *kmsg.FetchResponse, id int32, listener string) {
	if id < 0 || resp.Version < 16 {
		return
	}
	for _, br := range resp.Brokers {
		if br.NodeID == id {
			return
		}
	}
	im := b.rm.Image()
	if e, ok := b.endpointOf(im, id, listener); ok {
		br := kmsg.NewFetchResponseBroker()
		br.NodeID, br.Host, br.Port = id, e.Host, e.Port
		if r := im.Brokers[id].Rack; r != "" {
			br.Rack = strp(r)
		}
		resp.Brokers = append(resp.Brokers, br)
	}
}
