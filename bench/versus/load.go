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

// listenerOpts maps a listener's host:port to the client options it needs besides the
// seed (TLS and SASL, see security.go); PLAINTEXT listeners have no entry.
var listenerOpts sync.Map

// seed is the options of a client of the listener addr: kgo.SeedBrokers(addr) and the
// listener's listenerOpts.
func seed(addr string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(addr)}
	if o, ok := listenerOpts.Load(addr); ok {
		opts = append(opts, o.([]kgo.Opt)...)
	}
	return opts
}

// clientOpts are the franz-go settings shared by every producer of the benchmark, on
// both brokers: kgo defaults (acks=all, idempotent) with 1 MiB batches.
func producerOpts(addr, codec string) []kgo.Opt {
	c := kgo.NoCompression()
	if codec == "zstd" {
		c = kgo.ZstdCompression()
	}
	return append(seed(addr), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(20000),
		kgo.ProducerBatchCompression(c))
}

// keySpace is n distinct record keys ("k" and 7 digits), the keys of records produced to
// a compacted topic; nil (n = 0) produces records without a key.
func keySpace(n int) [][]byte {
	if n <= 0 {
		return nil
	}
	ks := make([][]byte, n)
	for i := range ks {
		ks[i] = []byte(fmt.Sprintf("k%07d", i))
	}
	return ks
}

// keyOf is record i's key: keys[i mod len(keys)], nil without keys.
func keyOf(keys [][]byte, i int) []byte {
	if len(keys) == 0 {
		return nil
	}
	return keys[i%len(keys)]
}

func newClient(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fatalf("kgo: %v", err)
	}
	return cl
}

// createTopic creates topic with replication factor 1 and the given topic configs (nil:
// the broker's defaults) and waits until its partitions have leaders.
func createTopic(addr, topic string, partitions int, configs map[string]*string) {
	createTopicRF(addr, topic, partitions, 1, configs)
}

// createTopicRF is createTopic with replication factor rf.
func createTopicRF(addr, topic string, partitions, rf int, configs map[string]*string) {
	cl := newClient(seed(addr)...)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), int32(partitions), int16(rf), configs, topic)
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
	return produceKeyed(addr, topic, codec, n, nil)
}

// produceKeyed is produce with record i keyed keyOf(keys, i).
func produceKeyed(addr, topic, codec string, n int, keys [][]byte) throughput {
	cl := newClient(append(producerOpts(addr, codec), kgo.DefaultProduceTopic(topic))...)
	defer cl.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Value
	wg.Add(n)
	start := time.Now()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: keyOf(keys, i), Value: values[i%len(values)]}, func(_ *kgo.Record, err error) {
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
	cl := newClient(append(seed(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(16<<20))...)
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

// pacedRun is what a paced producer did.
type pacedRun struct {
	Lat     []time.Duration // Produce call → acknowledgement, one per record
	Records int             // records produced (all acknowledged)
	Seconds float64         // first send → last acknowledgement
	LastAck time.Time       // the last acknowledgement
	Start   time.Time       // when the producers started
	// Sent is each record's send time since Start, in the order of Lat.
	Sent []time.Duration
}

// achieved is the produced rate in records/s (records over first send → last ack).
func (r pacedRun) achieved() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Records) / r.Seconds
}

// stampedValues recycles record values of paced producers once acknowledged.
var stampedValues = sync.Pool{New: func() any { b := make([]byte, recordSize); return &b }}

// paced produces on topic at perSec records/s for d, spread over clients producer
// clients (one connection each, each pacing its share of perSec); each value is a pool
// value whose first 8 bytes are the send time (unix ns, big endian), taken just before
// the Produce call. It stops handing out records once d has passed, even when it is
// behind (a client blocks when 20000 records are buffered), so the achieved rate can be
// below perSec: the caller reads it from the result. Every record must be acknowledged.
// extra are client options after producerOpts.
func paced(addr, topic, codec string, perSec int, d time.Duration, clients int, extra ...kgo.Opt) pacedRun {
	return pacedKeyed(addr, topic, codec, perSec, d, clients, nil, extra...)
}

