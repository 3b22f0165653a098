// Command sarama is the IBM/sarama smoke test against kmirror, run by test/clients/run.sh:
// create a 2-partition topic with ClusterAdmin, produce 6 records with a SyncProducer, consume
// them in a ConsumerGroup and commit, close; produce 4 more, and a new consumer group member must
// resume from the commit (exactly the 4 new records). Exits 1 with a one-line reason on failure.
//
//	sarama BOOTSTRAP TOPIC GROUP [KAFKA_VERSION]
//
// KAFKA_VERSION is the protocol level sarama is configured for (default: sarama's
// DefaultVersion). The producer compresses with snappy, and with zstd at 4.0 and above.
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: sarama BOOTSTRAP TOPIC GROUP [KAFKA_VERSION]")
		os.Exit(2)
	}
	cfg := sarama.NewConfig()
	if len(os.Args) > 4 {
		v, err := sarama.ParseKafkaVersion(os.Args[4])
		if err != nil {
			fail(err)
		}
		cfg.Version = v
	}
	if err := run(cfg, os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
	os.Exit(1)
}

func run(cfg *sarama.Config, bootstrap, topic, group string) error {
	brokers := []string{bootstrap}
	admin, err := sarama.NewClusterAdmin(brokers, cfg)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if err := produce(cfg, brokers, topic, 0, 6); err != nil {
		return err
	}
	if err := consumeCheck(cfg, brokers, topic, group, 0, 6); err != nil {
		return err
	}
	if err := produce(cfg, brokers, topic, 6, 10); err != nil {
		return err
	}
	if err := consumeCheck(cfg, brokers, topic, group, 6, 10); err != nil {
		return err
	}
	offs, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1}})
	if err != nil {
		return fmt.Errorf("list group offsets: %w", err)
	}
	var sum int64
	for _, b := range offs.Blocks[topic] {
		sum += b.Offset
	}
	if sum != 10 {
		return fmt.Errorf("committed offsets sum to %d, want 10", sum)
	}
	return nil
}

func produce(cfg *sarama.Config, brokers []string, topic string, lo, hi int) error {
	pc := *cfg
	pc.Producer.Return.Successes = true
	pc.Producer.RequiredAcks = sarama.WaitForAll
	pc.Producer.Compression = sarama.CompressionSnappy
	if pc.Version.IsAtLeast(sarama.V4_0_0_0) {
		pc.Producer.Compression = sarama.CompressionZSTD
	}
	p, err := sarama.NewSyncProducer(brokers, &pc)
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer p.Close()
	for i := lo; i < hi; i++ {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("v%d", i)),
		}); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
	}
	return nil
}

// handler collects values until want are seen, marking and committing each message.
type handler struct {
	mu   sync.Mutex
	got  []string
	dup  error
	want int
	done chan struct{}
	once sync.Once
}

func (*handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		v := string(m.Value)
		if slices.Contains(h.got, v) && h.dup == nil {
			h.dup = fmt.Errorf("duplicate %s", v)
		}
		h.got = append(h.got, v)
		n := len(h.got)
		h.mu.Unlock()
		s.MarkMessage(m, "")
		s.Commit()
		if n >= h.want {
			h.once.Do(func() { close(h.done) })
		}
	}
	return nil
}

func consumeCheck(cfg *sarama.Config, brokers []string, topic, group string, lo, hi int) error {
	cc := *cfg
	cc.Consumer.Offsets.Initial = sarama.OffsetOldest
	cc.Consumer.Offsets.AutoCommit.Enable = false
	cg, err := sarama.NewConsumerGroup(brokers, group, &cc)
	if err != nil {
		return fmt.Errorf("consumer group: %w", err)
	}
	h := &handler{want: hi - lo, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	select {
	case <-h.done:
	case <-time.After(60 * time.Second):
	case err := <-errc:
		cancel()
		cg.Close()
		return fmt.Errorf("consume: %w", err)
	}
	cancel()
	<-errc
	if err := cg.Close(); err != nil {
		return fmt.Errorf("close consumer group: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dup != nil {
		return h.dup
	}
	var want []string
	for i := lo; i < hi; i++ {
		want = append(want, fmt.Sprintf("v%d", i))
	}
	got := slices.Clone(h.got)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("consumed %v, want %v", got, want)
	}
	return nil
}
