package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterSettings are the sizes of a -only cluster run.
type clusterSettings struct {
	KafkaVersion   string  `json:"kafka_version"`
	DataDir        string  `json:"data_dir"`
	Nodes          int     `json:"nodes"`
	Partitions     int     `json:"partitions"`
	Records        int     `json:"records"`
	Startups       int     `json:"startups"`
	LatencyRate    int     `json:"latency_records_per_s"`
	LatencySeconds float64 `json:"latency_seconds"`
	RecordBytes    int     `json:"record_bytes"`
	Client         string  `json:"client"`
	// KafkaJVM are the options of each Apache Kafka node's JVM.
	KafkaJVM []string `json:"kafka_jvm"`
	// Properties are the server.properties lines every node of both clusters has after
	// its own process.roles, node.id, controller.quorum.voters, listeners and log.dirs.
	Properties []string `json:"common_server_properties"`
}

// startup is one start of a fresh cluster.
type startup struct {
	// MetadataS is the last node started → the first Metadata response (from any node)
	// listing every node as a broker.
	MetadataS float64 `json:"metadata_s"`
	// TopicS is the last node started → the first topic created (CreateTopics answered
	// without error) with a leader answering ListOffsets for every partition.
	TopicS float64 `json:"topic_s"`
	// StopS is SIGTERM to every node at once → every node exited, for the start-ups
	// that were not measured further (0 for the last one).
	StopS float64 `json:"stop_s,omitempty"`
}

// median is the median of vs (the mean of the middle two for an even count).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// clusterResult is one cluster's column of the cluster table.
type clusterResult struct {
	Cluster string `json:"cluster"`
	// Startups are the start-ups of fresh clusters (cs.Startups of them, each formatted
	// anew); the last one is the cluster measured. MetadataS and TopicS are their medians.
	Startups  []startup `json:"startups"`
	MetadataS float64   `json:"startup_metadata_s_median"`
	TopicS    float64   `json:"startup_topic_s_median"`
	// StopS is SIGTERM to every node of the measured cluster at once → every node exited,
	// after the run; StopSMedian the median of it and the start-ups' StopS.
	StopS       float64    `json:"stop_s"`
	StopSMedian float64    `json:"stop_s_median"`
	Produce     throughput `json:"produce"`
	ProduceCPUS float64    `json:"produce_cpu_s"` // the nodes' utime+stime over the produce window, summed
	Consume     throughput `json:"consume"`
	ConsumeCPUS float64    `json:"consume_cpu_s"`
	Latency     latency    `json:"produce_latency_at_fixed_rate"`
	PeakRSSMB   []float64  `json:"peak_rss_mb"` // VmHWM of each node, in node.id order
	CPUSeconds  []float64  `json:"cpu_s"`       // each node's utime+stime over the whole run
}

func (r clusterResult) rssMax() float64 {
	m := -1.0
	for _, v := range r.PeakRSSMB {
		m = max(m, v)
	}
	return m
}

func sum(vs []float64) float64 {
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s
}

