package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// TestBrokerKeysReadAtStartAreReadOnly: a broker key the broker reads only at start-up
// (roles, quorum, session timeout, auto topic creation, coordinator settings) is refused
// by AlterConfigs with Kafka's "Cannot update these configs dynamically" and described
// as ReadOnly — it used to be accepted and then ignored; a topic-config default
// (log.retention.ms) still changes and is described as the dynamic default.
func TestBrokerKeysReadAtStartAreReadOnly(t *testing.T) {
	b := brokertest.Start(t, nil)
	adm := kadm.NewClient(b.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	static := []string{"process.roles", "controller.quorum.voters", "broker.session.timeout.ms", "auto.create.topics.enable", "offsets.retention.minutes", "num.partitions"}
	for _, key := range static {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: kadm.StringPtr("1")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Err != kerr.InvalidRequest || !strings.Contains(rs[0].ErrMessage, "Cannot update these configs dynamically: "+key) {
			t.Errorf("dynamic %s: want INVALID_REQUEST naming the key, got %+v", key, rs)
		}
	}
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("3600000")}})
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("dynamic log.retention.ms: %v %+v", err, rs)
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBroker
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, b.Client())
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs: %v %+v", err, resp)
	}
	readOnly := map[string]bool{}
	values := map[string]string{}
	for _, c := range resp.Resources[0].Configs {
		readOnly[c.Name] = c.ReadOnly
		if c.Value != nil {
			values[c.Name] = *c.Value
		}
	}
	for _, key := range static {
		if !readOnly[key] {
			t.Errorf("%s not described ReadOnly", key)
		}
	}
	if readOnly["log.retention.ms"] || values["log.retention.ms"] != "3600000" {
		t.Errorf("log.retention.ms: read-only %v, value %q; want dynamic 3600000", readOnly["log.retention.ms"], values["log.retention.ms"])
	}
}
