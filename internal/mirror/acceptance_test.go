package mirror

// Acceptance tests of issue 4 ("Done when") that run on real kmirror brokers inside the
// test process (kbroker, the in-package equivalent of internal/brokertest) and on
// franz-go's kfake as a foreign source. The seed's commands and the CLI's bad input run
// against the built binary in test/e2e/mirror_test.go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	mirrorscli "github.com/kmirror/kmirror/internal/cli/mirrors"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
)

// accCompare fails unless every partition of topic holds the same (offset, batch bytes)
// list on src and dst, read with raw READ_UNCOMMITTED Fetch requests from both brokers,
// and returns the number of batches compared.
func accCompare(t *testing.T, what string, src, dst *kgo.Client, topic string, partitions int32) int {
	t.Helper()
	n := 0
	for p := int32(0); p < partitions; p++ {
		want := sourceBatches(t, src, topic, p)
		sameBatches(t, fmt.Sprintf("%s: %s-%d", what, topic, p), want, sourceBatches(t, dst, topic, p))
		n += len(want)
	}
	return n
}

// TestAcceptanceByteIdentity50k is issue 4, done-when 1 on two kmirror brokers: 50,000
// records from idempotent and plain producers with every codec, half of them with
// headers, mirrored; per partition the (offset, batch bytes) lists read from both brokers
// are identical and the topic IDs are equal, also after both brokers are bounced (spec
// section 2).
func TestAcceptanceByteIdentity50k(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	const parts = 3
	createTopicOn(t, a.client(), "orders", parts)
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	total := 0
	for i, codec := range codecs {
		for _, idempotent := range []bool{true, false} {
			opts := []kgo.Opt{kgo.DefaultProduceTopic("orders"), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(time.Millisecond)}
			if !idempotent {
				opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
			}
			cl := a.client(opts...)
			recs := make([]*kgo.Record, 5000)
			for j := range recs {
				recs[j] = &kgo.Record{Key: []byte(fmt.Sprintf("k%d", j%101)), Value: []byte(fmt.Sprintf("v-%d-%d-%v", i, j, idempotent))}
				if j%2 == 0 {
					recs[j].Headers = []kgo.RecordHeader{{Key: "codec", Value: []byte{byte(i)}}, {Key: "n", Value: []byte(fmt.Sprint(j))}}
				}
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cl.Close()
			total += len(recs)
		}
	}
	if total != 50000 {
		t.Fatalf("produced %d records", total)
	}
	src := a.client()
	eb := b.env()
	eb.createMirror("m1", a.b.Addr())
	eb.startTopics("m1", ".*")
	eb.waitCaughtUp(src, "m1", "orders")

	dst := b.client()
	var sum int64
	for _, end := range sourceEnds(t, dst, "orders") {
		sum += end
	}
	if sum != 50000 {
		t.Fatalf("destination holds %d offsets, want 50000", sum)
	}
	n := accCompare(t, "mirrored", src, dst, "orders", parts)
	srcID, dstID := sourceTopicID(t, src, "orders"), sourceTopicID(t, dst, "orders")
	if srcID != dstID {
		t.Fatalf("topic IDs differ: source %x, destination %x", srcID, dstID)
	}

	// bounce both clusters: nothing changes, mirroring goes on
	b.stop()
	a.stop()
	a.start()
	b.start()
	src, dst = a.client(), b.client()
	b.env().waitCaughtUp(src, "m1", "orders")
	if got := accCompare(t, "after bouncing both brokers", src, dst, "orders", parts); got != n {
		t.Fatalf("%d batches before the bounce, %d after", n, got)
	}
	if sourceTopicID(t, src, "orders") != srcID || sourceTopicID(t, dst, "orders") != srcID {
		t.Fatal("topic IDs changed across the bounce")
	}
}

// accRecord is what a consumer sees of one record.
type accRecord struct {
	partition int32
	offset    int64
	key, val  string
	headers   string
}

// accConsume reads partition 0 of topic from the start with the isolation level until the
// record at offset last, and returns what it saw.
func accConsume(t *testing.T, addr, topic string, last int64, committed bool) []accRecord {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(iso),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var out []accRecord
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s on %s: never reached offset %d (got %d records)", topic, addr, last, len(out))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume %s: %v", topic, err) })
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			var h strings.Builder
			for _, x := range r.Headers {
				fmt.Fprintf(&h, "%s=%x;", x.Key, x.Value)
			}
			out = append(out, accRecord{r.Partition, r.Offset, string(r.Key), string(r.Value), h.String()})
			done = done || r.Offset >= last
		})
		if done {
			return out
		}
	}
}