type clusterReport struct {
	Date    string  `json:"date"`
	Machine machine `json:"machine"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute load averages
	// before and after the run (the machine may be shared).
	LoadBefore string          `json:"load_average_before"`
	LoadAfter  string          `json:"load_average_after"`
	Settings   clusterSettings `json:"settings"`
	Clusters   []clusterResult `json:"clusters"`
}

// commonProps are the server.properties lines of every node of both clusters after its
// own (clusterProps): replication factor 1 for the internal topics, no initial
// rebalance delay, no topic auto-creation, as internal/kafkaproc's single-node broker;
// everything else at each system's defaults (no forced fsync).
var commonProps = []string{
	"controller.listener.names=CONTROLLER",
	"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
	"inter.broker.listener.name=PLAINTEXT",
	"offsets.topic.replication.factor=1",
	"transaction.state.log.replication.factor=1",
	"transaction.state.log.min.isr=1",
	"group.initial.rebalance.delay.ms=0",
	"auto.create.topics.enable=false",
}

// clusterProps is the server.properties of node i (0-based; node.id i+1) of a cluster of
// combined broker+controller nodes with PLAINTEXT listeners addrs and CONTROLLER
// listeners ctrls: a static quorum of every node (controller.quorum.voters), as
// docs/cluster.md configures kmirror and Apache Kafka 4.x accepts; more are the node's
// listeners ("NAME://host:port") after PLAINTEXT, also advertised; extra lines follow
// commonProps.
func clusterProps(i int, addrs, ctrls []string, logDir string, more, extra []string) string {
	voters := make([]string, len(ctrls))
	for j, c := range ctrls {
		voters[j] = fmt.Sprintf("%d@%s", j+1, c)
	}
	lines := append([]string{
		"process.roles=broker,controller",
		fmt.Sprintf("node.id=%d", i+1),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		"listeners=" + strings.Join(append(append([]string{"PLAINTEXT://" + addrs[i]}, more...), "CONTROLLER://"+ctrls[i]), ","),
		"advertised.listeners=" + strings.Join(append([]string{"PLAINTEXT://" + addrs[i]}, more...), ","),
		"log.dirs=" + logDir,
	}, commonProps...)
	return strings.Join(append(lines, extra...), "\n") + "\n"
}

// newClusterID is a random cluster ID as kafka-storage random-uuid makes them (16 random
// bytes, base64url without padding, not starting with '-').
func newClusterID() string {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			fatalf("cluster ID: %v", err)
		}
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// clusterKind formats and runs the nodes of one system, given a node's server.properties.
type clusterKind struct {
	name   string
	short  string // in file names
	format func(clusterID, conf string) *exec.Cmd
	run    func(conf string) *exec.Cmd
}

func kmirrorKind(bin string) clusterKind {
	return clusterKind{
		name: "kmirror", short: "kmirror",
		format: func(id, conf string) *exec.Cmd {
			return exec.Command(bin, "storage", "format", "-t", id, "-c", conf)
		},
		run: func(conf string) *exec.Cmd {
			return exec.Command(bin, "serve", "--config", conf, "--log-level", "warn")
		},
	}
}

func kafkaKind(version string) clusterKind {
	return clusterKind{
		name: "Apache Kafka " + version, short: "kafka",
		format: func(id, conf string) *exec.Cmd {
			// With controller.quorum.voters set, kafka-storage format takes neither
			// --standalone nor --initial-controllers: the quorum is static.
			return kafkaJVM([]string{"-Xmx256m"}, "kafka.tools.StorageTool", "format", "-t", id, "-c", conf)
		},
		run: func(conf string) *exec.Cmd { return kafkaJVM(kafkaHeap, "kafka.Kafka", conf) },
	}
}

// cluster is the running nodes of one system.
type cluster struct {
	name    string
	kind    clusterKind
	confs   []string // each node's server.properties
	nodes   []*proc
	started time.Time // when the last node was started
}

// restart starts node i (0-based) again on its configuration and data, after it exited.
func (c *cluster) restart(i int) {
	c.nodes[i] = launch(fmt.Sprintf("node%d", i+1), c.nodes[i].addr, filepath.Join(filepath.Dir(c.confs[i]), fmt.Sprintf("server-%d.log", time.Now().UnixNano())), c.kind.run(c.confs[i]))
}

// addr is the bootstrap address the benchmark's clients use: node 1's listener (the
// clients find the other brokers in its Metadata).
func (c *cluster) addr() string { return c.nodes[0].addr }

// cpu is the nodes' utime+stime, summed.
func (c *cluster) cpu() float64 {
	s := 0.0
	for _, p := range c.nodes {
		s += p.cpu()
	}
	return s
}

// exited reports whether a node has exited.
func (c *cluster) exited() bool {
	for _, p := range c.nodes {
		if p.exited() {
			return true
		}
	}
	return false
}

// tail is the end of the log of the first node that exited, else of node 1.
func (c *cluster) tail() string {
	for _, p := range c.nodes {
		if p.exited() {
			return p.tail()
		}
	}
	return c.nodes[0].tail()
}

func (c *cluster) label() string     { return c.name + " cluster" }
func (c *cluster) bootstrap() string { return c.addr() }

// alive exits the benchmark with the node's log when a node has exited.
func (c *cluster) alive() {
	for _, p := range c.nodes {
		if p.exited() {
			fatalf("%s exited:\n%s", p.name, p.tail())
		}
	}
}

// stop stops every node at once (SIGTERM, SIGKILL after 60 s) and returns how long
// until all exited.
func (c *cluster) stop() float64 {
	t := time.Now()
	defer func() { logf("cluster %s: stopped in %.2fs", c.name, time.Since(t).Seconds()) }()
	var wg sync.WaitGroup
	for _, p := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
	return time.Since(t).Seconds()
}

// profile records every node with `perf record` when -perf is set (profile).
func (c *cluster) profile(name string) func() {
	var stops []func()
	for _, p := range c.nodes {
		stops = append(stops, profile(p, name+"-"+p.name))
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// startCluster formats n nodes of kind under dir/node<i> with one new cluster ID (not
// timed), starts them one after the other and returns once they run. more, when not nil,
// gives node i's listeners after PLAINTEXT (clusterProps); extra are server.properties
// lines of every node after commonProps.
func startCluster(kind clusterKind, dir string, n int, more func(i int) []string, extra []string) *cluster {
	addrs, ctrls := make([]string, n), make([]string, n)
	for i := range n {
		addrs[i], ctrls[i] = freeAddr(), freeAddr()
	}
	id := newClusterID()
	confs := make([]string, n)
	for i := range n {
		nd := filepath.Join(dir, fmt.Sprintf("node%d", i+1))
		must(os.MkdirAll(nd, 0o755))
		confs[i] = filepath.Join(nd, "server.properties")
		var ls []string
		if more != nil {
			ls = more(i)
		}
		must(os.WriteFile(confs[i], []byte(clusterProps(i, addrs, ctrls, filepath.Join(nd, "data"), ls, extra)), 0o644))
		if out, err := kind.format(id, confs[i]).CombinedOutput(); err != nil {
			fatalf("%s: format node %d: %v\n%s", kind.name, i+1, err, out)
		}
	}
	c := &cluster{name: kind.name, kind: kind, confs: confs}
	for i := range n {
		c.nodes = append(c.nodes, launch(fmt.Sprintf("node%d", i+1), addrs[i], filepath.Join(filepath.Dir(confs[i]), "server.log"), kind.run(confs[i])))
	}
	c.started = time.Now()
	return c
}

// brokersListed is the number of brokers in addr's Metadata response, 0 when addr does
// not accept a connection within a second or answer within two.
func brokersListed(addr string) int {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0
	}
	conn.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return 0
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return 0
	}
	return len(resp.Brokers)
}

// waitServing measures the start-up to serving: polls every node's Metadata (every
// 10 ms) until one lists every node as a broker, then creates topic (replication factor
// rf with configs, retried every 10 ms until CreateTopics succeeds) and polls until every
// partition's leader answers ListOffsets. Both times are from c.started.
func waitServing(c *cluster, topic string, partitions, rf int, configs map[string]*string) (r startup) {
	deadline := c.started.Add(3 * time.Minute)
	for n := 0; n < len(c.nodes); {
		c.alive()
		if time.Now().After(deadline) {
			fatalf("%s: no Metadata listing %d brokers after 3 minutes (last: %d):\n%s", c.name, len(c.nodes), n, c.nodes[0].tail())
		}
		for _, p := range c.nodes {
			if n = brokersListed(p.addr); n >= len(c.nodes) {
				break
			}
		}
		if n < len(c.nodes) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	r.MetadataS = time.Since(c.started).Seconds()
	cl := newClient(kgo.SeedBrokers(c.addr()))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := adm.CreateTopic(ctx, int32(partitions), int16(rf), configs, topic)
		cancel()
		if err == nil {
			err = resp.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			break
		}
		c.alive()
		if time.Now().After(deadline) {
			fatalf("%s: create topic %s: %v", c.name, topic, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A new client for each poll: right after CreateTopics another broker may not know
	// the topic yet (in Kafka as in kmirror, the brokers' metadata follows the
	// controller's), and a franz-go client keeps such an answer for MetadataMinAge (5 s).
	for !topicLed(c.addr(), topic) {
		c.alive()
		if time.Now().After(deadline) {
			fatalf("%s: topic %s has partitions without a leader after 3 minutes", c.name, topic)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.TopicS = time.Since(c.started).Seconds()
	return r
}

// topicLed reports whether a new client bootstrapped from addr finds a leader answering
// ListOffsets for every partition of topic.
func topicLed(addr, topic string) bool {
	cl := newClient(kgo.SeedBrokers(addr))
	defer cl.Close()
	return endOffsets(kadm.NewClient(cl), topic) >= 0
}

// loadAverage is the first three fields of /proc/loadavg ("" when unreadable).
func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// benchClusters measures a cluster of n kmirror nodes, then one of n Apache Kafka nodes.
func benchClusters(bin, tmp string, s settings, n, partitions, startups int) clusterReport {
	cs := clusterSettings{KafkaVersion: s.KafkaVersion, DataDir: tmp, Nodes: n, Partitions: partitions, Records: s.BrokerRecords, Startups: startups,
		LatencyRate: s.LatencyRate, LatencySeconds: s.LatencySeconds, RecordBytes: recordSize, Client: s.Client,
		KafkaJVM: jvmOpts(kafkaHeap), Properties: commonProps}
	rep := clusterReport{Date: time.Now().UTC().Format(time.RFC3339), Machine: describeMachine(tmp), Settings: cs, LoadBefore: loadAverage()}
	for _, k := range []clusterKind{kmirrorKind(bin), kafkaKind(s.KafkaVersion)} {
		rep.Clusters = append(rep.Clusters, benchCluster(k, filepath.Join(tmp, "c-"+k.short), cs))
	}
	rep.LoadAfter = loadAverage()
	return rep
}

// benchCluster starts fresh clusters cs.Startups times (start-up to serving; each but
// the last stopped again) and measures the last one: warm-up, produce
// and consume throughput on one topic, produce latency at a fixed rate on another (both
// of cs.Partitions partitions), then each node's peak RSS and CPU.
func benchCluster(kind clusterKind, dir string, cs clusterSettings) clusterResult {
	r := clusterResult{Cluster: kind.name}
	topic := fmt.Sprintf("t%d", cs.Partitions)
	var c *cluster
	var meta, topicS []float64
	for i := range max(1, cs.Startups) {
		if c != nil {
			r.Startups[i-1].StopS = c.stop()
		}
		logf("cluster %s: formatting and starting %d nodes (start-up %d of %d)", kind.name, cs.Nodes, i+1, max(1, cs.Startups))
		c = startCluster(kind, filepath.Join(dir, fmt.Sprintf("start%d", i+1)), cs.Nodes, nil, nil)
		st := waitServing(c, topic, cs.Partitions, 1, nil)
		logf("cluster %s: %d brokers listed after %.2fs, topic %s created and led after %.2fs", kind.name, cs.Nodes, st.MetadataS, topic, st.TopicS)
		r.Startups = append(r.Startups, st)
		meta, topicS = append(meta, st.MetadataS), append(topicS, st.TopicS)
	}
	r.MetadataS, r.TopicS = median(meta), median(topicS)
	createTopic(c.addr(), "lat", cs.Partitions, nil)
	logf("cluster %s: warm-up, then produce/consume %d records", kind.name, cs.Records)
	warmUp(c.addr(), cs.Partitions, cs.Records/3)
	window := func(label string, f func() throughput) (throughput, float64) {
		cpu := c.cpu()
		stop := c.profile(kind.short + "-cluster-" + label)
		t := f()
		stop()
		cpu = c.cpu() - cpu
		settle()
		return t, cpu
	}
	r.Produce, r.ProduceCPUS = window("produce", func() throughput { return produce(c.addr(), topic, "none", cs.Records) })
	r.Consume, r.ConsumeCPUS = window("consume", func() throughput { return consume(c.addr(), topic, cs.Records) })
	r.Latency = fixedRateLatency("cluster "+kind.name, c.addr(), cs.LatencyRate, cs.LatencySeconds)
	for _, p := range c.nodes {
		r.PeakRSSMB = append(r.PeakRSSMB, p.peakRSSMB())
		r.CPUSeconds = append(r.CPUSeconds, p.cpu())
	}
	c.alive()
	logf("cluster %s: produce %.1f MB/s, consume %.1f MB/s, latency p50 %.1f ms p99 %.1f ms, peak RSS %v MB", kind.name, r.Produce.MBps, r.Consume.MBps, r.Latency.P50Ms, r.Latency.P99Ms, r.PeakRSSMB)
	r.StopS = c.stop()
	stops := []float64{r.StopS}
	for _, st := range r.Startups[:len(r.Startups)-1] {
		stops = append(stops, st.StopS)
	}
	r.StopSMedian = median(stops)
	return r
}

// renderClusterMarkdown renders the machine, the settings and the cluster table.
func renderClusterMarkdown(r clusterReport) string {
	var b strings.Builder
	s := r.Settings
	fmt.Fprintf(&b, "### %d-node cluster: kmirror vs Apache Kafka %s (KRaft) — %s\n\n", s.Nodes, s.KafkaVersion, r.Date[:10])
	b.WriteString(machineAndClient(r.Machine, s.DataDir, s.Client, s.RecordBytes, "make bench-cluster"))
	fmt.Fprintf(&b, "Load average (1, 5, 15 min) before the run: %s; after: %s.\n\n", r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(&b, "Each cluster: %d combined broker+controller nodes (`process.roles=broker,controller`, a static quorum of all of them in `controller.quorum.voters`), one process each, formatted with `storage format -t ID -c FILE` (not timed), replication factor 1, the same server.properties keys for both systems (%s), Apache Kafka's JVMs with %s. Topics of %d partitions, spread over the nodes by each controller; clients bootstrap from node 1. The clusters run one after the other, each alone on the machine.\n\n",
		s.Nodes, "`"+strings.Join(s.Properties, "`, `")+"`", strings.Join(s.KafkaJVM[:2], " "), s.Partitions)
	if len(r.Clusters) != 2 {
		return b.String()
	}
	k, a := r.Clusters[0], r.Clusters[1]
	fmt.Fprintf(&b, "| metric | kmirror | %s | kmirror / Kafka |\n|---|---:|---:|---:|\n", a.Cluster)
	row := func(name string, kv, av float64) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, num(kv), num(av), ratio(kv, av))
	}
	perNode := func(vs []float64) string {
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = num(v)
		}
		return strings.Join(parts, " / ")
	}
	row(fmt.Sprintf("produce MB/s, %d partitions (%d records)", s.Partitions, s.Records), k.Produce.MBps, a.Produce.MBps)
	row("produce records/s", k.Produce.RecPerS, a.Produce.RecPerS)
	row("nodes' CPU s during the produce (sum)", k.ProduceCPUS, a.ProduceCPUS)
	row(fmt.Sprintf("consume MB/s, %d partitions", s.Partitions), k.Consume.MBps, a.Consume.MBps)
	row("consume records/s", k.Consume.RecPerS, a.Consume.RecPerS)
	row("nodes' CPU s during the consume (sum)", k.ConsumeCPUS, a.ConsumeCPUS)
	row(fmt.Sprintf("produce latency p50 ms at %d records/s for %.0f s", s.LatencyRate, s.LatencySeconds), k.Latency.P50Ms, a.Latency.P50Ms)
	row(fmt.Sprintf("produce latency p99 ms at %d records/s", s.LatencyRate), k.Latency.P99Ms, a.Latency.P99Ms)
	row("peak RSS MB (VmHWM), largest node", k.rssMax(), a.rssMax())
	row("peak RSS MB (VmHWM), sum of the nodes", sum(k.PeakRSSMB), sum(a.PeakRSSMB))
	fmt.Fprintf(&b, "| peak RSS MB of each node, in node.id order | %s | %s | |\n", perNode(k.PeakRSSMB), perNode(a.PeakRSSMB))
	row("nodes' CPU s over the whole run (sum)", sum(k.CPUSeconds), sum(a.CPUSeconds))
	row(fmt.Sprintf("start-up s: last node started → Metadata lists %d brokers (median of %d)", s.Nodes, len(k.Startups)), k.MetadataS, a.MetadataS)
	row(fmt.Sprintf("start-up s: last node started → a %d-partition topic created, every partition led (median)", s.Partitions), k.TopicS, a.TopicS)
	startups := func(r clusterResult) string {
		parts := make([]string, len(r.Startups))
		for i, st := range r.Startups {
			parts[i] = num(st.TopicS)
		}
		return strings.Join(parts, " / ")
	}
	fmt.Fprintf(&b, "| start-up s to the led topic, each start-up | %s | %s | |\n", startups(k), startups(a))
	row(fmt.Sprintf("stop s: SIGTERM to every node at once → all exited (median of %d)", len(k.Startups)), k.StopSMedian, a.StopSMedian)
	stops := func(r clusterResult) string {
		parts := []string{}
		for _, st := range r.Startups[:len(r.Startups)-1] {
			parts = append(parts, num(st.StopS))
		}
		return strings.Join(append(parts, num(r.StopS)+" (after the run)"), " / ")
	}
	fmt.Fprintf(&b, "| stop s, each cluster | %s | %s | |\n", stops(k), stops(a))
	b.WriteString("\nThe machine is shared (2 cores, other work may run at the same time), so figures vary between runs by up to about 2× for throughput; the ratios of one run are what to compare.\n")
	return b.String()
}
