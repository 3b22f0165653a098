// Package consumecli is `kmirror consume TOPIC`: print a topic's records, as Apache
// Kafka's kafka-console-consumer.sh (--group, --max-messages as -n, --offset) with rpk's
// --format, through franz-go.
package consumecli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/cli/clientconf"
)

// NewCommand returns `kmirror consume TOPIC`: it prints records as --format says until
// -n records were printed or Ctrl-C. Without --group it reads every partition from
// --offset; with --group it consumes in that group (--offset applies where the group has
// no committed offset, as auto.offset.reset) and commits what it printed before exiting.
func NewCommand() *cobra.Command {
	var (
		client clientconf.Flags
		n      int
		group  string
		offset string
		format string
	)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print a topic's records (-n count, --group, --offset start|end|N, --format)",
		Long: `Prints a topic's records until -n records were printed or Ctrl-C.

--format is "json" (one JSON object a record) or a template where %t is the topic, %p the
partition, %o the offset, %k the key, %v the value, %T the timestamp (Unix ms), %h the
headers (k=v,...), and \n, \t, \\ and %% are escapes. The default, "%v\n", prints each value
on its own line, as kafka-console-consumer.sh does.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start, err := parseOffset(offset)
			if err != nil {
				return err
			}
			pr, err := newPrinter(format)
			if err != nil {
				return err
			}
			opts := []kgo.Opt{kgo.ConsumeTopics(args[0]), kgo.ConsumeResetOffset(start)}
			if group != "" {
				opts = append(opts, kgo.ConsumerGroup(group), kgo.AutoCommitMarks())
			}
			cl, err := client.Client("kmirror-consume", opts...)
			if err != nil {
				return err
			}
			defer cl.Close() // leaves the group
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := bufio.NewWriter(cmd.OutOrStdout())
			err = consume(ctx, cl, out, pr, n, group != "")
			if ferr := out.Flush(); err == nil {
				err = ferr
			}
			if group != "" {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if cerr := cl.CommitMarkedOffsets(cctx); cerr != nil && err == nil {
					err = fmt.Errorf("committing the offsets of group %s: %w", group, cerr)
				}
			}
			return err
		},
	}
	client.Register(cmd.Flags())
	f := cmd.Flags()
	f.IntVarP(&n, "num", "n", 0, "exit after printing this many records (0: until Ctrl-C)")
	f.StringVar(&group, "group", "", "consume in this consumer group (committing what was printed)")
	f.StringVar(&offset, "offset", "start", "where to start: start, end or an offset N (with --group: where the group has no committed offset)")
	f.StringVar(&format, "format", `%v\n`, `output format: "json" or a template of %t %p %o %k %v %T %h (see --help)`)
	return cmd
}

// parseOffset reads --offset.
func parseOffset(s string) (kgo.Offset, error) {
	switch s {
	case "start", "beginning", "earliest":
		return kgo.NewOffset().AtStart(), nil
	case "end", "latest":
		return kgo.NewOffset().AtEnd(), nil
	}
	at, err := strconv.ParseInt(s, 10, 64)
	if err != nil || at < 0 {
		return kgo.Offset{}, fmt.Errorf("--offset %q: expected start, end or an offset ≥ 0", s)
	}
	return kgo.NewOffset().At(at), nil
}

// consume prints records until n were printed (0: no bound) or ctx is done; mark marks
// each printed record for the group's commit.
func consume(ctx context.Context, cl *kgo.Client, w io.Writer, pr printer, n int, mark bool) error {
	printed := 0
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("%s-%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			if err := pr(w, r); err != nil {
				return err
			}
			if mark {
				cl.MarkCommitRecords(r)
			}
			if printed++; n > 0 && printed >= n {
				return nil
			}
		}
	}
}

// printer writes one record.
type printer func(io.Writer, *kgo.Record) error

// newPrinter compiles --format.
func newPrinter(format string) (printer, error) {
	if format == "json" {
		return func(w io.Writer, r *kgo.Record) error {
			hs := make(map[string]string, len(r.Headers))
			for _, h := range r.Headers {
				hs[h.Key] = string(h.Value)
			}
			var key *string
			if r.Key != nil {
				k := string(r.Key)
				key = &k
			}
			b, err := json.Marshal(struct {
				Topic     string            `json:"topic"`
				Partition int32             `json:"partition"`
				Offset    int64             `json:"offset"`
				Timestamp int64             `json:"timestamp"`
				Key       *string           `json:"key"`
				Value     string            `json:"value"`
				Headers   map[string]string `json:"headers,omitempty"`
			}{r.Topic, r.Partition, r.Offset, r.Timestamp.UnixMilli(), key, string(r.Value), hs})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "%s\n", b)
			return err
		}, nil
	}
	type part struct {
		lit  string
		verb byte // 0 for a literal
	}
	var parts []part
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, part{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if (c != '%' && c != '\\') || i == len(format)-1 {
			lit.WriteByte(c)
			continue
		}
		i++
		d := format[i]
		if c == '\\' {
			switch d {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case '\\':
				lit.WriteByte('\\')
			default:
				return nil, fmt.Errorf("--format %q: unknown escape \\%c", format, d)
			}
			continue
		}
		switch d {
		case '%':
			lit.WriteByte('%')
		case 't', 'p', 'o', 'k', 'v', 'T', 'h':
			flush()
			parts = append(parts, part{verb: d})
		default:
			return nil, fmt.Errorf("--format %q: unknown verb %%%c (want %%t %%p %%o %%k %%v %%T %%h)", format, d)
		}
	}
	flush()
	return func(w io.Writer, r *kgo.Record) error {
		var buf []byte
		for _, p := range parts {
			switch p.verb {
			case 0:
				buf = append(buf, p.lit...)
			case 't':
				buf = append(buf, r.Topic...)
			case 'p':
				buf = strconv.AppendInt(buf, int64(r.Partition), 10)
			case 'o':
				buf = strconv.AppendInt(buf, r.Offset, 10)
			case 'k':
				buf = append(buf, r.Key...)
			case 'v':
				buf = append(buf, r.Value...)
			case 'T':
				buf = strconv.AppendInt(buf, r.Timestamp.UnixMilli(), 10)
			case 'h':
				for i, h := range r.Headers {
					if i > 0 {
						buf = append(buf, ',')
					}
					buf = append(append(append(buf, h.Key...), '='), h.Value...)
				}
			}
		}
		_, err := w.Write(buf)
		return err
	}, nil
}