func sameRecords(t *testing.T, what string, want, got []accRecord) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d records on the source, %d on the destination", what, len(want), len(got))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: record %d: source %+v, destination %+v", what, i, want[i], got[i])
		}
	}
}

// TestAcceptanceGapsAndTransactions is issue 4, done-when 2: a kfake source holds a topic
// compacted by kfake and a topic written by transactional producers (committed and
// aborted transactions, and plain records between them). The destination offsets equal
// the source's, gaps included, and read_committed and read_uncommitted consumers see the
// same records on both sides.
func TestAcceptanceGapsAndTransactions(t *testing.T) {
	c, src := newKfake(t)
	addrs := c.ListenAddrs()
	for _, topic := range []string{"compacted", "txns"} {
		req := kmsgCreateTopic(topic, 1)
		if topic == "compacted" {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "cleanup.policy", kmsg.StringPtr("compact")
			req.Topics[0].Configs = append(req.Topics[0].Configs, cfg)
		}
		if resp, err := req.RequestWith(context.Background(), src); err != nil || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create %s: %v %+v", topic, err, resp)
		}
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("compacted"))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	for i := 0; i < 80; i++ { // one batch per record, keys overwritten between unique ones
		key := fmt.Sprintf("key-%d", i%4)
		if i%9 == 0 {
			key = fmt.Sprintf("once-%d", i)
		}
		r := &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("v%d", i)), Headers: []kgo.RecordHeader{{Key: "i", Value: []byte{byte(i)}}}}
		if err := pcl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.Compact()
	compacted := sourceBatches(t, src, "compacted", 0)
	gaps := 0
	for i := 1; i < len(compacted); i++ {
		if compacted[i].offset != record.Batch(compacted[i-1].data).NextOffset() {
			gaps++
		}
	}
	if gaps == 0 || compacted[0].offset == 0 && gaps < 2 {
		t.Fatalf("kfake left no gaps in the compacted topic (%d batches)", len(compacted))
	}

	yes, no := true, false
	produce(t, addrs, "txns", 10)
	tx1 := txnClient(t, addrs, "acc-tx-1", "txns")
	txnProduce(t, tx1, 12, &yes)
	txnProduce(t, tx1, 9, &no)
	tx2 := txnClient(t, addrs, "acc-tx-2", "txns")
	txnProduce(t, tx2, 7, &no)
	produce(t, addrs, "txns", 5)
	txnProduce(t, tx2, 6, &yes)
	txnProduce(t, tx1, 4, &no)
	produce(t, addrs, "txns", 3) // the last offset is a plain record both isolation levels see

	b := startBroker(t)
	eb := b.env()
	eb.createMirror("m1", addrs[0])
	eb.startTopics("m1", "compacted", "txns")
	eb.waitCaughtUp(src, "m1", "compacted")
	eb.waitCaughtUp(src, "m1", "txns")
	dst := b.client()
	for _, topic := range []string{"compacted", "txns"} {
		accCompare(t, "gaps and transactions", src, dst, topic, 1)
		last := sourceEnds(t, src, topic)[0] - 1
		for _, committed := range []bool{false, true} {
			what := fmt.Sprintf("%s read_committed=%v", topic, committed)
			want := accConsume(t, addrs[0], topic, last, committed)
			sameRecords(t, what, want, accConsume(t, b.b.Addr(), topic, last, committed))
			if topic == "txns" {
				// 10 + 12 + 9 + 7 + 5 + 6 + 4 + 3 records; committed: the aborted 9 + 7 + 4 go
				if n := map[bool]int{false: 56, true: 36}[committed]; len(want) != n {
					t.Fatalf("%s: %d records, want %d", what, len(want), n)
				}
			}
		}
	}
}

