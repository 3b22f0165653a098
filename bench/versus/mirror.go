package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// catchUp is one mirrored backlog.
type catchUp struct {
	Engine        string  `json:"engine"`
	Topic         string  `json:"topic"`
	Partitions    int     `json:"partitions"`
	Codec         string  `json:"codec"`
	BacklogRecs   int     `json:"backlog_records"`
	SourceDiskMB  float64 `json:"source_disk_mb"`     // the backlog's .log bytes on the source
	FirstRecordS  float64 `json:"start_to_first_s"`   // start (--start / MM2 process start) → first record on the destination
	CatchUpS      float64 `json:"catch_up_s"`         // first record → all records on the destination
	WindowRecords int     `json:"window_records"`     // records mirrored within CatchUpS
	MBps          float64 `json:"mb_per_s"`           // value bytes per second within CatchUpS
	RecPerS       float64 `json:"records_per_s"`      // records per second within CatchUpS
	CPUPerGB      float64 `json:"cpu_s_per_gb"`       // the mirroring process, per GB of values
	CPUPerGBTotal float64 `json:"cpu_s_per_gb_total"` // the mirroring process plus the destination broker
	// SourceCPUPerGB is the source broker's, when waitCaughtUp was given it.
	SourceCPUPerGB float64 `json:"source_cpu_s_per_gb,omitempty"`
	Error          string  `json:"error,omitempty"`
}

// measured is what waitCaughtUp reads: one process (*proc) or the nodes of a cluster
// (*cluster).
type measured interface {
	cpu() float64      // utime+stime in seconds (of a cluster: summed over its nodes)
	exited() bool      // the process (of a cluster: any node) has exited
	tail() string      // the end of its log (of a cluster: of a node that exited, else node 1's)
	label() string     // its name in messages
	bootstrap() string // the PLAINTEXT listener a client bootstraps from ("" for MirrorMaker 2)
}

