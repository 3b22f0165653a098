// Package quickstart runs kmirror's first-run experience: two clusters on one machine, a
// topic with a producer and a consumer group on the source, a cluster mirror to the
// destination, and either a live table (Run, `kmirror quickstart`) or the whole
// disaster-recovery drill unattended (RunScripted, `kmirror quickstart --scripted`).
package quickstart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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
	// Brokers is the number of nodes of each cluster (Run) or of the destination
	// (RunScripted, whose source is one child process to kill); 0 or 1: one node. A
	// cluster of n nodes listens on its port and the n−1 above it.
	Brokers int
}

func (o Options) out() io.Writer {
	if o.Out == nil {
		return os.Stdout
	}
	return o.Out
}

// maxBrokers bounds --brokers: a quickstart cluster on one machine.
const maxBrokers = 9

// checkPorts checks --brokers and that every port the clusters would listen on is free:
// each cluster's client ports port..port+n−1 and, with several nodes, its controller
// ports controllerPortOffset above; the two clusters' ranges must not overlap.
func checkPorts(o Options) error {
	n := max(1, o.Brokers)
	if n > maxBrokers {
		return fmt.Errorf("--brokers %d: at most %d nodes per quickstart cluster", o.Brokers, maxBrokers)
	}
	if n > 1 && (o.SourcePort == 0 || o.DestinationPort == 0) {
		return fmt.Errorf("--brokers %d needs fixed --source-port and --destination-port (each cluster takes %d consecutive ports)", n, n)
	}
	if n > 1 && o.SourcePort < o.DestinationPort+n && o.DestinationPort < o.SourcePort+n {
		return fmt.Errorf("--brokers %d: the source takes ports %d–%d and the destination %d–%d, which overlap: pick --destination-port %d or higher",
			n, o.SourcePort, o.SourcePort+n-1, o.DestinationPort, o.DestinationPort+n-1, o.SourcePort+n)
	}
	for _, base := range []int{o.SourcePort, o.DestinationPort} {
		if base == 0 {
			continue
		}
		for i := 0; i < n; i++ {
			ports := []int{base + i}
			if n > 1 {
				ports = append(ports, base+i+controllerPortOffset)
			}
			for _, p := range ports {
				if !portFree(p) {
					return fmt.Errorf("port %d is in use on localhost: stop what uses it or pick --source-port/--destination-port", p)
				}
			}
		}
	}
	return nil
}

