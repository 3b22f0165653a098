package producecli

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/brokertest"
)

// TestProduceRefusedRecord: a record the broker refuses (larger than the topic's
// max.message.bytes) makes `produce` fail with the Kafka error and the records
// acknowledged before it.
func TestProduceRefusedRecord(t *testing.T) {
	b := brokertest.Start(t, nil)
	v := "512"
	if _, err := kadm.NewClient(b.Client()).CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &v}, "small"); err != nil {
		t.Fatal(err)
	}
	cmd := NewCommand()
	big := make([]byte, 4096) // incompressible: kgo compresses batches
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte('!' + rng.IntN(90))
	}
	cmd.SetIn(strings.NewReader("ok\n" + string(big) + "\n"))
	cmd.SetArgs([]string{"small", "--bootstrap-server", b.Addr()})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") || !strings.HasPrefix(err.Error(), "produced ") {
		t.Fatalf("produce of an oversized record: %v", err)
	}
}
