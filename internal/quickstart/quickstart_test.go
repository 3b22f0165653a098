package quickstart

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for Run's writer goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunShowsMirroringAndStops runs the interactive quickstart on free ports until
// the live table shows every partition of orders MIRRORING with data mirrored, then
// cancels it (Ctrl-C) and checks that both clusters stopped and a second run on the
// same data comes back.
func TestRunShowsMirroringAndStops(t *testing.T) {
	data := t.TempDir()
	// The same ports for both runs: the mirror keeps the source's address.
	srcPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dstPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		s := runQuickstart(t, fmt.Sprintf("run %d", run), data, srcPort, dstPort, tableMirroring, nil, nil)
		for _, want := range []string{"--stop --topics orders --mirror my-mirror", "Stopping both clusters"} {
			if !strings.Contains(s, want) {
				t.Errorf("run %d: output lacks %q", run, want)
			}
		}
	}
}

// runQuickstart starts Run on data and the two ports, waits until until(output) holds,
// calls during (if any) with the clusters up and waits for after(output), then stops Run
// (Ctrl-C) and returns its output. Each wait gives up after 60 s.
func runQuickstart(t *testing.T, name, data string, srcPort, dstPort int, until func(string) bool,
	during func(ctx context.Context), after func(string) bool) string {
	return runQuickstartN(t, name, data, srcPort, dstPort, 1, until, during, after)
}