// Run starts the source and destination clusters in this process, creates `orders`
// on the source with a producer (a few records per second) and the group `orders-app`
// consuming it, creates the mirror `my-mirror` on the destination and starts `.*`, then
// prints the live table (every mirror on either cluster that holds `orders`) every
// Refresh until ctx is done, when it stops both clusters cleanly (Shutdown: logs
// flushed, checkpoints written). On a terminal the screen is redrawn below the opening
// lines; otherwise the commands to try are printed once and the table only when a
// partition's state changes or every 10 Refresh periods.
//
// A second run on the same data continues where the first stopped: when `my-mirror`
// already exists it sends no StartMirrorTopics (a STOPPED topic restarted would go
// through LOG_ALIGNMENT and be truncated, spec §4) and says whether the data was failed
// over or failed back.
func Run(ctx context.Context, o Options) error {
	out := o.out()
	data := o.Data
	if data == "" {
		data = DefaultDataDir
	}
	if err := checkPorts(o); err != nil {
		return err
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
	src, err := startInProcess("source", srcPort, srcDir, o.Brokers)
	if err != nil {
		return err
	}
	defer src.stop()
	dst, err := startInProcess("destination", dstPort, dstDir, o.Brokers)
	if err != nil {
		return err
	}
	defer dst.stop()
	say := func(format string, args ...any) { fmt.Fprintf(out, format, args...) }
	say("Source cluster on %s, destination cluster on %s (data and logs in %s).\n", src.addr(), dst.addr(), data)
	say("Status console: %s (destination), %s (source); Prometheus metrics at /metrics.\n", dst.consoleURL(), src.consoleURL())

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
	dstMirrors, err := dstAdm.describeAll(setup)
	if err != nil {
		return fmt.Errorf("describe the mirrors on %s: %w", dst.addr(), err)
	}
	srcMirrors, err := srcAdm.describeAll(setup)
	if err != nil {
		return fmt.Errorf("describe the mirrors on %s: %w", src.addr(), err)
	}
	ph, haveMirror := classify(dstMirrors, srcMirrors)
	if haveMirror && ph == phaseMirroring && mirrorEmpty(dstMirrors, Mirror) {
		// A first run stopped between CreateClusterMirror and StartMirrorTopics: the
		// mirror holds no topic at all, so starting .* restarts nothing.
		if err := dstAdm.startMirror(setup, Mirror, nil, []string{".*"}, true); err != nil {
			return err
		}
		say("Started mirroring .* in the existing cluster mirror %s (it held no topic).\n", Mirror)
	}
	if !haveMirror {
		say("Created topic %s (%d partitions) on the source.\n", Topic, Partitions)
		if err := dstAdm.createMirror(setup, Mirror, src.addr(), true); err != nil {
			return err
		}
		if err := dstAdm.startMirror(setup, Mirror, nil, []string{".*"}, true); err != nil {
			return err
		}
		say("Created cluster mirror %s on the destination and started mirroring .*\n", Mirror)
	} else {
		say("Continuing on existing data: topic %s and cluster mirror %s exist; their mirror states are left as they are.\n", Topic, Mirror)
		if msg := phaseMessage(ph, data, src.addr(), dst.addr()); msg != "" {
			say("\n%s", msg)
		}
	}

	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var produced, consumedN atomic.Int64
	var prodStatus atomic.Value
	prodStatus.Store("")
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		runProducer(wctx, src.addr(), next, &produced, &prodStatus)
	}()
	go func() { defer func() { done <- struct{}{} }(); runConsumer(wctx, src.addr(), &consumedN) }()

	refresh := o.Refresh
	if refresh <= 0 {
		refresh = time.Second
	}
	tty := isTerminal(out)
	// The tour once, then the table below it (redrawn in place on a terminal).
	fmt.Fprintln(out)
	writeNextSteps(out, tourCommand(out), src.addr(), dst.addr())
	drawn := 0 // terminal lines of the table drawn last
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	var lastSig string
	var lastPrint time.Time
	for {
		dctx, dcancel := context.WithTimeout(ctx, refresh)
		views, derr := describeBoth(dctx, dstAdm, srcAdm)
		dcancel()
		var tb strings.Builder
		pst := prodStatus.Load().(string)
		tb.WriteString(statusLines(time.Now(), src.addr(), dst.addr(), produced.Load(), consumedN.Load(), pst))
		if derr != nil && ctx.Err() == nil {
			fmt.Fprintf(&tb, "describe mirrors: %v\n", derr)
		} else {
			writeViews(&tb, views, src.addr(), dst.addr())
		}
		sig := signature(views) + "|" + pst
		if tty {
			drawn = redraw(out, tb.String(), drawn)
		} else if sig != lastSig || time.Since(lastPrint) >= 10*refresh {
			fmt.Fprintln(out)
			fmt.Fprint(out, tb.String())
			lastSig, lastPrint = sig, time.Now()
		}
		select {
		case <-ctx.Done():
			stopWork()
			<-done
			<-done
			fmt.Fprintln(out, "\nStopping both clusters ...")
			src.stop()
			dst.stop()
			fmt.Fprintf(out, "Stopped. The data stays in %s: run the quickstart again to continue from here (it leaves the mirrors' states as they are), or remove %s to start afresh.\n", data, data)
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

// tableWidth is the width the live table keeps to: an 80-column terminal.
const tableWidth = 80

// statusLines are the live table's first lines: the time and both clusters, then the
// workload's counts and the producer's status (cut to tableWidth), then a blank line.
func statusLines(now time.Time, src, dst string, produced, consumed int64, producerStatus string) string {
	status := fmt.Sprintf("produced %d, consumed by %s %d", produced, Group, consumed)
	if producerStatus != "" {
		status += "; " + producerStatus
	}
	if r := []rune(status); len(r) > tableWidth {
		status = string(r[:tableWidth-1]) + "…"
	}
	return fmt.Sprintf("%s  source %s, destination %s\n%s\n\n", now.Format("15:04:05"), src, dst, status)
}

// runProducer writes one record every 200 ms until ctx is done. While the source's
// topic is read-only (a mirror topic: POLICY_VIOLATION or READ_ONLY_TOPIC) or a produce
// fails otherwise, it retries the same record every 2 s and says so in status ("" while
// producing).
func runProducer(ctx context.Context, addr string, next int, produced *atomic.Int64, status *atomic.Value) {
	cl, err := newProducer(addr)
	if err != nil {
		status.Store("producer: " + err.Error())
		return
	}
	defer cl.Close()
	wait := 200 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.ProduceSync(pctx, orderRecord(next)).FirstErr()
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			produced.Add(1)
			next++
			status.Store("")
			wait = 200 * time.Millisecond
		case errors.Is(err, kerr.PolicyViolation) || strings.Contains(err.Error(), "READ_ONLY_TOPIC"):
			status.Store(fmt.Sprintf("producer PAUSED (%s read-only here)", Topic))
			wait = 2 * time.Second
		default:
			status.Store(fmt.Sprintf("producer retrying every 2 s: %v", err))
			wait = 2 * time.Second
		}
	}
}

// runConsumer reads orders in the group orders-app, committing every 5 s (kgo's
// autocommit), until ctx is done; it then commits and leaves the group.
func runConsumer(ctx context.Context, addr string, n *atomic.Int64) {
	cl, err := kgo.NewClient(seeds(addr), kgo.ConsumerGroup(Group), kgo.ConsumeTopics(Topic),
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
