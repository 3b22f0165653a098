package main

// -only mirror-rf3 (make bench-mirror-rf3): issue 15's replicated-destination measurement.
// One Apache Kafka source broker, one 3-node kmirror cluster as the destination of three
// engines one after the other, each on its own topics: kmirror Cluster Mirroring into RF 1
// mirror topics, kmirror into RF 3 mirror topics, and MirrorMaker 2 with
// replication.factor=3. Catch-up of a backlog, end-to-end lag at a fixed live rate, CPU
// per GB.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The engines of a -only mirror-rf3 run.
const (
	rf3Kmirror1 = "kmirror, RF 1"
	rf3Kmirror3 = "kmirror, RF 3"
	rf3MM2      = "MirrorMaker 2, RF 3"
)

// rf3Settings are the sizes of a -only mirror-rf3 run.
type rf3Settings struct {
	KafkaVersion string  `json:"kafka_version"`
	DataDir      string  `json:"data_dir"`
	Nodes        int     `json:"destination_nodes"`
	Partitions   []int   `json:"partitions"`
	Records      int     `json:"backlog_records"`
	RecordBytes  int     `json:"record_bytes"`
	LagRate      int     `json:"lag_records_per_s"`
	LagProducers int     `json:"lag_producer_clients"`
	LagSeconds   float64 `json:"lag_seconds"`
	MirrorProps  string  `json:"mirror_props,omitempty"`
	Client       string  `json:"client"`
	// Properties are the destination nodes' server.properties lines after their own
	// (clusterProps), default.replication.factor=1 at first; the nodes are restarted
	// with default.replication.factor=3 before the RF 3 runs.
	Properties []string `json:"common_server_properties"`
	MM2        string   `json:"mm2"`
}

// rf3Run is one engine's catch-up and lag run on one partition count.
type rf3Run struct {
	Engine            string  `json:"engine"` // rf3Kmirror1, rf3Kmirror3 or rf3MM2
	ReplicationFactor int     `json:"replication_factor"`
	Partitions        int     `json:"partitions"`
	SourceTopic       string  `json:"source_topic"`
	DestTopic         string  `json:"destination_topic"`
	CatchUp           catchUp `json:"catch_up"`
	// DestCPUPerGB is the destination nodes' utime+stime (summed) per GB of values over
	// the catch-up; MM2CPUPerGB MirrorMaker 2's process's (0 for kmirror); TotalCPUPerGB
	// both.
	DestCPUPerGB  float64   `json:"dest_cpu_s_per_gb"`
	MM2CPUPerGB   float64   `json:"mm2_cpu_s_per_gb,omitempty"`
	TotalCPUPerGB float64   `json:"total_cpu_s_per_gb"`
	Lag           lagResult `json:"steady_state_lag"`
	Error         string    `json:"error,omitempty"`
}

// rf3Ratio is one engine's figures over another's on the same partition count.
type rf3Ratio struct {
	Partitions int     `json:"partitions"`
	Ratio      string  `json:"ratio"` // "kmirror, RF 3 / kmirror, RF 1" or "kmirror, RF 3 / MirrorMaker 2, RF 3"
	MBps       float64 `json:"catch_up_mb_per_s"`
	LagP50     float64 `json:"lag_p50"`
	LagP99     float64 `json:"lag_p99"`
	CPUPerGB   float64 `json:"total_cpu_s_per_gb"`
}

type rf3Report struct {
	Date       string      `json:"date"`
	Machine    machine     `json:"machine"`
	LoadBefore string      `json:"load_average_before"`
	LoadAfter  string      `json:"load_average_after"`
	Settings   rf3Settings `json:"settings"`
	// RestartS is the restart of every destination node with
	// default.replication.factor=3 → serving again (a topic of RF 3 created and led).
	RestartS float64    `json:"restart_s"`
	Runs     []rf3Run   `json:"runs"`
	Ratios   []rf3Ratio `json:"ratios"`
}

