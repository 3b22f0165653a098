package main

// -only replication (make bench-replication): issue 14's measurements. A 3-node kmirror
// cluster and a 3-node Apache Kafka KRaft cluster, one after the other, every topic with
// replication factor 3 and min.insync.replicas 2, acks=all producers, 1 KiB records:
// produce and consume throughput, produce latency at a fixed rate, each node's peak RSS,
// and leader failover (kill -9 of a partition leader under a steady producer → the first
// acknowledged write to each partition it led).

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replicationProps are the server.properties lines of every node of both clusters of a
// -only replication run, after commonProps: the replication and failure-detection
// settings, each at Apache Kafka 4.x's default (and kmirror's) but written out so that
// both systems run with the same values, except auto.leader.rebalance.enable, off so
// that leadership stays where the failovers put it between rounds.
var replicationProps = []string{
	"default.replication.factor=3",
	"min.insync.replicas=2",
	"unclean.leader.election.enable=false",
	"broker.heartbeat.interval.ms=2000",
	"broker.session.timeout.ms=9000",
	"replica.lag.time.max.ms=30000",
	"replica.fetch.wait.max.ms=500",
	"replica.fetch.min.bytes=1",
	"replica.fetch.max.bytes=1048576",
	"replica.fetch.backoff.ms=1000",
	"num.replica.fetchers=1",
	"controller.quorum.election.timeout.ms=1000",
	"controller.quorum.fetch.timeout.ms=2000",
	"auto.leader.rebalance.enable=false",
}

// replicationTopicConfigs are the configs of every topic of a -only replication run
// (replication factor 3).
var replicationTopicConfigs = map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}

// failoverClient are the producer settings of the failover rounds on top of
// producerOpts, the same for both systems: metadata refreshed at most every 100 ms
// (franz-go's default MetadataMinAge is 5 s, which would round every failover up to the
// client's next refresh) and a constant 50 ms retry backoff (default: 250 ms growing to
// 2.5 s, jittered).
const failoverClient = "MetadataMinAge 100 ms, RetryBackoff 50 ms constant, unlimited retries, 100000 buffered records, records spread evenly over the partitions (manual partitioner)"

type replicationSettings struct {
	KafkaVersion      string   `json:"kafka_version"`
	DataDir           string   `json:"data_dir"`
	Nodes             int      `json:"nodes"`
	Partitions        int      `json:"partitions"`
	ReplicationFactor int      `json:"replication_factor"`
	MinISR            int      `json:"min_insync_replicas"`
	Rounds            int      `json:"throughput_rounds"`
	Records           int      `json:"records_per_round"`
	LatencyRates      []int    `json:"latency_records_per_s"`
	LatencySeconds    float64  `json:"latency_seconds_per_round"`
	LatencyRounds     int      `json:"latency_rounds"`
	Linger0Rate       int      `json:"latency_linger_0_records_per_s"` // the rate of the extra latency rounds with ProducerLinger(0); 0: none
	Failovers         int      `json:"failover_rounds"`
	FailoverRate      int      `json:"failover_records_per_s"`
	FailoverClient    string   `json:"failover_client"`
	RecordBytes       int      `json:"record_bytes"`
	Client            string   `json:"client"`
	KafkaJVM          []string `json:"kafka_jvm"`
	Properties        []string `json:"common_server_properties"`
	TopicConfigs      []string `json:"topic_configs"`
}

// failoverRound is one kill -9 of a partition leader.
type failoverRound struct {
	Victim     int32   `json:"killed_node"`
	Controller int32   `json:"active_controller"` // never the killed node
	Partitions []int32 `json:"partitions_led"`    // of the failover topic, by the killed node
	// FirstAckS is, per partition in Partitions, kill -9 → the first acknowledgement of a
	// write to that partition after the process was gone (-1: none within 2 minutes).
	FirstAckS []float64 `json:"first_ack_s"`
	FirstS    float64   `json:"first_partition_s"` // the smallest of FirstAckS
	LastS     float64   `json:"last_partition_s"`  // the largest: every partition it led writable again
	// HealS is the restart of the killed node → every partition's ISR full again (not a
	// goal; the time the benchmark waited before the next round).
	HealS float64 `json:"restart_to_full_isr_s"`
}

