package quickstart

import (
	"fmt"
	"strings"
)

// phase is where the quickstart tour left the data directory, read from the mirrors on
// both clusters at start.
type phase int

const (
	phaseFresh        phase = iota // no my-mirror on the destination: create it and start .*
	phaseMirroring                 // my-mirror exists and still mirrors orders: continue
	phaseFailedOver                // orders STOPPED in my-mirror (tour step 5): the destination is the primary
	phaseFailedBack                // ... and the source mirrors orders from the destination (tour step 6)
	phaseSwitchedBack              // ... and the source stopped that mirror too: both clusters are writable
)

// orderMirrors returns the mirrors of ms that hold a partition of Topic, with only
// those rows.
func orderMirrors(ms []mirrorInfo) []mirrorInfo {
	var out []mirrorInfo
	for _, m := range ms {
		var rows []PartitionRow
		for _, r := range m.Rows {
			if r.Topic == Topic {
				rows = append(rows, r)
			}
		}
		if len(rows) > 0 {
			m.Rows = rows
			out = append(out, m)
		}
	}
	return out
}

// allIn reports whether every row is in one of states (false for no rows).
func allIn(rows []PartitionRow, states ...string) bool {
	if len(rows) == 0 {
		return false
	}
	for _, r := range rows {
		ok := false
		for _, s := range states {
			ok = ok || r.State == s
		}
		if !ok {
			return false
		}
	}
	return true
}

func anyIn(rows []PartitionRow, states ...string) bool {
	for _, r := range rows {
		for _, s := range states {
			if r.State == s {
				return true
			}
		}
	}
	return false
}

// classify reads the phase from the mirrors on the destination and on the source.
// haveMirror reports whether my-mirror exists on the destination.
func classify(dst, src []mirrorInfo) (ph phase, haveMirror bool) {
	var mine []PartitionRow
	for _, m := range dst {
		if m.Name == Mirror {
			haveMirror = true
			if om := orderMirrors([]mirrorInfo{m}); len(om) > 0 {
				mine = om[0].Rows
			}
		}
	}
	var back []PartitionRow
	for _, m := range orderMirrors(src) {
		back = append(back, m.Rows...)
	}
	switch {
	case !haveMirror:
		return phaseFresh, false
	case len(back) > 0 && allIn(back, "STOPPED"):
		return phaseSwitchedBack, true
	case len(back) > 0:
		return phaseFailedBack, true
	case anyIn(mine, "STOPPING", "STOPPED"):
		return phaseFailedOver, true
	}
	return phaseMirroring, true
}

// phaseMessage tells the user, on a re-run, what state the data directory is in and
// that the quickstart leaves the mirrors alone; empty for phaseFresh and phaseMirroring.
func phaseMessage(ph phase, data, src, dst string) string {
	var b strings.Builder
	switch ph {
	case phaseFailedOver:
		fmt.Fprintf(&b, `This data has been FAILED OVER (tour step 5): %[3]s is STOPPED in %[4]s, so the destination
(%[2]s) holds the writable primary copy and the source's %[3]s is an ordinary topic that the demo
producer keeps writing to (it diverges). The quickstart does not re-start the mirror: that
would send the destination's %[3]s through LOG_ALIGNMENT and truncate it.
Continue with the failback (tour step 6), or start afresh:`, src, dst, Topic, Mirror)
	case phaseFailedBack:
		fmt.Fprintf(&b, `This data has been FAILED OVER and FAILED BACK (tour steps 5 and 6): the destination (%[2]s)
is the primary, and the source (%[1]s) mirrors %[3]s from it with %[5]s, so the source's
%[3]s is read-only and the demo producer is paused. The quickstart leaves both mirrors as they
are (re-starting %[4]s now would make the two clusters mirror each other).
To make the source primary again see "Try next" below; or start afresh:`, src, dst, Topic, Mirror, MirrorBack)
	case phaseSwitchedBack:
		fmt.Fprintf(&b, `This data has been failed over, failed back, and %[3]s stopped in %[5]s on the source: %[3]s is
writable on BOTH clusters and nothing mirrors it. The quickstart does not re-start either
mirror. Re-mirror by hand (docs/operations.md §4 step 6), or start afresh:`, src, dst, Topic, Mirror, MirrorBack)
	default:
		return ""
	}
	fmt.Fprintf(&b, "\n  stop this quickstart (Ctrl-C) and remove %s, or run it with --data OTHER-DIR.\n", data)
	return b.String()
}

// mirrorEmpty reports whether mirror name is in ms and holds no partition.
func mirrorEmpty(ms []mirrorInfo, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return len(m.Rows) == 0
		}
	}
	return false
}