// benchMirrorRF3 runs -only mirror-rf3: for each partition count of rs.Partitions the
// source holds two backlogs of rs.Records records (r1-b<P> for kmirror into RF 1, r3-b<P>
// for kmirror into RF 3 and for MirrorMaker 2, which writes src.r3-b<P>) and a lag topic
// per engine. A mirror topic is created with the destination's default.replication.factor
// (the broker that starts it creates it like an auto-created topic), so the kmirror RF 1
// runs come first, on nodes with default.replication.factor=1; then every node is
// restarted with 3 and the RF 3 runs follow, kmirror's and then MirrorMaker 2's, each
// with its own mirror (kmirror) or process (MirrorMaker 2). A finished engine's topics
// are paused (kmirror) or its process stopped, so they idle during the next.
func benchMirrorRF3(bin, tmp string, s settings, rs rf3Settings) rf3Report {
	rs.KafkaVersion, rs.DataDir, rs.Nodes, rs.RecordBytes, rs.LagSeconds, rs.MirrorProps, rs.Client = s.KafkaVersion, tmp, 3, recordSize, s.LagSeconds, s.MirrorProps, s.Client
	rs.Properties = append(append([]string{}, commonProps...), "default.replication.factor=1")
	rs.MM2 = "dedicated mode (org.apache.kafka.connect.mirror.MirrorMaker), its defaults (tasks.max 1), replication.factor 3 and RF 3 for its topics on the destination, offset-syncs on the source RF 1; checkpoints, heartbeats, ACL and config sync off"
	rep := rf3Report{Date: time.Now().UTC().Format(time.RFC3339), Machine: describeMachine(tmp), LoadBefore: loadAverage(), Settings: rs}
	lagD := time.Duration(rs.LagSeconds * float64(time.Second))

	logf("mirror-rf3: starting the Apache Kafka source")
	src := startKafka("source", filepath.Join(tmp, "rf3-source"))
	defer src.stop()
	srcLogDir := filepath.Join(tmp, "rf3-source", "data")
	for _, p := range rs.Partitions {
		for _, t := range []string{"r1-b", "r3-b"} {
			topic := fmt.Sprint(t, p)
			createTopic(src.addr, topic, p, nil)
			logf("mirror-rf3: backlog %s: %d records", topic, rs.Records)
			produce(src.addr, topic, "none", rs.Records)
		}
		for _, t := range []string{"r1-l", "r3-l", "m3-l"} {
			createTopic(src.addr, fmt.Sprint(t, p), p, lagTopicConfigs)
		}
	}

	logf("mirror-rf3: formatting and starting the 3-node kmirror destination (default.replication.factor=1)")
	c := startCluster(kmirrorKind(bin), filepath.Join(tmp, "rf3-dest"), rs.Nodes, nil, []string{"default.replication.factor=1"})
	defer c.stop()
	waitServing(c, "ready-rf1", 1, 1, nil)

	// kmirror runs one engine's catch-up and lag run for each partition count through
	// mirror, into mirror topics of replication factor rf, then pauses its topics.
	kmirror := func(engine, mirror, prefix string, rf int) {
		mirrorsCLI(bin, c.addr(), "--create", "--mirror", mirror, "--mirror-config", mirrorConfigFile(filepath.Join(tmp, mirror+".properties"), src.addr, s.MirrorProps))
		var topics []string
		for _, p := range rs.Partitions {
			backlog, lag := fmt.Sprintf("%s-b%d", prefix, p), fmt.Sprintf("%s-l%d", prefix, p)
			topics = append(topics, backlog, lag)
			r := rf3Run{Engine: engine, ReplicationFactor: rf, Partitions: p, SourceTopic: backlog, DestTopic: backlog}
			logf("mirror-rf3: %s: catch-up of %s (%d records)", engine, backlog, rs.Records)
			settle()
			t0 := time.Now()
			stop := c.profile("kmirror-rf3-" + backlog)
			mirrorsCLI(bin, c.addr(), "--start", "--mirror", mirror, "--topics", backlog)
			r.CatchUp = waitCaughtUp(c, c, src, backlog, int64(rs.Records), t0, 10*time.Minute)
			stop()
			r.DestCPUPerGB, r.TotalCPUPerGB = r.CatchUp.CPUPerGB, r.CatchUp.CPUPerGBTotal
			r.CatchUp.Engine, r.CatchUp.Topic, r.CatchUp.Partitions, r.CatchUp.Codec, r.CatchUp.BacklogRecs = engine, backlog, p, "none", rs.Records
			r.CatchUp.SourceDiskMB = float64(diskBytes(srcLogDir, backlog)) / 1e6
			mirrorsCLI(bin, c.addr(), "--start", "--mirror", mirror, "--topics", lag)
			waitTopic(c.addr(), lag)
			time.Sleep(time.Second) // the fetcher's first (empty) fetch is in flight
			rep.Runs = append(rep.Runs, rf3Lag(c, r, rf, src.addr, lag, lag, rs, lagD))
		}
		mirrorsCLI(bin, c.addr(), "--pause", "--mirror", mirror, "--topics", strings.Join(topics, ","))
	}
	kmirror(rf3Kmirror1, "rf1", "r1", 1)

	logf("mirror-rf3: restarting every destination node with default.replication.factor=3")
	rep.RestartS = setDefaultRF(c, 3)
	logf("mirror-rf3: serving again %.2fs after the restart", rep.RestartS)
	kmirror(rf3Kmirror3, "rf3", "r3", 3)

	for _, p := range rs.Partitions {
		backlog, lag := fmt.Sprintf("r3-b%d", p), fmt.Sprintf("m3-l%d", p)
		r := rf3Run{Engine: rf3MM2, ReplicationFactor: 3, Partitions: p, SourceTopic: backlog, DestTopic: "src." + backlog}
		logf("mirror-rf3: %s: catch-up of %s into %s (%d records)", rf3MM2, backlog, r.DestTopic, rs.Records)
		settle()
		mm := startMM2(filepath.Join(tmp, fmt.Sprintf("rf3-mm2-%d", p)), mm2Properties(src.addr, c.addr(), backlog+","+lag, "none", 3))
		r.CatchUp = waitCaughtUp(c, mm, src, r.DestTopic, int64(rs.Records), mm.started, 10*time.Minute)
		r.MM2CPUPerGB, r.TotalCPUPerGB = r.CatchUp.CPUPerGB, r.CatchUp.CPUPerGBTotal
		r.DestCPUPerGB = r.TotalCPUPerGB - r.MM2CPUPerGB
		r.CatchUp.Engine, r.CatchUp.Topic, r.CatchUp.Partitions, r.CatchUp.Codec, r.CatchUp.BacklogRecs = rf3MM2, backlog, p, "none", rs.Records
		r.CatchUp.SourceDiskMB = float64(diskBytes(srcLogDir, backlog)) / 1e6
		if r.CatchUp.Error == "" {
			waitTopic(c.addr(), "src."+lag)
			r = rf3Lag(c, r, 3, src.addr, lag, "src."+lag, rs, lagD)
		} else {
			r.Error = r.CatchUp.Error
		}
		rep.Runs = append(rep.Runs, r)
		mm.stop()
	}
	c.alive()
	rep.Ratios = rf3Ratios(rep.Runs, rs.Partitions)
	rep.LoadAfter = loadAverage()
	return rep
}

