// Package topicscli is `kmirror topics`: create, list, describe, delete and alter the
// configs of topics, in the style of rpk with the flag names and output of Apache
// Kafka's kafka-topics.sh (TopicCommand) and kafka-configs.sh. It talks to any Kafka
// cluster through franz-go's kadm.
package topicscli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/cli/clientconf"
)

type options struct {
	client clientconf.Flags
}

// NewCommand returns `kmirror topics` with its subcommands create, list, describe,
// delete and alter-config. --bootstrap-server defaults to localhost:9092;
// --command-config takes Kafka client properties. Errors (bad flags, Kafka error codes)
// are returned for the caller to print on one line; usage is not printed on error.
func NewCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:           "topics",
		Short:         "Create, list, describe, delete and alter the configs of topics",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("missing subcommand: one of create, list, describe, delete, alter-config")
		},
	}
	o.client.Register(cmd.PersistentFlags())
	cmd.AddCommand(createCommand(o), listCommand(o), describeCommand(o), deleteCommand(o), alterConfigCommand(o))
	return cmd
}

// admin connects to --bootstrap-server and returns the client, a context bounded by
// clientconf.CommandTimeout and the function releasing both.
func (o *options) admin(cmd *cobra.Command) (*kadm.Client, context.Context, func(), error) {
	cl, err := o.client.Client("kmirror-topics")
	if err != nil {
		return nil, nil, nil, err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, clientconf.CommandTimeout)
	return kadm.NewClient(cl), ctx, func() { cancel(); cl.Close() }, nil
}

// parseConfigs parses repeated --config key=value flags.
func parseConfigs(kvs []string) (map[string]*string, error) {
	out := make(map[string]*string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--config %q: expected key=value", kv)
		}
		v = strings.TrimSpace(v)
		out[strings.TrimSpace(k)] = &v
	}
	return out, nil
}

func createCommand(o *options) *cobra.Command {
	var (
		partitions  int32
		replication int16
		configs     []string
		ifNotExists bool
	)
	cmd := &cobra.Command{
		Use:   "create TOPIC...",
		Short: "Create topics (-p partitions, -r replication factor, --config key=value; -1: the broker's num.partitions and default.replication.factor)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := parseConfigs(configs)
			if err != nil {
				return err
			}
			adm, ctx, done, err := o.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.CreateTopics(ctx, partitions, replication, cfg, args...)
			if err != nil {
				return fmt.Errorf("creating topics: %w", err)
			}
			var failed []string
			for _, r := range resps.Sorted() {
				switch {
				case r.Err == nil:
					fmt.Fprintf(cmd.OutOrStdout(), "Created topic %s.\n", r.Topic)
				case ifNotExists && errors.Is(r.Err, kerr.TopicAlreadyExists):
				default:
					failed = append(failed, topicError(r.Topic, r.Err, r.ErrMessage))
				}
			}
			if len(failed) > 0 {
				return errors.New(strings.Join(failed, "; "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Int32VarP(&partitions, "partitions", "p", -1, "number of partitions (-1: the broker's num.partitions)")
	f.Int16VarP(&replication, "replication-factor", "r", -1, "replication factor (-1: the broker's default.replication.factor)")
	f.StringArrayVar(&configs, "config", nil, "topic config key=value (repeatable)")
	f.BoolVar(&ifNotExists, "if-not-exists", false, "do not fail when a topic already exists")
	return cmd
}

// topicError is one topic's failure on one line: the Kafka error and its message.
func topicError(topic string, err error, msg string) string {
	if msg != "" && !strings.Contains(err.Error(), msg) {
		return fmt.Sprintf("topic %s: %v: %s", topic, err, msg)
	}
	return fmt.Sprintf("topic %s: %v", topic, err)
}

func listCommand(o *options) *cobra.Command {
	var excludeInternal bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the topics, one a line (internal ones included unless --exclude-internal)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, ctx, done, err := o.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			tds, err := adm.ListTopicsWithInternal(ctx)
			if err != nil {
				return fmt.Errorf("listing topics: %w", err)
			}
			for _, name := range tds.Names() {
				if excludeInternal && tds[name].IsInternal {
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), name)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&excludeInternal, "exclude-internal", false, "leave the internal topics out")
	return cmd
}

func describeCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "describe [TOPIC...]",
		Short: "Describe topics as kafka-topics.sh --describe does: topic ID, partition count, replication factor, configs, then each partition's leader, replicas and ISR",
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, ctx, done, err := o.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			var tds kadm.TopicDetails
			if len(args) == 0 {
				tds, err = adm.ListTopicsWithInternal(ctx)
			} else {
				tds, err = adm.ListTopicsWithInternal(ctx, args...)
			}
			if err != nil {
				return fmt.Errorf("describing topics: %w", err)
			}
			for _, name := range tds.Names() {
				if td := tds[name]; td.Err != nil {
					return fmt.Errorf("topic %s: %w", name, td.Err)
				}
			}
			rcs, err := adm.DescribeTopicConfigs(ctx, tds.Names()...)
			if err != nil {
				return fmt.Errorf("describing topic configs: %w", err)
			}
			return printDescribe(cmd.OutOrStdout(), tds, rcs)
		},
	}
}

