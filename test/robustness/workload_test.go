package robustness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clustertest"
	"github.com/kmirror/kmirror/internal/record"
)

// pos is one record's place: partition and offset.
type pos struct {
	p int32
	o int64
}

func (q pos) String() string { return fmt.Sprintf("%d@%d", q.p, q.o) }

// workload writes to and reads from one topic while faults happen, and checks Kafka's
// replication guarantees (cluster.md §4) on what it saw:
//
//   - producers: acks=all idempotent franz-go clients, retrying without limit, each
//     record's value unique; every acknowledgement (partition, offset, value) is kept;
//   - probes: single raw Produce requests (no retries, so NOT_ENOUGH_REPLICAS is a
//     definite failure: refused before the append);
//   - a tail consumer reading every partition from the start, at read_uncommitted;
//   - a sampler asking every live node's Metadata and the leaders' ListOffsets.
//
// Invariants: no acknowledged write lost; each (partition, offset) holds one value across
// acks and reads; a value is written once (idempotence); a definite failure is never read;
// the consumer's offsets never go back; the HW never decreases; leader ∈ ISR ⊆ replicas;
// one leader per leader epoch and epochs never going back at one broker; after healing
// every replica is byte-identical, the ISR full and every partition led.
type workload struct {
	e     *env
	topic string
	parts int32
	// loose is set for unclean elections: acknowledged writes may be lost and the HW may
	// go back, so only convergence is checked.
	loose bool

	mu         sync.Mutex
	acked      map[pos]string
	ackedVals  map[string]pos
	failed     map[string]bool   // definite failures
	noRead     map[string]string // values that must never be read, and why
	read       map[pos]string
	produceErr []string
	violations []string
	ackCount   atomic.Int64
	readCount  atomic.Int64

	stopping atomic.Bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the consumer and the sampler
	genStop  chan struct{}  // closed: the producers stop writing new records
	genWG    sync.WaitGroup // the producers' loops
	prods    []*kgo.Client
	probeSeq atomic.Int64
}

// startWorkload starts producers producers, the tail consumer and the sampler on topic.
func startWorkload(e *env, topic string, parts int32, producers int) *workload {
	w := &workload{e: e, topic: topic, parts: parts,
		acked: map[pos]string{}, ackedVals: map[string]pos{}, failed: map[string]bool{},
		noRead: map[string]string{}, read: map[pos]string{}, genStop: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for i := range producers {
		w.startProducer(ctx, i)
	}
	w.wg.Add(2)
	go w.consume(ctx)
	go w.sample(ctx)
	e.t.Cleanup(w.stop)
	return w
}

func (w *workload) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) < 50 {
		w.violations = append(w.violations, fmt.Sprintf(format, args...))
	}
}

