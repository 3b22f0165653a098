// Package producecli is `kmirror produce TOPIC`: one record per line of standard input,
// as Apache Kafka's kafka-console-producer.sh (its parse.key and key.separator
// properties become --key-separator), through franz-go.
package producecli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/cli/clientconf"
)

// maxLine bounds one input line (one record), as max.message.bytes' default does.
const maxLine = 1 << 20

// NewCommand returns `kmirror produce TOPIC`. Each line of stdin is one record (the line
// without its newline as value; with --key-separator SEP, the text before the first SEP
// as key and the rest as value). acks=all and idempotence as Kafka's producer defaults;
// it exits non-zero on the first record the cluster refused, after flushing the others.
func NewCommand() *cobra.Command {
	var (
		client    clientconf.Flags
		keySep    string
		partition int32
	)
	cmd := &cobra.Command{
		Use:           "produce TOPIC",
		Short:         "Produce one record per line of standard input (--key-separator: key SEP value)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := []kgo.Opt{kgo.DefaultProduceTopic(args[0])}
			if partition >= 0 {
				opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			}
			cl, err := client.Client("kmirror-produce", opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			n, err := produce(ctx, cl, cmd.InOrStdin(), keySep, partition)
			if err != nil {
				return fmt.Errorf("produced %d records to %s, then: %w", n, args[0], err)
			}
			return nil
		},
	}
	client.Register(cmd.Flags())
	cmd.Flags().StringVar(&keySep, "key-separator", "", "split each line at the first occurrence of this into key and value (empty: no key)")
	cmd.Flags().Int32Var(&partition, "partition", -1, "produce to this partition (-1: the default partitioner)")
	return cmd
}

// produce sends one record per line of in and waits for every acknowledgement; it
// returns the records acknowledged and the first error.
func produce(ctx context.Context, cl *kgo.Client, in io.Reader, keySep string, partition int32) (int64, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	var (
		mu    sync.Mutex
		first error
		acked int64
	)
	done := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && first == nil {
			first = err
		} else if err == nil {
			acked++
		}
	}
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		r := &kgo.Record{Value: []byte(line), Partition: partition}
		if keySep != "" {
			if k, v, ok := strings.Cut(line, keySep); ok {
				r.Key, r.Value = []byte(k), []byte(v)
			}
		}
		cl.Produce(ctx, r, done)
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
	}
	flushErr := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		return acked, first
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return acked, fmt.Errorf("a line is longer than %d bytes", maxLine)
		}
		return acked, err
	}
	return acked, flushErr
}
