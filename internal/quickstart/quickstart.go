// Package quickstart runs kmirror's first-run experience: two clusters on one machine, a
// topic with a producer and a consumer group on the source, a cluster mirror to the
// destination, and either a live table (Run, `kmirror quickstart`) or the whole
// disaster-recovery drill unattended (RunScripted, `kmirror quickstart --scripted`).
package quickstart

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Default ports of the quickstart clusters (issue 7): the source on 9091, the
// destination on 9094.
const (
	DefaultSourcePort      = 9091
	DefaultDestinationPort = 9094
	DefaultDataDir         = "quickstart-data"
)

// Options configure Run and RunScripted.
type Options struct {
	// Data is the data directory; the clusters keep their logs in Data/source and
	// Data/destination. Empty: ./quickstart-data for Run, a fresh temporary directory
	// for RunScripted (removed after a passing drill).
	Data string
	// SourcePort and DestinationPort are the localhost listener ports. Run fails when
	// one is taken; RunScripted then picks a free port and says so. 0 picks a free port.
	SourcePort, DestinationPort int
	// Out receives the output; nil is os.Stdout.
	Out io.Writer
	// Executable is run as `Executable serve --config FILE` for RunScripted's source
	// cluster; empty is os.Executable() (the kmirror binary).
	Executable string
	// Env is the environment of that child process; nil is os.Environ().
	Env []string
	// Refresh is the period of Run's live table; 0 is one second.
	Refresh time.Duration
}

func (o Options) out() io.Writer {
	if o.Out == nil {
		return os.Stdout
	}
	return o.Out
}

// Run starts the source and destination clusters in this process, creates `orders`
// on the source with a producer (a few records per second) and the group `orders-app`
// consuming it, creates the mirror `my-mirror` on the destination and starts `.*`, then
// prints the live table and the commands to try next every Refresh until ctx is done,
// when it stops both clusters cleanly (Shutdown: logs flushed, checkpoints written).
// A second run on the same data continues where the first stopped.
func Run(ctx context.Context, o Options) error {
	out := o.out()
	data := o.Data
	if data == "" {
		data = DefaultDataDir
	}
	for _, p := range []int{o.SourcePort, o.DestinationPort} {
		if p != 0 && !portFree(p) {
			return fmt.Errorf("port %d is in use on localhost: stop what uses it or pick --source-port/--destination-port", p)
		}
	}
	var err error
	srcPort, dstPort := o.SourcePort, o.DestinationPort
	if srcPort == 0 {
		if srcPort, err = freePort(); err != nil {
			return err
		}
	}
	if dstPort == 0 {
		if dstPort, err = freePort(); err != nil {
			return err
		}
	}
	srcDir, dstDir := dataDirs(data)
	src, err := startInProcess("source", srcPort, srcDir)
	if err != nil {
		return err
	}
	defer src.stop()
	dst, err := startInProcess("destination", dstPort, dstDir)
	if err != nil {
		return err
	}
	defer dst.stop()
	fmt.Fprintf(out, "Source cluster on %s, destination cluster on %s (data and logs in %s).\n", src.addr(), dst.addr(), data)

	srcAdm, err := newAdmin(src.addr())
	if err != nil {
		return err
	}
	defer srcAdm.close()
	dstAdm, err := newAdmin(dst.addr())
	if err != nil {
		return err
	}
	defer dstAdm.close()
	setup, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := srcAdm.createTopic(setup, Topic, Partitions); err != nil {
		return err
	}
	next, err := nextOrder(setup, srcAdm)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Created topic %s (%d partitions) on the source.\n", Topic, Partitions)
	if err := dstAdm.createMirror(setup, Mirror, src.addr(), true); err != nil {
		return err
	}
	if err := dstAdm.startMirror(setup, Mirror, nil, []string{".*"}, true); err != nil {
		return err
	}
	fmt.Fprintf(out, "Created cluster mirror %s on the destination and started mirroring .*\n", Mirror)

	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var produced, consumedN atomic.Int64
	done := make(chan struct{}, 2)
	go func() { defer func() { done <- struct{}{} }(); runProducer(wctx, src.addr(), next, &produced) }()
	go func() { defer func() { done <- struct{}{} }(); runConsumer(wctx, src.addr(), &consumedN) }()

	refresh := o.Refresh
	if refresh <= 0 {
		refresh = time.Second
	}
	tty := isTerminal(out)
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	for {
		dctx, dcancel := context.WithTimeout(ctx, refresh)
		rows, derr := dstAdm.describe(dctx, Mirror)
		dcancel()
		if tty {
			fmt.Fprint(out, "\033[H\033[2J")
		}
		fmt.Fprintf(out, "%s  source %s → destination %s   produced %d, consumed by %s %d\n\n",
			time.Now().Format("15:04:05"), src.addr(), dst.addr(), produced.Load(), Group, consumedN.Load())
		if derr != nil && ctx.Err() == nil {
			fmt.Fprintf(out, "describe %s: %v\n", Mirror, derr)
		} else {
			writeTable(out, rows)
		}
		fmt.Fprintln(out)
		writeNextSteps(out, src.addr(), dst.addr())
		select {
		case <-ctx.Done():
			stopWork()
			<-done
			<-done
			fmt.Fprintln(out, "\nStopping both clusters ...")
			src.stop()
			dst.stop()
			fmt.Fprintf(out, "Stopped. The data stays in %s: run the quickstart again to continue, or remove it to start afresh.\n", data)
			return nil
		case <-tick.C:
		}
	}
}

// nextOrder returns 1 + the records already in the topic, so a second run continues
// the key sequence.
func nextOrder(ctx context.Context, a *admin) (int, error) {
	ends, err := a.adm.ListEndOffsets(ctx, Topic)
	if err != nil {
		return 0, err
	}
	n := 1
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			n += int(o.Offset)
		}
	})
	return n, nil
}

// runProducer writes one record every 200 ms until ctx is done.
func runProducer(ctx context.Context, addr string, next int, produced *atomic.Int64) {
	cl, err := newProducer(addr)
	if err != nil {
		return
	}
	defer cl.Close()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cl.Produce(ctx, orderRecord(next), func(_ *kgo.Record, err error) {
			if err == nil {
				produced.Add(1)
			}
		})
		next++
	}
}

// runConsumer reads orders in the group orders-app, committing every 5 s (kgo's
// autocommit), until ctx is done; it then commits and leaves the group.
func runConsumer(ctx context.Context, addr string, n *atomic.Int64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(Group), kgo.ConsumeTopics(Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return
	}
	defer cl.Close() // commits and leaves the group
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		n.Add(int64(fs.NumRecords()))
	}
}

// isTerminal reports whether w is a character device (the live table then redraws in
// place).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