// TestAcceptanceReadOnly is issue 4, done-when 3, over the wire: on a mirror topic,
// Produce from franz-go (non-retriable POLICY_VIOLATION; the raw response names
// READ_ONLY_TOPIC) and from kcat is refused and nothing is appended; DeleteRecords,
// DeleteTopics and CreatePartitions are refused with POLICY_VIOLATION and
// INVALID_CLUSTER_MIRROR_STATES in the message where the response has one; franz-go and
// kcat keep working against the broker, whose ApiVersions lists the mirror keys.
func TestAcceptanceReadOnly(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	createTopicOn(t, a.client(), "ro", 1)
	acl := a.client(kgo.DefaultProduceTopic("ro"))
	if err := acl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("mirrored")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	eb := b.env()
	eb.createMirror("m1", a.b.Addr())
	eb.startTopics("m1", "ro")
	eb.waitCaughtUp(a.client(), "m1", "ro")
	dst := b.client()
	leo := func() int64 { return sourceEnds(t, dst, "ro")[0] }
	before := leo()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// ApiVersions lists the mirror keys next to the standard ones
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, dst)
	if err != nil || av.ErrorCode != 0 {
		t.Fatalf("ApiVersions: %v %+v", err, av)
	}
	keys := map[int16]bool{}
	for _, k := range av.ApiKeys {
		keys[k.ApiKey] = true
	}
	for _, req := range []kmsg.Request{&mirrorproto.CreateClusterMirrorRequest{}, mirrorproto.NewStartMirrorTopicsRequest(),
		mirrorproto.NewStopMirrorTopicsRequest(), &mirrorproto.ListClusterMirrorsRequest{}, &mirrorproto.DescribeClusterMirrorsRequest{},
		mirrorproto.NewPauseMirrorTopicsRequest(), mirrorproto.NewResumeMirrorTopicsRequest(), mirrorproto.NewDeleteClusterMirrorRequest(),
		&mirrorproto.RecoverMirrorTopicsRequest{}} {
		if !keys[req.Key()] {
			t.Fatalf("ApiVersions does not list the mirror key %d", req.Key())
		}
	}
	if !keys[int16(kmsg.Produce)] || !keys[int16(kmsg.Fetch)] {
		t.Fatal("ApiVersions lost the standard keys")
	}

	// franz-go: a non-retriable POLICY_VIOLATION
	for _, opts := range [][]kgo.Opt{nil, {kgo.DisableIdempotentWrite()}} {
		pcl := b.client(append([]kgo.Opt{kgo.DefaultProduceTopic("ro")}, opts...)...)
		err := pcl.ProduceSync(ctx, &kgo.Record{Value: []byte("refused")}).FirstErr()
		if !errors.Is(err, kerr.PolicyViolation) || kerr.IsRetriable(err) {
			t.Fatalf("franz-go produce to a mirror topic: %v", err)
		}
	}
	// the raw Produce response carries the READ_ONLY_TOPIC message
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "ro"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = record.Build(record.BatchHeader{Timestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
		[]record.KV{{Value: []byte("raw")}})
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	presp, err := preq.RequestWith(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	rp := presp.Topics[0].Partitions[0]
	if rp.ErrorCode != kerr.PolicyViolation.Code || rp.ErrorMessage == nil || !strings.HasPrefix(*rp.ErrorMessage, "READ_ONLY_TOPIC: ") {
		t.Fatalf("raw produce: %v %q", kerr.ErrorForCode(rp.ErrorCode), strOf(rp.ErrorMessage))
	}
	// kcat
	kcat, kcatErr := exec.LookPath("kcat")
	if kcatErr == nil {
		cmd := exec.CommandContext(ctx, kcat, "-b", b.b.Addr(), "-P", "-t", "ro", "-X", "message.timeout.ms=5000")
		cmd.Stdin = strings.NewReader("from-kcat\n")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(strings.ToLower(string(out)), "policy violation") {
			t.Fatalf("kcat produce to a mirror topic was not refused with a policy violation: %s", out)
		}
	} else {
		t.Log("kcat not installed: kcat checks skipped (make deps installs it)")
	}
	if got := leo(); got != before {
		t.Fatalf("refused produces appended: LEO %d → %d", before, got)
	}

	// DeleteRecords (no message in the response)
	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "ro"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Offset = -1
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics = append(dr.Topics, drt)
	drResp, err := dr.RequestWith(ctx, dst)
	if err != nil || drResp.Topics[0].Partitions[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Fatalf("DeleteRecords on a mirror topic: %v %+v", err, drResp)
	}
	// DeleteTopics
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("ro")
	dt.Topics = append(dt.Topics, dtt)
	dt.TopicNames = []string{"ro"}
	dtResp, err := dt.RequestWith(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	if r := dtResp.Topics[0]; r.ErrorCode != kerr.PolicyViolation.Code || r.ErrorMessage == nil || !strings.HasPrefix(*r.ErrorMessage, "INVALID_CLUSTER_MIRROR_STATES: ") {
		t.Fatalf("DeleteTopics on a mirror topic: %v %q", kerr.ErrorForCode(r.ErrorCode), strOf(r.ErrorMessage))
	}
	// CreatePartitions
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "ro", 2
	cp.Topics = append(cp.Topics, cpt)
	cp.TimeoutMillis = 5000
	cpResp, err := cp.RequestWith(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	if r := cpResp.Topics[0]; r.ErrorCode != kerr.PolicyViolation.Code || r.ErrorMessage == nil || !strings.HasPrefix(*r.ErrorMessage, "INVALID_CLUSTER_MIRROR_STATES: ") {
		t.Fatalf("CreatePartitions on a mirror topic: %v %q", kerr.ErrorForCode(r.ErrorCode), strOf(r.ErrorMessage))
	}
	if got := leo(); got != before {
		t.Fatalf("LEO moved: %d → %d", before, got)
	}
	if _, err := b.b.Log("ro", 0); err != nil {
		t.Fatalf("the mirror topic is gone: %v", err)
	}

	// franz-go keeps working on other topics of the same broker, and on the mirror topic
	// for reads
	createTopicOn(t, dst, "plain", 1)
	pcl := b.client(kgo.DefaultProduceTopic("plain"))
	if err := pcl.ProduceSync(ctx, &kgo.Record{Value: []byte("franz")}).FirstErr(); err != nil {
		t.Fatalf("franz-go produce to a plain topic: %v", err)
	}
	if got := accConsume(t, b.b.Addr(), "ro", 0, true); len(got) != 1 || got[0].val != "mirrored" {
		t.Fatalf("franz-go consume of the mirror topic: %+v", got)
	}
	if kcatErr != nil {
		return
	}
	kcatRun := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", b.b.Addr()}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, stderr.String())
		}
		return stdout.String()
	}
	if md := kcatRun("", "-L", "-t", "ro"); !strings.Contains(md, `topic "ro" with 1 partitions`) {
		t.Fatalf("kcat -L: %s", md)
	}
	kcatRun("from-kcat\n", "-P", "-t", "plain")
	if got := kcatRun("", "-C", "-t", "plain", "-o", "beginning", "-e", "-q", "-f", "%o:%s\n"); got != "0:franz\n1:from-kcat\n" {
		t.Fatalf("kcat consume of plain: %q", got)
	}
	if got := kcatRun("", "-C", "-t", "ro", "-o", "beginning", "-e", "-q", "-f", "%o:%s\n"); got != "0:mirrored\n" {
		t.Fatalf("kcat consume of the mirror topic: %q", got)
	}
}

// accCLI runs `kmirror mirrors args...` in-process against addr and returns stdout; it
// fails the test when the command fails.
func accCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	cmd := mirrorscli.NewCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"--bootstrap-server", addr}, args...))
	if err := cmd.Execute(); err != nil {
		t.Fatalf("mirrors %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

// failedRows returns the rows of `--describe --failed` as whitespace-separated fields,
// without the header.
func failedRows(t *testing.T, addr, mirror string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(accCLI(t, addr, "--describe", "--failed", "--mirror", mirror)), "\n")
	if len(lines) == 0 || strings.Join(strings.Fields(lines[0]), " ") != "MIRROR TOPIC PARTITION RETRY ERROR" {
		t.Fatalf("--describe --failed header: %q", lines)
	}
	var out [][]string
	for _, l := range lines[1:] {
		out = append(out, strings.Fields(l))
	}
	return out
}

// TestAcceptanceFailedDescribeRecover is issue 4, done-when 6 (failures): a deleted source
// topic shows as NonRetryable under `kmirror mirrors --describe --failed` (the real
// command against the real broker); a partition whose retries are exhausted shows n/n and
// `--recover` restarts it, after which it catches up byte for byte.
func TestAcceptanceFailedDescribeRecover(t *testing.T) {
	c, src := newKfake(t, kfake.SeedTopics(1, "gone", "flaky"))
	addrs := c.ListenAddrs()
	produce(t, addrs, "gone", 10)
	produce(t, addrs, "flaky", 10)
	b := startBroker(t)
	addr := b.b.Addr()
	eb := b.env()
	eb.createMirror("m1", addrs[0], "fetch.wait.max.ms", "50") // quick retry rounds
	eb.startTopics("m1", "gone", "flaky")
	eb.waitCaughtUp(src, "m1", "gone")
	eb.waitCaughtUp(src, "m1", "flaky")
	if rows := failedRows(t, addr, "m1"); len(rows) != 0 {
		t.Fatalf("failed rows while healthy: %v", rows)
	}

	// every fetch of flaky fails until the fault is removed: retries run out
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "flaky", Err: kerr.CorruptMessage, Count: -1})
	produce(t, addrs, "flaky", 10)
	maxA := fastConfig().RetryMaxAttempts
	eventually(t, func() string { return fmt.Sprintf("flaky: %+v", eb.describe("m1", "flaky")) }, func() bool {
		d := eb.describe("m1", "flaky")[0]
		return d.State == mirrorproto.StateFailed && d.RetryAttempt >= maxA
	})
	// the source topic gone is deleted
	req := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("gone")
	req.Topics = append(req.Topics, dt)
	req.TopicNames = []string{"gone"}
	if _, err := req.RequestWith(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	eb.waitState("m1", "gone", mirrorproto.StateFailed)

	rows := failedRows(t, addr, "m1")
	want := [][]string{
		{"m1", "flaky", "0", fmt.Sprintf("%d/%d", maxA, maxA)},
		{"m1", "gone", "0", "NonRetryable", "The", "source", "topic", "is", "deleted."},
	}
	if len(rows) != 2 || strings.Join(rows[0][:4], " ") != strings.Join(want[0], " ") || strings.Join(rows[1], " ") != strings.Join(want[1], " ") {
		t.Fatalf("--describe --failed rows: %q, want %q", rows, want)
	}

	// --recover: flaky starts again and catches up; gone fails again, still NonRetryable
	h.Remove()
	before := eb.stateEpoch("flaky", 0)
	accCLI(t, addr, "--recover", "--mirror", "m1", "--topics", "flaky")
	eb.waitCaughtUp(src, "m1", "flaky")
	if got := eb.stateEpoch("flaky", 0); got < before+2 {
		t.Fatalf("flaky was not recovered through LOG_ALIGNMENT: state epoch %d → %d", before, got)
	}
	sameBatches(t, "flaky-0", sourceBatches(t, src, "flaky", 0), sourceBatches(t, b.client(), "flaky", 0))
	rows = failedRows(t, addr, "m1")
	if len(rows) != 1 || rows[0][1] != "gone" || rows[0][3] != "NonRetryable" {
		t.Fatalf("--describe --failed after --recover: %q", rows)
	}
}

