package mirrorscli

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/node"
)

// childBrokerDir makes the test binary run a kmirror broker on that data directory and
// print its address, so that a test can kill it with SIGKILL.
const childBrokerDir = "KMIRROR_MIRRORS_TEST_CHILD_BROKER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childBrokerDir); dir != "" {
		cfg, err := config.NewValues(config.Broker, map[string]string{
			"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir,
			"offsets.topic.num.partitions": "4", "mirror.state.topic.num.partitions": "4",
		}, false)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		br, err := node.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(br.Addr())
		br.Serve()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBrokerKilledDuringRequest kills the destination broker (a child process, SIGKILL)
// while `--create` waits for its answer (the source accepts connections and never
// answers): the error says the broker closed the connection during the request and that
// the create may or may not have been applied, not "is SASL missing?".
func TestBrokerKilledDuringRequest(t *testing.T) {
	hole, err := net.Listen("tcp", "127.0.0.1:0") // a source that never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	contacted := make(chan struct{}, 1) // the broker is handling --create: it dialed the source
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, unanswered, until the test ends
			select {
			case contacted <- struct{}{}:
			default:
			}
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe)
	child.Env = append(os.Environ(), childBrokerDir+"="+t.TempDir())
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("child broker: %v", err)
	}
	addr = strings.TrimSpace(addr)

	type result struct {
		out, errOut string
		err         error
	}
	done := make(chan result, 1)
	path := writeFile(t, "bootstrap.servers="+hole.Addr().String()+"\n")
	go func() {
		out, errOut, err := runCmd(t, "--bootstrap-server", addr, "--create", "--mirror", "m", "--mirror-config", path)
		done <- result{out, errOut, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("--create answered before the kill: %v %q %q", r.err, r.out, r.errOut)
	case <-contacted:
	case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the broker never dialed the source for --create")
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("--create did not return after the kill")
	}
	want := "Error: " + addr + " closed the connection during the request (the broker may have stopped or restarted): the --create may or may not have been applied; check with --describe\n"
	if r.err == nil || r.errOut != want {
		t.Errorf("err %v, stderr %q, want %q", r.err, r.errOut, want)
	}
}

// TestSASLHintKept runs `--alter` (whose first request is DescribeConfigs) without SASL
// against a real Kafka-protocol broker that requires SASL (kfake) and closes the
// connection on the first request: the SASL hint stays, since it is plausible there.
func TestSASLHintKept(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, errOut, err := runCmd(t, "--bootstrap-server", c.ListenAddrs()[0], "--alter", "--mirror", "m", "--delete-config", "fetch.max.bytes")
	if err == nil || !strings.Contains(errOut, "is SASL missing?") || strings.Contains(errOut, "during the request") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("err %v, stderr %q", err, errOut)
	}
}