// rateLatency is the fixed-rate latency rounds at one rate.
type rateLatency struct {
	Rate     int       `json:"records_per_s"`
	LingerMs float64   `json:"producer_linger_ms"` // franz-go's ProducerLinger: its default 10 ms, or 0
	Rounds   []latency `json:"rounds"`
	Achieved []float64 `json:"achieved_records_per_s"`
	P50Ms    float64   `json:"p50_ms_median"`
	P99Ms    float64   `json:"p99_ms_median"`
}

type replicationResult struct {
	Cluster     string          `json:"cluster"`
	Startup     startup         `json:"startup"`
	Produce     []throughput    `json:"produce_rounds"`
	Consume     []throughput    `json:"consume_rounds"`
	ProduceMBps float64         `json:"produce_mb_per_s_median"`
	ProduceRecS float64         `json:"produce_records_per_s_median"`
	ConsumeMBps float64         `json:"consume_mb_per_s_median"`
	ConsumeRecS float64         `json:"consume_records_per_s_median"`
	ProduceCPUS float64         `json:"produce_cpu_s"` // nodes' utime+stime over every produce round, summed
	Latency     []rateLatency   `json:"latency"`       // one per rate of replicationSettings.LatencyRates
	PeakRSSMB   []float64       `json:"peak_rss_mb"`   // VmHWM of each node before the failovers, in node.id order
	Failovers   []failoverRound `json:"failovers"`
	FailFirstS  float64         `json:"failover_first_partition_s_median"`
	FailLastS   float64         `json:"failover_last_partition_s_median"`
	FailPartS   float64         `json:"failover_per_partition_s_median"` // over every partition of every round
	Error       string          `json:"error,omitempty"`
}

type replicationReport struct {
	Date       string              `json:"date"`
	Machine    machine             `json:"machine"`
	LoadBefore string              `json:"load_average_before"`
	LoadAfter  string              `json:"load_average_after"`
	Settings   replicationSettings `json:"settings"`
	Clusters   []replicationResult `json:"clusters"`
}

func benchReplication(bin, tmp string, s settings, latRates []int, linger0Rate, nodes, partitions, rounds, records, latRounds, failovers, failRate int) replicationReport {
	rs := replicationSettings{KafkaVersion: s.KafkaVersion, DataDir: tmp, Nodes: nodes, Partitions: partitions, ReplicationFactor: 3, MinISR: 2,
		Rounds: rounds, Records: records, LatencyRates: latRates, LatencySeconds: s.LatencySeconds, LatencyRounds: latRounds, Linger0Rate: linger0Rate,
		Failovers: failovers, FailoverRate: failRate, FailoverClient: failoverClient, RecordBytes: recordSize, Client: s.Client,
		KafkaJVM: jvmOpts(kafkaHeap), Properties: append(append([]string{}, commonProps...), replicationProps...), TopicConfigs: []string{"min.insync.replicas=2"}}
	rep := replicationReport{Date: time.Now().UTC().Format(time.RFC3339), Machine: describeMachine(tmp), Settings: rs, LoadBefore: loadAverage()}
	for _, k := range []clusterKind{kmirrorKind(bin), kafkaKind(s.KafkaVersion)} {
		rep.Clusters = append(rep.Clusters, benchReplicated(k, filepath.Join(tmp, "r-"+k.short), rs))
	}
	rep.LoadAfter = loadAverage()
	return rep
}

