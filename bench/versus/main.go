// Command versus benchmarks kmirror side by side with what users would pick instead, on
// one machine, in one run, all on loopback, and prints the ratios kmirror / reference:
//
//   - Broker: kmirror against a single-node Apache Kafka 4.x (KRaft, JVM with
//     kafka-server-start.sh's default heap -Xmx1G -Xms1G), both with their default flush
//     settings (no forced fsync) and their data directories under the same temp dir.
//     franz-go with the same settings is the client of both: produce and consume
//     throughput (1 KiB records), p50/p99 produce latency at a fixed rate (Produce call →
//     acknowledgement), peak RSS (VmHWM) and start-up time (process start → first
//     successful Metadata response).
//   - Mirroring: kmirror Cluster Mirroring against MirrorMaker 2 (dedicated mode), both
//     pulling from the same Apache Kafka source broker and writing into a kmirror
//     destination broker (a separate one each): catch-up time of a 2 GB backlog (2,000,000
//     records of 1 KiB on 16 partitions), steady-state end-to-end lag at two rates — a
//     fixed low rate (10,000 records/s: the mirror's own latency on an unloaded machine)
//     and half of the maximum rate (kmirror's measured catch-up records/s) with the rate
//     the paced producers achieved — and CPU seconds per GB, uncompressed and zstd. Plus
//     kmirror's mirroring throughput for 1 and 16 partitions against the destination's own
//     produce throughput (and for 1 uncompressed partition once more by a second mirror
//     with an 8 MiB per-partition fetch.max.bytes), and its CPU per GB against a franz-go
//     consume-and-re-produce pipeline over the same backlogs (1 and 16 partitions).
//
// -only cluster (make bench-cluster) runs instead, and only, the cluster comparison:
// a 3-node kmirror cluster against a 3-node Apache Kafka 4.x KRaft cluster (combined
// broker+controller nodes, static quorum, one process each, replication factor 1),
// one after the other, with the same franz-go settings and the same server.properties
// keys: produce and consume throughput on a 12-partition topic, p50/p99 produce latency
// at a fixed rate, each node's peak RSS (largest and sum) and CPU, and start-up to
// serving (the last node started → a Metadata response listing every broker, and → a
// topic created with every partition led). Its results go to cluster-<date>.json and .md.
//
// -only replication (make bench-replication) runs, and only, the same two clusters with
// replication factor 3, min.insync.replicas 2 and acks=all (issue 14): produce and consume
// throughput and fixed-rate produce latency as medians of short rounds, each node's peak
// RSS, and leader failover: a steady producer, kill -9 of the node leading the most
// partitions that is not the active controller, and the time to the first acknowledged
// write to each partition it led, with the same failure-detection settings for both
// systems (replicationProps). Its results go to replication-<date>.json and .md.
//
// -only cleaner (make bench-cleaner) runs, and only, issue 18's end-to-end cleaner
// measurement: one kmirror broker built at -cleaner-before (3f101bc: the cleaning pass
// under the partition's append lock) and one built from the working tree, one after the
// other; a 1-partition topic filled with keyed records while its cleanup.policy is delete,
// produce latency at a fixed rate on that partition without cleaning, then while
// cleanup.policy=compact makes the cleaner clean it. Its results go to cleaner-<date>.json
// and .md.
//
// -only security (make bench-security) runs, and only, issue 16's measurement: one kmirror
// broker and one Apache Kafka broker, each with a PLAINTEXT and a SASL_SSL listener
// (SCRAM-SHA-512, PEM keystore): produce and consume throughput with the broker's CPU,
// and fixed-rate produce latency, per listener. Its results go to security-<date>.json
// and .md.
//
// -only mirror-rf3 (make bench-mirror-rf3) runs, and only, issue 15's replicated-destination
// measurement: one Apache Kafka source broker with backlogs, one 3-node kmirror cluster as
// the destination of three engines one after the other, each on its own topics — kmirror
// Cluster Mirroring into RF 1 mirror topics, then (the nodes restarted with
// default.replication.factor=3, which mirror topics are created with) into RF 3 mirror
// topics, then MirrorMaker 2 with replication.factor=3: catch-up MB/s of the backlog,
// end-to-end lag p50/p99 under a fixed live rate, and CPU s per GB (the three nodes, plus
// MirrorMaker 2's process). Its results go to mirror-rf3-<date>.json and .md.
//
// Results go to bench/results/versus-<date>.json and .md. Apache Kafka's jars come from
// test/interop/fetch-kafka.sh. Run from the repository root: go run ./bench/versus (or
// make bench). A benchmark, not a test: CI does not run it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/kafkaproc"
)

