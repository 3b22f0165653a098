// Package drill is `kmirror drill`: a disaster-recovery drill against the operator's own
// clusters that touches nothing but a topic (and a consumer group) it creates. It creates
// the drill topic on the source, starts it in the given cluster mirror of the
// destination, produces to it at a rate while a group consumes it on the source, then
// fails that topic over (StopMirrorTopics) without pausing first, and measures what an
// outage would cost: the records acknowledged on the source and missing on the
// destination (RPO), the duplicates the group reads when it resumes on the destination,
// the time from the stop to the first acknowledged write on the destination, and the lag
// just before the stop. It then deletes the drill topic and group on both clusters.
package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// Options configure Run.
type Options struct {
	// Source and Destination are clients' base options of the two clusters (seed brokers
	// and security, internal/cli/clientconf).
	Source, Destination []kgo.Opt
	// Mirror is the cluster mirror on the destination whose source is Source.
	Mirror string
	// Topic is the drill topic to create (must not exist); Partitions its partitions.
	Topic      string
	Partitions int32
	// Rate is the records per second produced; Duration how long before the stop.
	Rate     int
	Duration time.Duration
	// Keep leaves the drill topic and group on both clusters (to inspect them).
	Keep bool
	// Out receives the progress lines.
	Out io.Writer
}

// Report is what a drill measured.
type Report struct {
	Topic string
	// Acked is the records the source acknowledged; Mirrored those of them on the
	// destination after the failover; Lost = Acked − Mirrored (the RPO, in records).
	Acked, Mirrored, Lost int
	// LagBefore is the mirror's lag in records (summed over the partitions) described just
	// before the stop.
	LagBefore int64
	// Consumed is what the group read on the source; Resumed what it read on the
	// destination after the failover; Duplicates the records it read on both.
	Consumed, Resumed, Duplicates int
	// StopToWrite is the time from sending StopMirrorTopics to the first write
	// acknowledged by the destination.
	StopToWrite time.Duration
}

// String is the report on a few lines.
func (r *Report) String() string {
	return fmt.Sprintf("drill on %s: RPO %d records (%d acknowledged on the source, %d on the destination after the failover; lag just before the stop: %d)\n"+
		"the group read %d records on the source, %d on the destination after the failover, %d of them duplicates\n"+
		"from --stop to the first acknowledged write on the destination: %s",
		r.Topic, r.Lost, r.Acked, r.Mirrored, r.LagBefore, r.Consumed, r.Resumed, r.Duplicates, r.StopToWrite.Round(time.Millisecond))
}

// Group is the drill's consumer group name for topic.
func Group(topic string) string { return topic + "-group" }

