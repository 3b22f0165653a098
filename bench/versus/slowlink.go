package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kmirror/kmirror/internal/kafkaproc"
)

// slowLinkRun is one catch-up of a backlog across the proxied link at one round-trip time.
type slowLinkRun struct {
	Engine     string  `json:"engine"` // slowLinkKmirror, slowLinkTuned or slowLinkMM2
	RTTMs      int     `json:"rtt_ms"`
	Partitions int     `json:"partitions"`
	Records    int     `json:"records"`
	MBps       float64 `json:"mb_per_s"`
	CatchUpS   float64 `json:"catch_up_s"`
	CPUPerGB   float64 `json:"cpu_s_per_gb_total"` // the destination broker, plus MirrorMaker 2's process for MM2
	OfZeroMs   float64 `json:"of_0ms"`             // MBps / the same engine's and partitions' MBps at 0 ms
	OfMM2      float64 `json:"of_mm2,omitempty"`   // kmirror's MBps / MirrorMaker 2's at the same RTT and partitions
	Error      string  `json:"error,omitempty"`
}

// The engines of the slow-link runs.
const (
	slowLinkKmirror = "kmirror"        // the mirror's default settings (plus -mirror-props)
	slowLinkTuned   = "kmirror, tuned" // with -slowlink-tuned-props on top
	slowLinkMM2     = "MirrorMaker 2"  // dedicated mode, its defaults (tasks.max=1)
)

type slowLinkReport struct {
	Date        string        `json:"date"`
	Machine     machine       `json:"machine"`
	DataDir     string        `json:"data_dir"`
	Client      string        `json:"client"`
	Kafka       string        `json:"kafka_version"`
	MirrorProps string        `json:"mirror_props,omitempty"`
	TunedProps  string        `json:"tuned_mirror_props,omitempty"`
	Runs        []slowLinkRun `json:"runs"`
}

// benchSlowLink mirrors an uncompressed backlog of 1 and of 16 partitions from one Apache
// Kafka broker into a fresh kmirror destination per run, through a toxiproxy proxy that
// the source advertises (so every source connection crosses it) adding rtts milliseconds
// of round-trip time (half each way): kmirror with its default mirror settings, kmirror
// with tunedProps on top ("" skips it) and, with mm2, MirrorMaker 2 into a kmirror broker.
// It reports each catch-up rate against the same engine's at 0 ms and kmirror's against
// MirrorMaker 2's at the same RTT (issue 15: at 50 ms ≥ 0.8× of 0 ms with 16 partitions,
// ≥ 0.5× with one, ≥ 5× MirrorMaker 2).
func benchSlowLink(bin, tmp string, s settings, rtts []int, records1, records16 int, tunedProps string, mm2 bool) slowLinkReport {
	rep := slowLinkReport{Date: time.Now().UTC().Format(time.RFC3339), Machine: describeMachine(tmp), Kafka: s.KafkaVersion, DataDir: tmp, Client: s.Client,
		MirrorProps: s.MirrorProps}
	var engines []string // MirrorMaker 2 first, so that kmirror's rows carry the ratio to it
	if mm2 {
		engines = append(engines, slowLinkMM2)
	}
	engines = append(engines, slowLinkKmirror)
	if tunedProps != "" {
		rep.TunedProps = withProps(s.MirrorProps, tunedProps)
		engines = append(engines, slowLinkTuned)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	listen := freeAddr()
	logf("slowlink: starting the Apache Kafka source (advertised through %s)", listen)
	b, err := kafkaproc.StartBroker(kafkaJava, kafkaproc.BrokerConfig{Dir: filepath.Join(tmp, "sl-source"), JVM: jvmOpts(kafkaHeap),
		ToolJVM: jvmOpts([]string{"-Xmx256m"}), ReadyTimeout: 120 * time.Second, Props: []string{"advertised.listeners=PLAINTEXT://" + listen}})
	if err != nil {
		fatalf("slowlink source: %v", err)
	}
	src := track(&proc{name: "source", addr: b.Addr, cmd: b.Cmd, logPath: b.LogPath, started: b.Started, startup: b.Startup, done: b.Done()})
	defer src.stop()
	proxy := toxiproxy.NewProxy(server, "source", listen, b.Addr)
	must(proxy.Start())
	defer proxy.Stop()
	backlogs := []struct {
		topic         string
		partitions, n int
	}{{"sl1", 1, records1}, {"sl16", 16, records16}}
	for _, bl := range backlogs {
		createTopic(listen, bl.topic, bl.partitions, nil)
		produce(listen, bl.topic, "none", bl.n)
	}
	type key struct {
		engine     string
		partitions int
	}
	zero := map[key]float64{}
	mm2At := map[[2]int]float64{} // {RTT, partitions} → MirrorMaker 2's MB/s
	for i, rtt := range rtts {
		proxy.Toxics.ResetToxics(context.Background())
		if rtt > 0 {
			for _, dir := range []string{"upstream", "downstream"} {
				js := fmt.Sprintf(`{"name":"latency_%s","type":"latency","stream":%q,"toxicity":1,"attributes":{"latency":%d}}`, dir, dir, rtt/2)
				if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
					fatalf("toxiproxy latency: %v", err)
				}
			}
		}
		for _, bl := range backlogs {
			for _, engine := range engines {
				dir := filepath.Join(tmp, fmt.Sprintf("sl-%d-%d-%d", i, bl.partitions, len(rep.Runs)))
				c := slowLinkCatchUp(bin, dir, engine, listen, bl.topic, bl.n, s.MirrorProps, rep.TunedProps)
				r := slowLinkRun{Engine: engine, RTTMs: rtt, Partitions: bl.partitions, Records: bl.n, MBps: c.MBps, CatchUpS: c.CatchUpS, CPUPerGB: c.CPUPerGBTotal, Error: c.Error}
				k := key{engine, bl.partitions}
				if rtt == 0 {
					zero[k] = c.MBps
				}
				if z := zero[k]; z > 0 {
					r.OfZeroMs = c.MBps / z
				}
				if engine == slowLinkMM2 {
					mm2At[[2]int{rtt, bl.partitions}] = c.MBps
				} else if m := mm2At[[2]int{rtt, bl.partitions}]; m > 0 {
					r.OfMM2 = c.MBps / m
				}
				logf("slowlink: %s, %d ms RTT, %d partitions: %.1f MB/s (%.2f of 0 ms)", engine, rtt, bl.partitions, r.MBps, r.OfZeroMs)
				rep.Runs = append(rep.Runs, r)
			}
		}
	}
	return rep
}

