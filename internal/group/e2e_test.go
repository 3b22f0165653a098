package group

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// groupKeys are the API keys the coordinator serves.
var groupKeys = []int16{8, 9, 11, 12, 13, 14, 15, 16, 42, 47}

// kfakeWithCoordinator runs franz-go's kfake cluster (real sockets; it serves metadata,
// produce, fetch and FindCoordinator) with every group API routed to c, until the
// kmirror broker's own end-to-end tests exist. dropLeave makes LeaveGroup a no-op, as
// if the leaving consumer had been killed.
func kfakeWithCoordinator(t *testing.T, c *Coordinator, partitions int32, dropLeave *atomic.Bool) string {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	ctx := WithClient(context.Background(), "e2e", "/127.0.0.1")
	for _, key := range groupKeys {
		kc.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
			kc.KeepControl()
			var resp kmsg.Response
			switch r := req.(type) {
			case *kmsg.JoinGroupRequest:
				kc.SleepControl(func() { resp = c.JoinGroup(ctx, r) })
			case *kmsg.SyncGroupRequest:
				kc.SleepControl(func() { resp = c.SyncGroup(ctx, r) })
			case *kmsg.HeartbeatRequest:
				resp = c.Heartbeat(ctx, r)
			case *kmsg.LeaveGroupRequest:
				if dropLeave.Load() {
					lr := kmsg.NewPtrLeaveGroupResponse()
					lr.Version = r.Version
					return lr, nil, true
				}
				resp = c.LeaveGroup(ctx, r)
			case *kmsg.OffsetCommitRequest:
				resp = c.OffsetCommit(ctx, r)
			case *kmsg.OffsetFetchRequest:
				resp = c.OffsetFetch(ctx, r)
			case *kmsg.DescribeGroupsRequest:
				resp = c.DescribeGroups(ctx, r)
			case *kmsg.ListGroupsRequest:
				resp = c.ListGroups(ctx, r)
			case *kmsg.DeleteGroupsRequest:
				resp = c.DeleteGroups(ctx, r)
			case *kmsg.OffsetDeleteRequest:
				resp = c.OffsetDelete(ctx, r)
			}
			return resp, nil, true
		})
	}
	return kc.ListenAddrs()[0]
}

// TestConsumersShareTopicAndSurviveAKill is issue 3's first "done when" with the
// coordinator in the loop: three consumers share a 12-partition topic, one is killed,
// its partitions are reassigned after its session times out, every record is consumed,
// and the committed offsets reach the end offsets.
func TestConsumersShareTopicAndSurviveAKill(t *testing.T) {
	for _, bal := range []kgo.GroupBalancer{kgo.CooperativeStickyBalancer(), kgo.RangeBalancer()} {
		t.Run(bal.ProtocolName(), func(t *testing.T) {
			const parts, perPart = 12, 20
			e := newEnv(t)
			e.topics = map[string]int32{"t": parts}
			c := e.start(nil)
			var dropLeave atomic.Bool
			addr := kfakeWithCoordinator(t, c, parts, &dropLeave)

			prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			produce := func(round int) {
				for p := int32(0); p < parts; p++ {
					for i := 0; i < perPart; i++ {
						r := &kgo.Record{Topic: "t", Partition: p, Value: []byte(fmt.Sprintf("%d-%d-%d", round, p, i))}
						if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			produce(0)

			var mu sync.Mutex
			seen := map[string]bool{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			newConsumer := func() *kgo.Client {
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
					kgo.MaxVersions(kversion.V4_0_0()),
					kgo.ConsumerGroup("e2e-"+bal.ProtocolName()), kgo.ConsumeTopics("t"),
					kgo.Balancers(bal), kgo.SessionTimeout(1500*time.Millisecond),
					kgo.HeartbeatInterval(100*time.Millisecond), kgo.DisableAutoCommit(),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				if err != nil {
					t.Fatal(err)
				}
				return cl
			}
			var wg sync.WaitGroup
			consume := func(cl *kgo.Client, stop <-chan struct{}) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
					fs := cl.PollFetches(pctx)
					pcancel()
					if ctx.Err() != nil {
						return
					}
					mu.Lock()
					fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
					mu.Unlock()
					_ = cl.CommitUncommittedOffsets(ctx)
				}
			}
			var clients []*kgo.Client
			stops := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
			for i := 0; i < 3; i++ {
				cl := newConsumer()
				clients = append(clients, cl)
				wg.Add(1)
				go consume(cl, stops[i])
			}
			defer func() {
				cancel()
				wg.Wait()
				for _, cl := range clients[:2] {
					cl.Close()
				}
			}()
			eventually(t, "three members stable", func() bool {
				d := describe(c, "e2e-"+bal.ProtocolName())
				return d.State == "Stable" && len(d.Members) == 3
			})

			// Kill the third consumer: it stops without leaving the group.
			close(stops[2])
			dropLeave.Store(true)
			clients[2].Close()
			produce(1)
			eventually(t, "killed member removed after its session timeout", func() bool {
				d := describe(c, "e2e-"+bal.ProtocolName())
				return d.State == "Stable" && len(d.Members) == 2
			})
			dropLeave.Store(false)

			eventually(t, "every record consumed and committed", func() bool {
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n != 2*parts*perPart {
					return false
				}
				offs := c.CommittedOffsets("e2e-" + bal.ProtocolName())
				for p := int32(0); p < parts; p++ {
					if offs["t"][p].Offset != 2*perPart {
						return false
					}
				}
				return true
			})
		})
	}
}