// printDescribe writes TopicCommand's describe format: one line per topic with its
// dynamic configs, then one tab-indented line per partition.
func printDescribe(w io.Writer, tds kadm.TopicDetails, rcs kadm.ResourceConfigs) error {
	dynamic := map[string][]string{}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
				dynamic[rc.Name] = append(dynamic[rc.Name], c.Key+"="+*c.Value)
			}
		}
		sort.Strings(dynamic[rc.Name])
	}
	for _, name := range tds.Names() {
		td := tds[name]
		parts := td.Partitions.Sorted()
		rf := 0
		if len(parts) > 0 {
			rf = len(parts[0].Replicas)
		}
		fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			name, td.ID, len(parts), rf, strings.Join(dynamic[name], ","))
		for _, p := range parts {
			leader := "none"
			if p.Leader >= 0 {
				leader = strconv.Itoa(int(p.Leader))
			}
			fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s", name, p.Partition, leader, ids(p.Replicas), ids(p.ISR))
			if len(p.OfflineReplicas) > 0 {
				fmt.Fprintf(w, "\tOffline: %s", ids(p.OfflineReplicas))
			}
			if p.Err != nil {
				fmt.Fprintf(w, "\tError: %v", p.Err)
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// ids is a broker ID list as Kafka prints it: comma-separated.
func ids(l []int32) string {
	s := make([]string, len(l))
	for i, id := range l {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

func deleteCommand(o *options) *cobra.Command {
	var ifExists bool
	cmd := &cobra.Command{
		Use:   "delete TOPIC...",
		Short: "Delete topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			adm, ctx, done, err := o.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.DeleteTopics(ctx, args...)
			if err != nil {
				return fmt.Errorf("deleting topics: %w", err)
			}
			var failed []string
			for _, r := range resps.Sorted() {
				switch {
				case r.Err == nil:
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted topic %s.\n", r.Topic)
				case ifExists && errors.Is(r.Err, kerr.UnknownTopicOrPartition):
				default:
					failed = append(failed, topicError(r.Topic, r.Err, r.ErrMessage))
				}
			}
			if len(failed) > 0 {
				return errors.New(strings.Join(failed, "; "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&ifExists, "if-exists", false, "do not fail when a topic does not exist")
	return cmd
}

func alterConfigCommand(o *options) *cobra.Command {
	var (
		configs []string
		deletes []string
	)
	cmd := &cobra.Command{
		Use:   "alter-config TOPIC... (--config key=value | --delete-config key)...",
		Short: "Set (--config key=value) and remove (--delete-config key) dynamic topic configs, as kafka-configs.sh --alter does (IncrementalAlterConfigs)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := parseConfigs(configs)
			if err != nil {
				return err
			}
			if len(set) == 0 && len(deletes) == 0 {
				return errors.New("nothing to alter: give --config key=value or --delete-config key")
			}
			var alters []kadm.AlterConfig
			keys := make([]string, 0, len(set))
			for k := range set {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: set[k]})
			}
			for _, k := range deletes {
				alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: strings.TrimSpace(k)})
			}
			adm, ctx, done, err := o.admin(cmd)
			if err != nil {
				return err
			}
			defer done()
			resps, err := adm.AlterTopicConfigs(ctx, alters, args...)
			if err != nil {
				return fmt.Errorf("altering topic configs: %w", err)
			}
			var failed []string
			for _, r := range resps {
				if r.Err != nil {
					failed = append(failed, topicError(r.Name, r.Err, r.ErrMessage))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Completed updating config for topic %s.\n", r.Name)
			}
			if len(failed) > 0 {
				return errors.New(strings.Join(failed, "; "))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&configs, "config", nil, "topic config key=value to set (repeatable)")
	cmd.Flags().StringArrayVar(&deletes, "delete-config", nil, "topic config key to remove (repeatable)")
	return cmd
}
