package groupscli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

type resetOptions struct {
	topics     []string
	toEarliest bool
	toLatest   bool
	toOffset   int64
	toDatetime string
	execute    bool
	dryRun     bool
}

func resetCommand(o *options) *cobra.Command {
	r := &resetOptions{toOffset: -1}
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic T[:P,...] (--to-earliest|--to-latest|--to-offset N|--to-datetime T) [--execute]",
		Short: "Reset a group's committed offsets; prints the plan (dry run) unless --execute; refused while the group has members",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := r.spec(cmd)
			if err != nil {
				return err
			}
			targets, err := parseTopics(r.topics)
			if err != nil {
				return err
			}
			adm, done, err := o.admin()
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := withTimeout(cmd)
			defer cancel()
			return reset(ctx, adm, cmd.OutOrStdout(), args[0], targets, spec, r.execute)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&r.topics, "topic", nil, "topic to reset, optionally with partitions (T or T:0,1,2); repeatable (required)")
	f.BoolVar(&r.toEarliest, "to-earliest", false, "reset to the log start offset")
	f.BoolVar(&r.toLatest, "to-latest", false, "reset to the log end offset")
	f.Int64Var(&r.toOffset, "to-offset", -1, "reset to this offset (clamped to [log start, log end])")
	f.StringVar(&r.toDatetime, "to-datetime", "", "reset to the first offset at or after this time: YYYY-MM-DDTHH:mm:SS[.sss][zone] (local time without a zone)")
	f.BoolVar(&r.execute, "execute", false, "commit the new offsets (default: dry run)")
	f.BoolVar(&r.dryRun, "dry-run", false, "only print the plan (the default)")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// resetSpec is the chosen --to-* scenario.
type resetSpec struct {
	kind   string // earliest, latest, offset, datetime
	offset int64
	millis int64
}

func (r *resetOptions) spec(cmd *cobra.Command) (resetSpec, error) {
	var specs []resetSpec
	if r.toEarliest {
		specs = append(specs, resetSpec{kind: "earliest"})
	}
	if r.toLatest {
		specs = append(specs, resetSpec{kind: "latest"})
	}
	if cmd.Flags().Changed("to-offset") {
		if r.toOffset < 0 {
			return resetSpec{}, fmt.Errorf("--to-offset must not be negative, got %d", r.toOffset)
		}
		specs = append(specs, resetSpec{kind: "offset", offset: r.toOffset})
	}
	if r.toDatetime != "" {
		ms, err := parseDatetime(r.toDatetime)
		if err != nil {
			return resetSpec{}, err
		}
		specs = append(specs, resetSpec{kind: "datetime", millis: ms})
	}
	if len(specs) != 1 {
		return resetSpec{}, errors.New("exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime is required")
	}
	if r.execute && r.dryRun {
		return resetSpec{}, errors.New("--execute and --dry-run are mutually exclusive")
	}
	return specs[0], nil
}

// parseDatetime accepts kafka-consumer-groups' format 'YYYY-MM-DDTHH:mm:SS.sss', with or
// without milliseconds and an optional zone (Z, +hh:mm, +hhmm); without a zone it is
// local time.
func parseDatetime(s string) (int64, error) {
	for _, layout := range []string{"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05.000Z0700", "2006-01-02T15:04:05Z0700"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("invalid --to-datetime %q: want YYYY-MM-DDTHH:mm:SS[.sss][zone]", s)
}

// topicTarget is one --topic: all partitions (nil) or the listed ones.
type topicTarget struct {
	topic      string
	partitions []int32
}

func parseTopics(specs []string) ([]topicTarget, error) {
	var out []topicTarget
	for _, s := range specs {
		topic, parts, hasParts := strings.Cut(s, ":")
		if topic == "" {
			return nil, fmt.Errorf("invalid --topic %q", s)
		}
		t := topicTarget{topic: topic}
		if hasParts {
			for _, p := range strings.Split(parts, ",") {
				n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("invalid partition %q in --topic %q", p, s)
				}
				t.partitions = append(t.partitions, int32(n))
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// reset computes the new offsets, prints them and, with execute, commits them. It is
// refused unless the group is Empty or does not exist (as kafka-consumer-groups).
func reset(ctx context.Context, adm *kadm.Client, w io.Writer, group string, targets []topicTarget, spec resetSpec, execute bool) error {
	d, err := describeGroup(ctx, adm, group)
	if err != nil {
		return err
	}
	if d.State != "Empty" && d.State != "Dead" {
		return fmt.Errorf("assignments can only be reset if the group '%s' is inactive, but the current state is %s", group, d.State)
	}
	topics := make([]string, 0, len(targets))
	for _, t := range targets {
		topics = append(topics, t.topic)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("listing start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("listing end offsets: %w", err)
	}
	var after kadm.ListedOffsets
	if spec.kind == "datetime" {
		if after, err = adm.ListOffsetsAfterMilli(ctx, spec.millis, topics...); err != nil {
			return fmt.Errorf("listing offsets by time: %w", err)
		}
	}
	plan := kadm.Offsets{}
	for _, t := range targets {
		parts := t.partitions
		if parts == nil {
			ps, ok := ends[t.topic]
			if !ok || len(ps) == 0 {
				return fmt.Errorf("topic %q does not exist", t.topic)
			}
			for p := range ps {
				parts = append(parts, p)
			}
			sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		}
		for _, p := range parts {
			start, ok1 := starts.Lookup(t.topic, p)
			end, ok2 := ends.Lookup(t.topic, p)
			if !ok1 || !ok2 || start.Err != nil || end.Err != nil {
				return fmt.Errorf("partition %s-%d does not exist or has no leader", t.topic, p)
			}
			var at int64
			switch spec.kind {
			case "earliest":
				at = start.Offset
			case "latest":
				at = end.Offset
			case "offset":
				at = min(max(spec.offset, start.Offset), end.Offset)
			case "datetime":
				at = end.Offset
				if a, ok := after.Lookup(t.topic, p); ok && a.Err == nil && a.Offset >= 0 {
					at = a.Offset
				}
			}
			plan.Add(kadm.Offset{Topic: t.topic, Partition: p, At: at, LeaderEpoch: -1})
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
	for _, o := range plan.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", group, o.Topic, o.Partition, o.At)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !execute {
		fmt.Fprintln(w, "\nDry run: nothing was committed; add --execute to commit these offsets.")
		return nil
	}
	resps, err := adm.CommitOffsets(ctx, group, plan)
	if err != nil {
		return fmt.Errorf("committing offsets: %w", err)
	}
	if err := resps.Error(); err != nil {
		return fmt.Errorf("committing offsets: %w", err)
	}
	return nil
}
