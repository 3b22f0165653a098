package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// cleanerSettings are the sizes of -only cleaner.
type cleanerSettings struct {
	BeforeRev       string  `json:"before_rev"`
	AfterRev        string  `json:"after_rev"`
	Records         int     `json:"fill_records"`
	Keys            int     `json:"keys"`
	SegmentBytes    int     `json:"segment_bytes"`
	BackoffMs       int     `json:"log_cleaner_backoff_ms"`
	Rate            int     `json:"latency_records_per_s"`
	BaselineSeconds float64 `json:"baseline_seconds"`
	WindowSeconds   float64 `json:"window_seconds"`
	RecordBytes     int     `json:"record_bytes"`
	DataDir         string  `json:"data_dir"`
	Client          string  `json:"client"`
}

// cleanerRun is one build's figures.
type cleanerRun struct {
	Build     string     `json:"build"`
	Fill      throughput `json:"fill"`
	FilledMB  float64    `json:"partition_mb_filled"` // .log bytes of the partition before cleaning
	CleanedMB float64    `json:"partition_mb_cleaned"`
	// CleanS is the compact switch → the last .cleaned or .swap file seen (the pass done);
	// FirstCleanedS the switch → the first one seen.
	CleanS        float64 `json:"clean_s"`
	FirstCleanedS float64 `json:"first_cleaned_file_s"`
	Baseline      latency `json:"produce_latency_without_cleaning"`
	During        latency `json:"produce_latency_during_cleaning"` // records sent between the compact switch and the pass done
	Error         string  `json:"error,omitempty"`
}

type cleanerReport struct {
	Date     string          `json:"date"`
	Machine  machine         `json:"machine"`
	Settings cleanerSettings `json:"settings"`
	Runs     []cleanerRun    `json:"runs"` // before, after
}

// benchCleaner runs issue 18's end-to-end measurement on the kmirror binary built at
// cs.BeforeRev and on bin (the working tree): one broker each, one after the other.
func benchCleaner(bin, tmp string, cs cleanerSettings) cleanerReport {
	before := buildAt(cs.BeforeRev, tmp)
	rep := cleanerReport{Date: time.Now().UTC().Format(time.RFC3339), Machine: describeMachine(tmp), Settings: cs}
	rep.Runs = append(rep.Runs, cleanerOne("before ("+cs.BeforeRev+")", before, filepath.Join(tmp, "c-before"), cs))
	rep.Runs = append(rep.Runs, cleanerOne("after ("+cs.AfterRev+")", bin, filepath.Join(tmp, "c-after"), cs))
	return rep
}

// buildAt builds ./cmd/kmirror as of git revision rev (git archive into tmp) and returns
// the binary's path.
func buildAt(rev, tmp string) string {
	src := filepath.Join(tmp, "src-"+rev)
	must(os.MkdirAll(src, 0o755))
	logf("cleaner: building kmirror at %s", rev)
	if b, err := exec.Command("sh", "-c", fmt.Sprintf("git archive %s | tar -x -C %s", rev, src)).CombinedOutput(); err != nil {
		fatalf("git archive %s: %v\n%s", rev, err, b)
	}
	bin := filepath.Join(tmp, "kmirror-"+rev)
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "./cmd/kmirror")
	build.Dir = src
	if b, err := build.CombinedOutput(); err != nil {
		fatalf("go build at %s: %v\n%s", rev, err, b)
	}
	must(os.RemoveAll(src))
	return bin
}

// cleanerOne measures one build: a compacted-to-be topic "big" of one partition filled
// with cs.Records keyed records while its cleanup.policy is delete (the cleaner leaves
// it alone), produce latency at cs.Rate for cs.BaselineSeconds, then the same producer for
// cs.WindowSeconds during which cleanup.policy becomes compact (after one second) and
// the cleaner's pass runs.
func cleanerOne(name, bin, dir string, cs cleanerSettings) cleanerRun {
	logf("cleaner %s: starting", name)
	p := startKmirror(bin, "kmirror-"+filepath.Base(dir), dir, "--override", fmt.Sprintf("log.cleaner.backoff.ms=%d", cs.BackoffMs))
	defer p.stop()
	r := cleanerRun{Build: name}
	keys := keySpace(cs.Keys)
	createTopic(p.addr, "big", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("delete"), "retention.ms": kadm.StringPtr("-1"),
		"segment.bytes": kadm.StringPtr(fmt.Sprint(cs.SegmentBytes))})
	logDir, partDir := filepath.Join(dir, "data"), filepath.Join(dir, "data", "big-0")
	logf("cleaner %s: fill %d records over %d keys", name, cs.Records, cs.Keys)
	r.Fill = produceKeyed(p.addr, "big", "none", cs.Records, keys)
	settle()
	logf("cleaner %s: baseline latency at %d records/s for %.0fs", name, cs.Rate, cs.BaselineSeconds)
	r.Baseline = summarize(pacedKeyed(p.addr, "big", "none", cs.Rate, time.Duration(cs.BaselineSeconds*float64(time.Second)), 1, keys).Lat)
	settle()
	r.FilledMB = float64(diskBytes(logDir, "big")) / 1e6

	// The pass: watch the partition directory while the producer runs.
	var switched, firstCleaned, lastCleaned atomic.Int64 // unix ns, 0 until seen
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if switched.Load() == 0 || !cleanerFiles(partDir) {
				continue
			}
			now := time.Now().UnixNano()
			firstCleaned.CompareAndSwap(0, now)
			lastCleaned.Store(now)
		}
	}()
	window := time.Duration(cs.WindowSeconds * float64(time.Second))
	go func() {
		time.Sleep(time.Second)
		logf("cleaner %s: cleanup.policy=compact", name)
		alterTopicConfig(p.addr, "big", "cleanup.policy", "compact")
		switched.Store(time.Now().UnixNano())
	}()
	logf("cleaner %s: latency at %d records/s for %.0fs while the cleaner runs", name, cs.Rate, cs.WindowSeconds)
	run := pacedKeyed(p.addr, "big", "none", cs.Rate, window, 1, keys)
	close(stop)
	<-watched
	r.CleanedMB = float64(diskBytes(logDir, "big")) / 1e6
	sw, fc, lc := switched.Load(), firstCleaned.Load(), lastCleaned.Load()
	if fc == 0 {
		r.Error = "the cleaner wrote no .cleaned file within the window"
		return r
	}
	if r.CleanedMB > r.FilledMB*3/4 {
		r.Error = "the partition did not shrink below 3/4 of its size within the window"
	}
	r.FirstCleanedS, r.CleanS = float64(fc-sw)/1e9, float64(lc-sw)/1e9
	var during []time.Duration
	for i, s := range run.Sent {
		if at := run.Start.Add(s).UnixNano(); at >= sw && at <= lc {
			during = append(during, run.Lat[i])
		}
	}
	r.During = summarize(during)
	logf("cleaner %s: pass %.1fs (%.0f → %.0f MB); produce p99 %.2f ms without cleaning, %.2f ms during (max %.0f ms)",
		name, r.CleanS, r.FilledMB, r.CleanedMB, r.Baseline.P99Ms, r.During.P99Ms, r.During.MaxMs)
	return r
}