func (w *workload) startProducer(ctx context.Context, id int) {
	cl := w.e.c.Client(nil,
		kgo.ClientID(fmt.Sprintf("robustness-producer-%d", id)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(100),
		kgo.ProduceRequestTimeout(5*time.Second),
	)
	w.prods = append(w.prods, cl)
	w.genWG.Add(1)
	go func() {
		defer w.genWG.Done()
		for seq := 0; ; seq++ {
			select {
			case <-w.genStop:
				return
			default:
			}
			v := fmt.Sprintf("w%d-%06d", id, seq)
			r := &kgo.Record{Topic: w.topic, Partition: int32(seq) % w.parts, Value: []byte(v)}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					if !w.stopping.Load() && ctx.Err() == nil {
						w.mu.Lock()
						w.produceErr = append(w.produceErr, fmt.Sprintf("%s: %v", v, err))
						w.mu.Unlock()
					}
					return
				}
				w.ack(pos{r.Partition, r.Offset}, v)
			})
			select {
			case <-w.genStop:
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
}

// ack records an acknowledged write of v at q.
func (w *workload) ack(q pos, v string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.acked[q]; ok && old != v && !w.loose {
		w.violations = append(w.violations, fmt.Sprintf("%s acknowledged twice: %q and %q", q, old, v))
	}
	if old, ok := w.read[q]; ok && old != v && !w.loose {
		w.violations = append(w.violations, fmt.Sprintf("%s acknowledged as %q but read as %q", q, v, old))
	}
	w.acked[q] = v
	w.ackedVals[v] = q
	w.ackCount.Add(1)
}

// acks is how many writes were acknowledged so far.
func (w *workload) acks() int64 { return w.ackCount.Load() }

// waitProgress waits until n more writes than now are acknowledged.
func (w *workload) waitProgress(what string, n int64) {
	w.e.t.Helper()
	from := w.acks()
	clustertest.Eventually(w.e.t, waitLong, func() (bool, string) {
		got := w.acks() - from
		return got >= n, fmt.Sprintf("%s: %d of %d more writes acknowledged", what, got, n)
	})
}

func (w *workload) consume(ctx context.Context) {
	defer w.wg.Done()
	offs := map[int32]kgo.Offset{}
	for p := range w.parts {
		offs[p] = kgo.NewOffset().At(0)
	}
	cl := w.e.c.Client(nil,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.topic: offs}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
	)
	last := map[int32]int64{}
	for p := range w.parts {
		last[p] = -1
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last[r.Partition] && !w.loose {
				w.violate("the consumer went back on partition %d: offset %d after %d", r.Partition, r.Offset, last[r.Partition])
			}
			last[r.Partition] = r.Offset
			w.saw(pos{r.Partition, r.Offset}, string(r.Value), "the tail consumer")
		})
	}
}

// saw records that v was read at q.
func (w *workload) saw(q pos, v, who string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.readCount.Add(1)
	if why, ok := w.noRead[v]; ok {
		w.violations = append(w.violations, fmt.Sprintf("%s read %q at %s: %s", who, v, q, why))
	}
	if w.loose {
		w.read[q] = v
		return
	}
	if old, ok := w.read[q]; ok && old != v {
		w.violations = append(w.violations, fmt.Sprintf("%s read %q at %s, earlier read %q there", who, v, q, old))
	}
	if a, ok := w.acked[q]; ok && a != v {
		w.violations = append(w.violations, fmt.Sprintf("%s read %q at %s, acknowledged as %q", who, v, q, a))
	}
	if w.failed[v] {
		w.violations = append(w.violations, fmt.Sprintf("%s read %q at %s, a definite failure (NOT_ENOUGH_REPLICAS)", who, v, q))
	}
	w.read[q] = v
}