// kafkaJava runs classes from Apache Kafka's jars, with a WARN-level log4j2 config.
var kafkaJava kafkaproc.Java

// leaveTemp removes the benchmark's temp directory (its brokers' data, and the
// -fill-page-cache file of most of the machine's memory), or with -keep names it; main
// sets it once the directory exists.
var leaveTemp = func() {}

// fatalf prints the error, kills the processes the benchmark started, leaves the temp
// directory (leaveTemp) and exits.
func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "versus: "+format+"\n", args...)
	killRunning()
	leaveTemp()
	os.Exit(1)
}

func must(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// settings are the sizes of the run.
type settings struct {
	KafkaVersion   string  `json:"kafka_version"`
	DataDir        string  `json:"data_dir"`
	BrokerRecords  int     `json:"broker_records"`
	LatencyRate    int     `json:"latency_records_per_s"`
	LatencySeconds float64 `json:"latency_seconds"`
	Backlog16      int     `json:"backlog_records_16_partitions"`
	Backlog1       int     `json:"backlog_records_1_partition"`
	LagRate        int     `json:"lag_records_per_s"` // 0: half of kmirror's measured 16-partition catch-up records/s, per codec
	LagProducers   int     `json:"lag_producer_clients"`
	LagRateLow     int     `json:"lag_low_records_per_s"` // the fixed low rate of the second lag run (0: not run)
	LagLowClients  int     `json:"lag_low_producer_clients"`
	LagSeconds     float64 `json:"lag_seconds"`
	RecordBytes    int     `json:"record_bytes"`
	MM2Target      string  `json:"mm2_target"`
	MirrorProps    string  `json:"mirror_props,omitempty"`
	TunedProps     string  `json:"tuned_1_partition_mirror_props,omitempty"` // the second mirror's properties ("" with -tuned1=false)
	Client         string  `json:"client"`
}

// brokerResult is one broker's column of the broker table.
type brokerResult struct {
	Broker     string     `json:"broker"`
	StartupS   float64    `json:"startup_s"`
	Produce16  throughput `json:"produce_16_partitions"`
	Produce1   throughput `json:"produce_1_partition"`
	Consume16  throughput `json:"consume_16_partitions"`
	Latency    latency    `json:"produce_latency_at_fixed_rate"`
	PeakRSSMB  float64    `json:"peak_rss_mb"`
	CPUSeconds float64    `json:"cpu_s"`
}

// mirrorThroughput is a kmirror mirroring rate against the destination's produce rate.
type mirrorThroughput struct {
	Partitions int     `json:"partitions"`
	Codec      string  `json:"codec"`
	Mirror     catchUp `json:"mirror"`
	// FetchMaxBytes is the mirror's per-partition fetch.max.bytes when it is not the
	// default (the tuned 1-partition row), 0 otherwise.
	FetchMaxBytes int        `json:"fetch_max_bytes,omitempty"`
	DestProduce   throughput `json:"destination_produce"` // the tuned row repeats the default 1-partition row's
}

// tunedFetchMaxBytes is the per-partition fetch.max.bytes of the tuned 1-partition mirror
// (the default is 1 MiB).
const tunedFetchMaxBytes = 8 << 20

type report struct {
	Date        string               `json:"date"`
	Machine     machine              `json:"machine"`
	Settings    settings             `json:"settings"`
	Brokers     []brokerResult       `json:"brokers"`
	CatchUps    []catchUp            `json:"catch_ups"`
	Lags        map[string]lagResult `json:"steady_state_lag"`          // engine/codec → lag at half of the maximum (or -lag-rate)
	LagsLow     map[string]lagResult `json:"steady_state_lag_low_rate"` // engine/codec → lag at -lag-rate-low
	MirrorRates []mirrorThroughput   `json:"kmirror_mirror_throughput"`
	Pipelines   []pipelineResult     `json:"pipeline"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "pipeline" {
		runPipeline(os.Args[2:])
		return
	}
	var s settings
	flag.StringVar(&s.KafkaVersion, "kafka", "4.3.1", "Apache Kafka version (test/interop/fetch-kafka.sh)")
	base := flag.String("dir", os.TempDir(), "parent of the temp data directory of every broker")
	flag.IntVar(&s.BrokerRecords, "records", 300000, "records per broker throughput run")
	flag.IntVar(&s.LatencyRate, "latency-rate", 20000, "records/s of the produce latency run")
	latSecs := flag.Int("latency-seconds", 20, "duration of the produce latency run")
	flag.IntVar(&s.Backlog16, "backlog", 2000000, "backlog records of the 16-partition mirror topics (2,000,000 × 1 KiB: the 2 GB backlog of issue 4)")
	flag.IntVar(&s.Backlog1, "backlog1", 1000000, "backlog records of the 1-partition mirror topics (1 GB: a catch-up window of seconds, not a fraction of one)")
	flag.IntVar(&s.LagRate, "lag-rate", 0, "records/s of the steady-state lag runs; 0: half of the maximum, kmirror's measured 16-partition catch-up records/s of the same codec")
	flag.IntVar(&s.LagProducers, "lag-producers", 4, "producer clients sharing the paced load of a steady-state lag run at half of the maximum")
	flag.IntVar(&s.LagRateLow, "lag-rate-low", 10000, "records/s of the second, low-rate steady-state lag runs (the mirror's own latency on an unloaded machine); 0 skips them")
	flag.IntVar(&s.LagLowClients, "lag-low-producers", 1, "producer clients of a low-rate steady-state lag run")
	lagSecs := flag.Int("lag-seconds", 20, "duration of each steady-state lag run")
	flag.StringVar(&s.MM2Target, "mm2-target", "kmirror", "MirrorMaker 2 destination: kmirror or kafka")
	out := flag.String("out", "bench/results", "directory for the results")
	only := flag.String("only", "", "run only 'broker' or 'mirror', or 'cluster': a 3-node kmirror cluster against a 3-node Apache Kafka cluster alone (not part of the default run; results in cluster-<date>.{json,md}), or 'replication': the same clusters with replication factor 3, min.insync.replicas 2 and leader failover (results in replication-<date>.{json,md}), or 'cleaner': produce latency while the log cleaner works on a large partition, kmirror before and after (cleaner-<date>.{json,md}), or 'security': SASL_SSL against PLAINTEXT, kmirror and Apache Kafka (security-<date>.{json,md}), or 'slowlink': mirroring through a proxy adding round-trip time (slowlink-<date>.{json,md}), or 'mirror-rf3': mirroring into a 3-node kmirror cluster, RF 3 against RF 1 and against MirrorMaker 2 (mirror-rf3-<date>.{json,md})")
	nodes := flag.Int("nodes", 3, "nodes of each cluster of -only cluster")
	clusterParts := flag.Int("cluster-partitions", 12, "partitions of the topics of -only cluster")
	startups := flag.Int("startups", 3, "start-ups of a fresh cluster per system of -only cluster (the median is reported; the last cluster is measured)")
	rounds := flag.Int("rounds", 3, "-only replication: produce-then-consume rounds (the median is reported)")
	roundRecords := flag.Int("round-records", 100000, "-only replication: records of each produce round")
	latRounds := flag.Int("latency-rounds", 3, "-only replication: fixed-rate latency rounds of -round-latency-seconds at -latency-rate")
	roundLatSecs := flag.Int("round-latency-seconds", 10, "-only replication: duration of each latency round")
	failovers := flag.Int("failovers", 3, "-only replication: failover rounds (kill -9 of a partition leader)")
	latRates := flag.String("round-latency-rates", "5000,20000", "-only replication: the records/s of the latency rounds, comma-separated")
	linger0Rate := flag.Int("round-latency-linger0-rate", 5000, "-only replication: records/s of extra latency rounds with franz-go's ProducerLinger(0) (0: none)")
	failRate := flag.Int("failover-rate", 2000, "-only replication: records/s of the producer during a failover round")
	flag.StringVar(&s.MirrorProps, "mirror-props", "", "extra key=value lines (comma-separated) for kmirror's mirror.properties, e.g. fetch.max.bytes=8388608")
	withMM2 := flag.Bool("mm2", true, "run MirrorMaker 2 (false: kmirror's mirroring figures only)")
	tuned1 := flag.Bool("tuned1", true, fmt.Sprintf("also mirror a second 1-partition uncompressed backlog with a second mirror whose fetch.max.bytes is %d", tunedFetchMaxBytes))
	flag.StringVar(&perfDir, "perf", "", "directory for `perf record` profiles of kmirror's consume and mirror catch-up windows")
	var cs cleanerSettings
	flag.StringVar(&cs.BeforeRev, "cleaner-before", "3f101bc", "-only cleaner: the git revision of the \"before\" build (the cleaning pass under the append lock)")
	flag.IntVar(&cs.Records, "cleaner-records", 2000000, "-only cleaner: records filling the compacted partition")
	flag.IntVar(&cs.Keys, "cleaner-keys", 200000, "-only cleaner: distinct keys of those records")
	flag.IntVar(&cs.SegmentBytes, "cleaner-segment-bytes", 16<<20, "-only cleaner: segment.bytes of the compacted topic")
	flag.IntVar(&cs.Rate, "cleaner-rate", 2000, "-only cleaner: records/s of the produce latency runs")
	flag.Float64Var(&cs.BaselineSeconds, "cleaner-baseline-seconds", 15, "-only cleaner: duration of the latency run without cleaning")
	flag.Float64Var(&cs.WindowSeconds, "cleaner-window-seconds", 30, "-only cleaner: duration of the latency run during which the cleaner runs")
	secRecords := flag.Int("security-records", 500000, "-only security: records of each listener's produce and consume runs")
	secRate := flag.Int("security-latency-rate", 5000, "-only security: records/s of each listener's latency run")
	secLatSecs := flag.Float64("security-latency-seconds", 10, "-only security: duration of each listener's latency run")
	slowRecords1 := flag.Int("slowlink-records1", 800000, "-only slowlink: backlog records of the 1-partition topic")
	slowRecords16 := flag.Int("slowlink-records16", 1200000, "-only slowlink: backlog records of the 16-partition topic")
	slowTuned := flag.String("slowlink-tuned-props", "fetch.response.max.bytes=33554432", "-only slowlink: the mirror properties (comma-separated key=value) of the tuned kmirror runs, on top of -mirror-props (\"\": no tuned runs)")
	fill := flag.Bool("fill-page-cache", false, "before the runs, fill the page cache with a file (kept until the end) of the available memory minus 2 GiB, so that brokers write into recycled pages as in steady state, not into guest pages the VM's host took back (fillPageCache)")
	rf3Records := flag.Int("mirror-rf3-records", 2000000, "-only mirror-rf3: backlog records of each source topic (2,000,000 × 1 KiB: kmirror's catch-up windows of seconds, not a fraction of one)")
	rf3Parts := flag.String("mirror-rf3-partitions", "16", "-only mirror-rf3: partitions of the source topics, comma-separated (e.g. 16,1: each engine runs once per count)")
	rf3LagRate := flag.Int("mirror-rf3-lag-rate", 10000, "-only mirror-rf3: records/s of the steady-state lag run of each engine (the same for all three)")
	rf3LagProducers := flag.Int("mirror-rf3-lag-producers", 1, "-only mirror-rf3: producer clients sharing the lag run's rate")
	keep := flag.Bool("keep", false, "keep the temp directory (data and logs of every process) instead of removing it")
	flag.Parse()
	switch *only {
	case "", "broker", "mirror", "cluster", "replication", "cleaner", "security", "slowlink", "mirror-rf3":
	default:
		fatalf("-only %q: expected broker, mirror, cluster, replication, cleaner, security, slowlink or mirror-rf3", *only)
	}
	s.LatencySeconds, s.LagSeconds, s.RecordBytes = float64(*latSecs), float64(*lagSecs), recordSize
	if *tuned1 {
		s.TunedProps = withProp(s.MirrorProps, "fetch.max.bytes", fmt.Sprint(tunedFetchMaxBytes))
	}
	s.Client = "franz-go kgo v1.22 (acks=all, idempotent, 1 MiB batches, 20000 buffered records; consumers: 16 MiB fetches)"

	tmp, err := os.MkdirTemp(*base, "kmirror-versus-")
	must(err)
	leaveTemp = func() {
		if *keep {
			fmt.Fprintf(os.Stderr, "kept %s\n", tmp)
		} else {
			os.RemoveAll(tmp)
		}
	}
	defer leaveTemp()
	s.DataDir = tmp
	bin := filepath.Join(tmp, "kmirror")
	if b, err := exec.Command("go", "build", "-o", bin, "./cmd/kmirror").CombinedOutput(); err != nil {
		fatalf("go build: %v\n%s", err, b)
	}
	if *fill {
		pageCacheFill = describeFill(fillPageCache(tmp, 2<<30))
	}
	if *only == "cleaner" {
		cs.BackoffMs, cs.RecordBytes, cs.DataDir = 500, recordSize, tmp
		cs.Client = "franz-go kgo v1.22 (acks=all, idempotent, 1 MiB batches, 20000 buffered records), one client"
		head, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
		must(err)
		cs.AfterRev = strings.TrimSpace(string(head))
		if st, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(st) > 0 {
			cs.AfterRev += " + working tree changes"
		}
		rep := benchCleaner(bin, tmp, cs)
		writeResults(*out, "cleaner", rep, renderCleanerMarkdown(rep))
		return
	}
	o, err := exec.Command("./test/interop/fetch-kafka.sh", s.KafkaVersion).Output()
	if err != nil {
		fatalf("test/interop/fetch-kafka.sh: %v", err)
	}
	kafkaJava, err = kafkaproc.NewJava(strings.TrimSpace(string(o)), tmp)
	must(err)

	if *only == "replication" {
		s.LatencySeconds = float64(*roundLatSecs)
		rep := benchReplication(bin, tmp, s, positiveInts("-round-latency-rates", *latRates), *linger0Rate, *nodes, *clusterParts, *rounds, *roundRecords, *latRounds, *failovers, *failRate)
		writeResults(*out, "replication", rep, renderReplicationMarkdown(rep))
		return
	}
	if *only == "slowlink" {
		rep := benchSlowLink(bin, tmp, s, []int{0, 25, 50}, *slowRecords1, *slowRecords16, *slowTuned, *withMM2)
		writeResults(*out, "slowlink", rep, renderSlowLinkMarkdown(rep))
		return
	}
	if *only == "mirror-rf3" {
		rs := rf3Settings{Records: *rf3Records, Partitions: positiveInts("-mirror-rf3-partitions", *rf3Parts), LagRate: *rf3LagRate, LagProducers: *rf3LagProducers}
		rep := benchMirrorRF3(bin, tmp, s, rs)
		writeResults(*out, "mirror-rf3", rep, renderMirrorRF3Markdown(rep))
		return
	}
	if *only == "security" {
		ss := securitySettings{KafkaVersion: s.KafkaVersion, Records: *secRecords, Partitions: 16, LatencyRate: *secRate, LatencySeconds: *secLatSecs,
			RecordBytes: recordSize, Mechanism: "SCRAM-SHA-512", TLS: "server certificate RSA 2048, TLS 1.3 (both brokers' default ssl.enabled.protocols TLSv1.2,TLSv1.3; the Go client prefers 1.3)",
			DataDir: tmp, Client: s.Client}
		rep := benchSecurity(bin, tmp, ss)
		writeResults(*out, "security", rep, renderSecurityMarkdown(rep))
		return
	}
	if *only == "cluster" {
		rep := benchClusters(bin, tmp, s, *nodes, *clusterParts, *startups)
		writeResults(*out, "cluster", rep, renderClusterMarkdown(rep))
		return
	}
	rep := report{Date: time.Now().UTC().Format(time.RFC3339), Machine: describeMachine(tmp), Settings: s, Lags: map[string]lagResult{}, LagsLow: map[string]lagResult{}}
	if *only != "mirror" {
		rep.Brokers = []brokerResult{
			benchBroker("kmirror", func() *proc { return startKmirror(bin, "kmirror", filepath.Join(tmp, "b-kmirror")) }, s),
			benchBroker("Apache Kafka "+s.KafkaVersion, func() *proc { return startKafka("kafka", filepath.Join(tmp, "b-kafka")) }, s),
		}
	}
	if *only != "broker" {
		benchMirror(bin, tmp, s, *withMM2, &rep)
	}

	writeResults(*out, "versus", rep, renderMarkdown(rep))
}

// writeResults prints md and writes v and md to dir/name-<date>.json and .md.
func writeResults(dir, name string, v any, md string) {
	fmt.Println()
	fmt.Print(md)
	must(os.MkdirAll(dir, 0o755))
	stamp := time.Now().UTC().Format("2006-01-02")
	b, _ := json.MarshalIndent(v, "", "  ")
	must(os.WriteFile(filepath.Join(dir, name+"-"+stamp+".json"), append(b, '\n'), 0o644))
	must(os.WriteFile(filepath.Join(dir, name+"-"+stamp+".md"), []byte(md), 0o644))
	fmt.Printf("\nwrote %s/%s-%s.{json,md}\n", dir, name, stamp)
}

// benchBroker measures one broker: start-up, produce and consume on 16 partitions,
// produce on 1 partition, latency at a fixed rate on 16 partitions, then peak RSS.
func benchBroker(name string, start func() *proc, s settings) brokerResult {
	logf("broker %s: starting", name)
	p := start()
	defer p.stop()
	r := brokerResult{Broker: name, StartupS: p.startup.Seconds()}
	createTopic(p.addr, "t16", 16, nil)
	createTopic(p.addr, "t1", 1, nil)
	createTopic(p.addr, "lat", 16, nil)
	logf("broker %s: up in %.2fs; warm-up, then produce/consume %d records", name, r.StartupS, s.BrokerRecords)
	warmUp(p.addr, 16, s.BrokerRecords/3)
	r.Produce16 = produce(p.addr, "t16", "none", s.BrokerRecords)
	settle()
	stop := profile(p, p.name+"-consume")
	r.Consume16 = consume(p.addr, "t16", s.BrokerRecords)
	stop()
	settle()
	r.Produce1 = produce(p.addr, "t1", "none", s.BrokerRecords)
	settle()
	r.Latency = fixedRateLatency("broker "+name, p.addr, s.LatencyRate, s.LatencySeconds)
	r.PeakRSSMB = p.peakRSSMB()
	r.CPUSeconds = p.cpu()
	return r
}

// warmUp is a pass not measured (JIT for the JVM, page cache and buffers for both): n
// records produced to and consumed from a topic "warm" of the given partitions; then
// settle.
func warmUp(addr string, partitions, n int) {
	createTopic(addr, "warm", partitions, nil)
	consume(addr, "warm", produce(addr, "warm", "none", n).Records)
	settle()
}

// fixedRateLatency is the produce latency (Produce call → acknowledgement) on the topic
// "lat", produced by one client at perSec records/s for seconds. The caller creates
// "lat" before its warm-up: the first records to a topic created a moment ago can wait
// for its metadata to reach the brokers and the client, which would be in the p99.
func fixedRateLatency(name, addr string, perSec int, seconds float64) latency {
	logf("%s: latency at %d records/s for %.0fs", name, perSec, seconds)
	return summarize(paced(addr, "lat", "none", perSec, time.Duration(seconds)*time.Second, 1).Lat)
}

// benchMirror runs the mirroring comparison.
func benchMirror(bin, tmp string, s settings, withMM2 bool, rep *report) {
	codecs := []string{"none", "zstd"}
	logf("mirror: starting the Apache Kafka source")
	src := startKafka("source", filepath.Join(tmp, "m-source"))
	defer src.stop()
	srcLogDir := filepath.Join(tmp, "m-source", "data")
	type backlog struct {
		topic, codec string
		parts, n     int
	}
	var backlogs []backlog
	for _, c := range codecs {
		backlogs = append(backlogs, backlog{"b16-" + c, c, 16, s.Backlog16}, backlog{"b1-" + c, c, 1, s.Backlog1})
		// Lag topics: kmirror (lk) and MirrorMaker 2 (lm) at half of the maximum, and at
		// the low rate (lkl, lml).
		for _, t := range []string{"lk-" + c, "lm-" + c, "lkl-" + c, "lml-" + c} {
			createTopic(src.addr, t, 16, lagTopicConfigs)
		}
	}
	// The tuned 1-partition backlog: a copy of b1-none for the second mirror.
	tuned := backlog{"b1t-none", "none", 1, s.Backlog1}
	produced := backlogs
	if s.TunedProps != "" {
		produced = append(produced[:len(produced):len(produced)], tuned)
	}
	for _, b := range produced {
		createTopic(src.addr, b.topic, b.parts, nil)
		logf("mirror: backlog %s: %d records", b.topic, b.n)
		produce(src.addr, b.topic, b.codec, b.n)
	}
	diskMB := func(topic string) float64 { return float64(diskBytes(srcLogDir, topic)) / 1e6 }

	// kmirror: the destination's own produce rate, then mirroring of each backlog.
	dst := startKmirror(bin, "kmirror-dst", filepath.Join(tmp, "m-kmirror"))
	for _, b := range backlogs {
		pt := "p" + strings.TrimPrefix(b.topic, "b")
		createTopic(dst.addr, pt, b.parts, nil)
		logf("mirror: destination produce rate %s: %d records", pt, b.n)
		settle()
		rep.MirrorRates = append(rep.MirrorRates, mirrorThroughput{Partitions: b.parts, Codec: b.codec, DestProduce: produce(dst.addr, pt, b.codec, b.n)})
	}
	mirrorsCLI(bin, dst.addr, "--create", "--mirror", "bench", "--mirror-config", mirrorConfigFile(filepath.Join(tmp, "mirror.properties"), src.addr, s.MirrorProps))
	catchUpRun := func(mirror string, b backlog) catchUp {
		logf("mirror: kmirror catch-up %s (mirror %s)", b.topic, mirror)
		settle()
		t0 := time.Now()
		stop := profile(dst, "kmirror-mirror-"+b.topic)
		mirrorsCLI(bin, dst.addr, "--start", "--mirror", mirror, "--topics", b.topic)
		c := waitCaughtUp(dst, dst, src, b.topic, int64(b.n), t0, 10*time.Minute)
		stop()
		c.Engine, c.Topic, c.Partitions, c.Codec, c.BacklogRecs, c.SourceDiskMB = "kmirror", b.topic, b.parts, b.codec, b.n, diskMB(b.topic)
		return c
	}
	for i, b := range backlogs {
		c := catchUpRun("bench", b)
		rep.MirrorRates[i].Mirror = c
		if b.parts == 16 {
			rep.CatchUps = append(rep.CatchUps, c)
		}
	}
	if s.TunedProps != "" {
		// The same 1-partition backlog through a second mirror on the same destination
		// that fetches up to 8 MiB per partition; compared with the same destination
		// produce rate as the default 1-partition row.
		mirrorsCLI(bin, dst.addr, "--create", "--mirror", "bench-tuned", "--mirror-config", mirrorConfigFile(filepath.Join(tmp, "mirror-tuned.properties"), src.addr, s.TunedProps))
		c := catchUpRun("bench-tuned", tuned)
		for i, mr := range rep.MirrorRates {
			if mr.Partitions == 1 && mr.Codec == tuned.codec && mr.FetchMaxBytes == 0 {
				t := mirrorThroughput{Partitions: 1, Codec: tuned.codec, Mirror: c, FetchMaxBytes: tunedFetchMaxBytes, DestProduce: mr.DestProduce}
				rep.MirrorRates = append(rep.MirrorRates[:i+1], append([]mirrorThroughput{t}, rep.MirrorRates[i+1:]...)...)
				break
			}
		}
	}
	// The lag runs: at the fixed low rate (-lag-rate-low) with its own producer clients,
	// then at half of the maximum rate: kmirror's 16-partition catch-up records/s of the
	// same codec (or at -lag-rate). MirrorMaker 2 gets the same rates.
	lagD := time.Duration(s.LagSeconds) * time.Second
	maxRate, lagRate := map[string]float64{}, map[string]int{}
	for _, c := range codecs {
		for _, cu := range rep.CatchUps {
			if cu.Engine == "kmirror" && cu.Codec == c && cu.Error == "" {
				maxRate[c] = cu.RecPerS
			}
		}
		lagRate[c] = s.LagRate
		if lagRate[c] <= 0 {
			lagRate[c] = int(maxRate[c] / 2)
		}
	}
	lagRun := func(engine, c, srcTopic, dstAddr, dstTopic string, low bool) {
		rate, producers, into, what := lagRate[c], s.LagProducers, rep.Lags, "at half of the maximum"
		if low {
			rate, producers, into, what = s.LagRateLow, s.LagLowClients, rep.LagsLow, "at the low rate"
		} else if s.LagRate > 0 {
			what = "at -lag-rate"
		}
		if rate <= 0 {
			logf("mirror: %s steady-state lag %s %s skipped: no measured maximum rate", engine, c, what)
			into[engine+"/"+c] = lagResult{Error: "no measured maximum rate (kmirror's catch-up failed)"}
			return
		}
		logf("mirror: %s steady-state lag %s %s: %d records/s by %d producer client(s)", engine, c, what, rate, producers)
		settle()
		l := endToEnd(src.addr, srcTopic, dstAddr, dstTopic, c, rate, producers, lagD, 3*time.Second)
		if !low {
			l.MaxRate = maxRate[c]
		}
		logf("mirror: %s steady-state lag %s %s: achieved %.0f of %d records/s, p50 %.1f ms, p99 %.1f ms, drain %.2f s", engine, c, what, l.AchievedRate, l.TargetRate, l.P50Ms, l.P99Ms, l.DrainS)
		into[engine+"/"+c] = l
	}
	// lagRuns runs the low-rate lag run (unless -lag-rate-low 0), then the one at half of
	// the maximum; the topics are named <prefix>l-<codec> and <prefix>-<codec>.
	lagRuns := func(engine, c, prefix, dstAddr, dstPrefix string) {
		if s.LagRateLow > 0 {
			lagRun(engine, c, prefix+"l-"+c, dstAddr, dstPrefix+prefix+"l-"+c, true)
		}
		lagRun(engine, c, prefix+"-"+c, dstAddr, dstPrefix+prefix+"-"+c, false)
	}
	for _, c := range codecs {
		for _, t := range []string{"lkl-" + c, "lk-" + c} {
			mirrorsCLI(bin, dst.addr, "--start", "--mirror", "bench", "--topics", t)
			waitTopic(dst.addr, t)
		}
		time.Sleep(time.Second) // the fetcher's first (empty) fetch is in flight
		lagRuns("kmirror", c, "lk", dst.addr, "")
	}
	for _, b := range backlogs {
		logf("mirror: consume-and-re-produce pipeline %s", b.topic)
		settle()
		stop := profile(dst, "kmirror-pipeline-dest-"+b.topic)
		rep.Pipelines = append(rep.Pipelines, pipeline(src.addr, dst, b.topic, b.codec, b.parts, b.n))
		stop()
	}
	dst.stop()
	if !withMM2 {
		return
	}

	// MirrorMaker 2 into its own destination broker.
	var target *proc
	if s.MM2Target == "kafka" {
		target = startKafka("mm2-dst", filepath.Join(tmp, "m-mm2-dst"))
	} else {
		target = startKmirror(bin, "mm2-dst", filepath.Join(tmp, "m-mm2-dst"))
	}
	defer target.stop()
	for _, c := range codecs {
		logf("mirror: MirrorMaker 2 catch-up and steady-state lag %s", c)
		settle()
		mm := startMM2(filepath.Join(tmp, "mm2-"+c), mm2Properties(src.addr, target.addr, "b16-"+c+",lm-"+c+",lml-"+c, c, 1))
		cu := waitCaughtUp(target, mm, src, "src.b16-"+c, int64(s.Backlog16), mm.started, 10*time.Minute)
		cu.Engine, cu.Topic, cu.Partitions, cu.Codec, cu.BacklogRecs, cu.SourceDiskMB = "MirrorMaker 2", "b16-"+c, 16, c, s.Backlog16, diskMB("b16-"+c)
		rep.CatchUps = append(rep.CatchUps, cu)
		if cu.Error == "" {
			waitTopic(target.addr, "src.lm-"+c)
			waitTopic(target.addr, "src.lml-"+c)
			lagRuns("MirrorMaker 2", c, "lm", target.addr, "src.")
		}
		mm.stop()
	}
}

// withProp returns the comma-separated key=value pairs of props with key set to value
// (any earlier value of key dropped).
func withProp(props, key, value string) string {
	var kept []string
	for _, kv := range strings.Split(props, ",") {
		if k, _, _ := strings.Cut(kv, "="); kv != "" && strings.TrimSpace(k) != key {
			kept = append(kept, kv)
		}
	}
	return strings.Join(append(kept, key+"="+value), ",")
}

// positiveInts parses the comma-separated positive integers of the flag name's value v.
func positiveInts(name, v string) []int {
	var ns []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fatalf("%s %q: expected positive integers separated by commas", name, v)
		}
		ns = append(ns, n)
	}
	return ns
}

// waitTopic waits until topic exists on addr with a leader for every partition.
func waitTopic(addr, topic string) {
	cl := newClient(seed(addr)...)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if endOffsets(adm, topic) >= 0 {
			return
		}
	}
	fatalf("topic %s never appeared on %s", topic, addr)
}
