package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	mirrorscli "github.com/kmirror/kmirror/internal/cli/mirrors"
	"github.com/kmirror/kmirror/internal/quickstart"
)

// newQuickstartCommand wires `kmirror quickstart [--scripted]` to internal/quickstart.
func newQuickstartCommand() *cobra.Command {
	var (
		o        quickstart.Options
		scripted bool
	)
	cmd := &cobra.Command{
		Use:   "quickstart",
		Short: "Run two clusters, a producer, a consumer group and a mirror on this machine (--scripted: the whole DR drill)",
		Long: `Runs a source cluster on localhost:9091 and a destination cluster on localhost:9094, creates
the topic orders (6 partitions) with a producer and the consumer group orders-app on the source,
creates the cluster mirror my-mirror on the destination and starts mirroring .*, then shows a
live table of every mirror holding orders on either cluster and the commands to try next
until Ctrl-C, which stops both clusters cleanly. When stdout is not a terminal, the
commands are printed once and the table when a partition's state changes (at least every
10 s).

Run again on the same data it continues where it stopped and leaves the mirrors' states
as they are: after a failover (or failback) it does not restart the mirror, which would
truncate the now-primary copy; it says which state the data is in. Remove
./quickstart-data or pass --data OTHER-DIR to start afresh.

With --scripted it runs the disaster-recovery drill unattended instead (mirror, kill -9 the
source under live load, fail over, resume the group on the destination, restart the
source, fail back) and exits 0 only if every step held. Its last line is the one-line
result: the RPO it measured (records the source acknowledged that never reached the
destination), records lost, duplicates, time to fail over, and the records truncated at
failback (the killed source's divergent tail, the RPO's records among them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.Out = cmd.OutOrStdout()
			if !scripted {
				return quickstart.Run(ctx, o)
			}
			rep, err := quickstart.RunScripted(ctx, o)
			fmt.Fprintln(o.Out, rep.Summary())
			if err != nil {
				return &mirrorscli.ExitError{Err: err, Code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&scripted, "scripted", false, "run the disaster-recovery drill unattended; exit 0 only if every step held")
	f.StringVar(&o.Data, "data", "", "data directory (default ./quickstart-data; --scripted: a temporary directory)")
	f.IntVar(&o.SourcePort, "source-port", quickstart.DefaultSourcePort, "source cluster port on localhost (0: a free port)")
	f.IntVar(&o.DestinationPort, "destination-port", quickstart.DefaultDestinationPort, "destination cluster port on localhost (0: a free port)")
	f.IntVar(&o.Brokers, "brokers", 1, "nodes per cluster (--scripted: of the destination); a cluster of N nodes listens on its port and the N-1 above it, its controllers 10000 above")
	return cmd
}