// sample checks, every 300 ms, every live node's Metadata (leader ∈ ISR ⊆ replicas, one
// leader per epoch, a node's epochs never going back) and the HW the leaders answer
// ListOffsets with at their epoch (never going back).
func (w *workload) sample(ctx context.Context) {
	defer w.wg.Done()
	type seen struct {
		gen   int
		epoch int32
	}
	lastEpoch := map[[2]int32]seen{}    // (node, partition)
	epochLeader := map[[2]int32]int32{} // (partition, epoch) → leader
	hwAt := map[int32]map[int32]int64{} // partition → epoch → highest HW
	for ctx.Err() == nil {
		listed := false // the HWs are asked once a round, of the leaders the first answering node names
		for _, n := range w.e.live() {
			gen := w.e.generation(n.ID)
			ps, err := w.e.partitions(n.ID, w.topic)
			if err != nil || w.e.generation(n.ID) != gen {
				continue
			}
			for p, s := range ps {
				if s.Leader >= 0 && !slices.Contains(s.ISR, s.Leader) {
					w.violate("node %d: partition %d's leader %d is not in its ISR %v", n.ID, p, s.Leader, s.ISR)
				}
				for _, r := range s.ISR {
					if !slices.Contains(s.Replicas, r) {
						w.violate("node %d: partition %d's ISR %v is not within its replicas %v", n.ID, p, s.ISR, s.Replicas)
					}
				}
				k := [2]int32{n.ID, p}
				if prev, ok := lastEpoch[k]; ok && prev.gen == gen && s.LeaderEpoch < prev.epoch {
					w.violate("node %d: partition %d's leader epoch went back from %d to %d", n.ID, p, prev.epoch, s.LeaderEpoch)
				}
				lastEpoch[k] = seen{gen, s.LeaderEpoch}
				if s.Leader < 0 {
					continue
				}
				ek := [2]int32{p, s.LeaderEpoch}
				if l, ok := epochLeader[ek]; ok && l != s.Leader {
					w.violate("partition %d has two leaders at epoch %d: %d and %d", p, s.LeaderEpoch, l, s.Leader)
				}
				epochLeader[ek] = s.Leader
				if listed || w.loose || w.e.generation(s.Leader) < 0 {
					continue
				}
				if hw, ok := w.listHW(ctx, s.Leader, p, s.LeaderEpoch); ok {
					if hwAt[p] == nil {
						hwAt[p] = map[int32]int64{}
					}
					for ep, h := range hwAt[p] {
						if ep <= s.LeaderEpoch && hw < h {
							w.violate("partition %d's HW went back: %d at epoch %d (leader %d), %d earlier at epoch %d", p, hw, s.LeaderEpoch, s.Leader, h, ep)
						}
					}
					hwAt[p][s.LeaderEpoch] = max(hwAt[p][s.LeaderEpoch], hw)
				}
			}
			listed = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// listHW asks node id's ListOffsets for partition p's latest offset (the HW) at leader
// epoch epoch; ok is false on any error (a node at another epoch answers FENCED or
// UNKNOWN_LEADER_EPOCH, a new leader OFFSET_NOT_AVAILABLE).
func (w *workload) listHW(ctx context.Context, id, p, epoch int32) (int64, bool) {
	return listHW(ctx, w.e, id, w.topic, p, epoch)
}

func listHW(ctx context.Context, e *env, id int32, topic string, p, epoch int32) (int64, bool) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.node(id).Addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return 0, false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, epoch, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, false
	}
	r := resp.Topics[0].Partitions[0]
	if r.ErrorCode != 0 {
		return 0, false
	}
	return r.Offset, true
}

// probeResult is what one raw Produce answered.
type probeResult struct {
	value  string
	offset int64
	err    error // the request's or the partition's error
}

// rawProduce sends one Produce of one record with value v to partition p over cl (a
// rawClient: one node, its acks, no producer ID, no retries) and returns its answer.
func rawProduce(ctx context.Context, cl *kgo.Client, topic string, p int32, v string) probeResult {
	req := kmsg.NewPtrProduceRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = record.Build(record.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: time.Now().UnixMilli()},
		[]record.KV{{Value: []byte(v)}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return probeResult{value: v, err: err}
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return probeResult{value: v, err: errors.New("no partition in the Produce answer")}
	}
	r := resp.Topics[0].Partitions[0]
	return probeResult{value: v, offset: r.BaseOffset, err: kerr.ErrorForCode(r.ErrorCode)}
}

// probe sends one acks=all record to partition p's leader node id; an answer
// NOT_ENOUGH_REPLICAS makes the value a definite failure, a success an acknowledged
// write.
func (w *workload) probe(id, p int32) probeResult {
	cl := w.e.rawClient(id, -1)
	defer cl.Close()
	v := fmt.Sprintf("probe-%06d", w.probeSeq.Add(1))
	r := rawProduce(context.Background(), cl, w.topic, p, v)
	switch {
	case r.err == nil:
		w.ack(pos{p, r.offset}, v)
	case errors.Is(r.err, kerr.NotEnoughReplicas):
		w.mu.Lock()
		w.failed[v] = true
		w.mu.Unlock()
	}
	return r
}

// mustNotRead marks values that must never be read (why says which guarantee).
func (w *workload) mustNotRead(why string, vs ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range vs {
		w.noRead[v] = why
	}
}

// stop stops the clients and goroutines (the records not yet acknowledged are
// abandoned, neither acknowledged nor failed).
func (w *workload) stop() {
	if w.stopping.Swap(true) {
		return
	}
	close(w.genStop)
	gen := make(chan struct{})
	go func() { w.genWG.Wait(); close(gen) }()
	select {
	case <-gen:
	case <-time.After(30 * time.Second): // a Produce blocked on a full buffer of a cluster that does not heal
		w.cancel()
		<-gen
	}
	for _, cl := range w.prods {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cl.Flush(ctx)
		cancel()
	}
	w.cancel()
	w.wg.Wait()
	for _, cl := range w.prods {
		cl.Close()
	}
}

// noProduceErrors fails the test if any producer got an error it does not retry.
func (w *workload) noProduceErrors() {
	w.e.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.produceErr) > 0 {
		w.e.t.Errorf("%d produce errors franz-go does not retry, first: %s", len(w.produceErr), strings.Join(w.produceErr[:min(5, len(w.produceErr))], "; "))
	}
}

