package quickstart

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Report holds what RunScripted measured.
type Report struct {
	SourcePort, DestinationPort int
	Produced                    int           // records acknowledged in all (source and destination)
	Unmirrored                  int           // the RPO, measured: records the source acknowledged under live load that never reached the destination
	SourceTail                  int           // records on the restarted source that the destination never had (acknowledged or not): its divergent tail
	LagBefore                   int64         // the mirror's lag in records just before the kill
	LiveAcked                   int           // records the source acknowledged under live load
	Lost                        int           // records that reached the destination or were produced there, missing from it or never delivered to the group
	Duplicates                  int           // records the group read again on the destination after reading them on the source
	DuplicateBound              int           // duplicates allowed: records the group read but had not committed at the outage
	GroupSynced                 bool          // the destination held the group's source offsets before the outage (metadata sync, spec §9)
	FailoverTime                time.Duration // from kill -9 of the source to the first record acknowledged by the destination
	Truncated                   int64         // records LOG_ALIGNMENT dropped from the source's log at failback
	Failures                    []string      // checks that did not hold; empty when the drill passed

	// ProducedBy is Produced split by the step that produced: the source before the
	// outage, the source under live load until the kill, the destination after failover,
	// the source after failback (the one record that shows it is writable again).
	ProducedBy map[string]int
}

// producedOrder is the order producedBreakdown lists Report.ProducedBy in.
var producedOrder = []string{"on the source before the outage", "on the source under live load until the kill", "on the destination after failover", "on the source after failback"}

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
	s := fmt.Sprintf("%d records lost, RPO %d acknowledged records (measured, source killed under live load, lag %d), %d duplicates (bound %d), failover in %d ms, %d records truncated at failback (the source's divergent tail) (ports %d/%d)",
		r.Lost, r.Unmirrored, r.LagBefore, r.Duplicates, r.DuplicateBound, r.FailoverTime.Milliseconds(), r.Truncated, r.SourcePort, r.DestinationPort)
	if len(r.Failures) == 0 {
		return "quickstart drill PASSED: " + s
	}
	return fmt.Sprintf("quickstart drill FAILED (%s): %s", strings.Join(r.Failures, "; "), s)
}

// drill sizes: records before the outage, the live load until the kill (rate and
// duration), records produced on the destination after failover.
const (
	drillMirrored   = 300
	drillLiveRate   = 200 // records/s produced to the source while it mirrors, until the kill
	drillLive       = 2 * time.Second
	drillAfter      = 80
	drillWaitMirror = 90 * time.Second
)

