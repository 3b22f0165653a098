package quickstart

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Report holds what RunScripted measured.
type Report struct {
	SourcePort, DestinationPort int
	Produced                    int           // records acknowledged in all (source and destination)
	Unmirrored                  int           // records the source acknowledged after the mirror link was cut: its divergent tail at the outage
	Lost                        int           // records that reached the destination or were produced there, missing from it or never delivered to the group
	Duplicates                  int           // records the group read again on the destination after reading them on the source
	DuplicateBound              int           // duplicates allowed: records the group read but had not committed at the outage
	GroupSynced                 bool          // the destination held the group's source offsets before the outage (metadata sync, spec §9)
	FailoverTime                time.Duration // from kill -9 of the source to the first record acknowledged by the destination
	Truncated                   int64         // records LOG_ALIGNMENT dropped from the source's log at failback
	Failures                    []string      // checks that did not hold; empty when the drill passed

	// ProducedBy is Produced split by the step that produced: "source before the
	// outage", "source's unmirrored tail", "destination after failover", "source after
	// failback" (the one record that shows it is writable again).
	ProducedBy map[string]int
	tailStep   int
}

// producedOrder is the order producedBreakdown lists Report.ProducedBy in.
var producedOrder = []string{"on the source before the outage", "in the source's unmirrored tail", "on the destination after failover", "on the source after failback"}

func (r *Report) producedBreakdown() string {
	var parts []string
	for _, k := range producedOrder {
		if n := r.ProducedBy[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, " + ")
}

// Summary is the one-line result RunScripted prints last.
func (r *Report) Summary() string {
	s := fmt.Sprintf("%d records lost, %d duplicates (bound %d), failover in %d ms, %d records truncated at failback (the source's unmirrored tail: the RPO of an async mirror, not lost) (ports %d/%d)",
		r.Lost, r.Duplicates, r.DuplicateBound, r.FailoverTime.Milliseconds(), r.Truncated, r.SourcePort, r.DestinationPort)
	if len(r.Failures) == 0 {
		return "quickstart drill PASSED: " + s
	}
	return fmt.Sprintf("quickstart drill FAILED (%s): %s", strings.Join(r.Failures, "; "), s)
}

// drill sizes: records before the outage, the source's unmirrored tail, records
// produced on the destination after failover.
const (
	drillMirrored   = 300
	drillTail       = 20
	drillAfter      = 80
	drillWaitMirror = 90 * time.Second
)

// RunScripted runs the disaster-recovery drill unattended and returns its report; the
// error is non-nil when a step failed or a check did not hold (Report.Failures).
//
// The source cluster is a child process (`<Executable> serve`) so that the outage is a
// real kill -9; the destination runs in this process. Steps: produce to `orders` on the
// source; mirror it to the destination (`my-mirror`, `.*`) until lag 0; the group
// `orders-app` consumes and commits on the source; the mirror link is cut (PauseMirrorTopics)
// and the source acknowledges a tail of records that never reach the destination — what an
// outage leaves behind; kill -9 of the source; failover (StopMirrorTopics) and produce on
// the destination; the group resumes on the destination; the source restarts on its data;
// failback (`my-mirror-back` on the source, start `orders`, lag 0) truncates the source's
// tail and leaves both logs identical; StopMirrorTopics on the source makes it writable.
func RunScripted(ctx context.Context, o Options) (*Report, error) {
	out := o.out()
	rep := &Report{}
	var err error
	if rep.SourcePort, err = scriptedPort(out, "source", o.SourcePort); err != nil {
		return rep, err
	}
	if rep.DestinationPort, err = scriptedPort(out, "destination", o.DestinationPort); err != nil {
		return rep, err
	}
	data := o.Data
	removeData := false
	if data == "" {
		if data, err = os.MkdirTemp("", "kmirror-quickstart-"); err != nil {
			return rep, err
		}
		removeData = true
	}
	srcDir, dstDir := dataDirs(data)
	for _, d := range []string{srcDir, dstDir} {
		if entries, _ := os.ReadDir(d); len(entries) > 0 {
			return rep, fmt.Errorf("%s is not empty: the drill needs fresh clusters (remove it or pick another --data)", d)
		}
	}
	exe, env := o.Executable, o.Env
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return rep, err
		}
	}
	if env == nil {
		env = os.Environ()
	}
	fmt.Fprintf(out, "kmirror quickstart --scripted: source on localhost:%d (child process), destination on localhost:%d, data in %s\n",
		rep.SourcePort, rep.DestinationPort, data)

	d := &drill{ctx: ctx, out: out, rep: rep, exe: exe, env: env, srcDir: srcDir, dstDir: dstDir, brokers: o.Brokers}
	defer d.shutdown()
	err = d.run()
	d.shutdown()
	if err != nil {
		rep.Failures = append(rep.Failures, err.Error())
	}
	fmt.Fprintf(out, "\n%-31s%d (%s)\n", "records produced:", rep.Produced, rep.producedBreakdown())
	fmt.Fprintf(out, "%-31s%d (records mirrored to or produced on the destination that the group never read or that left it)\n", "records lost:", rep.Lost)
	fmt.Fprintf(out, "    The %d records truncated at failback (below) are the source's deliberately unmirrored tail: the old\n"+
		"    primary acknowledged them after replication was paused (step %d), so the destination never had\n"+
		"    them. That is the RPO of an asynchronous mirror — what the last LAG shows at failover — and\n"+
		"    not counted as lost.\n", rep.Truncated, rep.tailStep)
	fmt.Fprintf(out, "%-31s%d (bound %d; group offsets synced before the outage: %v)\n", "duplicates seen:", rep.Duplicates, rep.DuplicateBound, rep.GroupSynced)
	fmt.Fprintf(out, "%-31s%d ms (kill -9 of the source to the first record acknowledged by the destination)\n", "time to fail over:", rep.FailoverTime.Milliseconds())
	fmt.Fprintf(out, "%-31s%d (the source's unmirrored tail: %d)\n", "records truncated at failback:", rep.Truncated, rep.Unmirrored)
	if len(rep.Failures) > 0 {
		fmt.Fprintf(out, "data and logs kept in %s\n", data)
		return rep, fmt.Errorf("%s", strings.Join(rep.Failures, "; "))
	}
	if removeData {
		os.RemoveAll(data)
	}
	return rep, nil
}