// finish stops the workload, waits until the cluster healed (every partition led by a
// live node, the ISR full, every replica byte-identical), reads every partition from the
// start and checks every invariant on all that was acknowledged and read.
func (w *workload) finish() {
	t := w.e.t
	t.Helper()
	w.stop()
	t.Log("workload stopped; waiting for the cluster to heal")
	w.e.waitFullISR(w.topic)
	w.e.waitIdentical(w.topic, w.parts)
	t.Log("every partition led, its ISR full and its replicas byte-identical")
	ends := w.e.endOffsets(w.topic)
	final := readAll(w.e, w.topic, ends)
	valAt := map[string]pos{}
	for q, v := range final {
		w.saw(q, v, "the final read")
		if other, ok := valAt[v]; ok && !w.loose {
			w.violate("%q is written twice, at %s and %s (idempotence)", v, other, q)
		}
		valAt[v] = q
	}
	w.mu.Lock()
	if !w.loose {
		var lost []string
		for q, v := range w.acked {
			if final[q] != v {
				lost = append(lost, fmt.Sprintf("%q at %s (read %q)", v, q, final[q]))
			}
		}
		sort.Strings(lost)
		if len(lost) > 0 {
			w.violations = append(w.violations, fmt.Sprintf("%d acknowledged writes lost, first: %s", len(lost), strings.Join(lost[:min(5, len(lost))], "; ")))
		}
	}
	vs := slices.Clone(w.violations)
	acked, failed, reads := len(w.acked), len(w.failed), w.readCount.Load()
	w.mu.Unlock()
	t.Logf("workload on %s: %d writes acknowledged, %d definite failures, %d reads, %d records at the end", w.topic, acked, failed, reads, len(final))
	for _, v := range vs {
		t.Error(v)
	}
}

// readAll reads every partition of topic from offset 0 to ends (its HWs), with a new
// consumer.
func readAll(e *env, topic string, ends map[int32]int64) map[pos]string {
	t := e.t
	t.Helper()
	offs := map[int32]kgo.Offset{}
	left := 0
	for p, end := range ends {
		if end > 0 {
			offs[p] = kgo.NewOffset().At(0)
			left++
		}
	}
	out := map[pos]string{}
	if left == 0 {
		return out
	}
	cl := e.c.Client(nil, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	done := map[int32]bool{}
	for len(done) < left {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("final read of %s: %d of %d partitions read to their end %v", topic, len(done), left, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[pos{r.Partition, r.Offset}] = string(r.Value)
			if r.Offset+1 >= ends[r.Partition] {
				done[r.Partition] = true
			}
		})
	}
	return out
}

// waitIdentical waits until every node holds a replica of every partition of topic
// and all of a partition's replicas are byte-identical (clustertest.Node.LogDigest).
func (e *env) waitIdentical(topic string, parts int32) {
	e.t.Helper()
	for p := range parts {
		clustertest.Eventually(e.t, waitLong, func() (bool, string) {
			var first string
			var sizes []string
			same := true
			for _, n := range e.c.Nodes {
				d, size, ok := n.LogDigest(topic, p)
				if !ok {
					return false, fmt.Sprintf("node %d holds no replica of %s-%d", n.ID, topic, p)
				}
				sizes = append(sizes, fmt.Sprintf("node %d: %d bytes", n.ID, size))
				if first == "" {
					first = d
				} else if d != first {
					same = false
				}
			}
			return same, fmt.Sprintf("the replicas of %s-%d differ (%s)", topic, p, strings.Join(sizes, ", "))
		})
	}
}
