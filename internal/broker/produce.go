package broker

// Produce (transactional producers: txn.go). Follows Kafka's KafkaApis.handleProduceRequest,
// ReplicaManager.appendRecords and LogValidator.

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/partition"
	"github.com/kmirror/kmirror/internal/storage"
)

func init() {
	// v12+ adds nothing clients need; v13 uses topic IDs.
	register(kmsg.Produce, 3, 11, (*Broker).handleProduce)
}

func (b *Broker) handleProduce(ctx context.Context, req *kmsg.ProduceRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	badAcks := req.Acks != 0 && req.Acks != 1 && req.Acks != -1
	now := time.Now().UnixMilli()
	im := b.rm.Image()
	// Kafka's handleProduceRequest: a transactional produce needs WRITE on its
	// transactional ID (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
	// each topic WRITE (else TOPIC_AUTHORIZATION_FAILED).
	txnAllowed := req.TransactionID == nil || b.authorize(ctx, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID)
	leaders := map[int32]bool{} // KIP-951: the endpoints of leaders named in errors
	var waits []replicationWait // acks=all appends waiting for the ISR
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		var rules produceRules // resolved once per topic, on the first valid partition
		topicAllowed := txnAllowed && b.authorize(ctx, acl.OpWrite, acl.ResourceTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			fail := func(e *kerr.Error, msg string) {
				sp.ErrorCode = e.Code
				if msg != "" {
					sp.ErrorMessage = strp(msg)
				}
			}
			part, err := b.leader(rt.Topic, rp.Partition)
			switch {
			case !txnAllowed:
				fail(kerr.TransactionalIDAuthorizationFailed, "")
			case !topicAllowed:
				fail(kerr.TopicAuthorizationFailed, "")
			case badAcks:
				fail(kerr.InvalidRequiredAcks, "")
			case err != nil:
				fail(partitionError(err), "")
				if errors.Is(err, partition.ErrNotLeader) {
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = b.currentLeader(rt.Topic, rp.Partition)
					if sp.CurrentLeader.LeaderID >= 0 {
						leaders[sp.CurrentLeader.LeaderID] = true
					}
				}
			case isInternalTopic(rt.Topic):
				fail(kerr.InvalidTopicException, "clients may not produce to the internal topic "+rt.Topic)
			default:
				if ok, msg := b.checkMirrorWrite(rt.Topic, rp.Partition, "produce"); !ok {
					fail(kerr.PolicyViolation, msg)
					break
				}
				if rules.nowMs == 0 {
					rules = b.produceRules(im.Topics[rt.Topic], now)
				}
				if w, ok := b.produceOne(part, req.TransactionID, rp.Records, rules, req.Acks == -1, &sp); ok {
					w.topic, w.partition = len(resp.Topics), len(st.Partitions)
					waits = append(waits, w)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	b.awaitReplication(ctx, resp, waits, req.TimeoutMillis)
	if req.Version >= 10 {
		for id := range leaders {
			if e, ok := b.endpointOf(im, id, b.listenerOf(ctx)); ok {
				br := kmsg.NewProduceResponseBroker()
				br.NodeID, br.Host, br.Port = id, e.Host, e.Port
				if r := im.Brokers[id].Rack; r != "" {
					br.Rack = strp(r)
				}
				resp.Brokers = append(resp.Brokers, br)
			}
		}
	}
	if req.Acks == 0 {
		return nil
	}
	return resp
}

// replicationWait is an acks=all append waiting for the high watermark (Kafka's
// DelayedProduce): the partition, the leader epoch it was written with, the offset the
// HW must reach, and where its answer is in the response.
type replicationWait struct {
	part             *partition.Partition
	leaderEpoch      int32
	end              int64
	topic, partition int
}

// produceOne validates and appends one partition's batch as leader; with acksAll it
// returns the wait for its replication (ok false: nothing to wait for, sp holds the
// answer).
func (b *Broker) produceOne(part *partition.Partition, transactionalID *string, records []byte, rules produceRules, acksAll bool, sp *kmsg.ProduceResponseTopicPartition) (w replicationWait, ok bool) {
	batch, err := validateProduce(records, rules)
	if err != nil {
		var ve *validationError
		errors.As(err, &ve)
		sp.ErrorCode = ve.code.Code
		sp.ErrorMessage = strp(ve.msg)
		sp.ErrorRecords = nil
		return w, false
	}
	appendTime := int64(-1)
	if rules.logAppendTime {
		appendTime = rules.nowMs
	}
	appendFn := func() {
		la, err := part.AppendAsLeader(batch, appendTime, acksAll)
		if err != nil {
			code := appendErrorCode(err)
			sp.ErrorCode = code.Code
			sp.ErrorMessage = strp(err.Error())
			return
		}
		sp.BaseOffset = la.FirstOffset
		sp.LogAppendTime = appendTime
		sp.LogStartOffset = part.Log().LogStartOffset()
		w, ok = replicationWait{part: part, leaderEpoch: la.LeaderEpoch, end: la.LastOffset + 1}, acksAll
	}
	if batch.IsTransactional() {
		id := ""
		if transactionalID != nil {
			id = *transactionalID
		}
		if e, msg := b.produceTransactional(id, part.Topic(), part.Index(), batch, appendFn); e != nil {
			sp.ErrorCode = e.Code
			if msg != "" {
				sp.ErrorMessage = strp(msg)
			}
			return w, false
		}
		return w, ok
	}
	appendFn()
	return w, ok
}

// awaitReplication waits, up to the request's timeout, until each acks=all append is
// replicated to the ISR, and answers those that are not as Kafka's DelayedProduce:
// REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND, or NOT_LEADER_OR_FOLLOWER when
// leadership moved (the append may be truncated away), each with offset −1.
func (b *Broker) awaitReplication(ctx context.Context, resp *kmsg.ProduceResponse, waits []replicationWait, timeoutMs int32) {
	if len(waits) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(max(timeoutMs, 0))*time.Millisecond)
	defer cancel()
	for _, w := range waits {
		if err := w.part.WaitReplicated(wctx, w.leaderEpoch, w.end); err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				err = context.DeadlineExceeded
			}
			sp := &resp.Topics[w.topic].Partitions[w.partition]
			sp.ErrorCode = appendErrorCode(err).Code
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
		}
	}
}

