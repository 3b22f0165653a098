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
	RTTMs      int     `json:"rtt_ms"`
	Partitions int     `json:"partitions"`
	Records    int     `json:"records"`
	MBps       float64 `json:"mb_per_s"`
	CatchUpS   float64 `json:"catch_up_s"`
	OfZeroMs   float64 `json:"of_0ms"` // MBps / the same partitions' MBps at 0 ms
	Error      string  `json:"error,omitempty"`
}

type slowLinkReport struct {
	Date    string        `json:"date"`
	Machine machine       `json:"machine"`
	DataDir string        `json:"data_dir"`
	Client  string        `json:"client"`
	Kafka   string        `json:"kafka_version"`
	Runs    []slowLinkRun `json:"runs"`
}

// benchSlowLink mirrors an uncompressed backlog of 1 and of 16 partitions from one Apache
// Kafka broker into a fresh kmirror destination per run, through a toxiproxy proxy that
// the source advertises (so every source connection of the mirror crosses it) adding
// rtts milliseconds of round-trip time (half each way), and reports the catch-up rate
// against the same partitions' at 0 ms (issue 15: ≥ 0.8× with 16 partitions and ≥ 0.5×
// with one at 50 ms).
func benchSlowLink(bin, tmp string, s settings, rtts []int, records1, records16 int) slowLinkReport {
	rep := slowLinkReport{Date: time.Now().UTC().Format(time.RFC3339), Machine: describeMachine(tmp), Kafka: s.KafkaVersion, DataDir: tmp, Client: s.Client}
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
	zero := map[int]float64{}
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
			settle()
			dst := startKmirror(bin, "dest", filepath.Join(tmp, fmt.Sprintf("sl-dest-%d-%d", i, bl.partitions)))
			mirrorsCLI(bin, dst.addr, "--create", "--mirror", "slow", "--mirror-config",
				mirrorConfigFile(filepath.Join(tmp, fmt.Sprintf("sl-%d-%d.properties", i, bl.partitions)), listen, s.MirrorProps))
			t0 := time.Now()
			mirrorsCLI(bin, dst.addr, "--start", "--mirror", "slow", "--topics", bl.topic)
			c := waitCaughtUp(dst, dst, bl.topic, int64(bl.n), t0, 10*time.Minute)
			dst.stop()
			r := slowLinkRun{RTTMs: rtt, Partitions: bl.partitions, Records: bl.n, MBps: c.MBps, CatchUpS: c.CatchUpS, Error: c.Error}
			if rtt == 0 {
				zero[bl.partitions] = c.MBps
			}
			if z := zero[bl.partitions]; z > 0 {
				r.OfZeroMs = c.MBps / z
			}
			logf("slowlink: %d ms RTT, %d partitions: %.1f MB/s (%.2f of 0 ms)", rtt, bl.partitions, r.MBps, r.OfZeroMs)
			rep.Runs = append(rep.Runs, r)
		}
	}
	return rep
}

func renderSlowLinkMarkdown(r slowLinkReport) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# kmirror mirroring across a slow link — %s\n\n", r.Date[:10])
	sb.WriteString(machineAndClient(r.Machine, r.DataDir, r.Client, recordSize, "go run ./bench/versus -only slowlink (make bench-slowlink)"))
	fmt.Fprintf(&sb, "Source: one Apache Kafka %s broker advertising a toxiproxy proxy that adds the round-trip time (half each way) to every source connection of the mirror; destination: a fresh kmirror broker per run; uncompressed 1 KiB records; catch-up of the whole backlog with kmirror's default mirror settings (fetch.max.bytes 1 MiB growing up to the partition's share of fetch.response.max.bytes 10 MiB; receive.buffer.bytes -1, the OS's TCP autotuning). MirrorMaker 2 over the same proxy is not run yet.\n\n", r.Kafka)
	sb.WriteString("| RTT ms | partitions | records | catch-up MB/s | catch-up s | of 0 ms |\n|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Runs {
		fmt.Fprintf(&sb, "| %d | %d | %d | %.1f | %.2f | %.2f |\n", x.RTTMs, x.Partitions, x.Records, x.MBps, x.CatchUpS, x.OfZeroMs)
	}
	return sb.String()
}
