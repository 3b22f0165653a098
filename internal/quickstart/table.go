package quickstart

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// mirrorView is one mirror that holds Topic, on the cluster named On.
type mirrorView struct {
	On, Addr string // "destination" or "source", and its address
	mirrorInfo
}

// describeBoth returns every mirror holding Topic on the destination, then on the
// source (the failback mirror my-mirror-back lives there).
func describeBoth(ctx context.Context, dst, src *admin) ([]mirrorView, error) {
	var views []mirrorView
	for _, c := range []struct {
		on string
		a  *admin
	}{{"destination", dst}, {"source", src}} {
		ms, err := c.a.describeAll(ctx)
		if err != nil {
			return views, fmt.Errorf("%s %s: %w", c.on, c.a.addr, err)
		}
		for _, m := range orderMirrors(ms) {
			views = append(views, mirrorView{On: c.on, Addr: c.a.addr, mirrorInfo: m})
		}
	}
	return views, nil
}

// signature is what the non-terminal output compares to decide whether to reprint the
// table: the mirrors and their partitions' states, not the moving offsets.
func signature(views []mirrorView) string {
	var b strings.Builder
	for _, v := range views {
		fmt.Fprintf(&b, "%s/%s:", v.On, v.Name)
		for _, r := range v.Rows {
			fmt.Fprintf(&b, "%d=%s,", r.Partition, r.State)
		}
	}
	return b.String()
}

// writeViews prints one table per mirror holding Topic, with a heading that says which
// way it copies and, when its partitions are STOPPED, that its offsets are those of the
// stop.
func writeViews(w io.Writer, views []mirrorView, src, dst string) {
	if len(views) == 0 {
		fmt.Fprintf(w, "No mirror holds %s yet.\n", Topic)
		return
	}
	for i, v := range views {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "Mirror %s on the %s (%s) from %s\n", v.Name, v.On, v.Addr, v.Source)
		switch {
		case allIn(v.Rows, "STOPPED"):
			fmt.Fprintf(w, "  STOPPED: %s is writable on the %s; offsets as of the stop\n", Topic, v.On)
		case anyIn(v.Rows, "MIRRORING", "LOG_ALIGNMENT", "EPOCH_FENCING", "ULE_RECOVERY"):
			fmt.Fprintf(w, "  ACTIVE: %s is read-only on the %s\n", Topic, v.On)
		}
		writeTable(w, v.Rows)
	}
}

// writeTable prints one line per mirror partition: source offset (source high
// watermark), destination offset (log end offset), lag and state; -1 reads "-".
func writeTable(w io.Writer, rows []PartitionRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSOURCE-OFFSET\tDESTINATION-OFFSET\tLAG\tSTATE\t")
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

// writeNextSteps prints the command lines to try next against the running clusters:
// the tour of README.md, same steps and same example key.
// km is how the tour runs kmirror (tourCommand).
func writeNextSteps(w io.Writer, km, src, dst string) {
	fmt.Fprintf(w, `Try next (in another terminal; Ctrl-C here stops both clusters) — the tour of README.md:

  1. Describe the mirror:
    %[7]s mirrors --bootstrap-server %[2]s --describe --mirror %[3]s
  2. Read the mirrored topic on the destination:
    kcat -b %[2]s -C -t %[4]s -e -f '%%p %%o %%k %%s\n'
  3. Mirror topics are read-only (this fails with "Policy violation"):
    kcat -b %[2]s -P -t %[4]s -K: <<< 'order-x:{"order":0}'
  4. Consumer group offsets on the source, synced to the destination:
    %[7]s groups --bootstrap-server %[1]s describe %[6]s
    %[7]s groups --bootstrap-server %[2]s describe %[6]s
  5. Fail over (the destination's %[4]s becomes writable; LAG 0 and DESTINATION-OFFSET
     = SOURCE-OFFSET + 1, + 1 more per transaction left open in the partition: the
     failover appends one MIRROR_PID_RESET control record and one ABORT per open one):
    %[7]s mirrors --bootstrap-server %[2]s --stop --topics %[4]s --mirror %[3]s
    kcat -b %[2]s -P -t %[4]s -K: <<< 'order-x:{"order":0}'
  6. Fail back (the source truncates its divergent tail, then follows the destination;
     its %[4]s is read-only and the demo producer pauses):
    printf 'bootstrap.servers=%[2]s\n' > back.properties
    %[7]s mirrors --bootstrap-server %[1]s --create --mirror %[5]s --mirror-config back.properties
    %[7]s mirrors --bootstrap-server %[1]s --start --topics %[4]s --mirror %[5]s
    %[7]s mirrors --bootstrap-server %[1]s --describe --mirror %[5]s    # wait for LAG 0
  7. Optional: make the source primary again (planned switchover, docs/operations.md §4):
     first stop writes to the destination, wait for LAG 0 on %[5]s, then
    %[7]s mirrors --bootstrap-server %[1]s --stop --topics %[4]s --mirror %[5]s
     Run on its own right after step 6 this leaves %[4]s writable on both clusters.
`, src, dst, Mirror, Topic, MirrorBack, Group, km)
}