// cleanerFiles reports whether dir holds a segment file of a cleaning pass in progress
// (.cleaned or .swap, Kafka's LogFileUtils suffixes, which kmirror uses too).
func cleanerFiles(dir string) bool {
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if n := e.Name(); strings.HasSuffix(n, ".cleaned") || strings.HasSuffix(n, ".swap") {
			return true
		}
	}
	return false
}

// alterTopicConfig sets one topic config with IncrementalAlterConfigs.
func alterTopicConfig(addr, topic, key, value string) {
	cl := newClient(seed(addr)...)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: key, Value: kadm.StringPtr(value)}}, topic)
	if err == nil {
		for _, r := range resp {
			err = r.Err
		}
	}
	if err != nil {
		fatalf("alter %s of %s: %v", key, topic, err)
	}
}

func renderCleanerMarkdown(r cleanerReport) string {
	var b strings.Builder
	s := r.Settings
	fmt.Fprintf(&b, "# kmirror produce latency while the log cleaner works on a large partition (issue 18) — %s\n\n", r.Date[:10])
	b.WriteString(machineAndClient(r.Machine, s.DataDir, s.Client, s.RecordBytes, "go run ./bench/versus -only cleaner (make bench-cleaner)"))
	fmt.Fprintf(&b, "One kmirror broker per build, one after the other: `kmirror` built at %s (the cleaning pass under the partition's append lock) and at %s (the pass off the lock, each segment group swapped in under it on its own). "+
		"A topic of one partition, segment.bytes %s, filled with %d records of %d B over %d keys while its cleanup.policy is delete; then one franz-go producer (acks=all) at %d records/s on that partition, "+
		"%.0f s without cleaning, then %.0f s during which cleanup.policy becomes compact (after 1 s; log.cleaner.backoff.ms %d) and the cleaner's pass runs. "+
		"\"During cleaning\" counts the records sent between the compact switch (IncrementalAlterConfigs acknowledged; the cleaner picks the log up within its backoff) and the pass done (the last `.cleaned` or `.swap` file seen in the partition directory, sampled every 20 ms; one pass: the records produced during the window leave the log below min.cleanable.dirty.ratio 0.5). "+
		"Latency is Produce call → acknowledgement.\n\n",
		s.BeforeRev, s.AfterRev, mib(s.SegmentBytes), s.Records, s.RecordBytes, s.Keys, s.Rate, s.BaselineSeconds, s.WindowSeconds, s.BackoffMs)
	b.WriteString("| | " + r.Runs[0].Build + " | " + r.Runs[1].Build + " | before / after |\n|---|---:|---:|---:|\n")
	row := func(name string, f func(cleanerRun) float64) {
		a, c := f(r.Runs[0]), f(r.Runs[1])
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, num(a), num(c), ratio(a, c))
	}
	row("fill, MB/s", func(c cleanerRun) float64 { return c.Fill.MBps })
	row("partition before cleaning, MB", func(c cleanerRun) float64 { return c.FilledMB })
	row("partition after the window, MB", func(c cleanerRun) float64 { return c.CleanedMB })
	row("compact switch → first .cleaned file, s", func(c cleanerRun) float64 { return c.FirstCleanedS })
	row("compact switch → last .cleaned/.swap file (pass done), s", func(c cleanerRun) float64 { return c.CleanS })
	row("produce p50 without cleaning, ms", func(c cleanerRun) float64 { return c.Baseline.P50Ms })
	row("produce p99 without cleaning, ms", func(c cleanerRun) float64 { return c.Baseline.P99Ms })
	row("produce max without cleaning, ms", func(c cleanerRun) float64 { return c.Baseline.MaxMs })
	row("records sent during cleaning", func(c cleanerRun) float64 { return float64(c.During.Samples) })
	row("produce p50 during cleaning, ms", func(c cleanerRun) float64 { return c.During.P50Ms })
	row("produce p99 during cleaning, ms", func(c cleanerRun) float64 { return c.During.P99Ms })
	row("produce max during cleaning, ms", func(c cleanerRun) float64 { return c.During.MaxMs })
	for _, c := range r.Runs {
		if c.Error != "" {
			fmt.Fprintf(&b, "\n%s: %s\n", c.Build, c.Error)
		}
	}
	return b.String()
}
