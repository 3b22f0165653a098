package e2e

// Cluster Mirroring with the built binary (issue 4, done-when 4 and 7): two `kmirror
// serve` processes, the seed's `kmirror mirrors` commands as written, and the CLI's bad
// input.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/record"
)

// mirrorBrokers starts a source and a destination `kmirror serve` with a small
// __transaction_state.
func mirrorBrokers(t *testing.T) (src, dst *proc) {
	t.Helper()
	small := []string{"--override", "transaction.state.log.num.partitions=4", "--override", "offsets.topic.num.partitions=4",
		"--override", "mirror.state.topic.num.partitions=4"}
	src = serve(t, t.TempDir(), freeAddr(t), small...)
	dst = serve(t, t.TempDir(), freeAddr(t), small...)
	return src, dst
}

// mirrors runs `kmirror mirrors args...` and returns stdout, stderr and the exit code.
func mirrors(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kmirrorBin(t), append([]string{"mirrors"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("mirrors %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// mustMirrors runs `kmirror mirrors args...` and fails the test unless it exits 0.
func mustMirrors(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := mirrors(t, args...)
	if code != 0 {
		t.Fatalf("mirrors %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// portOnly turns 127.0.0.1:PORT into :PORT, the seed's spelling.
func portOnly(addr string) string { return addr[strings.LastIndex(addr, ":"):] }

// describeEntry is the part of `--describe --json` these tests read.
type describeEntry struct {
	Topic             string `json:"topic"`
	Partition         int32  `json:"partition"`
	DestinationOffset *int64 `json:"destination_offset"`
	Lag               *int64 `json:"lag"`
	State             string `json:"state"`
}

// waitLag0 polls `--describe --json` until every partition of the mirror is MIRRORING
// with lag 0 and its destination offset at the source's end offset.
func waitLag0(t *testing.T, dst, srcAddr, mirror string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		out := mustMirrors(t, "--bootstrap-server", dst, "--describe", "--json", "--mirror", mirror)
		var ds []describeEntry
		if err := json.Unmarshal([]byte(out), &ds); err != nil {
			t.Fatalf("--describe --json: %v\n%s", err, out)
		}
		ok := len(ds) > 0
		for _, d := range ds {
			if d.State != "MIRRORING" || d.Lag == nil || *d.Lag != 0 || d.DestinationOffset == nil ||
				*d.DestinationOffset != endOffset(t, srcAddr, d.Topic, d.Partition) {
				ok = false
			}
		}
		if ok {
			return
		}
		last = out
		if time.Now().After(deadline) {
			t.Fatalf("mirror %s never reached lag 0:\n%s", mirror, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endOffset is the read_uncommitted end offset (HW) of a partition.
func endOffset(t *testing.T, addr, topic string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), client(t, addr))
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ListOffsets %s-%d on %s: %v %+v", topic, partition, addr, err, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// rawBatches reads every record batch of a partition, read_uncommitted, from offset 0 to
// the end offset, with raw Fetch requests.
func rawBatches(t *testing.T, addr, topic string, partition int32) []record.Batch {
	t.Helper()
	cl := client(t, addr)
	end := endOffset(t, addr, topic, partition)
	var out []record.Batch
	for off := int64(0); off < end; {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes = 10, 4<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = partition, off, 4<<20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		kresp, err := cl.Request(context.Background(), fetchV12{req})
		if err != nil {
			t.Fatal(err)
		}
		rp := kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if rp.ErrorCode != 0 {
			t.Fatalf("fetch %s-%d at %d: %v", topic, partition, off, kerr.ErrorForCode(rp.ErrorCode))
		}
		data, n := rp.RecordBatches, 0
		for len(data) > 0 {
			b, rest, err := record.Next(data)
			if err != nil {
				break
			}
			data = rest
			if b.LastOffset() < off {
				continue
			}
			out = append(out, append(record.Batch(nil), b...))
			off = b.NextOffset()
			n++
		}
		if n == 0 {
			t.Fatalf("fetch %s-%d at %d below the end %d returned nothing", topic, partition, off, end)
		}
	}
	return out
}

// fetchV12 caps a Fetch at v12 (topics by name).
type fetchV12 struct{ *kmsg.FetchRequest }

func (fetchV12) MaxVersion() int16 { return 12 }

// consumeValues reads partition 0 of topic from the start until the record at offset
// last with the isolation level and returns the values.
func consumeValues(t *testing.T, addr, topic string, last int64, committed bool) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := client(t, addr, kgo.FetchIsolationLevel(iso), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s on %s: offset %d never read (got %v)", topic, addr, last, out)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume %s: %v", topic, err) })
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, string(r.Value))
			done = done || r.Offset >= last
		})
		if done {
			return out
		}
	}
}

func produceValues(t *testing.T, cl *kgo.Client, values ...string) {
	t.Helper()
	for _, v := range values {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
}

// TestMirrorSeedCommands is issue 4, done-when 4, with the built binary: the seed's
// create / add '.*' / remove commands as written (`--bootstrap-server :PORT`); after the
// remove the topic accepts writes from a new idempotent producer and a transactional
// producer, the transaction that was open on the source is aborted on the destination
// (read_committed sees none of its records, read_uncommitted sees them followed by the
// ABORT marker), and the data up to the failover point is identical on both sides.
func TestMirrorSeedCommands(t *testing.T) {
	src, dst := mirrorBrokers(t)
	createTopic(t, src.addr, "orders", 1)
	createTopic(t, src.addr, "events", 2)
	plain := client(t, src.addr, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceValues(t, plain, "o1", "o2", "o3")
	committed := client(t, src.addr, kgo.TransactionalID("src-committed"), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := committed.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, committed, "c1", "c2")
	if err := committed.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// a transaction left open on the source: its records are mirrored, its end never is
	open := client(t, src.addr, kgo.TransactionalID("src-open"), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(5*time.Minute))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, open, "open1", "open2")
	ev := client(t, src.addr, kgo.DefaultProduceTopic("events"), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	for i := 0; i < 200; i++ {
		ev.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("e%d", i))}, nil)
	}
	if err := ev.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	f := filepath.Join(t.TempDir(), "my-mirror.properties")
	if err := os.WriteFile(f, []byte("bootstrap.servers=localhost"+portOnly(src.addr)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := portOnly(dst.addr)
	mustMirrors(t, "--bootstrap-server", d, "--create", "--mirror", "my-mirror", "--mirror-config", f)
	mustMirrors(t, "--bootstrap-server", d, "--add", "--topic", ".*", "--mirror", "my-mirror")
	waitLag0(t, d, src.addr, "my-mirror")

	// the failover point: the source's end offsets now
	failover := map[string]map[int32]int64{"orders": {0: endOffset(t, src.addr, "orders", 0)},
		"events": {0: endOffset(t, src.addr, "events", 0), 1: endOffset(t, src.addr, "events", 1)}}
	for topic, parts := range failover {
		for p := range parts {
			want, got := rawBatches(t, src.addr, topic, p), rawBatches(t, dst.addr, topic, p)
			if len(got) < len(want) {
				t.Fatalf("%s-%d: %d batches on the source, %d on the destination", topic, p, len(want), len(got))
			}
			for i := range want {
				if !bytes.Equal(want[i], got[i]) {
					t.Fatalf("%s-%d: batch %d at offset %d differs", topic, p, i, want[i].BaseOffset())
				}
			}
		}
	}
	// read-only until the remove
	if err := client(t, dst.addr, kgo.DefaultProduceTopic("orders")).ProduceSync(context.Background(),
		&kgo.Record{Value: []byte("refused")}).FirstErr(); !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("produce to the mirror topic: %v", err)
	}

	out := mustMirrors(t, "--bootstrap-server", d, "--remove", "--topic", ".*", "--mirror", "my-mirror")
	if !strings.Contains(out, "orders") || !strings.Contains(out, "events") {
		t.Fatalf("--remove output: %s", out)
	}

	// what the failover wrote after the mirrored data: the ABORT marker of the open
	// transaction, then MIRROR_PID_RESET
	ordersEnd := failover["orders"][0]
	tail := rawBatches(t, dst.addr, "orders", 0)
	var after []record.Batch
	for _, b := range tail {
		if b.BaseOffset() >= ordersEnd {
			after = append(after, b)
		}
	}
	var openPID int64 = -1
	for _, b := range tail {
		if b.BaseOffset() < ordersEnd && b.IsTransactional() && !b.IsControl() {
			openPID = b.ProducerID() // the last transactional data batch is the open one
		}
	}
	if len(after) != 2 {
		t.Fatalf("%d batches after the failover point, want the ABORT marker and MIRROR_PID_RESET", len(after))
	}
	if typ, err := after[0].ControlType(); err != nil || typ != record.ControlAbort || after[0].ProducerID() != openPID {
		t.Fatalf("first batch after the failover point: control type %d (%v), producer %d, want ABORT for %d", typ, err, after[0].ProducerID(), openPID)
	}
	if typ, err := after[1].ControlType(); err != nil || typ != record.ControlMirrorPIDReset {
		t.Fatalf("second batch after the failover point: control type %d (%v), want MIRROR_PID_RESET", typ, err)
	}

	// a new idempotent producer and a transactional producer write to the topic
	idem := client(t, dst.addr, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceValues(t, idem, "n1", "n2")
	txn := client(t, dst.addr, kgo.TransactionalID("dst-txn"), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceValues(t, txn, "t1", "t2")
	if err := txn.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
		t.Fatalf("commit on the failed-over topic: %v", err)
	}
	produceValues(t, idem, "n3")
	last := endOffset(t, dst.addr, "orders", 0) - 1
	rc := consumeValues(t, dst.addr, "orders", last, true)
	if want := "o1,o2,o3,c1,c2,n1,n2,t1,t2,n3"; strings.Join(rc, ",") != want {
		t.Fatalf("read_committed on the destination: %v, want %s", rc, want)
	}
	ru := consumeValues(t, dst.addr, "orders", last, false)
	if want := "o1,o2,o3,c1,c2,open1,open2,n1,n2,t1,t2,n3"; strings.Join(ru, ",") != want {
		t.Fatalf("read_uncommitted on the destination: %v, want %s", ru, want)
	}
	// the other topic is writable too
	produceValues(t, client(t, dst.addr, kgo.DefaultProduceTopic("events")), "after-failover")
}

// TestMirrorsBadInput is issue 4, done-when 7, with the built binary against real
// brokers: each case exits non-zero with exactly one `Error:` line naming the problem.
func TestMirrorsBadInput(t *testing.T) {
	src, dst := mirrorBrokers(t)
	createTopic(t, src.addr, "orders", 1)
	produceValues(t, client(t, src.addr, kgo.DefaultProduceTopic("orders")), "x")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.properties")
	unreachable := filepath.Join(dir, "unreachable.properties")
	os.WriteFile(good, []byte("bootstrap.servers="+src.addr+"\n"), 0o644)
	os.WriteFile(unreachable, []byte("bootstrap.servers=127.0.0.1:1\n"), 0o644)
	d := dst.addr
	mustMirrors(t, "--bootstrap-server", d, "--create", "--mirror", "my-mirror", "--mirror-config", good)
	mustMirrors(t, "--bootstrap-server", d, "--add", "--topic", "orders", "--mirror", "my-mirror")

	cases := []struct {
		name string
		args []string
		want string // the Error: line contains this
	}{
		{"two actions", []string{"--list", "--describe"}, "only one action is allowed, got --list and --describe"},
		{"missing --mirror", []string{"--add", "--topic", "orders"}, "--start requires --mirror"},
		{"unknown mirror", []string{"--add", "--topic", "orders", "--mirror", "nope"}, "UNKNOWN_CLUSTER_MIRROR: cluster mirror nope does not exist"},
		{"invalid regex", []string{"--add", "--topic", "orders-[", "--mirror", "my-mirror"}, `invalid regex "orders-["`},
		{"unreachable source", []string{"--create", "--mirror", "m2", "--mirror-config", unreachable}, "NETWORK_EXCEPTION: cannot reach the source cluster at 127.0.0.1:1"},
		{"duplicate mirror", []string{"--create", "--mirror", "my-mirror", "--mirror-config", good}, "CLUSTER_MIRROR_ALREADY_EXISTS: cluster mirror my-mirror already exists"},
		{"delete with active topics", []string{"--delete", "--mirror", "my-mirror"}, "CLUSTER_MIRROR_NOT_EMPTY: cluster mirror my-mirror has topics that are not STOPPED: orders"},
	}
	for _, c := range cases {
		out, errOut, code := mirrors(t, append([]string{"--bootstrap-server", d}, c.args...)...)
		var errLines []string
		for _, l := range strings.Split(errOut, "\n") {
			if strings.HasPrefix(l, "Error:") {
				errLines = append(errLines, l)
			}
		}
		if code == 0 || len(errLines) != 1 || !strings.Contains(errLines[0], c.want) {
			t.Errorf("%s: exit %d, Error lines %q (want one containing %q)\nstdout: %s", c.name, code, errLines, c.want, out)
		}
	}
	// nothing was changed by the refused commands
	out := mustMirrors(t, "--bootstrap-server", d, "--list")
	if strings.Contains(out, "m2") || !strings.Contains(out, "my-mirror") {
		t.Fatalf("--list after bad input: %s", out)
	}
}