// accProducer writes numbered records to topic on addr until stopped, retrying through
// broker restarts; it returns the number of acknowledged records.
type accProducer struct {
	stop  chan struct{}
	done  chan struct{}
	acked atomic.Int64
	err   atomic.Value
}

func startAccProducer(t *testing.T, addr, topic string) *accProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordDeliveryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p := &accProducer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cl.Close()
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			recs := make([]*kgo.Record, 20)
			for j := range recs {
				recs[j] = &kgo.Record{Key: []byte(fmt.Sprint(j)), Value: []byte(fmt.Sprintf("live-%d-%d", i, j))}
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				p.err.Store(err)
				return
			}
			p.acked.Add(int64(len(recs)))
		}
	}()
	t.Cleanup(func() { p.finish() })
	return p
}

func (p *accProducer) finish() error {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	if err, _ := p.err.Load().(error); err != nil {
		return err
	}
	return nil
}

// waitAcked waits until the producer has n more acknowledged records than now.
func (p *accProducer) waitAcked(t *testing.T, n int64) {
	t.Helper()
	target := p.acked.Load() + n
	eventually(t, func() string {
		return fmt.Sprintf("producer at %d acks, want %d (err %v)", p.acked.Load(), target, p.err.Load())
	},
		func() bool { return p.acked.Load() >= target || p.err.Load() != nil })
	if err, _ := p.err.Load().(error); err != nil {
		t.Fatalf("producer: %v", err)
	}
}