// rf3Lag completes r after its catch-up: checks that every partition of r.DestTopic has
// rf replicas in its ISR, then runs the steady-state lag run from srcLag on the source
// into dstLag on the destination.
func rf3Lag(c *cluster, r rf3Run, rf int, src, srcLag, dstLag string, rs rf3Settings, d time.Duration) rf3Run {
	c.alive()
	if r.CatchUp.Error != "" {
		r.Error = r.CatchUp.Error
		return r
	}
	if err := waitFullISR(c, c.addr, r.DestTopic, r.Partitions, rf, time.Minute); err != nil {
		r.Error = fmt.Sprintf("replication factor %d expected: %v", rf, err)
		logf("mirror-rf3: %s: %s", r.Engine, r.Error)
		return r
	}
	logf("mirror-rf3: %s, %d partitions: caught up at %.1f MB/s (%.2f s), %.2f CPU s/GB; lag at %d records/s for %.0f s", r.Engine, r.Partitions, r.CatchUp.MBps, r.CatchUp.CatchUpS,
		r.TotalCPUPerGB, rs.LagRate, d.Seconds())
	settle()
	r.Lag = endToEnd(src, srcLag, c.addr(), dstLag, "none", rs.LagRate, rs.LagProducers, d, 3*time.Second)
	r.Error = r.Lag.Error
	logf("mirror-rf3: %s: achieved %.0f of %d records/s, p50 %.1f ms, p99 %.1f ms, drain %.2f s", r.Engine, r.Lag.AchievedRate, r.Lag.TargetRate, r.Lag.P50Ms, r.Lag.P99Ms, r.Lag.DrainS)
	return r
}