// scriptedPort returns want if it can be bound, else a free port (0 always picks one).
func scriptedPort(out io.Writer, name string, want int) (int, error) {
	if want != 0 && portFree(want) {
		return want, nil
	}
	p, err := freePort()
	if err != nil {
		return 0, err
	}
	if want != 0 {
		fmt.Fprintf(out, "port %d is taken; the %s cluster uses port %d\n", want, name, p)
	}
	return p, nil
}

type drill struct {
	ctx            context.Context
	out            io.Writer
	rep            *Report
	exe            string
	env            []string
	srcDir, dstDir string
	brokers        int // nodes of the destination cluster
	src, dst       *cluster
	srcAdm, dstAdm *admin
	step           int
	producing      string // the producedOrder key of the records produce writes
}

func (d *drill) shutdown() {
	if d.srcAdm != nil {
		d.srcAdm.close()
		d.srcAdm = nil
	}
	if d.dstAdm != nil {
		d.dstAdm.close()
		d.dstAdm = nil
	}
	if d.src != nil {
		d.src.stop()
		d.src = nil
	}
	if d.dst != nil {
		d.dst.stop()
		d.dst = nil
	}
}

// do runs one step, printing its name and how long it took.
func (d *drill) do(name string, f func() error) error {
	d.step++
	fmt.Fprintf(d.out, "%2d. %s ... ", d.step, name)
	start := time.Now()
	if err := f(); err != nil {
		fmt.Fprintln(d.out, "FAILED")
		return fmt.Errorf("step %d (%s): %w", d.step, name, err)
	}
	fmt.Fprintf(d.out, "ok (%d ms)\n", time.Since(start).Milliseconds())
	return nil
}

// check records a check that did not hold without stopping the drill.
func (d *drill) check(ok bool, format string, args ...any) {
	if !ok {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintf(d.out, "    CHECK FAILED: %s\n", msg)
		d.rep.Failures = append(d.rep.Failures, msg)
	}
}

func (d *drill) startSource() error {
	c, err := startChild(d.ctx, "source", d.rep.SourcePort, d.srcDir, d.exe, d.env)
	if err != nil {
		return err
	}
	d.src = c
	d.srcAdm, err = newAdmin(c.addr())
	return err
}