// benchReplicated measures one system: a fresh cluster, a warm-up, rs.Rounds rounds of
// produce then consume (a topic each), rs.LatencyRounds fixed-rate latency rounds, the
// nodes' peak RSS, then rs.Failovers failover rounds.
func benchReplicated(kind clusterKind, dir string, rs replicationSettings) replicationResult {
	r := replicationResult{Cluster: kind.name}
	logf("replication %s: formatting and starting %d nodes", kind.name, rs.Nodes)
	c := startCluster(kind, dir, rs.Nodes, nil, replicationProps)
	defer func() {
		if c != nil {
			c.stop()
		}
	}()
	r.Startup = waitServing(c, "warm", rs.Partitions, rs.ReplicationFactor, replicationTopicConfigs)
	logf("replication %s: serving after %.2fs", kind.name, r.Startup.TopicS)
	create := func(topic string) {
		createTopicRF(c.addr(), topic, rs.Partitions, rs.ReplicationFactor, replicationTopicConfigs)
	}
	for i := range rs.Rounds {
		create(fmt.Sprintf("p%d", i))
	}
	create("lat")
	create("fo")
	logf("replication %s: warm-up", kind.name)
	consume(c.addr(), "warm", produce(c.addr(), "warm", "none", rs.Records).Records)
	settle()
	cpu := 0.0
	for i := range rs.Rounds {
		topic := fmt.Sprintf("p%d", i)
		c0 := c.cpu()
		stop := c.profile(kind.short + "-rf3-produce-" + topic)
		p := produce(c.addr(), topic, "none", rs.Records)
		stop()
		cpu += c.cpu() - c0
		settle()
		cs := consume(c.addr(), topic, rs.Records)
		settle()
		logf("replication %s: round %d: produce %.1f MB/s, consume %.1f MB/s", kind.name, i+1, p.MBps, cs.MBps)
		r.Produce, r.Consume = append(r.Produce, p), append(r.Consume, cs)
	}
	r.ProduceCPUS = cpu
	var pm, pr, cm, cr []float64
	for i := range r.Produce {
		pm, pr = append(pm, r.Produce[i].MBps), append(pr, r.Produce[i].RecPerS)
		cm, cr = append(cm, r.Consume[i].MBps), append(cr, r.Consume[i].RecPerS)
	}
	r.ProduceMBps, r.ProduceRecS, r.ConsumeMBps, r.ConsumeRecS = median(pm), median(pr), median(cm), median(cr)
	type latRun struct {
		rate   int
		linger float64
	}
	var runs []latRun
	for _, rate := range rs.LatencyRates {
		runs = append(runs, latRun{rate, 10})
	}
	if rs.Linger0Rate > 0 {
		runs = append(runs, latRun{rs.Linger0Rate, 0})
	}
	for _, lr := range runs {
		rate := lr.rate
		rl := rateLatency{Rate: rate, LingerMs: lr.linger}
		var extra []kgo.Opt
		if lr.linger == 0 {
			extra = append(extra, kgo.ProducerLinger(0))
		}
		var l50, l99 []float64
		for i := range rs.LatencyRounds {
			stop := c.profile(fmt.Sprintf("%s-rf3-latency-%d-linger%.0f-%d", kind.short, rate, lr.linger, i))
			run := paced(c.addr(), "lat", "none", rate, time.Duration(rs.LatencySeconds*float64(time.Second)), 1, extra...)
			stop()
			l := summarize(run.Lat)
			logf("replication %s: latency round %d at %d records/s, linger %.0f ms: p50 %.1f ms, p99 %.1f ms (achieved %.0f records/s)", kind.name, i+1, rate, lr.linger, l.P50Ms, l.P99Ms, run.achieved())
			rl.Rounds, rl.Achieved = append(rl.Rounds, l), append(rl.Achieved, run.achieved())
			l50, l99 = append(l50, l.P50Ms), append(l99, l.P99Ms)
		}
		rl.P50Ms, rl.P99Ms = median(l50), median(l99)
		r.Latency = append(r.Latency, rl)
	}
	for _, p := range c.nodes {
		r.PeakRSSMB = append(r.PeakRSSMB, p.peakRSSMB())
	}
	c.alive()
	var first, last, all []float64
	for i := range rs.Failovers {
		f, err := failover(c, "fo", rs.Partitions, rs.ReplicationFactor, rs.FailoverRate)
		if err != nil {
			r.Error = fmt.Sprintf("failover round %d: %v", i+1, err)
			logf("replication %s: %s", kind.name, r.Error)
			break
		}
		logf("replication %s: failover %d: killed node %d (leader of %v; controller %d): first partition %.2fs, last %.2fs; ISR full %.1fs after the restart",
			kind.name, i+1, f.Victim, f.Partitions, f.Controller, f.FirstS, f.LastS, f.HealS)
		r.Failovers = append(r.Failovers, f)
		first, last, all = append(first, f.FirstS), append(last, f.LastS), append(all, f.FirstAckS...)
	}
	r.FailFirstS, r.FailLastS, r.FailPartS = median(first), median(last), median(all)
	c.alive()
	c.stop()
	c = nil
	return r
}

