package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/bench/internal/procinfo"
	"github.com/kmirror/kmirror/internal/kafkaproc"
)

// proc is a broker or MirrorMaker 2 process started by the benchmark.
type proc struct {
	name    string
	addr    string // PLAINTEXT listener, "" for MirrorMaker 2
	cmd     *exec.Cmd
	logPath string
	started time.Time
	startup time.Duration // process start → first successful Metadata response
	done    <-chan struct{}
}

// cpu returns the process's utime+stime in seconds from /proc/<pid>/stat.
func (p *proc) cpu() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// After "pid (comm) ", field 3 (state) is f[0]; utime is field 14, stime field 15.
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clockTicks
}

// clockTicks is USER_HZ (getconf CLK_TCK), 100 on Linux.
const clockTicks = 100

// peakRSSMB returns VmHWM of the process in MiB.
func (p *proc) peakRSSMB() float64 { return procinfo.PeakRSSMB(p.cmd.Process.Pid) }

// stop sends SIGTERM and waits (SIGKILL after 60 s).
func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func (p *proc) label() string     { return p.name }
func (p *proc) bootstrap() string { return p.addr }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func freeAddr() string {
	addr, err := kafkaproc.FreeAddr()
	if err != nil {
		fatalf("listen: %v", err)
	}
	return addr
}

// running are the processes started by launch or startKafka, killed by fatalf.
var running struct {
	sync.Mutex
	procs []*proc
}

func track(p *proc) *proc {
	running.Lock()
	defer running.Unlock()
	running.procs = append(running.procs, p)
	return p
}

// killRunning kills (SIGKILL) every process the benchmark started that still runs.
func killRunning() {
	running.Lock()
	defer running.Unlock()
	for _, p := range running.procs {
		if !p.exited() {
			p.cmd.Process.Kill()
		}
	}
}

func launch(name, addr, logPath string, cmd *exec.Cmd) *proc {
	logf, err := os.Create(logPath)
	if err != nil {
		fatalf("%v", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	done := make(chan struct{})
	p := &proc{name: name, addr: addr, cmd: cmd, logPath: logPath, done: done}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		fatalf("start %s: %v", name, err)
	}
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	return track(p)
}

// waitMetadata polls until the broker answers a Metadata request and records the
// start-up time (from process start).
func (p *proc) waitMetadata(limit time.Duration) {
	deadline := p.started.Add(limit)
	for {
		if p.exited() {
			fatalf("%s exited:\n%s", p.name, p.tail())
		}
		if kafkaproc.Ready(p.addr) {
			p.startup = time.Since(p.started)
			return
		}
		if time.Now().After(deadline) {
			fatalf("%s never answered Metadata:\n%s", p.name, p.tail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startKmirror runs `kmirror serve` with its defaults (no forced fsync) on dir, with a
// PLAINTEXT listener; extra are more `kmirror serve` arguments (e.g. --override k=v).
func startKmirror(bin, name, dir string, extra ...string) *proc {
	return startKmirrorListeners(bin, name, dir, nil, extra...)
}

// startKmirrorListeners is startKmirror with the listeners more ("NAME://host:port")
// after the PLAINTEXT one, which stays the proc's addr.
func startKmirrorListeners(bin, name, dir string, more []string, extra ...string) *proc {
	must(os.MkdirAll(dir, 0o755))
	addr := freeAddr()
	listeners := strings.Join(append([]string{"PLAINTEXT://" + addr}, more...), ",")
	cmd := exec.Command(bin, append([]string{"serve", "--listeners", listeners, "--log-dirs", filepath.Join(dir, "data"), "--log-level", "warn"}, extra...)...)
	p := launch(name, addr, filepath.Join(dir, "kmirror.log"), cmd)
	p.waitMetadata(60 * time.Second)
	return p
}

// kafkaJVM runs class from Apache Kafka's jars with the JVM options of Apache Kafka's
// kafka-run-class.sh (KAFKA_JVM_PERFORMANCE_OPTS) after a given heap (KAFKA_HEAP_OPTS).
func kafkaJVM(heap []string, class string, args ...string) *exec.Cmd {
	return kafkaJava.Command(context.Background(), jvmOpts(heap), class, args...)
}

// jvmOpts are heap followed by kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS.
func jvmOpts(heap []string) []string {
	return append(append([]string{}, heap...), "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")
}

// kafkaHeap is kafka-server-start.sh's default KAFKA_HEAP_OPTS.
var kafkaHeap = []string{"-Xmx1G", "-Xms1G"}

// mm2Heap is connect-mirror-maker.sh's default KAFKA_HEAP_OPTS.
var mm2Heap = []string{"-Xms256M", "-Xmx2G"}

// startKafka formats and runs a single-node KRaft Apache Kafka broker on dir with
// Kafka's defaults (no forced fsync) through internal/kafkaproc, as test/interop does.
// Formatting is not part of the measured start-up time.
func startKafka(name, dir string) *proc {
	b, err := kafkaproc.StartBroker(kafkaJava, kafkaproc.BrokerConfig{Dir: dir, JVM: jvmOpts(kafkaHeap), ToolJVM: jvmOpts([]string{"-Xmx256m"}), ReadyTimeout: 120 * time.Second})
	if err != nil {
		fatalf("%s: %v", name, err)
	}
	return track(&proc{name: name, addr: b.Addr, cmd: b.Cmd, logPath: b.LogPath, started: b.Started, startup: b.Startup, done: b.Done()})
}

// startMM2 runs MirrorMaker 2 in dedicated mode (org.apache.kafka.connect.mirror.MirrorMaker)
// with the given mm2.properties.
func startMM2(dir, props string) *proc {
	must(os.MkdirAll(dir, 0o755))
	conf := filepath.Join(dir, "mm2.properties")
	must(os.WriteFile(conf, []byte(props), 0o644))
	return launch("mm2", "", filepath.Join(dir, "mm2.log"), kafkaJVM(mm2Heap, "org.apache.kafka.connect.mirror.MirrorMaker", conf))
}

// perfDir, when set (-perf), makes profile() record `perf record -g` samples of a process.
var perfDir string

// profile starts `perf record` on p into perfDir/name.perf.data when -perf is set; the
// returned function stops it. Read the result with `perf report -i FILE`.
func profile(p *proc, name string) func() {
	if perfDir == "" {
		return func() {}
	}
	must(os.MkdirAll(perfDir, 0o755))
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(p.cmd.Process.Pid), "-o", filepath.Join(perfDir, name+".perf.data"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		fatalf("perf: %v", err)
	}
	return func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	}
}

// settle writes the page cache's dirty pages to disk (sync(2)) before a measured window,
// so that the kernel's writeback of the data an earlier run wrote (gigabytes, written
// back at the disk's pace and with the kernel's CPU) does not fall into this window and
// every engine and run starts from the same state.
func settle() {
	t := time.Now()
	syscall.Sync()
	if d := time.Since(t); d > time.Second {
		logf("sync: %.1f s of writeback before the next window", d.Seconds())
	}
}
