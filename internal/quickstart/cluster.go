package quickstart

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/node"
)

// ClusterProps are the broker settings of both quickstart clusters on top of the
// embedded defaults: a 1 s mirror metadata refresh (spec §9) so that the drill does not
// wait 30 s for group offsets, no initial rebalance delay, and fewer partitions for the
// internal topics so that a laptop starts them in a blink.
func ClusterProps(port int, dir string) map[string]string {
	return map[string]string{
		"node.id":                             "1",
		"listeners":                           "PLAINTEXT://localhost:" + strconv.Itoa(port),
		"log.dirs":                            dir,
		"group.initial.rebalance.delay.ms":    "0",
		"offsets.topic.num.partitions":        "10",
		"mirror.state.topic.num.partitions":   "10",
		"mirror.metadata.refresh.interval.ms": "1000",
	}
}

// cluster is one quickstart cluster: an in-process broker or a child `kmirror serve`.
type cluster struct {
	name string
	port int
	dir  string // data directory (log.dirs)

	// in process
	b    *broker.Broker
	done chan struct{}

	// child process
	cmd    *exec.Cmd
	exited chan struct{}

	stopOnce sync.Once
}

func (c *cluster) addr() string { return "localhost:" + strconv.Itoa(c.port) }

// startInProcess runs a broker in this process (node.New), its
// log written to <dir>.log.
func startInProcess(name string, port int, dir string) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cfg, err := config.NewValues(config.Broker, ClusterProps(port, dir), false)
	if err != nil {
		logf.Close()
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b, err := node.New(cfg, logger)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s cluster: %w", name, err)
	}
	c := &cluster{name: name, port: port, dir: dir, b: b, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer logf.Close()
		_ = b.Serve()
	}()
	return c, nil
}

// startChild runs `<exe> serve --config <dir>.properties` as a child process with its
// output in <dir>.log and waits until it answers Metadata.
func startChild(ctx context.Context, name string, port int, dir, exe string, env []string) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	props := ClusterProps(port, dir)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s=%s\n", k, props[k])
	}
	propsFile := dir + ".properties"
	if err := os.WriteFile(propsFile, []byte(sb.String()), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "serve", "--config", propsFile)
	cmd.Stdout, cmd.Stderr, cmd.Env = logf, logf, env
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s cluster: %w", name, err)
	}
	c := &cluster{name: name, port: port, dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		defer close(c.exited)
		defer logf.Close()
		_ = cmd.Wait()
	}()
	if err := c.waitReady(ctx); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// waitReady polls Metadata until the child answers, for at most 30 s.
func (c *cluster) waitReady(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addr()), kgo.DialTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("%s cluster exited at start; see %s.log", c.name, c.dir)
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s cluster did not answer on %s within 30 s: %v", c.name, c.addr(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill sends SIGKILL to a child cluster and reaps it: no flush, no checkpoint, exactly
// like a machine that loses power after the page cache reached the disk.
func (c *cluster) kill() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// stop shuts a cluster down cleanly: an in-process broker through Shutdown (in-flight
// requests answered, logs flushed, checkpoints written), a child through SIGTERM.
func (c *cluster) stop() { c.stopOnce.Do(c.doStop) }

func (c *cluster) doStop() {
	if c.b != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.b.Shutdown(ctx)
		<-c.done
		return
	}
	if c.cmd != nil {
		_ = c.cmd.Process.Signal(os.Interrupt)
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			c.kill()
		}
	}
}

// portFree reports whether localhost:port can be bound.
func portFree(port int) bool {
	l, err := net.Listen("tcp", "localhost:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// freePort returns a port the kernel just handed out on localhost.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// dataDirs returns <data>/source and <data>/destination.
func dataDirs(data string) (src, dst string) {
	return filepath.Join(data, "source"), filepath.Join(data, "destination")
}