// TestAcceptanceRestartsWhileMirroring is issue 4, done-when 6 (restarts): while a
// producer writes to the source, the SOURCE broker restarts and then the DESTINATION
// broker restarts; mirroring resumes from the LEO with no gap and no duplicate (the full
// (offset, bytes) lists are equal at the end, nothing truncated or skipped) and the
// destination's partition states are reloaded from __mirror_state.
func TestAcceptanceRestartsWhileMirroring(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	const parts = 2
	createTopicOn(t, a.client(), "live", parts)
	eb := b.env()
	eb.createMirror("m1", a.b.Addr())
	eb.startTopics("m1", "live")
	prod := startAccProducer(t, a.b.Addr(), "live")
	prod.waitAcked(t, 500)
	eventually(t, func() string { return fmt.Sprintf("%+v", eb.describe("m1", "live")) }, func() bool {
		d := eb.describe("m1", "live")
		return len(d) == parts && d[0].DestinationOffset > 0 && d[1].DestinationOffset > 0
	})

	// the source restarts under the producer and the mirror
	progress := map[int32]int64{}
	for _, d := range eb.describe("m1", "live") {
		progress[d.PartitionIndex] = d.DestinationOffset
	}
	a.stop()
	a.start()
	prod.waitAcked(t, 500)
	eventually(t, func() string {
		return fmt.Sprintf("mirroring after the source restart: %+v", eb.describe("m1", "live"))
	}, func() bool {
		for _, d := range eb.describe("m1", "live") {
			if d.State != mirrorproto.StateMirroring || d.DestinationOffset <= progress[d.PartitionIndex] {
				return false
			}
		}
		return true
	})

	// the destination restarts: states come back from __mirror_state
	epochs := map[int32]int32{}
	for p := int32(0); p < parts; p++ {
		epochs[p] = eb.stateEpoch("live", p)
	}
	b.stop()
	prod.waitAcked(t, 300)
	b.start()
	eb = b.env()
	for p := int32(0); p < parts; p++ {
		eventually(t, func() string { return "partition reloaded" }, func() bool { return b.m.partitionOf("live", p) != nil })
		if got := eb.stateEpoch("live", p); epochs[p] == 0 || got < epochs[p] {
			t.Fatalf("live-%d: state epoch %d after the restart, %d before: not reloaded from __mirror_state", p, got, epochs[p])
		}
	}
	prod.waitAcked(t, 300)
	if err := prod.finish(); err != nil {
		t.Fatalf("producer: %v", err)
	}
	src, dst := a.client(), b.client()
	eb.waitCaughtUp(src, "m1", "live")
	accCompare(t, "after restarts", src, dst, "live", parts)
	var mirrored int64
	for _, d := range eb.describe("m1", "live") {
		if d.TruncatedOffset != -1 || d.SkippedOffsets != 0 || d.Lag != 0 {
			t.Fatalf("restart truncated, skipped or lags: %+v", d)
		}
		mirrored += d.DestinationOffset
	}
	if mirrored < prod.acked.Load() {
		t.Fatalf("%d offsets mirrored, %d records acknowledged", mirrored, prod.acked.Load())
	}
}

