package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/bench/internal/procinfo"
)

// proc is a broker or MirrorMaker 2 process started by the benchmark.
type proc struct {
	name    string
	addr    string // PLAINTEXT listener, "" for MirrorMaker 2
	cmd     *exec.Cmd
	logPath string
	started time.Time
	startup time.Duration // process start → first successful Metadata response
	done    chan struct{}
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

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("listen: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func launch(name, addr, logPath string, cmd *exec.Cmd) *proc {
	logf, err := os.Create(logPath)
	if err != nil {
		fatalf("%v", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	p := &proc{name: name, addr: addr, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		fatalf("start %s: %v", name, err)
	}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	return p
}

// waitMetadata polls until the broker answers a Metadata request and records the
// start-up time (from process start).
func (p *proc) waitMetadata(limit time.Duration) {
	deadline := p.started.Add(limit)
	for {
		if p.exited() {
			fatalf("%s exited:\n%s", p.name, p.tail())
		}
		if c, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
			c.Close()
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RequestRetries(0))
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
				cancel()
				cl.Close()
				if err == nil {
					p.startup = time.Since(p.started)
					return
				}
			}
		}
		if time.Now().After(deadline) {
			fatalf("%s never answered Metadata:\n%s", p.name, p.tail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startKmirror runs `kmirror serve` with its defaults (no forced fsync) on dir.
func startKmirror(bin, name, dir string) *proc {
	must(os.MkdirAll(dir, 0o755))
	addr := freeAddr()
	cmd := exec.Command(bin, "serve", "--listeners", "PLAINTEXT://"+addr, "--log-dirs", filepath.Join(dir, "data"), "--log-level", "warn")
	p := launch(name, addr, filepath.Join(dir, "kmirror.log"), cmd)
	p.waitMetadata(60 * time.Second)
	return p
}

// kafkaJVM are the JVM options of Apache Kafka's kafka-run-class.sh
// (KAFKA_JVM_PERFORMANCE_OPTS) with a given heap (KAFKA_HEAP_OPTS).
func kafkaJVM(heap []string, class string, args ...string) *exec.Cmd {
	a := append([]string{}, heap...)
	a = append(a, "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+log4jConf, "-cp", filepath.Join(libsDir, "*"), class)
	return exec.Command("java", append(a, args...)...)
}

// kafkaHeap is kafka-server-start.sh's default KAFKA_HEAP_OPTS.
var kafkaHeap = []string{"-Xmx1G", "-Xms1G"}

// mm2Heap is connect-mirror-maker.sh's default KAFKA_HEAP_OPTS.
var mm2Heap = []string{"-Xms256M", "-Xmx2G"}

// startKafka formats and runs a single-node KRaft Apache Kafka broker on dir with
// Kafka's defaults (no forced fsync), as test/interop's harness does. Formatting is not
// part of the measured start-up time.
func startKafka(name, dir string) *proc {
	must(os.MkdirAll(dir, 0o755))
	addr := freeAddr()
	ctrl := freeAddr()
	props := strings.Join([]string{
		"process.roles=broker,controller",
		"node.id=1",
		"controller.quorum.bootstrap.servers=" + ctrl,
		"listeners=PLAINTEXT://" + addr + ",CONTROLLER://" + ctrl,
		"advertised.listeners=PLAINTEXT://" + addr,
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + filepath.Join(dir, "data"),
		"offsets.topic.replication.factor=1",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"group.initial.rebalance.delay.ms=0",
		"auto.create.topics.enable=false",
	}, "\n") + "\n"
	conf := filepath.Join(dir, "server.properties")
	must(os.WriteFile(conf, []byte(props), 0o644))
	uuid, err := kafkaJVM([]string{"-Xmx256m"}, "kafka.tools.StorageTool", "random-uuid").Output()
	if err != nil {
		fatalf("StorageTool random-uuid: %v", err)
	}
	if out, err := kafkaJVM([]string{"-Xmx256m"}, "kafka.tools.StorageTool", "format", "-t", strings.TrimSpace(string(uuid)), "-c", conf, "--standalone").CombinedOutput(); err != nil {
		fatalf("StorageTool format: %v\n%s", err, out)
	}
	p := launch(name, addr, filepath.Join(dir, "kafka.log"), kafkaJVM(kafkaHeap, "kafka.Kafka", conf))
	p.waitMetadata(120 * time.Second)
	return p
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

const log4jYAML = `Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
`
