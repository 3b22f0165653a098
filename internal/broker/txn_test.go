package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// txnProps keeps __transaction_state small in tests.
var txnProps = map[string]string{"transaction.state.log.num.partitions": "4"}

func startTxnBroker(t *testing.T, extra map[string]string) *brokertest.Broker {
	props := map[string]string{}
	for k, v := range txnProps {
		props[k] = v
	}
	for k, v := range extra {
		props[k] = v
	}
	return brokertest.Start(t, props)
}

// txnProducer is a franz-go transactional producer to topic.
func txnProducer(b *brokertest.Broker, id, topic string, opts ...kgo.Opt) *kgo.Client {
	return b.Client(append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// produceTxn runs one transaction producing values and ends it with commit.
func produceTxn(t *testing.T, p *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx := context.Background()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", commit, err)
	}
}

// readAll appends a non-transactional sentinel record to partition 0 of topic, then
// consumes from the start with the isolation level until the sentinel, returning the
// values before it. Once the sentinel is readable, every earlier transaction is
// resolved for read_committed.
func readAll(t *testing.T, b *brokertest.Broker, topic string, committed bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sentinel := "end-" + time.Now().Format("150405.000000000")
	if err := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(sentinel)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	c := b.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchIsolationLevel(iso))
	defer c.Close()
	var out []string
	for {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v without the sentinel before the deadline", out)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		for _, r := range fs.Records() {
			v := string(r.Value)
			if v == sentinel {
				return out
			}
			if !strings.HasPrefix(v, "end-") {
				out = append(out, v)
			}
		}
	}
}

func describeTxn(t *testing.T, cl *kgo.Client, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TransactionStates[0]
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// TestTxnCommitAbortIsolation: read_committed sees only committed transactions'
// records, read_uncommitted sees all; DescribeTransactions and ListTransactions report
// the coordinator state.
func TestTxnCommitAbortIsolation(t *testing.T) {
	b := startTxnBroker(t, nil)
	createTopic(t, b.Client(), "tx", 1, nil)
	p := txnProducer(b, "tx-1", "tx")
	produceTxn(t, p, true, "c1", "c2", "c3")
	produceTxn(t, p, false, "a1", "a2")
	produceTxn(t, p, true, "c4")
	if got := readAll(t, b, "tx", true); !equal(got, []string{"c1", "c2", "c3", "c4"}) {
		t.Fatalf("read_committed got %v", got)
	}
	if got := readAll(t, b, "tx", false); !equal(got, []string{"c1", "c2", "c3", "a1", "a2", "c4"}) {
		t.Fatalf("read_uncommitted got %v", got)
	}
	d := describeTxn(t, b.Client(), "tx-1")
	if d.ErrorCode != 0 || d.State != "CompleteCommit" || d.ProducerEpoch != 0 || len(d.Topics) != 0 {
		t.Fatalf("describe: %+v", d)
	}
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.StateFilters = []string{"CompleteCommit", "Bogus"}
	lresp, err := lreq.RequestWith(context.Background(), b.Client())
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.TransactionStates) != 1 || lresp.TransactionStates[0].TransactionalID != "tx-1" || !equal(lresp.UnknownStateFilters, []string{"Bogus"}) {
		t.Fatalf("list: %+v", lresp)
	}
	if d := describeTxn(t, b.Client(), "nope"); d.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe unknown: %+v", d)
	}
}
