package mirror

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/record"
)

// TestULERecovery: a source whose history parts from the mirror's (a Fetch answered with
// a DivergingEpoch below the mirror's LEO, what an unclean leader election on the source
// gives) truncates a MIRRORING partition to the divergence point. A topic opted in with
// mirror.support.unclean.leader.election=true goes through ULE_RECOVERY (spec section 4)
// on the way back to MIRRORING; one not opted in truncates and goes on fetching without
// it. Both end identical to the source again.
func TestULERecovery(t *testing.T) {
	for _, optIn := range []bool{true, false} {
		t.Run(fmt.Sprintf("optIn=%v", optIn), func(t *testing.T) {
			c, src := newKfake(t, kfake.SeedTopics(1, "u"))
			addrs := c.ListenAddrs()
			for range 5 {
				produce(t, addrs, "u", 20)
			}
			e := newEnv(t)
			e.createMirror("m1", addrs[0])
			e.startTopics("m1", "u")
			e.waitCaughtUp(src, "m1", "u")
			if optIn {
				dst, err := kgo.NewClient(kgo.SeedBrokers(e.local.Addr()))
				if err != nil {
					t.Fatal(err)
				}
				defer dst.Close()
				v := "true"
				rs, err := kadm.NewClient(dst).AlterTopicConfigs(context.Background(),
					[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: cfgUncleanElection, Value: &v}}, "u")
				if err == nil {
					_, err = rs.On("u", nil)
				}
				if err != nil {
					t.Fatalf("set %s on the mirror topic: %v", cfgUncleanElection, err)
				}
				p := e.m.partitionOf("u", 0)
				eventually(t, func() string { return "the runner never read the opt-in" }, func() bool { return p.uncleanOptIn.Load() })
			}
			batches := localBatches(t, e.localLog("u", 0))
			cut := batches[len(batches)-2].offset // the source "lost" its last two batches
			epoch := record.Batch(batches[0].data).LeaderEpoch()
			leo := e.localLog("u", 0).LogEndOffset()
			done := false
			c.ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.FetchRequest)
				if done || req.Topics[0].Partitions[0].FetchOffset != leo {
					done = true // truncated: from now on the source serves its log again
					return nil, nil, false
				}
				resp := req.ResponseKind().(*kmsg.FetchResponse)
				st := kmsg.NewFetchResponseTopic()
				st.Topic, st.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark, sp.LastStableOffset = 0, cut, cut
				sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = epoch, cut
				st.Partitions = append(st.Partitions, sp)
				resp.Topics = append(resp.Topics, st)
				return resp, nil, true
			})
			p := e.m.partitionOf("u", 0)
			var seen []mirrorproto.State
			eventually(t, func() string { return fmt.Sprintf("states %v, describe %+v", seen, e.describe("m1", "u")) }, func() bool {
				p.mu.Lock()
				defer p.mu.Unlock()
				if n := len(seen); n == 0 || seen[n-1] != p.st.State {
					seen = append(seen, p.st.State)
				}
				if p.st.PrevState == mirrorproto.StateULERecovery && (len(seen) == 0 || seen[len(seen)-1] != mirrorproto.StateULERecovery) {
					seen = append(seen, mirrorproto.StateULERecovery)
				}
				return p.st.TruncatedOffset == cut && p.st.TruncatedRecords == leo-cut && p.st.State == mirrorproto.StateMirroring
			})
			went := false
			for _, s := range seen {
				went = went || s == mirrorproto.StateULERecovery
			}
			if went != optIn {
				t.Fatalf("ULE_RECOVERY seen %v with the topic opted in %v (states %v)", went, optIn, seen)
			}
			// the source's own log still has the records: the mirror fetches them again
			e.waitCaughtUp(src, "m1", "u")
			sameBatches(t, "u-0", sourceBatches(t, src, "u", 0), localBatches(t, e.localLog("u", 0)))
		})
	}
}