// activeController is the node.id of the metadata quorum's leader (DescribeQuorum, which
// both systems' brokers forward to the active controller).
func activeController(addr string) (int32, error) {
	cl := newClient(kgo.SeedBrokers(addr))
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	t.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{t}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("DescribeQuorum: %d topics in the response", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || resp.ErrorCode != 0 {
		return -1, fmt.Errorf("DescribeQuorum: error codes %d, %d", resp.ErrorCode, p.ErrorCode)
	}
	return p.LeaderID, nil
}

// topicLayout is each partition's leader and ISR size, from a new client's Metadata.
func topicLayout(addr, topic string) (leaders map[int32]int32, isr map[int32]int, err error) {
	cl := newClient(kgo.SeedBrokers(addr))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	leaders, isr = map[int32]int32{}, map[int32]int{}
	for _, p := range td.Partitions {
		leaders[p.Partition], isr[p.Partition] = p.Leader, len(p.ISR)
	}
	return leaders, isr, nil
}

// failover runs one failover round on topic: waits until every partition's ISR is full,
// picks the node leading the most partitions that is not the active controller, starts
// a producer writing perSec records/s spread evenly over the partitions, kills the node
// with SIGKILL after 3 s of acknowledged writes and measures, for every partition it led,
// the kill → the first acknowledgement of a write to that partition once the process is
// gone. Then it stops the producer (every record must be acknowledged), restarts the
// node and waits until every ISR is full again.
func failover(c *cluster, topic string, partitions, rf, perSec int) (failoverRound, error) {
	var f failoverRound
	alive := func() string {
		for _, p := range c.nodes {
			if !p.exited() {
				return p.addr
			}
		}
		return c.addr()
	}
	if err := waitFullISR(c, alive, topic, partitions, rf, 3*time.Minute); err != nil {
		return f, err
	}
	ctrl, err := activeController(c.addr())
	if err != nil {
		return f, err
	}
	leaders, _, err := topicLayout(c.addr(), topic)
	if err != nil {
		return f, err
	}
	led := map[int32][]int32{}
	for p, l := range leaders {
		led[l] = append(led[l], p)
	}
	f.Victim, f.Controller = -1, ctrl
	for id, ps := range led {
		if id != ctrl && id > 0 && (f.Victim < 0 || len(ps) > len(led[f.Victim]) || len(ps) == len(led[f.Victim]) && id < f.Victim) {
			f.Victim = id
		}
	}
	if f.Victim < 0 {
		return f, fmt.Errorf("no partition of %s led by a node other than the active controller %d (leaders %v)", topic, ctrl, leaders)
	}
	f.Partitions = led[f.Victim]
	sort.Slice(f.Partitions, func(i, j int) bool { return f.Partitions[i] < f.Partitions[j] })
	victim := c.nodes[f.Victim-1]

	cl := newClient(append(producerOpts(c.addr(), "none"), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(100000), kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))...)
	defer cl.Close()
	var (
		mu       sync.Mutex
		firstAck = map[int32]time.Time{}
		acked    atomic.Int64
		gone     atomic.Int64 // unix ns when the killed process was reaped; 0 before
		failed   atomic.Value
		acks     sync.WaitGroup
	)
	want := map[int32]bool{}
	for _, p := range f.Partitions {
		want[p] = true
	}
	stopProducing := make(chan struct{})
	producing := make(chan struct{})
	go func() {
		defer close(producing)
		start := time.Now()
		for i := 0; ; {
			select {
			case <-stopProducing:
				return
			default:
			}
			for due := int(time.Since(start).Seconds() * float64(perSec)); i < due; i++ {
				p := int32(i % partitions)
				acks.Add(1)
				cl.Produce(context.Background(), &kgo.Record{Partition: p, Value: values[i%len(values)]}, func(r *kgo.Record, err error) {
					defer acks.Done()
					now := time.Now()
					if err != nil {
						failed.Store(err)
						return
					}
					acked.Add(1)
					if g := gone.Load(); g != 0 && now.UnixNano() > g && want[r.Partition] {
						mu.Lock()
						if _, ok := firstAck[r.Partition]; !ok {
							firstAck[r.Partition] = now
						}
						mu.Unlock()
					}
				})
			}
			time.Sleep(time.Millisecond)
		}
	}()
	finish := func() error {
		close(stopProducing)
		<-producing
		done := make(chan struct{})
		go func() { acks.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("records still unacknowledged 2 minutes after the producer stopped")
		}
		if err, _ := failed.Load().(error); err != nil {
			return fmt.Errorf("produce: %v", err)
		}
		return nil
	}
	// 3 s of acknowledged writes before the kill.
	for t := time.Now(); time.Since(t) < 3*time.Second || acked.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(t) > time.Minute {
			finish()
			return f, fmt.Errorf("no acknowledged write within a minute")
		}
	}
	killed := time.Now()
	victim.cmd.Process.Kill()
	<-victim.done
	gone.Store(time.Now().UnixNano())
	for deadline := killed.Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(firstAck)
		mu.Unlock()
		if n == len(f.Partitions) || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	f.FirstS, f.LastS = -1, -1
	for _, p := range f.Partitions {
		s := -1.0
		if t, ok := firstAck[p]; ok {
			s = t.Sub(killed).Seconds()
			if f.FirstS < 0 || s < f.FirstS {
				f.FirstS = s
			}
			f.LastS = max(f.LastS, s)
		}
		f.FirstAckS = append(f.FirstAckS, s)
	}
	missing := len(firstAck) < len(f.Partitions)
	mu.Unlock()
	if err := finish(); err != nil {
		return f, err
	}
	if missing {
		return f, fmt.Errorf("partitions of node %d without an acknowledged write 2 minutes after the kill: %v", f.Victim, f.FirstAckS)
	}
	restarted := time.Now()
	c.restart(int(f.Victim - 1))
	if err := waitFullISR(c, alive, topic, partitions, rf, 3*time.Minute); err != nil {
		return f, err
	}
	f.HealS = time.Since(restarted).Seconds()
	return f, nil
}