// Run runs the drill and returns its report. The drill topic and group are deleted on
// both clusters afterwards (unless Keep), also when the drill fails part way.
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	src, err := kgo.NewClient(append(o.Source, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))...)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	dst, err := kgo.NewClient(append(o.Destination, kgo.MaxVersions(mirrorproto.ClientVersions()))...)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	sadm, dadm := kadm.NewClient(src), kadm.NewClient(dst)
	group := Group(o.Topic)
	rep = &Report{Topic: o.Topic}

	if _, err := sadm.CreateTopic(ctx, o.Partitions, -1, nil, o.Topic); err != nil {
		return nil, fmt.Errorf("creating the drill topic %s on the source: %w", o.Topic, err)
	}
	fmt.Fprintf(out, "Created %s (%d partitions) on the source.\n", o.Topic, o.Partitions)
	if !o.Keep {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var problems []string
			for side, adm := range map[string]*kadm.Client{"source": sadm, "destination": dadm} {
				if _, derr := adm.DeleteGroups(cctx, group); derr != nil {
					problems = append(problems, fmt.Sprintf("deleting group %s on the %s: %v", group, side, derr))
				}
				if resp, derr := adm.DeleteTopics(cctx, o.Topic); derr != nil {
					problems = append(problems, fmt.Sprintf("deleting %s on the %s: %v", o.Topic, side, derr))
				} else if r, ok := resp[o.Topic]; ok && r.Err != nil && side == "source" {
					problems = append(problems, fmt.Sprintf("deleting %s on the source: %v", o.Topic, r.Err))
				}
			}
			if len(problems) > 0 && err == nil {
				err = errors.New(strings.Join(problems, "; "))
			}
			fmt.Fprintf(out, "Deleted %s and its group on both clusters.\n", o.Topic)
		}()
	}

	if err := startTopic(ctx, dst, o.Mirror, o.Topic); err != nil {
		return nil, err
	}
	if err := waitMirroring(ctx, dst, o.Mirror, o.Topic, int(o.Partitions)); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "Mirroring %s with %s; producing %d records/s and consuming in %s on the source for %s ...\n", o.Topic, o.Mirror, o.Rate, group, o.Duration)

	var (
		mu    sync.Mutex
		acked = map[int]bool{}
		perr  error
	)
	pctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		tick := time.NewTicker(time.Second / time.Duration(max(1, o.Rate)))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			src.Produce(ctx, &kgo.Record{Topic: o.Topic, Value: []byte(strconv.Itoa(n))}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if perr == nil {
						perr = err
					}
					return
				}
				acked[n] = true
			})
		}
	}()
	consumedOnSource := map[int]bool{}
	cctx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	consumerDone := make(chan error, 1)
	go func() { consumerDone <- consume(cctx, o.Source, o.Topic, group, consumedOnSource, nil) }()

	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.Duration):
	}
	if rep.LagBefore, err = mirrorLag(ctx, dst, o.Mirror, o.Topic); err != nil {
		return nil, err
	}
	// The failover, without pausing: the source keeps acknowledging what was in flight.
	stopAt := time.Now()
	stopErr := make(chan error, 1)
	go func() { stopErr <- stopTopic(ctx, dst, o.Mirror, o.Topic) }()
	stopProducing()
	<-produced
	if err := src.Flush(ctx); err != nil {
		return nil, err
	}
	stopConsuming()
	if err := <-consumerDone; err != nil {
		return nil, err
	}
	for {
		werr := dst.ProduceSync(ctx, &kgo.Record{Topic: o.Topic, Value: []byte("drill-first-write")}).FirstErr()
		if werr == nil {
			rep.StopToWrite = time.Since(stopAt)
			break
		}
		if ctx.Err() != nil {
			return nil, werr
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-stopErr; err != nil {
		return nil, err
	}
	mu.Lock()
	if perr != nil {
		mu.Unlock()
		return nil, fmt.Errorf("producing to the source: %w", perr)
	}
	rep.Acked = len(acked)
	mu.Unlock()
	fmt.Fprintf(out, "Stopped %s (failover); the destination took its first write after %s.\n", o.Topic, rep.StopToWrite.Round(time.Millisecond))

	onDst, err := readAll(ctx, o.Destination, dadm, o.Topic)
	if err != nil {
		return nil, err
	}
	for n := range acked {
		if onDst[n] {
			rep.Mirrored++
		}
	}
	rep.Lost = rep.Acked - rep.Mirrored
	rep.Consumed = len(consumedOnSource)

	// the group resumes on the destination from its synced offsets, up to the end
	ends, err := dadm.ListEndOffsets(ctx, o.Topic)
	if err != nil {
		return nil, err
	}
	resumed := map[int]bool{}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := consume(rctx, o.Destination, o.Topic, group, resumed, ends); err != nil {
		return nil, fmt.Errorf("resuming %s on the destination: %w", group, err)
	}
	rep.Resumed = len(resumed)
	for n := range resumed {
		if consumedOnSource[n] {
			rep.Duplicates++
		}
	}
	return rep, nil
}

// consume reads topic in group into seen (drill record numbers) until ctx is done or,
// with until, every partition reached its end offset there; it commits what it read.
func consume(ctx context.Context, base []kgo.Opt, topic, group string, seen map[int]bool, until kadm.ListedOffsets) error {
	cl, err := kgo.NewClient(append(base, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitMarks(), kgo.AutoCommitInterval(200*time.Millisecond),
		kgo.KeepControlRecords())...) // control records (the failover's MIRROR_PID_RESET) move the position to the end
	if err != nil {
		return err
	}
	defer cl.Close()
	next := map[int32]int64{}
	done := func() bool {
		if until == nil {
			return false
		}
		for _, lo := range until[topic] {
			if next[lo.Partition] < lo.Offset {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if n, err := strconv.Atoi(string(r.Value)); err == nil && !r.Attrs.IsControl() {
				seen[n] = true
			}
			cl.MarkCommitRecords(r)
		})
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.CommitMarkedOffsets(cctx); err != nil {
		return fmt.Errorf("committing %s: %w", group, err)
	}
	if until != nil && !done() {
		return fmt.Errorf("did not reach the end of %s: %v", topic, ctx.Err())
	}
	return nil
}

// readAll returns the drill record numbers in topic on the cluster of base.
func readAll(ctx context.Context, base []kgo.Opt, adm *kadm.Client, topic string) (map[int]bool, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range ends[topic] {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(base, kgo.ConsumePartitions(offsets), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	seen := map[int]bool{}
	next := map[int32]int64{}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		reached := true
		for p, lo := range ends[topic] {
			if next[p] < lo.Offset {
				reached = false
			}
		}
		if reached {
			return seen, nil
		}
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, rctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if n, err := strconv.Atoi(string(r.Value)); err == nil && !r.Attrs.IsControl() {
				seen[n] = true
			}
		})
	}
}
