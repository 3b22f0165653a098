package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/cli/clientconf"
	"github.com/kmirror/kmirror/internal/drill"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// newDrillCommand wires `kmirror drill` to internal/drill.
func newDrillCommand() *cobra.Command {
	var (
		dst, src clientconf.Flags
		o        drill.Options
	)
	cmd := &cobra.Command{
		Use:   "drill --mirror NAME [--bootstrap-server DESTINATION] [--source-bootstrap-server SOURCE]",
		Short: "A disaster-recovery drill on a topic of its own: mirror it, fail it over under load, report RPO, duplicates and time to the first write",
		Long: `Creates the drill topic on the source, starts it in the cluster mirror --mirror of the
destination (--bootstrap-server), produces --rate records/s to it while the group
<topic>-group consumes it on the source, and after --duration fails the topic over
(StopMirrorTopics) without pausing first. It reports the records acknowledged on the
source and missing on the destination (the RPO), the duplicates the group reads when it
resumes on the destination, the time from the stop to the first acknowledged write on
the destination and the lag just before the stop, then deletes the drill topic and group
on both clusters (--keep leaves them). Nothing else is touched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.Mirror == "" {
				return fmt.Errorf("--mirror is required")
			}
			dopts, err := clientconf.Load(dst.Bootstrap, dst.CommandConfig)
			if err != nil {
				return err
			}
			if src.Bootstrap == "" {
				if src.Bootstrap, err = mirrorSource(ctx, &dst, o.Mirror); err != nil {
					return err
				}
			}
			sopts, err := clientconf.Load(src.Bootstrap, src.CommandConfig)
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			o.Destination, o.Source, o.Out = dopts, sopts, cmd.OutOrStdout()
			if o.Topic == "" {
				o.Topic = fmt.Sprintf("kmirror-drill-%d", time.Now().Unix())
			}
			rep, err := drill.Run(ctx, o)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	dst.Register(f)
	f.StringVar(&src.Bootstrap, "source-bootstrap-server", "", "the source cluster (default: the mirror's bootstrap.servers)")
	f.StringVar(&src.CommandConfig, "source-command-config", "", "client properties file for the source cluster")
	f.StringVar(&o.Mirror, "mirror", "", "the cluster mirror on the destination (required)")
	f.StringVar(&o.Topic, "topic", "", "the drill topic to create (default kmirror-drill-<unix time>)")
	f.Int32Var(&o.Partitions, "partitions", 3, "partitions of the drill topic")
	f.IntVar(&o.Rate, "rate", 100, "records per second produced to the source")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to produce before the failover")
	f.BoolVar(&o.Keep, "keep", false, "keep the drill topic and group on both clusters")
	return cmd
}

// mirrorSource is the source bootstrap of mirror on the destination, from
// DescribeClusterMirrors.
func mirrorSource(ctx context.Context, dst *clientconf.Flags, mirror string) (string, error) {
	cl, err := dst.Client("kmirror-drill", kgo.MaxVersions(mirrorproto.ClientVersions()))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	resp, err := cl.Request(ctx, &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: []string{mirror}})
	if err != nil {
		return "", fmt.Errorf("describing mirror %s: %w", mirror, err)
	}
	r := resp.(*mirrorproto.DescribeClusterMirrorsResponse)
	if len(r.Mirrors) == 0 {
		return "", fmt.Errorf("mirror %s: no answer", mirror)
	}
	m := r.Mirrors[0]
	if err := mirrorproto.ErrorFor(m.ErrorCode, m.ErrorMessage); err != nil {
		return "", err
	}
	return m.SourceBootstrap, nil
}
