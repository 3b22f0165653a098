// Package groupscli is `kmirror groups`, a small consumer-group tool in the style of
// Apache Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand): list, describe with
// lag, reset-offsets (a dry run unless --execute) and delete. It talks to any Kafka
// cluster through franz-go's kadm.
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

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/cli/clientconf"
)

type options struct {
	client clientconf.Flags
}

// NewCommand returns `kmirror groups` with its subcommands list, describe,
// reset-offsets and delete. --bootstrap-server defaults to localhost:9092;
// --command-config takes Kafka client properties (security). Errors (bad flags, broker
// errors) are returned for the caller to print on one line and exit non-zero; usage is
// not printed on error.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:           "groups",
		Short:         "List, describe, reset the offsets of and delete consumer groups",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("missing subcommand: one of list, describe, reset-offsets, delete")
		},
	}
	o.client.Register(cmd.PersistentFlags())
	cmd.AddCommand(listCommand(o), describeCommand(o), resetCommand(o), deleteCommand(o))
	return cmd
}

// admin connects to --bootstrap-server.
func (o *options) admin() (*kadm.Client, func(), error) {
	cl, err := o.client.Client("kmirror-groups")
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

func withTimeout(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, clientconf.CommandTimeout)
}

func listCommand(o *options) *cobra.Command {
	var state bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the groups (with --state: and their states)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, done, err := o.admin()
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := withTimeout(cmd)
			defer cancel()
			groups, err := adm.ListGroups(ctx)
			if err != nil {
				return fmt.Errorf("listing groups: %w", err)
			}
			return printList(cmd.OutOrStdout(), groups, state)
		},
	}
	cmd.Flags().BoolVar(&state, "state", false, "also print each group's state")
	return cmd
}

func printList(w io.Writer, groups kadm.ListedGroups, state bool) error {
	names := groups.Groups()
	sort.Strings(names)
	if !state {
		for _, g := range names {
			fmt.Fprintln(w, g)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE")
	for _, g := range names {
		fmt.Fprintf(tw, "%s\t%s\n", g, groups[g].State)
	}
	return tw.Flush()
}

func describeCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Describe a group: members and assignments, then per partition the committed offset, log end offset and lag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, done, err := o.admin()
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := withTimeout(cmd)
			defer cancel()
			return describe(ctx, adm, cmd.OutOrStdout(), args[0])
		},
	}
}

func describeGroup(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedGroup, error) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, fmt.Errorf("describing group %q: %w", group, err)
	}
	d, ok := ds[group]
	if !ok {
		return d, fmt.Errorf("describing group %q: no answer", group)
	}
	if d.Err != nil {
		return d, fmt.Errorf("describing group %q: %w", group, d.Err)
	}
	return d, nil
}

type partRow struct {
	topic     string
	partition int32
	current   int64 // -1: no committed offset
	leo       int64 // -1: unknown
	consumer  string
	host      string
	client    string
}

func describe(ctx context.Context, adm *kadm.Client, w io.Writer, group string) error {
	d, err := describeGroup(ctx, adm, group)
	if err != nil {
		return err
	}
	if d.State == "Dead" {
		return fmt.Errorf("consumer group %q does not exist", group)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("fetching offsets of %q: %w", group, err)
	}
	rows := map[[2]string]*partRow{}
	key := func(t string, p int32) [2]string { return [2]string{t, strconv.Itoa(int(p))} }
	row := func(t string, p int32) *partRow {
		k := key(t, p)
		if rows[k] == nil {
			rows[k] = &partRow{topic: t, partition: p, current: -1, leo: -1, consumer: "-", host: "-", client: "-"}
		}
		return rows[k]
	}
	fmt.Fprintf(w, "GROUP %s  STATE %s  PROTOCOL-TYPE %s  PROTOCOL %s\n\n", d.Group, d.State, dash(d.ProtocolType), dash(d.Protocol))
	if len(d.Members) == 0 {
		fmt.Fprintf(w, "Consumer group '%s' has no active members.\n\n", group)
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CONSUMER-ID\tGROUP-INSTANCE-ID\tHOST\tCLIENT-ID\t#PARTITIONS\tASSIGNMENT")
		for _, m := range d.Members {
			var parts []string
			n := 0
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					ps := append([]int32(nil), t.Partitions...)
					sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
					var s []string
					for _, p := range ps {
						s = append(s, strconv.Itoa(int(p)))
						r := row(t.Topic, p)
						r.consumer, r.host, r.client = m.MemberID, m.ClientHost, m.ClientID
					}
					n += len(ps)
					parts = append(parts, t.Topic+"("+strings.Join(s, ",")+")")
				}
				sort.Strings(parts)
			}
			inst := "-"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", m.MemberID, inst, m.ClientHost, m.ClientID, n, dash(strings.Join(parts, " ")))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	offs.Each(func(r kadm.OffsetResponse) {
		if r.Err == nil {
			row(r.Topic, r.Partition).current = r.At
		}
	})
	topicSet := map[string]bool{}
	for _, r := range rows {
		topicSet[r.topic] = true
	}
	if len(topicSet) > 0 {
		topics := make([]string, 0, len(topicSet))
		for t := range topicSet {
			topics = append(topics, t)
		}
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return fmt.Errorf("listing end offsets: %w", err)
		}
		ends.Each(func(lo kadm.ListedOffset) {
			if r := rows[key(lo.Topic, lo.Partition)]; r != nil && lo.Err == nil {
				r.leo = lo.Offset
			}
		})
	}
	sorted := make([]*partRow, 0, len(rows))
	for _, r := range rows {
		sorted = append(sorted, r)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].topic != sorted[j].topic {
			return sorted[i].topic < sorted[j].topic
		}
		return sorted[i].partition < sorted[j].partition
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
	var beyond []string
	for _, r := range sorted {
		cur, leo, lag := "-", "-", "-"
		if r.current >= 0 {
			cur = strconv.FormatInt(r.current, 10)
		}
		if r.leo >= 0 {
			leo = strconv.FormatInt(r.leo, 10)
		}
		if r.current >= 0 && r.leo >= 0 {
			// Kafka's ConsumerGroupCommand prints a negative lag here; it is flagged too.
			lag = strconv.FormatInt(r.leo-r.current, 10)
			if r.current > r.leo {
				beyond = append(beyond, r.topic+"-"+strconv.Itoa(int(r.partition)))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", group, r.topic, r.partition, cur, leo, lag, r.consumer, r.host, r.client)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(beyond) > 0 {
		fmt.Fprintf(w, "\nWarning: the committed offset is beyond the log end offset (negative LAG) on %s: the log was truncated or the topic recreated, and a consumer would reset by auto.offset.reset; set the offsets with `kmirror groups reset-offsets`.\n", strings.Join(beyond, ", "))
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deleteCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete groups that have no active members, with their committed offsets",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, done, err := o.admin()
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := withTimeout(cmd)
			defer cancel()
			resps, err := adm.DeleteGroups(ctx, args...)
			if err != nil {
				return fmt.Errorf("deleting groups: %w", err)
			}
			var failed []string
			for _, g := range args {
				if r, ok := resps[g]; !ok || r.Err != nil {
					e := errors.New("no answer")
					if ok {
						e = r.Err
					}
					failed = append(failed, fmt.Sprintf("group '%s' could not be deleted due to: %v", g, e))
				}
			}
			if len(failed) > 0 {
				return errors.New(strings.Join(failed, "; "))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deletion of requested consumer groups ('%s') was successful.\n", strings.Join(args, "', '"))
			return nil
		},
	}
}