// RunScripted runs the disaster-recovery drill unattended and returns its report; the
// error is non-nil when a step failed or a check did not hold (Report.Failures).
//
// The source cluster is a child process (`<Executable> serve`) so that the outage is a
// real kill -9; the destination runs in this process. Steps: produce to `orders` on the
// source; mirror it to the destination (`my-mirror`, `.*`) until lag 0; the group
// `orders-app` consumes and commits on the source; a producer writes to the source at
// drillLiveRate while it mirrors and the source is killed with kill -9 under that load,
// the mirror not paused: what the destination lacks of the acknowledged records is the
// measured RPO; failover (StopMirrorTopics) and produce on
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
	fmt.Fprintf(out, "%-31s%d of the %d records the source acknowledged under live load never reached the destination\n"+
		"    (the source was killed while producing, the mirror not paused; lag just before: %d). That is\n"+
		"    the RPO of an asynchronous mirror, measured; those records are not counted as lost above.\n", "RPO (acknowledged, missing):", rep.Unmirrored, rep.LiveAcked, rep.LagBefore)
	fmt.Fprintf(out, "%-31s%d (bound %d; group offsets synced before the outage: %v)\n", "duplicates seen:", rep.Duplicates, rep.DuplicateBound, rep.GroupSynced)
	fmt.Fprintf(out, "%-31s%d ms (kill -9 of the source to the first record acknowledged by the destination)\n", "time to fail over:", rep.FailoverTime.Milliseconds())
	fmt.Fprintf(out, "%-31s%d (the restarted source's divergent tail: %d records, acknowledged or not)\n", "records truncated at failback:", rep.Truncated, rep.SourceTail)
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

	var (
		killed    time.Time
		liveAcked map[int]bool
		next      int
	)
	if err := d.do(fmt.Sprintf("produce %d records/s to %s on the source while it mirrors, and kill -9 the source under that load after %s", drillLiveRate, Topic, drillLive), func() error {
		liveAcked, next, killed, err = d.killUnderLoad(srcAddr, drillMirrored+1)
		return err
	}); err != nil {
		return err
	}
	rep.LiveAcked = len(liveAcked)
	rep.Produced += len(liveAcked)
	rep.ProducedBy[producedOrder[1]] += len(liveAcked)
	first, last := next, next+drillAfter-1
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

	// what reached the destination of the live load, read before anything else writes
	mirroredLive := map[int]bool{}
	if err := d.do("count the acknowledged records that reached the destination (the RPO)", func() error {
		lines, err := dumpTopic(ctx, dstAddr)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if n := orderNumber([]byte(strings.Fields(l)[2])); n > drillMirrored && n < first {
				mirroredLive[n] = true
			}
		}
		for n := range liveAcked {
			if !mirroredLive[n] {
				rep.Unmirrored++
			}
		}
		fmt.Fprintf(d.out, "    %d of %d acknowledged records are on the destination: RPO %d records (lag just before the kill: %d)\n",
			len(liveAcked)-rep.Unmirrored, len(liveAcked), rep.Unmirrored, rep.LagBefore)
		return nil
	}); err != nil {
		return err
	}

	var onDest consumed
	expected := func(n int) bool { return n >= 1 && n <= drillMirrored || mirroredLive[n] || n >= first && n <= last }
	if err := d.do(fmt.Sprintf("group %s resumes on the destination", Group), func() error {
		onDest, err = consumeGroup(ctx, dstAddr, 60*time.Second, func(c consumed) bool {
			all := append(append(consumed{}, onSource...), c...)
			return covers(all, 1, drillMirrored) && covers(c, first, last) && coversAll(all, mirroredLive)
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
	if err := d.do("count the restarted source's divergent tail (records the destination never had)", func() error {
		lines, err := dumpTopic(ctx, srcAddr)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if n := orderNumber([]byte(strings.Fields(l)[2])); n > drillMirrored && !mirroredLive[n] {
				rep.SourceTail++
			}
		}
		return nil
	}); err != nil {
		return err
	}
	d.check(rep.Unmirrored <= rep.SourceTail, "%d acknowledged records missing on the destination, but the source's divergent tail holds only %d", rep.Unmirrored, rep.SourceTail)
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
	d.check(rep.Truncated == int64(rep.SourceTail), "failback truncated %d records, the source's divergent tail was %d", rep.Truncated, rep.SourceTail)
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
			if n := orderNumber([]byte(strings.Fields(l)[2])); n > drillMirrored && n < first && !mirroredLive[n] {
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

// coversAll reports whether c holds every order number of want.
func coversAll(c consumed, want map[int]bool) bool {
	have := make(map[int]bool, len(c))
	for _, n := range c {
		have[n] = true
	}
	for n := range want {
		if !have[n] {
			return false
		}
	}
	return true
}

// killUnderLoad produces order numbers from, from+1, ... to the source at drillLiveRate
// for drillLive, records the mirror's lag, kills the source with kill -9 while the
// producer keeps going, and returns the order numbers the source acknowledged, the next
// unused order number and the time of the kill.
func (d *drill) killUnderLoad(addr string, from int) (map[int]bool, int, time.Time, error) {
	cl, err := newProducer(addr)
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	var (
		mu    sync.Mutex
		acked = map[int]bool{}
		wg    sync.WaitGroup
	)
	pctx, stop := context.WithCancel(d.ctx)
	defer stop()
	n := from
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / drillLiveRate)
		defer tick.Stop()
		for ; ; n++ {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			num := n
			cl.Produce(pctx, orderRecord(num), func(_ *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[num] = true
					mu.Unlock()
				}
			})
		}
	}()
	select {
	case <-d.ctx.Done():
		return nil, 0, time.Time{}, d.ctx.Err()
	case <-time.After(drillLive):
	}
	if rows, err := d.dstAdm.describe(d.ctx, Mirror); err == nil {
		for _, r := range rows {
			if r.Topic == Topic && r.Lag > 0 {
				d.rep.LagBefore += r.Lag
			}
		}
	}
	d.srcAdm.close()
	d.srcAdm = nil
	d.src.kill()
	killed := time.Now()
	d.src = nil
	time.Sleep(100 * time.Millisecond) // the producer keeps writing into the outage
	stop()
	wg.Wait()
	cl.Close() // fails what is still buffered: never acknowledged
	mu.Lock()
	defer mu.Unlock()
	return acked, n, killed, nil
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
