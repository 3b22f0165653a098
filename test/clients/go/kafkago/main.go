// Command kafkago is the segmentio/kafka-go smoke test against kmirror, run by
// test/clients/run.sh: create a 2-partition topic (Client.CreateTopics), produce 6 records with a
// Writer, consume them with a group Reader and commit (CommitMessages), close; produce 4 more,
// and a new Reader in the same group must resume from the commit (exactly the 4 new records).
// The Writer compresses with lz4. Exits 1 with a one-line reason on failure.
//
//	kafkago BOOTSTRAP TOPIC GROUP
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: kafkago BOOTSTRAP TOPIC GROUP")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
}

func run(bootstrap, topic, group string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := &kafka.Client{Addr: kafka.TCP(bootstrap)}
	resp, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: 2, ReplicationFactor: 1,
	}}})
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if err := resp.Errors[topic]; err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if err := produce(ctx, bootstrap, topic, 0, 6); err != nil {
		return err
	}
	if err := consumeCheck(ctx, bootstrap, topic, group, 0, 6); err != nil {
		return err
	}
	if err := produce(ctx, bootstrap, topic, 6, 10); err != nil {
		return err
	}
	if err := consumeCheck(ctx, bootstrap, topic, group, 6, 10); err != nil {
		return err
	}
	offs, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0, 1}}})
	if err != nil {
		return fmt.Errorf("offset fetch: %w", err)
	}
	var sum int64
	for _, p := range offs.Topics[topic] {
		sum += p.CommittedOffset
	}
	if sum != 10 {
		return fmt.Errorf("committed offsets sum to %d, want 10", sum)
	}
	return nil
}

func produce(ctx context.Context, bootstrap, topic string, lo, hi int) error {
	w := &kafka.Writer{Addr: kafka.TCP(bootstrap), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, Compression: kafka.Lz4}
	defer w.Close()
	var msgs []kafka.Message
	for i := lo; i < hi; i++ {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	return nil
}

func consumeCheck(ctx context.Context, bootstrap, topic, group string, lo, hi int) error {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{bootstrap}, GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 500 * time.Millisecond,
	})
	var got []string
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for len(got) < hi-lo {
		m, err := r.FetchMessage(rctx)
		if err != nil {
			r.Close()
			return fmt.Errorf("fetch after %v: %w", got, err)
		}
		if slices.Contains(got, string(m.Value)) {
			r.Close()
			return fmt.Errorf("duplicate %s", m.Value)
		}
		got = append(got, string(m.Value))
		if err := r.CommitMessages(rctx, m); err != nil {
			r.Close()
			return fmt.Errorf("commit: %w", err)
		}
	}
	if err := r.Close(); err != nil {
		return fmt.Errorf("close reader: %w", err)
	}
	var want []string
	for i := lo; i < hi; i++ {
		want = append(want, fmt.Sprintf("v%d", i))
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("consumed %v, want %v", got, want)
	}
	return nil
}
