package main

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"

	"github.com/kmirror/kmirror/bench/internal/procinfo"
)

// machine describes where the benchmark ran.
type machine struct {
	NumCPU   int    `json:"nproc"`
	CPUModel string `json:"cpu_model"`
	MemTotal string `json:"mem_total"`
	Disk     string `json:"disk"` // df -T of the data directory and lsblk of its device
	Java     string `json:"java"`
	Go       string `json:"go"`
	// PageCache is describeFill's line when -fill-page-cache filled the page cache.
	PageCache string `json:"page_cache,omitempty"`
}

// pageCacheFill is the describeFill line of this run ("" without -fill-page-cache); main
// sets it before any benchmark runs.
var pageCacheFill string

func describeMachine(dir string) machine {
	m := machine{NumCPU: runtime.NumCPU(), Go: runtime.Version(), CPUModel: procinfo.CPUModel(), MemTotal: procinfo.MemTotal(), PageCache: pageCacheFill}
	if b, err := exec.Command("df", "-T", dir).Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		f := strings.Fields(lines[len(lines)-1])
		if len(f) >= 7 {
			m.Disk = fmt.Sprintf("%s (%s) mounted on %s", f[0], f[1], f[6])
			dev := strings.TrimPrefix(f[0], "/dev/")
			if b, err := exec.Command("lsblk", "-dn", "-o", "ROTA,SIZE,MODEL", "/dev/"+dev).Output(); err == nil {
				g := strings.Fields(string(b))
				if len(g) >= 2 {
					kind := "non-rotational"
					if g[0] == "1" {
						kind = "reported rotational (virtual disk)"
					}
					m.Disk += fmt.Sprintf(", %s, %s", g[1], kind)
				}
			}
		}
	}
	if b, err := exec.Command("java", "-version").CombinedOutput(); err == nil {
		m.Java = strings.SplitN(strings.TrimSpace(string(b)), "\n", 2)[0]
	}
	return m
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// mib renders a byte count as MiB ("8 MiB").
func mib(n int) string { return fmt.Sprintf("%g MiB", float64(n)/(1<<20)) }