// setDefaultRF stops every node of c at once, sets default.replication.factor=rf in each
// node's server.properties, starts them again on their data and returns the restart →
// serving again (waitServing: every node listed, a topic of replication factor rf
// created and led).
func setDefaultRF(c *cluster, rf int) float64 {
	c.stop()
	for i, conf := range c.confs {
		b, err := os.ReadFile(conf)
		must(err)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		set := false
		for j, l := range lines {
			if strings.HasPrefix(l, "default.replication.factor=") {
				lines[j], set = fmt.Sprintf("default.replication.factor=%d", rf), true
			}
		}
		if !set {
			lines = append(lines, fmt.Sprintf("default.replication.factor=%d", rf))
		}
		must(os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
		c.restart(i)
	}
	c.started = time.Now()
	return waitServing(c, fmt.Sprintf("ready-rf%d", rf), 1, rf, nil).TopicS
}

// rf3Ratios are kmirror RF 3 over kmirror RF 1 and over MirrorMaker 2 for each partition
// count where both runs succeeded.
func rf3Ratios(runs []rf3Run, partitions []int) []rf3Ratio {
	find := func(engine string, p int) *rf3Run {
		for i := range runs {
			if runs[i].Engine == engine && runs[i].Partitions == p && runs[i].Error == "" {
				return &runs[i]
			}
		}
		return nil
	}
	over := func(a, b float64) float64 { // 0 when either is not positive (JSON has no Inf)
		if a <= 0 || b <= 0 {
			return 0
		}
		return a / b
	}
	var out []rf3Ratio
	for _, p := range partitions {
		k := find(rf3Kmirror3, p)
		for _, other := range []string{rf3Kmirror1, rf3MM2} {
			o := find(other, p)
			if k == nil || o == nil {
				continue
			}
			out = append(out, rf3Ratio{Partitions: p, Ratio: rf3Kmirror3 + " / " + other,
				MBps: over(k.CatchUp.MBps, o.CatchUp.MBps), LagP50: over(k.Lag.P50Ms, o.Lag.P50Ms), LagP99: over(k.Lag.P99Ms, o.Lag.P99Ms), CPUPerGB: over(k.TotalCPUPerGB, o.TotalCPUPerGB)})
		}
	}
	return out
}

func renderMirrorRF3Markdown(r rf3Report) string {
	var b strings.Builder
	s := r.Settings
	fmt.Fprintf(&b, "# kmirror mirroring into a 3-node destination: RF 3 vs RF 1 vs MirrorMaker 2 — %s\n\n", r.Date[:10])
	b.WriteString(machineAndClient(r.Machine, s.DataDir, s.Client, s.RecordBytes, "go run ./bench/versus -only mirror-rf3 (make bench-mirror-rf3)"))
	fmt.Fprintf(&b, "Load average (1, 5, 15 min) before the run: %s; after: %s.\n\n", r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(&b, "Source: one Apache Kafka %s broker; per partition count, two backlogs of %d uncompressed records (%.2f GB of values each) and a lag topic per engine (message.timestamp.type=LogAppendTime). Destination: one %d-node kmirror cluster (combined broker+controller nodes, static quorum, `%s`) for all three engines, one after the other, each on its own topics; every process shares the machine's %d cores. ",
		s.KafkaVersion, s.Records, float64(s.Records*s.RecordBytes)/1e9, s.Nodes, strings.Join(s.Properties, "`, `"), r.Machine.NumCPU)
	fmt.Fprintf(&b, "A mirror topic is created with the destination's `default.replication.factor`, so **%s** runs first (its own mirror, kmirror's default mirror settings%s), then every node is restarted with `default.replication.factor=3` (serving again after %.2f s) and **%s** runs (a second mirror, the same settings), then **%s**: %s, into `src.<topic>` on the same cluster, from the same source backlog as kmirror's RF 3 run. A finished kmirror engine's topics are paused. ",
		rf3Kmirror1, extraProps(s.MirrorProps), r.RestartS, rf3Kmirror3, rf3MM2, s.MM2)
	fmt.Fprintf(&b, "Catch-up: first record → every record on the destination by its end offsets (the high watermark: for RF 3, replicated to the whole ISR); the ISR of every destination partition is then checked to hold RF replicas. Lag: %d records/s by %d paced producer client(s) for %.0f s after the catch-up, first 3 s left out, send time (in the value) → read by a consumer on the destination; “from the source append” measures from the source's LogAppendTime. CPU: utime+stime from /proc over the catch-up window per GB of values, the destination's three nodes summed, plus MirrorMaker 2's JVM for MirrorMaker 2; the source broker's apart.\n\n",
		s.LagRate, s.LagProducers, s.LagSeconds)
	for _, p := range s.Partitions {
		var k1, k3, mm rf3Run
		for _, x := range r.Runs {
			if x.Partitions != p {
				continue
			}
			switch x.Engine {
			case rf3Kmirror1:
				k1 = x
			case rf3Kmirror3:
				k3 = x
			case rf3MM2:
				mm = x
			}
		}
		fmt.Fprintf(&b, "#### %d partitions\n\n", p)
		for _, x := range []rf3Run{k3, k1, mm} {
			if x.Error != "" {
				fmt.Fprintf(&b, "%s failed: %s\n\n", x.Engine, x.Error)
			}
		}
		fmt.Fprintf(&b, "| metric | %s | %s | %s | RF 3 / RF 1 (kmirror) | kmirror / MM2 (RF 3) |\n|---|---:|---:|---:|---:|---:|\n", rf3Kmirror3, rf3Kmirror1, rf3MM2)
		row := func(name string, v func(rf3Run) float64) {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, num(v(k3)), num(v(k1)), num(v(mm)), ratio(v(k3), v(k1)), ratio(v(k3), v(mm)))
		}
		values := func(name string, v func(rf3Run) float64) { // no ratios: start-up or near-zero figures
			fmt.Fprintf(&b, "| %s | %s | %s | %s | | |\n", name, num(v(k3)), num(v(k1)), num(v(mm)))
		}
		values("start → first record s (MirrorMaker 2: from its JVM's start)", func(x rf3Run) float64 { return x.CatchUp.FirstRecordS })
		row("catch-up s (first record → caught up)", func(x rf3Run) float64 { return x.CatchUp.CatchUpS })
		row("catch-up MB/s", func(x rf3Run) float64 { return x.CatchUp.MBps })
		row("catch-up records/s", func(x rf3Run) float64 { return x.CatchUp.RecPerS })
		row("CPU s/GB, destination nodes (sum of 3)", func(x rf3Run) float64 { return x.DestCPUPerGB })
		fmt.Fprintf(&b, "| CPU s/GB, MirrorMaker 2's process | | | %s | | |\n", num(mm.MM2CPUPerGB))
		row("CPU s/GB, total", func(x rf3Run) float64 { return x.TotalCPUPerGB })
		row("CPU s/GB, the source broker (not in the total)", func(x rf3Run) float64 { return x.CatchUp.SourceCPUPerGB })
		row(fmt.Sprintf("lag: achieved records/s (target %d)", s.LagRate), func(x rf3Run) float64 { return x.Lag.AchievedRate })
		row("lag p50 ms", func(x rf3Run) float64 { return x.Lag.P50Ms })
		row("lag p99 ms", func(x rf3Run) float64 { return x.Lag.P99Ms })
		row("lag p50 ms from the source append", func(x rf3Run) float64 { return x.Lag.Appended.P50Ms })
		row("lag p99 ms from the source append", func(x rf3Run) float64 { return x.Lag.Appended.P99Ms })
		values("lag: last ack on source → all read on destination s", func(x rf3Run) float64 { return x.Lag.DrainS })
		b.WriteString("\n")
	}
	b.WriteString("The machine is shared (2 cores, other work may run at the same time), so figures vary between runs by up to about 2× for throughput; the ratios of one run are what to compare.\n")
	return b.String()
}