// appendErrorCode maps storage errors to Kafka error codes.
func appendErrorCode(err error) *kerr.Error {
	if e := partitionError(err); e != nil {
		return e
	}
	switch {
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch
	case errors.Is(err, storage.ErrCorrupt):
		return kerr.CorruptMessage
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange
	default:
		return kerr.KafkaStorageError
	}
}

func (b *Broker) produceRules(t *metadata.Topic, now int64) produceRules {
	policy, _ := b.topicConfig(t, "cleanup.policy")
	tsType, _ := b.topicConfig(t, "message.timestamp.type")
	return produceRules{
		maxMessageBytes: b.topicInt(t, "max.message.bytes"),
		compacted:       strings.Contains(policy, "compact"),
		logAppendTime:   strings.EqualFold(tsType, "LogAppendTime"),
		beforeMaxMs:     b.topicInt(t, "message.timestamp.before.max.ms"),
		afterMaxMs:      b.topicInt(t, "message.timestamp.after.max.ms"),
		nowMs:           now,
	}
}

// checkMirrorWrite asks the mirror manager whether a write may touch the topic
// (partition −1 = every partition). Refusals carry the spec §10 message.
func (b *Broker) checkMirrorWrite(topic string, partition int32, op string) (bool, string) {
	if b.mirrors == nil {
		return true, ""
	}
	if partition >= 0 {
		return b.mirrors.CheckWrite(topic, partition, op)
	}
	t := b.meta.Image().Topics[topic]
	if t == nil {
		return true, ""
	}
	for p := int32(0); p < t.Partitions; p++ {
		if ok, msg := b.mirrors.CheckWrite(topic, p, op); !ok {
			return false, msg
		}
	}
	return true, ""
}