// fetchFirst returns the first batch a raw READ_UNCOMMITTED Fetch at offset returns.
func fetchFirst(t *testing.T, cl *kgo.Client, topic string, offset int64) record.Batch {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 10, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = offset, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	kresp, err := cl.Request(context.Background(), &fetchByName{req})
	if err != nil {
		t.Fatal(err)
	}
	rp := kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	b, _, err := record.Next(rp.RecordBatches)
	if rp.ErrorCode != 0 || err != nil {
		t.Fatalf("fetch %s at %d: %v %v", topic, offset, kerr.ErrorForCode(rp.ErrorCode), err)
	}
	return b
}

// TestAcceptanceControlBatchesAndTimeLookups covers edge cases of spec section 16 on two
// kmirror brokers. Control-only batches: with segment.bytes=14 (synced to the mirror
// topic) every batch, commit and abort markers and MIRROR_PID_RESET included, ends its
// segment, and a fetch positioned on it returns it on both sides; a consumer moves past
// them to a record produced after the failover. Time lookups: ListOffsets by timestamp
// finds the exact record inside a gzip batch and answers −1 without an error past the
// last record, identically on both sides. Offset zero and empty logs: an empty source
// topic mirrors with lag 0.
func TestAcceptanceControlBatchesAndTimeLookups(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	acl := a.client()
	req := kmsgCreateTopic("ctl", 1)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "segment.bytes", kmsg.StringPtr("14")
	req.Topics[0].Configs = append(req.Topics[0].Configs, cfg)
	if resp, err := req.RequestWith(context.Background(), acl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create ctl: %v %+v", err, resp)
	}
	createTopicOn(t, acl, "empty", 1)
	ctx := context.Background()
	gz := a.client(kgo.DefaultProduceTopic("ctl"), kgo.ProducerBatchCompression(kgo.GzipCompression()))
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := 0; i < 10; i++ { // one gzip batch, timestamps base, base+10ms, ...
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * 10 * time.Millisecond)})
	}
	if err := gz.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tx := a.client(kgo.TransactionalID("ctl-tx"), kgo.DefaultProduceTopic("ctl"))
	for _, commit := range []bool{true, false} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint("txn-", commit)), Timestamp: base.Add(time.Second)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	// the markers are written when EndTransaction returns; wait until both are readable
	eventually(t, func() string { return "markers on the source" }, func() bool { return sourceEnds(t, acl, "ctl")[0] == 14 })

	eb := b.env()
	eb.createMirror("m1", a.b.Addr())
	eb.startTopics("m1", "ctl", "empty")
	eb.waitCaughtUp(acl, "m1", "ctl")
	eb.waitCaughtUp(acl, "m1", "empty")
	// lag is unknown (−1) until the first fetch response, then 0, never negative
	eventually(t, func() string { return fmt.Sprintf("%+v", eb.describe("m1", "empty")) }, func() bool { return eb.describe("m1", "empty")[0].SourceOffset >= 0 })
	if d := eb.describe("m1", "empty")[0]; d.Lag != 0 || d.DestinationOffset != 0 || d.SourceOffset != 0 {
		t.Fatalf("empty topic: %+v", d)
	}
	bcl := b.client()
	if got := sourceEnds(t, bcl, "empty")[0]; got != 0 {
		t.Fatalf("empty topic end offset %d on the destination", got)
	}
	batches := sourceBatches(t, acl, "ctl", 0)
	sameBatches(t, "ctl-0", batches, sourceBatches(t, bcl, "ctl", 0))
	controls := 0
	for _, bt := range batches {
		if !record.Batch(bt.data).IsControl() {
			continue
		}
		controls++
		for side, cl := range map[string]*kgo.Client{"source": acl, "destination": bcl} {
			if got := fetchFirst(t, cl, "ctl", bt.offset); got.BaseOffset() != bt.offset || !got.IsControl() {
				t.Fatalf("%s: fetch at the control batch %d returned batch %d (control %v)", side, bt.offset, got.BaseOffset(), got.IsControl())
			}
		}
	}
	if controls != 2 {
		t.Fatalf("%d control batches, want a commit and an abort marker", controls)
	}
	if segs, _ := filepath.Glob(filepath.Join(b.props["log.dirs"], "ctl-0", "*.log")); len(segs) < len(batches) {
		t.Fatalf("%d segments on the destination for %d batches: segment.bytes=14 not applied", len(segs), len(batches))
	}

	// time lookups, same answers on both sides
	for _, c := range []struct {
		ts, want int64
	}{
		{base.UnixMilli(), 0},
		{base.UnixMilli() + 35, 4}, // inside the gzip batch: the first record at or after
		{base.UnixMilli() + 90, 9},
		{base.Add(time.Second).UnixMilli(), 10},
		{time.Now().Add(time.Hour).UnixMilli(), -1}, // past the last record (markers are stamped now)
	} {
		for side, cl := range map[string]*kgo.Client{"source": acl, "destination": bcl} {
			if got := listOffsets(t, cl, "ctl", c.ts)[0]; got != c.want {
				t.Fatalf("%s: ListOffsets at %d = %d, want %d", side, c.ts-base.UnixMilli(), got, c.want)
			}
		}
	}

	// failover: MIRROR_PID_RESET ends the log in a segment of its own; fetch returns it and
	// a consumer moves past it to the next record
	eb.stopTopics("m1", "ctl")
	leo := sourceEnds(t, bcl, "ctl")[0]
	if got := fetchFirst(t, bcl, "ctl", leo-1); got.BaseOffset() != leo-1 {
		t.Fatalf("fetch at MIRROR_PID_RESET (%d) returned batch %d", leo-1, got.BaseOffset())
	} else if typ, err := got.ControlType(); err != nil || typ != record.ControlMirrorPIDReset {
		t.Fatalf("last batch: control type %d (%v)", typ, err)
	}
	if err := b.client(kgo.DefaultProduceTopic("ctl")).ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, committed := range []bool{false, true} {
		got := accConsume(t, b.b.Addr(), "ctl", leo, committed)
		if last := got[len(got)-1]; last.offset != leo || last.val != "after" {
			t.Fatalf("read_committed=%v: last record %+v, want \"after\" at %d", committed, last, leo)
		}
	}
}
