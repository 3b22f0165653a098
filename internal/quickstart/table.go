package quickstart

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// writeTable prints one line per mirror partition: source offset (source high
// watermark), destination offset (log end offset), lag and state; -1 reads "-".
func writeTable(w io.Writer, rows []PartitionRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSOURCE OFFSET\tDESTINATION OFFSET\tLAG\tSTATE\t")
	if len(rows) == 0 {
		fmt.Fprintln(tw, "(no mirror topic yet)\t\t\t\t\t\t")
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", r.Topic, r.Partition, dash(r.SourceOffset), dash(r.DestinationOffset), dash(r.Lag), r.State)
	}
	tw.Flush()
}

func dash(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

// writeNextSteps prints the command lines to try next against the running clusters.
func writeNextSteps(w io.Writer, src, dst string) {
	fmt.Fprintf(w, `Try next (in another terminal; Ctrl-C here stops both clusters):

  Describe the mirror:
    kmirror mirrors --bootstrap-server %[2]s --describe --mirror %[3]s
  Read the mirrored topic on the destination:
    kcat -b %[2]s -C -t %[4]s -e -f '%%p %%o %%k %%s\n'
    kafka-console-consumer.sh --bootstrap-server %[2]s --topic %[4]s --from-beginning --property print.key=true
  Fail over (the destination's %[4]s becomes writable):
    kmirror mirrors --bootstrap-server %[2]s --stop --topics %[4]s --mirror %[3]s
    kcat -b %[2]s -P -t %[4]s -K: <<< 'order-after-failover:{"order":0}'
  Fail back (the source's divergent tail is truncated, then it follows the destination):
    printf 'bootstrap.servers=%[2]s\n' > back.properties
    kmirror mirrors --bootstrap-server %[1]s --create --mirror %[5]s --mirror-config back.properties
    kmirror mirrors --bootstrap-server %[1]s --start --topics %[4]s --mirror %[5]s
    kmirror mirrors --bootstrap-server %[1]s --describe --mirror %[5]s    # wait for LAG 0
    kmirror mirrors --bootstrap-server %[1]s --stop --topics %[4]s --mirror %[5]s
  Consumer group lag on either side:
    kmirror groups --bootstrap-server %[1]s describe %[6]s
`, src, dst, Mirror, Topic, MirrorBack, Group)
}
