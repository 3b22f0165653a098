// Package e2e runs the built kmirror binary as a separate process and drives it with
// real clients: crashes (kill -9), damaged segments, bad configuration.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// kmirrorBin builds ./cmd/kmirror once per test binary.
func kmirrorBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kmirror-e2e")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "kmirror")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/kmirror").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// syncBuffer is a goroutine-safe stderr sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// proc is one running `kmirror serve`.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	addr   string
	done   chan error
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serve starts `kmirror serve` on dir and addr and waits until it accepts
// connections. The process is killed when the test ends if still running.
func serve(t *testing.T, dir, addr string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--listeners", "PLAINTEXT://" + addr, "--log-dirs", dir}, extra...)
	cmd := exec.Command(kmirrorBin(t), args...)
	p := &proc{cmd: cmd, stderr: &syncBuffer{}, addr: addr, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("broker stderr:\n%s", p.stderr.String())
		}
		p.done <- nil
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if strings.Contains(p.stderr.String(), "kmirror broker serving") {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				return p
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("kmirror serve exited: %v\n%s", err, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kmirror serve did not come up:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill9 kills the broker with SIGKILL and waits for it to be gone.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	err := <-p.done
	p.done <- err
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	resp, err := kadm.NewClient(client(t, addr)).CreateTopics(context.Background(), partitions, 1, nil, topic)
	if err != nil || resp[topic].Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp[topic].Err)
	}
}

type partOffset struct {
	partition int32
	offset    int64
}

// readAll consumes topic from the start until every partition reaches its end offset
// and returns partition/offset → value.
func readAll(t *testing.T, addr, topic string) map[partOffset]string {
	t.Helper()
	ends, err := kadm.NewClient(client(t, addr)).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	c := client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[partOffset]string{}
	next := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for {
		doneAll := true
		for p, end := range want {
			if next[p] < end {
				doneAll = false
			}
		}
		if doneAll {
			return got
		}
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: got %v of %v before the deadline", topic, next, want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("%s-%d: offset %d after %d (hole or repeat)", topic, r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			got[partOffset{r.Partition, r.Offset}] = string(r.Value)
		})
	}
}

// TestKill9DuringProduce: an acks=all producer writes continuously; the broker is
// killed with SIGKILL; after a restart on the same data every acknowledged record is
// at its acknowledged offset, offsets have no hole or repeat, and new records continue
// right after the log end.
func TestKill9DuringProduce(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	p := serve(t, dir, addr)
	const topic = "load"
	createTopic(t, addr, topic, 3)

	var mu sync.Mutex
	acked := map[partOffset]string{}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("v%07d", i)
			prod.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[partOffset{r.Partition, r.Offset}] = string(r.Value)
					mu.Unlock()
				}
			})
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 20000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d records acknowledged before the deadline", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.kill9(t) // mid-load
	cancel()
	<-stopped
	prod.Close() // fails whatever is still buffered; those were never acknowledged
	mu.Lock()
	ackedCopy := acked
	mu.Unlock()
	t.Logf("%d records acknowledged before kill -9", len(ackedCopy))

	serve(t, dir, addr)
	got := readAll(t, addr, topic) // asserts contiguous offsets from 0
	for po, v := range ackedCopy {
		if got[po] != v {
			t.Fatalf("acknowledged record %s at %d-%d: read %q", v, po.partition, po.offset, got[po])
		}
	}
	// No value twice (an idempotent producer's retry must not duplicate).
	seen := map[string]bool{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("value %s is in the log twice", v)
		}
		seen[v] = true
	}
	// New records continue at the log end of each partition.
	ends := map[int32]int64{}
	for po := range got {
		ends[po.partition] = max(ends[po.partition], po.offset+1)
	}
	after := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for part := int32(0); part < 3; part++ {
		r, err := after.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: part, Value: []byte("after")}).First()
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset != ends[part] {
			t.Fatalf("partition %d: first offset after restart %d, want %d", part, r.Offset, ends[part])
		}
	}
}

// newestLog returns the path of the newest .log segment of topic-0 in dir.
func newestLog(t *testing.T, dir, topic string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, topic+"-0", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no segments for %s: %v", topic, err)
	}
	sort.Strings(logs)
	return logs[len(logs)-1]
}

// TestDamagedSegmentRecovered: after a crash, a segment whose tail was cut, or whose
// last batch has a flipped byte, is recovered at restart to the last valid batch; the
// broker logs a WARN line saying what was dropped, and the records before the damage
// are all there.
func TestDamagedSegmentRecovered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string, size int64) error
	}{
		{"torn tail", func(path string, size int64) error { return os.Truncate(path, size-7) }},
		{"flipped byte", func(path string, size int64) error {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			b := make([]byte, 1)
			if _, err := f.ReadAt(b, size-5); err != nil {
				return err
			}
			b[0] ^= 0x40
			_, err = f.WriteAt(b, size-5)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, addr := t.TempDir(), freeAddr(t)
			p := serve(t, dir, addr)
			const topic = "dmg"
			createTopic(t, addr, topic, 1)
			cl := client(t, addr, kgo.DefaultProduceTopic(topic))
			// Ten batches of ten records: offsets 0–99, the last batch 90–99.
			for b := 0; b < 10; b++ {
				recs := make([]*kgo.Record, 10)
				for i := range recs {
					recs[i] = &kgo.Record{Value: []byte(fmt.Sprint(b*10 + i))}
				}
				if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cl.Close()
			p.kill9(t)
			seg := newestLog(t, dir, topic)
			st, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(seg, st.Size()); err != nil {
				t.Fatal(err)
			}
			p2 := serve(t, dir, addr)
			var warn string
			for _, line := range strings.Split(p2.stderr.String(), "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, filepath.Base(seg)) && strings.Contains(line, "bytes=") {
					warn = line
				}
			}
			if warn == "" {
				t.Fatalf("no WARN line about the dropped bytes of %s:\n%s", filepath.Base(seg), p2.stderr.String())
			}
			t.Logf("broker said: %s", warn)
			got := readAll(t, addr, topic)
			if len(got) != 90 {
				t.Fatalf("recovered %d records, want 90 (the batches before the damaged one)", len(got))
			}
			for o := int64(0); o < 90; o++ {
				if got[partOffset{0, o}] != fmt.Sprint(o) {
					t.Fatalf("offset %d: %q", o, got[partOffset{0, o}])
				}
			}
		})
	}
}

// TestServeBadConfig: `kmirror serve --config` with an invalid value exits non-zero
// with a one-line error naming the key.
func TestServeBadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(cfg, []byte("log.dirs="+dir+"\nlog.retention.ms=forever\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kmirrorBin(t), "serve", "--config", cfg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("exit: %v, want a non-zero exit", err)
	}
	out := strings.TrimSpace(stderr.String())
	if strings.Count(out, "\n") != 0 || !strings.Contains(out, "log.retention.ms") {
		t.Fatalf("stderr %q: want one line naming log.retention.ms", out)
	}
}

// TestServeBusyPort: `kmirror serve` on a port in use exits non-zero with one line naming
// the listener, and writes nothing to its data directory (no new cluster ID).
func TestServeBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(kmirrorBin(t), "serve", "--listeners", "PLAINTEXT://"+ln.Addr().String(), "--log-dirs", data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("exit: %v, want a non-zero exit", err)
	}
	out := strings.TrimSpace(stderr.String())
	if strings.Count(out, "\n") != 0 || !strings.Contains(out, "address already in use") {
		t.Fatalf("stderr %q: want one line saying the address is in use", out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("data directory %s was created by a broker that could not bind", data)
	}
}