// slowLinkCatchUp mirrors topic's backlog of n records from the source at addr into a
// fresh kmirror broker under dir with engine, and measures its catch-up.
func slowLinkCatchUp(bin, dir, engine, addr, topic string, n int, mirrorProps, tunedProps string) catchUp {
	settle()
	dst := startKmirror(bin, "dest", filepath.Join(dir, "dest"))
	defer dst.stop()
	if engine == slowLinkMM2 {
		mm := startMM2(filepath.Join(dir, "mm2"), mm2Properties(addr, dst.addr, topic, "none", 1))
		defer mm.stop()
		return waitCaughtUp(dst, mm, nil, "src."+topic, int64(n), mm.started, 10*time.Minute)
	}
	props := mirrorProps
	if engine == slowLinkTuned {
		props = tunedProps
	}
	mirrorsCLI(bin, dst.addr, "--create", "--mirror", "slow", "--mirror-config", mirrorConfigFile(filepath.Join(dir, "mirror.properties"), addr, props))
	t0 := time.Now()
	mirrorsCLI(bin, dst.addr, "--start", "--mirror", "slow", "--topics", topic)
	return waitCaughtUp(dst, dst, nil, topic, int64(n), t0, 10*time.Minute)
}

func renderSlowLinkMarkdown(r slowLinkReport) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# kmirror mirroring across a slow link — %s\n\n", r.Date[:10])
	sb.WriteString(machineAndClient(r.Machine, r.DataDir, r.Client, recordSize, "go run ./bench/versus -only slowlink (make bench-slowlink)"))
	fmt.Fprintf(&sb, "Source: one Apache Kafka %s broker advertising a toxiproxy proxy (in the benchmark's process) that adds the round-trip time (half each way) to every source connection; destination: a fresh kmirror broker per run; uncompressed 1 KiB records; catch-up of the whole backlog. Engines: **%s**, kmirror's default mirror settings%s (fetch.max.bytes 1 MiB growing up to the partition's share of fetch.response.max.bytes, 10 MiB; receive.buffer.bytes -1, the OS's TCP autotuning)", r.Kafka, slowLinkKmirror, extraProps(r.MirrorProps))
	if r.TunedProps != "" {
		fmt.Fprintf(&sb, "; **%s**: `%s`", slowLinkTuned, r.TunedProps)
	}
	sb.WriteString("; **MirrorMaker 2** in dedicated mode with its defaults (tasks.max 1; its consumer's fetch.max.bytes 50 MiB, max.partition.fetch.bytes 1 MiB), into a kmirror broker. CPU: the destination broker's, plus MirrorMaker 2's process.\n\n")
	sb.WriteString("| engine | RTT ms | partitions | records | catch-up MB/s | catch-up s | CPU s/GB | of 0 ms | kmirror / MM2 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Runs {
		vs := ""
		if x.OfMM2 > 0 {
			vs = fmt.Sprintf("%.1f", x.OfMM2)
		}
		fmt.Fprintf(&sb, "| %s | %d | %d | %d | %.1f | %.2f | %.2f | %.2f | %s |\n", x.Engine, x.RTTMs, x.Partitions, x.Records, x.MBps, x.CatchUpS, x.CPUPerGB, x.OfZeroMs, vs)
	}
	return sb.String()
}

// withProps returns the comma-separated key=value pairs of props with those of more set
// on top (withProp for each).
func withProps(props, more string) string {
	for _, kv := range strings.Split(more, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			props = withProp(props, strings.TrimSpace(k), v)
		}
	}
	return props
}

// extraProps describes the -mirror-props of a run ("" when none).
func extraProps(p string) string {
	if p == "" {
		return ""
	}
	return " plus `" + p + "`"
}