func num(v float64) string {
	switch {
	case v < 0:
		return "—"
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// machineAndClient are the report's paragraphs on the machine and the client; how is the
// command that ran it.
func machineAndClient(m machine, dataDir, client string, recordBytes int, how string) string {
	memory := ""
	if m.PageCache != "" {
		memory = "Memory: " + m.PageCache + ".\n\n"
	}
	return fmt.Sprintf("Machine: %d CPUs (%s), %s memory; disk %s; data under %s (all brokers on the same filesystem, default flush settings: no forced fsync). %s; %s. Everything on loopback, one run, `%s`.\n\nClient: %s. Records of %d B.\n\n",
		m.NumCPU, m.CPUModel, m.MemTotal, m.Disk, dataDir, m.Java, m.Go, how, client, recordBytes) + memory
}

// renderMarkdown renders the machine, the settings and the tables.
func renderMarkdown(r report) string {
	var b strings.Builder
	s, m := r.Settings, r.Machine
	fmt.Fprintf(&b, "### kmirror vs Apache Kafka %s and MirrorMaker 2 — %s\n\n", s.KafkaVersion, r.Date[:10])
	b.WriteString(machineAndClient(m, s.DataDir, s.Client, s.RecordBytes, "make bench"))
	if len(r.Brokers) == 2 {
		k, a := r.Brokers[0], r.Brokers[1]
		fmt.Fprintf(&b, "#### Broker: kmirror vs %s (single node, JVM -Xmx1G -Xms1G)\n\n", a.Broker)
		fmt.Fprintf(&b, "| metric | kmirror | %s | kmirror / Kafka |\n|---|---:|---:|---:|\n", a.Broker)
		row := func(name string, kv, av float64) {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, num(kv), num(av), ratio(kv, av))
		}
		row(fmt.Sprintf("produce MB/s, 16 partitions (%d records)", s.BrokerRecords), k.Produce16.MBps, a.Produce16.MBps)
		row("produce records/s, 16 partitions", k.Produce16.RecPerS, a.Produce16.RecPerS)
		row("produce MB/s, 1 partition", k.Produce1.MBps, a.Produce1.MBps)
		row("consume MB/s, 16 partitions", k.Consume16.MBps, a.Consume16.MBps)
		row("consume records/s, 16 partitions", k.Consume16.RecPerS, a.Consume16.RecPerS)
		row(fmt.Sprintf("produce latency p50 ms at %d records/s for %.0f s", s.LatencyRate, s.LatencySeconds), k.Latency.P50Ms, a.Latency.P50Ms)
		row(fmt.Sprintf("produce latency p99 ms at %d records/s", s.LatencyRate), k.Latency.P99Ms, a.Latency.P99Ms)
		row("broker peak RSS MB (VmHWM)", k.PeakRSSMB, a.PeakRSSMB)
		row("broker CPU s over the whole run", k.CPUSeconds, a.CPUSeconds)
		row("start-up s (process start → first Metadata response)", k.StartupS, a.StartupS)
		b.WriteString("\n")
	}
	if len(r.CatchUps) > 0 {
		fmt.Fprintf(&b, "#### Mirroring: kmirror Cluster Mirroring vs MirrorMaker 2 (dedicated mode)\n\n")
		lagRate := "half of the maximum rate, the maximum being kmirror's measured 16-partition catch-up records/s of the same codec (the same target for both engines)"
		if s.LagRate > 0 {
			lagRate = fmt.Sprintf("a fixed %d records/s", s.LagRate)
		}
		lowRun := ""
		if s.LagRateLow > 0 {
			clients := "1 producer client"
			if s.LagLowClients != 1 {
				clients = fmt.Sprintf("%d producer clients", s.LagLowClients)
			}
			lowRun = fmt.Sprintf("at a fixed %d records/s by %s, which the machine paces with room to spare, so that the lag is the mirror's own; then ", s.LagRateLow, clients)
		}
		fmt.Fprintf(&b, "Source: one Apache Kafka %s broker. Destination: a kmirror broker for each engine (MirrorMaker 2 target: %s). Backlog: %d records × %d B on 16 partitions (%.2f GB of values). Steady-state lag, two runs per codec and engine on 16-partition topics: records produced on the source %sat %s by %d paced producer clients; each run %.0f s, first 3 s left out, send time (in the value) → read by a consumer on the destination; “from the source append” measures from the source's LogAppendTime instead (the lag topics have message.timestamp.type=LogAppendTime and both engines carry that timestamp over unchanged), which leaves out the time records waited in the producers' buffers. “Achieved” is the produced rate (records / first send → last acknowledgement); where it is below the target the producers on this machine could not pace the target (with zstd they are bound by their own compression), were behind all along, and the lag includes the time records waited in their buffers. “Last ack → all read” is how long the destination consumer kept reading after production ended: about the lag when the mirror kept up; seconds when the mirror (or the consumer) fell behind during the run and the lag grew. CPU: utime+stime from /proc of the mirroring process (kmirror: the destination broker; MirrorMaker 2: its JVM), per GB of values, over the catch-up; “+ dest” adds the destination broker.\n\n",
			s.KafkaVersion, s.MM2Target, s.Backlog16, s.RecordBytes, float64(s.Backlog16*s.RecordBytes)/1e9, lowRun, lagRate, s.LagProducers, s.LagSeconds)
		fmt.Fprintf(&b, "| codec | metric | kmirror | MirrorMaker 2 | kmirror / MM2 |\n|---|---|---:|---:|---:|\n")
		for _, c := range []string{"none", "zstd"} {
			var k, mm catchUp
			for _, cu := range r.CatchUps {
				if cu.Codec == c && cu.Engine == "kmirror" {
					k = cu
				} else if cu.Codec == c {
					mm = cu
				}
			}
			row := func(name string, kv, mv float64) {
				if mm.Engine == "" { // MirrorMaker 2 did not run (-mm2=false)
					mv = -1
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c, name, num(kv), num(mv), ratio(kv, mv))
			}
			if mm.Error != "" {
				fmt.Fprintf(&b, "| %s | MirrorMaker 2 failed | | %s | |\n", c, mm.Error)
			}
			row("start → first record s", k.FirstRecordS, mm.FirstRecordS)
			row(fmt.Sprintf("catch-up s (first record → caught up) of the %s GB backlog", num(float64(s.Backlog16*s.RecordBytes)/1e9)), k.CatchUpS, mm.CatchUpS)
			row("catch-up MB/s", k.MBps, mm.MBps)
			row("catch-up records/s", k.RecPerS, mm.RecPerS)
			lagErrors := func(set string, kl, ml lagResult) {
				for _, e := range []struct {
					engine string
					l      lagResult
				}{{"kmirror", kl}, {"MirrorMaker 2", ml}} {
					if e.l.Error != "" {
						fmt.Fprintf(&b, "| %s | %s: %s failed: %s | | | |\n", c, set, e.engine, e.l.Error)
					}
				}
			}
			// lagRows are the rows of one lag run pair after its target: at labels the
			// send → read percentiles (" at the achieved rate" where the rate was a target).
			lagRows := func(set, at string, kl, ml lagResult) {
				row(set+": achieved produced records/s", kl.AchievedRate, ml.AchievedRate)
				row(set+": p50 ms"+at, kl.P50Ms, ml.P50Ms)
				row(set+": p99 ms"+at, kl.P99Ms, ml.P99Ms)
				row(set+": p50 ms from the source append", kl.Appended.P50Ms, ml.Appended.P50Ms)
				row(set+": p99 ms from the source append", kl.Appended.P99Ms, ml.Appended.P99Ms)
				row(set+": last ack on source → all read on destination s", kl.DrainS, ml.DrainS)
			}
			if s.LagRateLow > 0 {
				set := fmt.Sprintf("lag at %d records/s", s.LagRateLow)
				kl, ml := r.LagsLow["kmirror/"+c], r.LagsLow["MirrorMaker 2/"+c]
				lagErrors(set, kl, ml)
				lagRows(set, "", kl, ml)
			}
			kl, ml := r.Lags["kmirror/"+c], r.Lags["MirrorMaker 2/"+c]
			set, target := "lag at half the maximum (target/achieved)", fmt.Sprintf("target records/s (half of the measured maximum %s records/s)", num(kl.MaxRate))
			if s.LagRate > 0 {
				set, target = fmt.Sprintf("lag at %d records/s (-lag-rate; target/achieved)", s.LagRate), "target records/s"
			}
			lagErrors(set, kl, ml)
			row(set+": "+target, float64(kl.TargetRate), float64(ml.TargetRate))
			lagRows(set, " at the achieved rate", kl, ml)
			row("CPU s/GB, mirroring process", k.CPUPerGB, mm.CPUPerGB)
			row("CPU s/GB, mirroring + dest broker", k.CPUPerGBTotal, mm.CPUPerGBTotal)
		}
		b.WriteString("\n")
	}
	if len(r.MirrorRates) > 0 {
		fmt.Fprintf(&b, "#### kmirror mirroring throughput (issue 4 targets: ≥ 0.80 of the destination's own produce rate; ≤ 0.20 of the CPU/GB of a consume-and-re-produce pipeline)\n\n")
		fmt.Fprintf(&b, "| partitions | codec | backlog records (GB of values) | source MB on disk | mirror MB/s | mirror records/s | dest produce MB/s | mirror / produce | kmirror CPU s/GB | pipeline CPU s/GB (+ dest) | kmirror / pipeline |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, mr := range r.MirrorRates {
			pipe, total := "", 0.0
			for _, p := range r.Pipelines {
				if p.Codec == mr.Codec && p.Partitions == mr.Partitions {
					pipe, total = fmt.Sprintf("%s (%s)", num(p.CPUPerGB), num(p.CPUPerGBTotal)), p.CPUPerGBTotal
				}
			}
			cmp := "—"
			if total > 0 {
				cmp = ratio(mr.Mirror.CPUPerGB, total)
			}
			parts := fmt.Sprint(mr.Partitions)
			if mr.FetchMaxBytes > 0 {
				parts += fmt.Sprintf(" (fetch.max.bytes=%s)", mib(mr.FetchMaxBytes))
			}
			fmt.Fprintf(&b, "| %s | %s | %d (%s) | %s | %s | %s | %s | %s | %s | %s | %s |\n", parts, mr.Codec, mr.Mirror.BacklogRecs, num(float64(mr.Mirror.BacklogRecs*s.RecordBytes)/1e9), num(mr.Mirror.SourceDiskMB),
				num(mr.Mirror.MBps), num(mr.Mirror.RecPerS), num(mr.DestProduce.MBps), ratio(mr.Mirror.MBps, mr.DestProduce.MBps), num(mr.Mirror.CPUPerGB), pipe, cmp)
		}
		b.WriteString("\n")
		b.WriteString("Notes: “dest produce” is franz-go producing as many records as the backlog holds into the kmirror destination (same partitions and codec); every measured window starts after sync(2), so that no writeback of an earlier run falls into it; with zstd it is bound by the client's own compression on this 2-core machine, so the zstd “mirror / produce” ratio overstates. The pipeline is a franz-go consumer on the source feeding a franz-go producer into the destination (same partition and codec), run as its own process; its CPU is read with getrusage, “+ dest” adds the destination broker's. It copies the same backlogs as the mirror (1 and 16 partitions).")
		for _, mr := range r.MirrorRates {
			if mr.FetchMaxBytes > 0 {
				codec := mr.Codec
				if codec == "none" {
					codec = "uncompressed"
				}
				fmt.Fprintf(&b, " The “1 (fetch.max.bytes=%s)” row is a second copy of the 1-partition %s backlog (same records, produced the same way) mirrored by a second mirror on the same destination whose per-partition fetch size (fetch.max.bytes) is %s instead of the default 1 MiB; its “dest produce” and pipeline figures are the default 1-partition row's.", mib(mr.FetchMaxBytes), codec, mib(mr.FetchMaxBytes))
			}
		}
		b.WriteString("\n\n")
	}
	b.WriteString("The machine is shared (2 cores, other work may run at the same time), so figures vary between runs by up to about 2× for throughput; the ratios of one run are what to compare.\n")
	return b.String()
}