// runQuickstartN is runQuickstart with clusters of brokers nodes.
func runQuickstartN(t *testing.T, name, data string, srcPort, dstPort, brokers int, until func(string) bool,
	during func(ctx context.Context), after func(string) bool) string {
	t.Helper()
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, Options{Data: data, SourcePort: srcPort, DestinationPort: dstPort, Out: &out, Refresh: 200 * time.Millisecond, Brokers: brokers})
	}()
	wait := func(cond func(string) bool) {
		deadline := time.Now().Add(60 * time.Second)
		for !cond(out.String()) {
			select {
			case err := <-errc:
				cancel()
				t.Fatalf("%s: Run returned early: %v\n%s", name, err, out.String())
			default:
			}
			if time.Now().After(deadline) {
				cancel()
				<-errc
				t.Fatalf("%s: condition not met within 60 s:\n%s", name, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	wait(until)
	if during != nil {
		during(ctx)
		wait(after)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out.String()
}

// TestRunWithThreeBrokers runs the quickstart with clusters of three nodes (--brokers 3)
// until the table shows orders MIRRORING, then runs it again on the same data: both
// clusters come back.
func TestRunWithThreeBrokers(t *testing.T) {
	data := t.TempDir()
	src, dst := freeRange(t, 3), freeRange(t, 3)
	for dst < src+3 && src < dst+3 { // the two clusters' ranges must not overlap
		dst = freeRange(t, 3)
	}
	for run := 1; run <= 2; run++ {
		s := runQuickstartN(t, fmt.Sprintf("run %d", run), data, src, dst, 3, tableMirroring, nil, nil)
		if want := fmt.Sprintf("localhost:%d,localhost:%d,localhost:%d", src, src+1, src+2); !strings.Contains(s, want) {
			t.Fatalf("run %d: output does not name the source's three nodes %s:\n%s", run, want, s)
		}
	}
}

// freeRange returns a port p such that p..p+n−1 and the controller ports above them are
// free now.
func freeRange(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 100; try++ {
		base, err := freePort()
		if err != nil || base+n+controllerPortOffset > 65535 {
			continue
		}
		ok := true
		for i := 0; i < n && ok; i++ {
			ok = portFree(base+i) && portFree(base+i+controllerPortOffset)
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

// tableMirroring reports whether the last table printed shows the 6 partitions of
// orders MIRRORING, at least one with a destination offset above 0.
func tableMirroring(s string) bool {
	i := strings.LastIndex(s, "TOPIC")
	if i < 0 {
		return false
	}
	n, data := 0, false
	for _, line := range strings.Split(s[i:], "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == Topic && f[5] == "MIRRORING" {
			n++
			if f[3] != "0" && f[3] != "-" {
				data = true
			}
		}
	}
	return n == Partitions && data
}

// TestRerunAfterFailoverAndFailback runs the quickstart, fails over (tour step 5) and
// re-runs it: the destination keeps its records and orders stays STOPPED in my-mirror.
// It then fails back (tour step 6) and re-runs again: no partition is FAILED, the table
// shows my-mirror-back and the producer reports that it is paused.
func TestRerunAfterFailoverAndFailback(t *testing.T) {
	data := t.TempDir()
	srcPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dstPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	src, dst := "localhost:"+itoa(srcPort), "localhost:"+itoa(dstPort)
	run := func(name string, until func(string) bool, during func(ctx context.Context), after func(string) bool) string {
		return runQuickstart(t, name, data, srcPort, dstPort, until, during, after)
	}
	endOffsets := func(addr string) int64 {
		a, err := newAdmin(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer a.close()
		n, err := nextOrder(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		return int64(n - 1)
	}
	adminOf := func(addr string) *admin {
		a, err := newAdmin(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.close)
		return a
	}

	// 1. First run; fail over while it runs.
	run("first run", tableMirroring, func(ctx context.Context) {
		if err := adminOf(dst).stopMirror(ctx, Mirror, Topic); err != nil {
			t.Fatal(err)
		}
	}, func(s string) bool { return strings.Contains(s, "STOPPED: orders is writable on the destination") })

	// 2. Re-run after the failover: nothing is restarted or truncated.
	var before int64
	s := run("re-run after failover", func(s string) bool {
		return strings.Contains(s, "STOPPED: orders is writable on the destination")
	}, func(ctx context.Context) {
		before = endOffsets(dst)
		rows, err := adminOf(dst).describe(ctx, Mirror)
		if err != nil {
			t.Fatal(err)
		}
		if !allIn(rows, "STOPPED") {
			t.Errorf("after the re-run my-mirror is %s, want every partition STOPPED", summarize(rows))
		}
	}, func(string) bool { return true })
	if !strings.Contains(s, "FAILED OVER") {
		t.Errorf("re-run after failover does not say so:\n%s", s)
	}
	if before == 0 {
		t.Errorf("the destination's %s was truncated on re-run", Topic)
	}

	// 3. Fail back with the clusters up, then re-run.
	run("fail back", func(s string) bool { return strings.Contains(s, "Source cluster on") }, func(ctx context.Context) {
		a := adminOf(src)
		if err := a.createMirror(ctx, MirrorBack, dst, false); err != nil {
			t.Fatal(err)
		}
		if err := a.startMirror(ctx, MirrorBack, []string{Topic}, nil, false); err != nil {
			t.Fatal(err)
		}
		if _, err := a.waitState(ctx, MirrorBack, Topic, Partitions, "MIRRORING", 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}, func(s string) bool { return strings.Contains(s, "producer PAUSED") })
	s = run("re-run after failback", func(s string) bool {
		return strings.Contains(s, "Mirror "+MirrorBack+" on the source") && strings.Contains(s, "producer PAUSED")
	}, nil, nil)
	if !strings.Contains(s, "FAILED BACK") {
		t.Errorf("re-run after failback does not say so:\n%s", s)
	}
	if i := strings.LastIndex(s, "Mirror "+MirrorBack); strings.Contains(s[i:], "FAILED") {
		t.Errorf("a partition is FAILED after the re-run:\n%s", s[i:])
	}
	if n := strings.Count(s, "Try next (in another terminal"); n != 1 {
		t.Errorf("non-terminal output prints the commands to try %d times, want once", n)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestTableUsesCLIColumnNames checks that the live table and the tour use the column
// names `kmirror mirrors --describe` prints (SOURCE-OFFSET, DESTINATION-OFFSET), and that
// the tour does not promise exactly + 1 after a failover (an open transaction adds an
// ABORT marker).
func TestTableUsesCLIColumnNames(t *testing.T) {
	var b bytes.Buffer
	writeTable(&b, []PartitionRow{{Topic: Topic, Partition: 0, SourceOffset: 5, DestinationOffset: 6, Lag: 0, State: "STOPPED"}})
	header, _, _ := strings.Cut(b.String(), "\n")
	if got := strings.Fields(header); strings.Join(got, " ") != "TOPIC PARTITION SOURCE-OFFSET DESTINATION-OFFSET LAG STATE" {
		t.Errorf("table header %q", header)
	}
	b.Reset()
	writeNextSteps(&b, "bin/kmirror", "localhost:9091", "localhost:9094")
	tour := b.String()
	if strings.Contains(tour, "SOURCE OFFSET") || strings.Contains(tour, "DESTINATION OFFSET") || !strings.Contains(tour, "ABORT") {
		t.Errorf("tour:\n%s", tour)
	}
}

// TestLiveTableFits80x24: after a failback both mirrors hold orders; the live table (the
// status lines and both mirrors' six partitions) fits an 80×24 terminal without a
// wrapped line, and a redraw moves up over exactly the table drawn before.
func TestLiveTableFits80x24(t *testing.T) {
	var views []mirrorView
	for _, m := range []struct{ on, addr, name, src, state string }{
		{"destination", "localhost:9094", Mirror, "localhost:9091", "STOPPED"},
		{"source", "localhost:9091", MirrorBack, "localhost:9094", "MIRRORING"},
	} {
		v := mirrorView{On: m.on, Addr: m.addr, mirrorInfo: mirrorInfo{Name: m.name, Source: m.src}}
		for p := int32(0); p < Partitions; p++ {
			v.Rows = append(v.Rows, PartitionRow{Mirror: m.name, Topic: Topic, Partition: p, SourceOffset: 1234567, DestinationOffset: 1234567, State: m.state})
		}
		views = append(views, v)
	}
	var tb bytes.Buffer
	tb.WriteString(statusLines(time.Now(), "localhost:9091", "localhost:9094", 1234567, 1234567, "producer retrying every 2 s: unable to dial: dial tcp 127.0.0.1:9091: connect: connection refused"))
	writeViews(&tb, views, "localhost:9091", "localhost:9094")
	table := tb.String()
	for _, line := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
		if n := len([]rune(line)); n > 80 {
			t.Errorf("line of %d columns: %q", n, line)
		}
	}
	if n := screenLines(table, 80); n >= 24 {
		t.Errorf("the table takes %d lines of a 24-line terminal:\n%s", n, table)
	}
	var out bytes.Buffer
	drawn := redraw(&out, table, 0)
	if out.String() != table {
		t.Errorf("first draw: %q", out.String())
	}
	out.Reset()
	redraw(&out, table, drawn)
	if want := "\r\033[" + itoa(drawn) + "A\033[J" + table; out.String() != want {
		t.Errorf("redraw starts %q, want to move up %d lines", out.String()[:12], drawn)
	}
}
