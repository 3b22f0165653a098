package main

import (
	"context"
	"flag"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runPipeline is the consume-and-re-produce pipeline that Cluster Mirroring is compared
// with: a franz-go consumer on the source and a franz-go producer on the destination
// (same partition, same codec), run as its own process (`versus pipeline ...`) so that its
// CPU time can be read from the kernel. It exits once n records are acknowledged.
func runPipeline(args []string) {
	fs := flag.NewFlagSet("pipeline", flag.ExitOnError)
	from := fs.String("from", "", "source bootstrap")
	topic := fs.String("topic", "", "source topic")
	to := fs.String("to", "", "destination bootstrap")
	out := fs.String("out", "", "destination topic")
	codec := fs.String("codec", "none", "none or zstd")
	n := fs.Int("records", 0, "records to copy")
	fs.Parse(args)

	cons := newClient(kgo.SeedBrokers(*from), kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(16<<20))
	defer cons.Close()
	prod := newClient(append(producerOpts(*to, *codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	defer prod.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Value
	got := 0
	for got < *n {
		fetches := cons.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) { fatalf("pipeline fetch %s-%d: %v", t, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			got++
			wg.Add(1)
			prod.Produce(ctx, &kgo.Record{Topic: *out, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp},
				func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Store(err)
					}
					wg.Done()
				})
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		fatalf("pipeline produce: %v", err)
	}
}
