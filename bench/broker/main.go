// Command broker benchmarks a kmirror broker run as the built binary: produce and
// consume throughput (MB/s, records/s) and produce latency (p50/p99, from Produce call
// to acknowledgement, as Kafka's producer-perf-test measures it) with franz-go, 1 KiB
// records, on topics of 1 and 16 partitions, plus the broker's peak RSS (VmHWM).
// It prints a markdown table and writes bench/results/broker-<date>.json.
//
// Run from the repository root: go run ./bench/broker (or make bench-broker).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/bench/internal/procinfo"
)

// result is one row of the table.
type result struct {
	Partitions      int     `json:"partitions"`
	Records         int     `json:"records"`
	RecordBytes     int     `json:"record_bytes"`
	ProduceMBps     float64 `json:"produce_mb_per_s"`
	ProduceRecPerS  float64 `json:"produce_records_per_s"`
	ProduceP50Ms    float64 `json:"produce_latency_p50_ms"`
	ProduceP99Ms    float64 `json:"produce_latency_p99_ms"`
	ConsumeMBps     float64 `json:"consume_mb_per_s"`
	ConsumeRecPerS  float64 `json:"consume_records_per_s"`
	BrokerPeakRSSMB float64 `json:"broker_peak_rss_mb"`
}

// report is the JSON file.
type report struct {
	Date    string   `json:"date"`
	Machine machine  `json:"machine"`
	Client  string   `json:"client"`
	Results []result `json:"results"`
}

type machine struct {
	NumCPU   int    `json:"nproc"`
	CPUModel string `json:"cpu_model"`
	MemTotal string `json:"mem_total"`
	GoOS     string `json:"goos"`
	GoArch   string `json:"goarch"`
}

func main() {
	records := flag.Int("records", 200000, "records per run")
	size := flag.Int("size", 1024, "record value size in bytes")
	out := flag.String("out", "bench/results", "directory for the JSON results")
	flag.Parse()

	tmp, err := os.MkdirTemp("", "kmirror-bench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "kmirror")
	if b, err := exec.Command("go", "build", "-o", bin, "./cmd/kmirror").CombinedOutput(); err != nil {
		log.Fatalf("go build: %v\n%s", err, b)
	}

	var rows []result
	for _, parts := range []int{1, 16} {
		// A fresh broker per row, so that the peak RSS belongs to that row.
		addr, stop, rss := startBroker(bin, filepath.Join(tmp, fmt.Sprintf("data-%d", parts)))
		r := run(addr, parts, *records, *size)
		r.BrokerPeakRSSMB = rss()
		stop()
		rows = append(rows, r)
	}

	m := describeMachine()
	fmt.Printf("\nkmirror broker benchmark — %d CPUs (%s), %s memory; franz-go, %d B records, acks=all, idempotent\n\n", m.NumCPU, m.CPUModel, m.MemTotal, *size)
	fmt.Println("| partitions | records | produce MB/s | produce rec/s | produce p50 ms | produce p99 ms | consume MB/s | consume rec/s | broker peak RSS MB |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Printf("| %d | %d | %.1f | %.0f | %.1f | %.1f | %.1f | %.0f | %.0f |\n", r.Partitions, r.Records, r.ProduceMBps, r.ProduceRecPerS, r.ProduceP50Ms, r.ProduceP99Ms, r.ConsumeMBps, r.ConsumeRecPerS, r.BrokerPeakRSSMB)
	}
	rep := report{Date: time.Now().UTC().Format(time.RFC3339), Machine: m, Client: "franz-go kgo (defaults: idempotent, acks=all)", Results: rows}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(*out, "broker-"+time.Now().UTC().Format("2006-01-02")+".json")
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nwrote %s\n", path)
}

// startBroker runs `kmirror serve` on dir; it returns the address, a stop function
// (SIGTERM, wait) and a reader of the process's peak RSS in MB.
func startBroker(bin, dir string) (string, func(), func() float64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--listeners", "PLAINTEXT://"+addr, "--log-dirs", dir, "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log.Fatal("broker did not come up")
		}
	}
	pid := cmd.Process.Pid
	rss := func() float64 { return procinfo.PeakRSSMB(pid) }
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	return addr, stop, rss
}

func run(addr string, partitions, n, size int) result {
	ctx := context.Background()
	topic := fmt.Sprintf("bench-%d", partitions)
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, int32(partitions), 1, nil, topic); err != nil {
		log.Fatal(err)
	}
	r := result{Partitions: partitions, Records: n, RecordBytes: size}
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(20000))
	if err != nil {
		log.Fatal(err)
	}
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var failed sync.Once
	wg.Add(n)
	start := time.Now()
	for i := 0; i < n; i++ {
		sent := time.Now()
		i := i
		prod.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Do(func() { log.Fatalf("produce: %v", err) })
			}
			lat[i] = time.Since(sent)
			wg.Done()
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	prod.Close()
	r.ProduceRecPerS = float64(n) / el
	r.ProduceMBps = float64(n*size) / el / 1e6
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r.ProduceP50Ms = float64(lat[n/2]) / 1e6
	r.ProduceP99Ms = float64(lat[n*99/100]) / 1e6

	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(16<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close()
	got := 0
	start = time.Now()
	for got < n {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) { log.Fatalf("fetch %s-%d: %v", t, p, err) })
		got += fs.NumRecords()
	}
	el = time.Since(start).Seconds()
	r.ConsumeRecPerS = float64(n) / el
	r.ConsumeMBps = float64(n*size) / el / 1e6
	return r
}

func describeMachine() machine {
	return machine{NumCPU: runtime.NumCPU(), GoOS: runtime.GOOS, GoArch: runtime.GOARCH,
		CPUModel: procinfo.CPUModel(), MemTotal: procinfo.MemTotal()}
}
