package config_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// TestBrokerAppliesRetentionHours starts a real broker with Apache Kafka's stock
// log.retention.hours / log.roll.hours keys and checks a new topic's effective
// retention.ms and segment.ms, as DescribeConfigs reports them.
func TestBrokerAppliesRetentionHours(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"log.retention.hours": "2", "log.retention.minutes": "30", "log.roll.hours": "3"})
	adm := kadm.NewClient(b.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("t", nil)
	if err != nil || rc.Err != nil {
		t.Fatal(err, rc.Err)
	}
	want := map[string]string{"retention.ms": "1800000", "segment.ms": "10800000"} // minutes win over hours
	for _, c := range rc.Configs {
		if w, ok := want[c.Key]; ok {
			if c.MaybeValue() != w {
				t.Errorf("%s = %q, want %q", c.Key, c.MaybeValue(), w)
			}
			delete(want, c.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("not described: %v", want)
	}
	// a dynamic 0 is refused as a static one is (Kafka: log.retention.ms must be -1 or ≥ 1)
	if rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("0")}}); err == nil && (len(rs) == 0 || rs[0].Err == nil) {
		t.Errorf("dynamic log.retention.ms=0 accepted")
	}
	// resolved at start-up only: a dynamic change is refused rather than accepted and ignored
	for _, key := range []string{"log.retention.hours", "log.retention.minutes", "log.roll.hours"} {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: kadm.StringPtr("1")}})
		if err == nil && len(rs) > 0 {
			err = rs[0].Err
		}
		if err == nil || !strings.Contains(rs[0].ErrMessage, "Cannot update these configs dynamically") {
			t.Errorf("dynamic %s: %v %+v", key, err, rs)
		}
	}
}
