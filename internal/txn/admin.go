package txn

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Describe serves one transactional ID of DescribeTransactions v0
// (TransactionCoordinator.handleDescribeTransactions). Errors in ErrorCode:
// INVALID_REQUEST (empty ID), NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// TRANSACTIONAL_ID_NOT_FOUND, COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	out := kmsg.NewDescribeTransactionsResponseTransactionState()
	out.TransactionalID = id
	if e := c.status(); e != nil {
		out.ErrorCode = e.Code
		return out
	}
	if id == "" {
		out.ErrorCode = kerr.InvalidRequest.Code
		return out
	}
	t, e := c.lookup(id)
	if e != nil {
		out.ErrorCode = e.Code
		return out
	}
	if t == nil {
		out.ErrorCode = kerr.TransactionalIDNotFound.Code
		return out
	}
	defer t.mu.Unlock()
	out.State = t.state.String()
	out.TimeoutMillis, out.StartTimestamp = t.timeoutMs, t.startMs
	out.ProducerID, out.ProducerEpoch = t.producerID, t.producerEpoch
	for _, tp := range t.sortedPartitions() {
		if n := len(out.Topics); n > 0 && out.Topics[n-1].Topic == tp.Topic {
			out.Topics[n-1].Partitions = append(out.Topics[n-1].Partitions, tp.Partition)
			continue
		}
		rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// List serves ListTransactions v0–1 (TransactionStateManager.listTransactionStates):
// transactions matching every given filter (states by Kafka name, producer IDs, and
// from v1 a minimum running time in ms, −1 for none), sorted by transactional ID.
// Unknown state names are returned in UnknownStateFilters; an unknown state filter
// alone matches nothing. Only the loaded partitions' transactions are listed;
// ErrorCode is COORDINATOR_LOAD_IN_PROGRESS (and nothing listed) while a partition
// loads, COORDINATOR_NOT_AVAILABLE once closed.
func (c *Coordinator) List(req *kmsg.ListTransactionsRequest, nowMs int64) *kmsg.ListTransactionsResponse {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	if e := c.status(); e != nil {
		resp.ErrorCode = e.Code
		return resp
	}
	c.mu.Lock()
	loading := c.loadingLocked()
	c.mu.Unlock()
	if loading {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp
	}
	states := map[State]bool{}
	for _, name := range req.StateFilters {
		if s, ok := ParseState(name); ok {
			states[s] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		resp.TransactionStates = []kmsg.ListTransactionsResponseTransactionState{}
		return resp
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	duration := int64(-1)
	if req.Version >= 1 {
		duration = req.DurationFilterMillis
	}
	resp.TransactionStates = []kmsg.ListTransactionsResponseTransactionState{}
	for _, t := range c.all() {
		t.mu.Lock()
		match := t.state != Dead && (len(states) == 0 || states[t.state]) && (len(pids) == 0 || pids[t.producerID]) &&
			(duration < 0 || (t.state == Ongoing && nowMs-t.startMs > duration))
		if match {
			s := kmsg.NewListTransactionsResponseTransactionState()
			s.TransactionalID, s.ProducerID, s.TransactionState = t.id, t.producerID, t.state.String()
			resp.TransactionStates = append(resp.TransactionStates, s)
		}
		t.mu.Unlock()
	}
	sort.Slice(resp.TransactionStates, func(i, j int) bool {
		return resp.TransactionStates[i].TransactionalID < resp.TransactionStates[j].TransactionalID
	})
	return resp
}