func (d *drill) run() error {
	ctx, rep := d.ctx, d.rep
	var err error
	if err := d.do(fmt.Sprintf("start the source cluster (kmirror serve, child process) on localhost:%d", rep.SourcePort), d.startSource); err != nil {
		return err
	}
	if err := d.do(fmt.Sprintf("start the destination cluster (in process) on localhost:%d", rep.DestinationPort), func() error {
		d.dst, err = startInProcess("destination", rep.DestinationPort, d.dstDir, d.brokers)
		if err != nil {
			return err
		}
		d.dstAdm, err = newAdmin(d.dst.addr())
		return err
	}); err != nil {
		return err
	}
	srcAddr, dstAddr := d.src.addr(), d.dst.addr()

	if err := d.do(fmt.Sprintf("create topic %s (%d partitions) on the source and produce %d records", Topic, Partitions, drillMirrored), func() error {
		if err := d.srcAdm.createTopic(ctx, Topic, Partitions); err != nil {
			return err
		}
		d.producing = producedOrder[0]
		return d.produce(srcAddr, 1, drillMirrored)
	}); err != nil {
		return err
	}
	if err := d.do(fmt.Sprintf("create mirror %s on the destination, start .*, wait for lag 0", Mirror), func() error {
		if err := d.dstAdm.createMirror(ctx, Mirror, srcAddr, false); err != nil {
			return err
		}
		if err := d.dstAdm.startMirror(ctx, Mirror, nil, []string{".*"}, false); err != nil {
			return err
		}
		_, err := d.dstAdm.waitState(ctx, Mirror, Topic, Partitions, "MIRRORING", drillWaitMirror)
		return err
	}); err != nil {
		return err
	}

	var onSource consumed
	if err := d.do(fmt.Sprintf("group %s consumes and commits on the source", Group), func() error {
		onSource, err = consumeGroup(ctx, srcAddr, 60*time.Second, func(c consumed) bool { return covers(c, 1, drillMirrored) })
		return err
	}); err != nil {
		return err
	}
	// The group commits everything it read, so nothing read is uncommitted.
	rep.DuplicateBound = 0
	// Not fatal: without the sync the group re-reads, which the duplicates check reports.
	if err := d.do("wait for the group's offsets on the destination (mirror metadata sync)", func() error {
		srcOffsets, err := d.srcAdm.groupOffsets(ctx, Group, Topic)
		if err != nil {
			return err
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			dstOffsets, err := d.dstAdm.groupOffsets(ctx, Group, Topic)
			if err == nil && sameOffsets(srcOffsets, dstOffsets) {
				rep.GroupSynced = true
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("destination offsets %v, source %v after 15 s: the group will re-read on the destination", dstOffsets, srcOffsets)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}); err != nil {
		fmt.Fprintf(d.out, "    %v\n", err)
	}

	if err := d.do(fmt.Sprintf("cut the mirror link (pause %s) and produce %d more records on the source", Topic, drillTail), func() error {
		if err := d.dstAdm.pauseMirror(ctx, Mirror, Topic); err != nil {
			return err
		}
		if _, err := d.dstAdm.waitState(ctx, Mirror, Topic, Partitions, "PAUSED", 30*time.Second); err != nil {
			return err
		}
		rep.Unmirrored = drillTail
		rep.tailStep = d.step
		d.producing = producedOrder[1]
		return d.produce(srcAddr, drillMirrored+1, drillMirrored+drillTail)
	}); err != nil {
		return err
	}

	var killed time.Time
	if err := d.do("kill -9 the source cluster", func() error {
		d.srcAdm.close()
		d.srcAdm = nil
		d.src.kill()
		killed = time.Now()
		d.src = nil
		return nil
	}); err != nil {
		return err
	}
	first, last := drillMirrored+drillTail+1, drillMirrored+drillTail+drillAfter
	if err := d.do(fmt.Sprintf("fail over: stop mirroring %s on the destination and produce %d records there", Topic, drillAfter), func() error {
		if err := d.dstAdm.stopMirror(ctx, Mirror, Topic); err != nil {
			return err
		}
		d.producing = producedOrder[2]
		if err := d.produce(dstAddr, first, first); err != nil {
			return err
		}
		rep.FailoverTime = time.Since(killed)
		return d.produce(dstAddr, first+1, last)
	}); err != nil {
		return err
	}

	var onDest consumed
	expected := func(n int) bool { return n >= 1 && n <= drillMirrored || n >= first && n <= last }
	if err := d.do(fmt.Sprintf("group %s resumes on the destination", Group), func() error {
		onDest, err = consumeGroup(ctx, dstAddr, 60*time.Second, func(c consumed) bool {
			return covers(append(append(consumed{}, onSource...), c...), 1, drillMirrored) && covers(c, first, last)
		})
		return err
	}); err != nil {
		return err
	}
	seen := map[int]bool{}
	for _, n := range onSource {
		seen[n] = true
	}
	for _, n := range onDest {
		if seen[n] {
			rep.Duplicates++
		}
		seen[n] = true
	}
	for n := 1; n <= last; n++ {
		if expected(n) && !seen[n] {
			rep.Lost++
		}
	}
	destDump, err := dumpTopic(ctx, dstAddr)
	if err != nil {
		return err
	}
	onDisk := map[int]bool{}
	for _, l := range destDump {
		onDisk[orderNumber([]byte(strings.Fields(l)[2]))] = true
	}
	for n := 1; n <= last; n++ {
		if expected(n) && !onDisk[n] && seen[n] {
			rep.Lost++ // delivered once but no longer on the destination
		}
	}
	fmt.Fprintf(d.out, "    group read %d records on the source and %d on the destination: %d lost, %d duplicates\n", len(onSource), len(onDest), rep.Lost, rep.Duplicates)
	d.check(rep.Lost == 0, "%d records lost", rep.Lost)
	d.check(rep.Duplicates <= rep.DuplicateBound, "%d duplicates, bound %d (group offsets synced: %v)", rep.Duplicates, rep.DuplicateBound, rep.GroupSynced)

	if err := d.do("restart the source cluster on its data", d.startSource); err != nil {
		return err
	}
	if err := d.do(fmt.Sprintf("fail back: create mirror %s on the source, start %s, wait for lag 0", MirrorBack, Topic), func() error {
		if err := d.srcAdm.createMirror(ctx, MirrorBack, dstAddr, false); err != nil {
			return err
		}
		if err := d.srcAdm.startMirror(ctx, MirrorBack, []string{Topic}, nil, false); err != nil {
			return err
		}
		rows, err := d.srcAdm.waitState(ctx, MirrorBack, Topic, Partitions, "MIRRORING", drillWaitMirror)
		for _, r := range rows {
			rep.Truncated += r.TruncatedRecords
		}
		return err
	}); err != nil {
		return err
	}
	d.check(rep.Truncated == int64(rep.Unmirrored), "failback truncated %d records, the source's divergent tail was %d", rep.Truncated, rep.Unmirrored)
	same := 0
	if err := d.do("compare (partition, offset, key, value) on both clusters", func() error {
		a, err := dumpTopic(ctx, srcAddr)
		if err != nil {
			return err
		}
		b, err := dumpTopic(ctx, dstAddr)
		if err != nil {
			return err
		}
		tail := 0
		for _, l := range a {
			if n := orderNumber([]byte(strings.Fields(l)[2])); n > drillMirrored && n < first {
				tail++
			}
		}
		d.check(tail == 0, "%d records of the source's divergent tail survived failback", tail)
		d.check(strings.Join(a, "\n") == strings.Join(b, "\n"), "source (%d records) and destination (%d records) differ after failback", len(a), len(b))
		same = len(b)
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "    both clusters hold the same %d records\n", same)
	if err := d.do(fmt.Sprintf("stop mirroring %s on the source: it is writable again (produce 1 record there)", Topic), func() error {
		if err := d.srcAdm.stopMirror(ctx, MirrorBack, Topic); err != nil {
			return err
		}
		d.producing = producedOrder[3]
		return d.produce(srcAddr, last+1, last+1)
	}); err != nil {
		return err
	}
	return nil
}

func (d *drill) produce(addr string, from, to int) error {
	cl, err := newProducer(addr)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	if err := produceRange(ctx, cl, from, to); err != nil {
		return fmt.Errorf("produce to %s: %w", addr, err)
	}
	d.rep.Produced += to - from + 1
	if d.rep.ProducedBy == nil {
		d.rep.ProducedBy = map[string]int{}
	}
	d.rep.ProducedBy[d.producing] += to - from + 1
	return nil
}

// covers reports whether c holds every order number from..to.
func covers(c consumed, from, to int) bool {
	have := make(map[int]bool, len(c))
	for _, n := range c {
		have[n] = true
	}
	for n := from; n <= to; n++ {
		if !have[n] {
			return false
		}
	}
	return true
}

func sameOffsets(a, b map[int32]int64) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}
