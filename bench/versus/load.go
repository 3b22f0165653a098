package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// recordSize is the value size of every record, in bytes.
const recordSize = 1024

// values is a pool of record values: text of words drawn from a 512-word vocabulary, so
// that zstd compresses them about as well as typical log or JSON payloads.
var values = func() [][]byte {
	r := rand.New(rand.NewSource(1))
	words := make([]string, 512)
	for i := range words {
		w := make([]byte, 3+r.Intn(7))
		for j := range w {
			w[j] = byte('a' + r.Intn(26))
		}
		words[i] = string(w)
	}
	vs := make([][]byte, 4096)
	for i := range vs {
		v := make([]byte, 0, recordSize+16)
		for len(v) < recordSize {
			v = append(append(v, words[r.Intn(len(words))]...), ' ')
		}
		vs[i] = v[:recordSize]
	}
	return vs
}()

// clientOpts are the franz-go settings shared by every producer of the benchmark, on
// both brokers: kgo defaults (acks=all, idempotent) with 1 MiB batches.
func producerOpts(addr, codec string) []kgo.Opt {
	c := kgo.NoCompression()
	if codec == "zstd" {
		c = kgo.ZstdCompression()
	}
	return []kgo.Opt{kgo.SeedBrokers(addr), kgo.ProducerBatchMaxBytes(1 << 20), kgo.MaxBufferedRecords(20000),
		kgo.ProducerBatchCompression(c)}
}

func newClient(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fatalf("kgo: %v", err)
	}
	return cl
}

func createTopic(addr, topic string, partitions int) {
	cl := newClient(kgo.SeedBrokers(addr))
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		fatalf("create topic %s on %s: %v", topic, addr, err)
	}
	waitTopic(addr, topic)
}

// throughput is a measured rate.
type throughput struct {
	Records int     `json:"records"`
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"` // value bytes (uncompressed) per second, 1 MB = 10^6 B
	RecPerS float64 `json:"records_per_s"`
}

func rate(n int, d time.Duration) throughput {
	s := d.Seconds()
	return throughput{Records: n, Seconds: s, MBps: float64(n*recordSize) / s / 1e6, RecPerS: float64(n) / s}
}

// produce writes n records as fast as the client goes and returns the rate.
func produce(addr, topic, codec string, n int) throughput {
	cl := newClient(append(producerOpts(addr, codec), kgo.DefaultProduceTopic(topic))...)
	defer cl.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Value
	wg.Add(n)
	start := time.Now()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Value: values[i%len(values)]}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	el := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		fatalf("produce to %s: %v", topic, err)
	}
	return rate(n, el)
}

// consume reads n records from the start of topic and returns the rate.
func consume(addr, topic string, n int) throughput {
	cl := newClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(16<<20))
	defer cl.Close()
	got := 0
	start := time.Now()
	for got < n {
		fs := cl.PollFetches(context.Background())
		fs.EachError(func(t string, p int32, err error) { fatalf("fetch %s-%d: %v", t, p, err) })
		got += fs.NumRecords()
	}
	return rate(n, time.Since(start))
}

// latency is a latency distribution in ms.
type latency struct {
	Samples int     `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

func summarize(l []time.Duration) latency {
	if len(l) == 0 {
		return latency{}
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return latency{Samples: len(l), P50Ms: ms(l[len(l)/2]), P99Ms: ms(l[len(l)*99/100]), MaxMs: ms(l[len(l)-1])}
}

// paced produces at a fixed rate (records/s) for d; each value starts with the send time
// (unix ns, big endian). It returns the Produce-call-to-ack latency of every record.
func paced(addr, topic, codec string, perSec int, d time.Duration) []time.Duration {
	cl := newClient(append(producerOpts(addr, codec), kgo.DefaultProduceTopic(topic))...)
	defer cl.Close()
	ctx := context.Background()
	total := int(float64(perSec) * d.Seconds())
	lat := make([]time.Duration, total)
	var wg sync.WaitGroup
	var failed atomic.Value
	wg.Add(total)
	start := time.Now()
	for i := 0; i < total; {
		due := int(time.Since(start).Seconds() * float64(perSec))
		for ; i < due && i < total; i++ {
			v := append([]byte(nil), values[i%len(values)]...)
			sent := time.Now()
			binary.BigEndian.PutUint64(v, uint64(sent.UnixNano()))
			idx := i
			cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Store(err)
				}
				lat[idx] = time.Since(sent)
				wg.Done()
			})
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		fatalf("paced produce to %s: %v", topic, err)
	}
	return lat
}

// endToEnd produces on the source at perSec for d while a consumer reads topic dst on the
// destination; it returns produced-on-source → read-on-destination lags, leaving out
// the first warm seconds.
func endToEnd(src, srcTopic, dst, dstTopic, codec string, perSec int, d, warm time.Duration) latency {
	total := int(float64(perSec) * d.Seconds())
	cl := newClient(kgo.SeedBrokers(dst), kgo.ConsumeTopics(dstTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(16<<20), kgo.MetadataMinAge(250*time.Millisecond))
	defer cl.Close()
	var lags []time.Duration
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		got := 0
		ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
		defer cancel()
		for got < total {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				fmt.Fprintf(os.Stderr, "end-to-end: only %d of %d records arrived on %s\n", got, total, dstTopic)
				return
			}
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				got++
				sent := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
				if sent.Sub(start) >= warm {
					lags = append(lags, now.Sub(sent))
				}
			})
		}
	}()
	paced(src, srcTopic, codec, perSec, d)
	<-done
	return summarize(lags)
}

// endOffsets returns the sum of the end offsets of topic's partitions (-1 if the topic
// does not exist yet or a partition has no leader).
func endOffsets(adm *kadm.Client, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	var sum int64
	ok := len(res) > 0
	res.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ok = false
		}
		sum += o.Offset
	})
	if !ok {
		return -1
	}
	return sum
}

// diskBytes is the size of topic's .log segment files under a Kafka or kmirror log dir.
func diskBytes(logDir, topic string) int64 {
	var sum int64
	dirs, _ := filepath.Glob(filepath.Join(logDir, topic+"-*"))
	for _, d := range dirs {
		filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".log") {
				sum += fi.Size()
			}
			return nil
		})
	}
	return sum
}