// pacedKeyed is paced with each client's record i keyed keyOf(keys, i).
func pacedKeyed(addr, topic, codec string, perSec int, d time.Duration, clients int, keys [][]byte, extra ...kgo.Opt) pacedRun {
	clients = max(1, min(clients, perSec))
	ctx := context.Background()
	var acks, producers sync.WaitGroup
	var failed atomic.Value
	var lastAck atomic.Int64
	lats, sents := make([][]time.Duration, clients), make([][]time.Duration, clients)
	start := time.Now()
	for w := range clients {
		cl := newClient(append(append(producerOpts(addr, codec), kgo.DefaultProduceTopic(topic)), extra...)...)
		defer cl.Close()
		share := perSec / clients
		if w < perSec%clients {
			share++
		}
		lat := make([]time.Duration, int(float64(share)*d.Seconds()))
		sentAt := make([]time.Duration, len(lat))
		producers.Add(1)
		go func() {
			defer producers.Done()
			i := 0
		pace:
			for i < len(lat) {
				el := time.Since(start)
				if el >= d {
					break
				}
				for due := min(int(el.Seconds()*float64(share)), len(lat)); i < due; i++ {
					if i%256 == 255 && time.Since(start) >= d {
						break pace
					}
					vp := stampedValues.Get().(*[]byte)
					v := *vp
					copy(v, values[(i*clients+w)%len(values)])
					sent := time.Now()
					binary.BigEndian.PutUint64(v, uint64(sent.UnixNano()))
					idx := i
					sentAt[i] = sent.Sub(start)
					acks.Add(1)
					cl.Produce(ctx, &kgo.Record{Key: keyOf(keys, i), Value: v}, func(_ *kgo.Record, err error) {
						now := time.Now()
						if err != nil {
							failed.Store(err)
						}
						lat[idx] = now.Sub(sent)
						stampedValues.Put(vp)
						for {
							last := lastAck.Load()
							if now.UnixNano() <= last || lastAck.CompareAndSwap(last, now.UnixNano()) {
								break
							}
						}
						acks.Done()
					})
				}
				time.Sleep(time.Millisecond)
			}
			lats[w], sents[w] = lat[:i], sentAt[:i]
		}()
	}
	producers.Wait()
	acks.Wait()
	if err, _ := failed.Load().(error); err != nil {
		fatalf("paced produce to %s: %v", topic, err)
	}
	r := pacedRun{Start: start}
	for w, l := range lats {
		r.Lat = append(r.Lat, l...)
		r.Sent = append(r.Sent, sents[w]...)
	}
	r.Records = len(r.Lat)
	if r.Records > 0 {
		r.LastAck = time.Unix(0, lastAck.Load())
		r.Seconds = r.LastAck.Sub(start).Seconds()
	}
	return r
}

// lagResult is a steady-state end-to-end lag run: the lag distribution plus the rate
// asked for and the rate the paced producer achieved.
type lagResult struct {
	latency
	MaxRate      float64 `json:"max_records_per_s"`      // kmirror's 16-partition catch-up records/s of this codec (0 in a low-rate run)
	TargetRate   int     `json:"target_records_per_s"`   // half of MaxRate, or -lag-rate
	AchievedRate float64 `json:"achieved_records_per_s"` // records produced / (first send → last ack)
	Producers    int     `json:"producer_clients"`
	Produced     int     `json:"records_produced"`
	Arrived      int     `json:"records_arrived"` // read on the destination
	DrainS       float64 `json:"drain_s"`         // last acknowledgement on the source → last record read on the destination
	// Appended is the lag from the source's LogAppendTime (the timestamp of the mirrored
	// batch) to the read on the destination: the mirror's own part, without the time
	// records waited in the producers' buffers.
	Appended latency `json:"appended"`
	Error    string  `json:"error,omitempty"`
}

// endToEnd produces on the source at perSec with producers clients for d (paced) while a
// consumer reads dstTopic on the destination; it returns the lags send time (in the
// value) → read on the destination and, when srcTopic has message.timestamp.type
// LogAppendTime (lagTopicConfigs), source append → read on the destination, leaving out
// records sent in the first warm, and the achieved produce rate. It waits up to 5 minutes after d for every record to arrive.
func endToEnd(src, srcTopic, dst, dstTopic, codec string, perSec, producers int, d, warm time.Duration) lagResult {
	cl := newClient(kgo.SeedBrokers(dst), kgo.ConsumeTopics(dstTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(16<<20), kgo.MetadataMinAge(250*time.Millisecond))
	defer cl.Close()
	var lags, appended []time.Duration
	var total atomic.Int64 // records produced, known once the paced producer is done
	total.Store(-1)
	got := 0
	var lastRead time.Time
	done := make(chan struct{})
	start := time.Now()
	deadline := start.Add(d + 5*time.Minute)
	go func() {
		defer close(done)
		for {
			if t := total.Load(); t >= 0 && int64(got) >= t {
				return
			}
			if time.Now().After(deadline) {
				return
			}
			// A bounded poll, so that the loop sees the final count once production ends.
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			now := time.Now()
			if fs.NumRecords() > 0 {
				lastRead = now
			}
			fs.EachRecord(func(r *kgo.Record) {
				got++
				sent := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
				if sent.Sub(start) >= warm {
					lags = append(lags, now.Sub(sent))
					appended = append(appended, now.Sub(r.Timestamp))
				}
			})
		}
	}()
	p := paced(src, srcTopic, codec, perSec, d, producers)
	total.Store(int64(p.Records))
	<-done
	r := lagResult{latency: summarize(lags), Appended: summarize(appended), TargetRate: perSec, AchievedRate: p.achieved(), Producers: producers, Produced: p.Records, Arrived: got,
		DrainS: max(0, lastRead.Sub(p.LastAck).Seconds())}
	if got < p.Records {
		r.Error = fmt.Sprintf("only %d of %d records arrived on %s within 5 minutes", got, p.Records, dstTopic)
		fmt.Fprintln(os.Stderr, "end-to-end:", r.Error)
	}
	return r
}

// lagTopicConfigs are the source lag topics' configs: the source stamps every batch with
// its append time, which the mirror copies unchanged (kmirror: byte for byte; MirrorMaker
// 2: as the record timestamp, its default config filter leaving message.timestamp.type
// out of the target topic), so that the destination's consumer reads the time the record
// was produced on the source.
var lagTopicConfigs = map[string]*string{"message.timestamp.type": kadm.StringPtr("LogAppendTime")}

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