// waitFullISR polls (every 100 ms) until every partition of topic has a leader and rf
// replicas in its ISR.
func waitFullISR(c *cluster, addr func() string, topic string, partitions, rf int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		leaders, isr, err := topicLayout(addr(), topic)
		full := err == nil && len(leaders) == partitions
		for p, l := range leaders {
			full = full && l >= 0 && isr[p] == rf
		}
		if full {
			return nil
		}
		for _, p := range c.nodes {
			if p.exited() {
				return fmt.Errorf("%s exited:\n%s", p.name, p.tail())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s: ISRs not full after %v (err %v, ISR sizes %v)", topic, limit, err, isr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// renderReplicationMarkdown renders the machine, the settings and the table.
func renderReplicationMarkdown(r replicationReport) string {
	var b strings.Builder
	s := r.Settings
	fmt.Fprintf(&b, "### Replication: %d-node kmirror vs Apache Kafka %s (KRaft), RF %d, min.insync.replicas %d, acks=all — %s\n\n", s.Nodes, s.KafkaVersion, s.ReplicationFactor, s.MinISR, r.Date[:10])
	b.WriteString(machineAndClient(r.Machine, s.DataDir, s.Client, s.RecordBytes, "make bench-replication"))
	fmt.Fprintf(&b, "Load average (1, 5, 15 min) before the run: %s; after: %s.\n\n", r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(&b, "Each cluster: %d combined broker+controller nodes (static quorum of all of them), one process each, the same server.properties keys for both systems (%s), Apache Kafka's JVMs with %s. Every topic: %d partitions, replication factor %d, topic config `%s`; clients bootstrap from node 1. The clusters run one after the other (kmirror first), each alone on the machine; the machine is shared with other work, so each figure is the median of several short rounds.\n\n",
		s.Nodes, "`"+strings.Join(s.Properties, "`, `")+"`", strings.Join(s.KafkaJVM[:2], " "), s.Partitions, s.ReplicationFactor, strings.Join(s.TopicConfigs, ","))
	fmt.Fprintf(&b, "Throughput: %d rounds, each producing %d records as fast as one client goes into a fresh topic, then consuming them. Latency: %d rounds of %.0f s at each of %s records/s by one client (Produce call → acknowledgement; “achieved” is the rate the client kept: below the target, records waited in its buffer and the latency includes that wait), with franz-go's default 10 ms linger (the goal rows)%s. Failover: %d rounds; in each, a producer writes %d records/s spread evenly over the %d partitions of one topic (%s); after 3 s the node leading the most partitions that is not the active controller (DescribeQuorum) is killed with SIGKILL; measured per partition it led is kill → the first acknowledged write to it after the process was gone; the node is then restarted and the next round waits for every ISR to be full.\n\n",
		s.Rounds, s.Records, s.LatencyRounds, s.LatencySeconds, intList(s.LatencyRates, " and "), linger0(s.Linger0Rate), s.Failovers, s.FailoverRate, s.Partitions, s.FailoverClient)
	if len(r.Clusters) != 2 {
		return b.String()
	}
	k, a := r.Clusters[0], r.Clusters[1]
	fmt.Fprintf(&b, "| metric | kmirror | %s | kmirror / Kafka | goal |\n|---|---:|---:|---:|---|\n", a.Cluster)
	row := func(name string, kv, av float64, goal string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, num(kv), num(av), ratio(kv, av), goal)
	}
	list := func(vs []float64) string {
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = num(v)
		}
		return strings.Join(parts, " / ")
	}
	each := func(ts []throughput) string {
		var vs []float64
		for _, t := range ts {
			vs = append(vs, t.MBps)
		}
		return list(vs)
	}
	row(fmt.Sprintf("produce MB/s, %d partitions (median of %d rounds of %d records)", s.Partitions, s.Rounds, s.Records), k.ProduceMBps, a.ProduceMBps, "≥ 1.0")
	fmt.Fprintf(&b, "| produce MB/s, each round | %s | %s | | |\n", each(k.Produce), each(a.Produce))
	row("produce records/s (median)", k.ProduceRecS, a.ProduceRecS, "")
	row("nodes' CPU s over the produce rounds (sum)", k.ProduceCPUS, a.ProduceCPUS, "")
	row(fmt.Sprintf("consume MB/s, %d partitions (median)", s.Partitions), k.ConsumeMBps, a.ConsumeMBps, "")
	fmt.Fprintf(&b, "| consume MB/s, each round | %s | %s | | |\n", each(k.Consume), each(a.Consume))
	lat := func(ls []latency, p99 bool) string {
		var vs []float64
		for _, l := range ls {
			if p99 {
				vs = append(vs, l.P99Ms)
			} else {
				vs = append(vs, l.P50Ms)
			}
		}
		return list(vs)
	}
	for i := range min(len(k.Latency), len(a.Latency)) {
		kl, al := k.Latency[i], a.Latency[i]
		at := fmt.Sprintf("%d records/s", kl.Rate)
		goal := "≤ 0.5"
		if kl.LingerMs == 0 {
			at += ", linger 0"
			goal = ""
		}
		row(fmt.Sprintf("produce latency p50 ms at %s (median of %d rounds)", at, len(kl.Rounds)), kl.P50Ms, al.P50Ms, "")
		row(fmt.Sprintf("produce latency p99 ms at %s (median)", at), kl.P99Ms, al.P99Ms, goal)
		fmt.Fprintf(&b, "| p50; p99 ms at %s, each round | %s; %s | %s; %s | | |\n", at, lat(kl.Rounds, false), lat(kl.Rounds, true), lat(al.Rounds, false), lat(al.Rounds, true))
		fmt.Fprintf(&b, "| achieved records/s at %s, each round | %s | %s | | |\n", at, list(kl.Achieved), list(al.Achieved))
	}
	row("peak RSS MB (VmHWM), largest node", k.maxRSS(), a.maxRSS(), "")
	fmt.Fprintf(&b, "| peak RSS MB of each node, in node.id order | %s | %s | | |\n", list(k.PeakRSSMB), list(a.PeakRSSMB))
	row(fmt.Sprintf("failover s: kill -9 of a leader → first acknowledged write, every partition it led (median over %d rounds of the last partition)", s.Failovers), k.FailLastS, a.FailLastS, "≤ 0.5")
	row("failover s: the same, the first of its partitions (median)", k.FailFirstS, a.FailFirstS, "")
	row("failover s: the same, median over every partition of every round", k.FailPartS, a.FailPartS, "")
	rounds := func(fs []failoverRound) string {
		var parts []string
		for _, f := range fs {
			parts = append(parts, fmt.Sprintf("node %d (%d partitions): %s–%s", f.Victim, len(f.Partitions), num(f.FirstS), num(f.LastS)))
		}
		return strings.Join(parts, "; ")
	}
	fmt.Fprintf(&b, "| failover s, each round (killed node: first–last partition) | %s | %s | | |\n", rounds(k.Failovers), rounds(a.Failovers))
	heal := func(fs []failoverRound) string {
		var vs []float64
		for _, f := range fs {
			vs = append(vs, f.HealS)
		}
		return list(vs)
	}
	fmt.Fprintf(&b, "| restart of the killed node → every ISR full s, each round | %s | %s | | |\n", heal(k.Failovers), heal(a.Failovers))
	for _, c := range r.Clusters {
		if c.Error != "" {
			fmt.Fprintf(&b, "\n%s: %s\n", c.Cluster, c.Error)
		}
	}
	b.WriteString("\nThe machine is shared (2 cores, other work may run at the same time); the two clusters ran back to back, and the ratios of one run are what to compare.\n")
	return b.String()
}

func (r replicationResult) maxRSS() float64 {
	m := -1.0
	for _, v := range r.PeakRSSMB {
		m = max(m, v)
	}
	return m
}

// intList joins vs with sep.
func intList(vs []int, sep string) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, sep)
}

// linger0 describes the extra latency rounds without linger (none for rate 0).
func linger0(rate int) string {
	if rate <= 0 {
		return ""
	}
	return fmt.Sprintf(", then as many at %d records/s with `ProducerLinger(0)`, which leaves the client's own batching wait out", rate)
}