// waitCaughtUp polls the destination's end offsets of topic until they reach want. It
// returns the catch-up measurement with CPU read from the mirroring process and the
// destination (the same for kmirror: the broker or the cluster's nodes), and from the
// source broker unless source is nil.
func waitCaughtUp(dst, mirroring, source measured, topic string, want int64, t0 time.Time, limit time.Duration) catchUp {
	cl := newClient(kgo.SeedBrokers(dst.bootstrap()))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var c catchUp
	var tFirst time.Time
	var firstCount int64
	var cpuM0, cpuD0, cpuS0 float64
	srcCPU := func() float64 {
		if source == nil {
			return 0
		}
		return source.cpu()
	}
	for {
		n := endOffsets(adm, topic)
		now := time.Now()
		if n > 0 && tFirst.IsZero() {
			tFirst, firstCount = now, n
			cpuM0, cpuD0, cpuS0 = mirroring.cpu(), dst.cpu(), srcCPU()
			c.FirstRecordS = now.Sub(t0).Seconds()
		}
		if n >= want {
			cpuM, cpuD, cpuS := mirroring.cpu()-cpuM0, dst.cpu()-cpuD0, srcCPU()-cpuS0
			c.CatchUpS = now.Sub(tFirst).Seconds()
			c.WindowRecords = int(want - firstCount)
			gb := float64(c.WindowRecords) * recordSize / 1e9
			if c.CatchUpS > 0 && c.WindowRecords > 0 {
				c.MBps = float64(c.WindowRecords) * recordSize / c.CatchUpS / 1e6
				c.RecPerS = float64(c.WindowRecords) / c.CatchUpS
				c.CPUPerGB = cpuM / gb
				c.CPUPerGBTotal = cpuM / gb
				c.SourceCPUPerGB = cpuS / gb
				if mirroring != dst {
					c.CPUPerGBTotal = (cpuM + cpuD) / gb
				}
			}
			return c
		}
		for _, m := range []measured{mirroring, dst} {
			if m.exited() {
				c.Error = m.label() + " exited: " + lastLine(m.tail())
				return c
			}
		}
		if now.Sub(t0) > limit {
			c.Error = fmt.Sprintf("not caught up after %s (%d of %d records)", limit, n, want)
			fmt.Fprintf(os.Stderr, "%s: %s\n%s\n", topic, c.Error, mirroring.tail())
			return c
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// mirrorsCLI runs `kmirror mirrors --bootstrap-server dst args...`.
func mirrorsCLI(bin, dst string, args ...string) {
	out, err := exec.Command(bin, append([]string{"mirrors", "--bootstrap-server", dst}, args...)...).CombinedOutput()
	if err != nil {
		fatalf("kmirror mirrors %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// mm2Properties is the MirrorMaker 2 configuration of the benchmark: one flow src->dst,
// replication factor rf for the topics it creates on dst (the mirrored topics, and
// Connect's offset, status and config topics and the checkpoints and heartbeats topics
// in dedicated mode), 1 for the offset-syncs topic, which lives on the source (its
// default offset-syncs.topic.location), a single broker in every benchmark; checkpoints,
// heartbeats, ACL and topic-config sync off (only the data path is measured), everything
// else at its default (tasks.max=1, the default replication policy that prefixes
// "src."). For zstd data the producer toward dst compresses with zstd, so that the
// destination holds zstd batches as kmirror's does.
func mm2Properties(src, dst, topics, codec string, rf int) string {
	r := fmt.Sprint(rf)
	lines := []string{
		"clusters = src, dst",
		"src.bootstrap.servers = " + src,
		"dst.bootstrap.servers = " + dst,
		"src->dst.enabled = true",
		"dst->src.enabled = false",
		"src->dst.topics = " + topics,
		"replication.factor = " + r,
		"checkpoints.topic.replication.factor = " + r,
		"heartbeats.topic.replication.factor = " + r,
		"offset-syncs.topic.replication.factor = 1",
		"offset.storage.replication.factor = " + r,
		"status.storage.replication.factor = " + r,
		"config.storage.replication.factor = " + r,
		"emit.checkpoints.enabled = false",
		"emit.heartbeats.enabled = false",
		"sync.group.offsets.enabled = false",
		"sync.topic.acls.enabled = false",
		"sync.topic.configs.enabled = false",
	}
	if codec == "zstd" {
		lines = append(lines, "dst.producer.compression.type = zstd")
	}
	return strings.Join(lines, "\n") + "\n"
}

// pipelineResult is the consume-and-re-produce pipeline over a backlog.
type pipelineResult struct {
	Partitions    int     `json:"partitions"`
	Codec         string  `json:"codec"`
	Records       int     `json:"records"`
	Seconds       float64 `json:"seconds"`
	MBps          float64 `json:"mb_per_s"`
	CPUPerGB      float64 `json:"cpu_s_per_gb"`       // the pipeline process
	CPUPerGBTotal float64 `json:"cpu_s_per_gb_total"` // the pipeline plus the destination broker
}

// pipeline runs this program's `pipeline` subcommand from srcTopic on src into a new
// topic pipe<partitions>-<codec> on dst and measures its CPU (rusage) and the destination
// broker's.
func pipeline(src string, dst *proc, srcTopic, codec string, partitions, n int) pipelineResult {
	out := fmt.Sprintf("pipe%d-%s", partitions, codec)
	createTopic(dst.addr, out, partitions, nil)
	self, err := os.Executable()
	must(err)
	cmd := exec.Command(self, "pipeline", "-from", src, "-topic", srcTopic, "-to", dst.addr, "-out", out, "-codec", codec, "-records", fmt.Sprint(n))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cpuD0 := dst.cpu()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		fatalf("pipeline: %v", err)
	}
	el := time.Since(start).Seconds()
	ru := cmd.ProcessState
	cpu := (ru.UserTime() + ru.SystemTime()).Seconds()
	gb := float64(n) * recordSize / 1e9
	return pipelineResult{Partitions: partitions, Codec: codec, Records: n, Seconds: el, MBps: float64(n) * recordSize / el / 1e6,
		CPUPerGB: cpu / gb, CPUPerGBTotal: (cpu + dst.cpu() - cpuD0) / gb}
}

// mirrorConfigFile writes a mirror's properties to path: bootstrap.servers plus the
// comma-separated key=value pairs of extra (kmirror's defaults otherwise).
func mirrorConfigFile(p, src, extra string) string {
	props := "bootstrap.servers=" + src + "\n"
	if extra != "" {
		props += strings.ReplaceAll(extra, ",", "\n") + "\n"
	}
	must(os.WriteFile(p, []byte(props), 0o644))
	return p
}
