package broker

import (
	"log/slog"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/controller"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/wire"
)

// TestRegistryMatchesOldTables: the registry serves what wire.DefaultVersions,
// brokerVersions and controllerVersions did.
func TestRegistryMatchesOldTables(t *testing.T) {
	want := map[int16]wire.VersionRange{}
	for _, k := range wire.DefaultVersions().APIKeys() {
		want[k.ApiKey] = wire.VersionRange{Min: k.MinVersion, Max: k.MaxVersion}
	}
	want[kmsg.DescribeQuorum.Int16()] = wire.VersionRange{Min: 0, Max: 2}
	want[kmsg.DescribeTopicPartitions.Int16()] = wire.VersionRange{Min: 0, Max: 0}
	want[kmsg.WriteTxnMarkers.Int16()] = wire.VersionRange{Min: 0, Max: 1}
	want[kmsg.AddPartitionsToTxn.Int16()] = wire.VersionRange{Min: 0, Max: 4}
	for _, mirrors := range []bool{false, true} {
		w := maps.Clone(want)
		b := &Broker{}
		if mirrors {
			b.newMirrors = func(*Broker, *config.Values, *slog.Logger) Mirrors { return nil }
			for _, api := range mirrorproto.APIs() {
				if api.Name != "BumpLeaderEpochs" {
					w[api.Key] = wire.VersionRange{Min: api.MinVersion, Max: api.MaxVersion}
				}
			}
		}
		if got := tableOf(brokerAPIs.versions(b)); !maps.Equal(got, w) {
			t.Errorf("mirroring %v: broker listeners serve %v, want %v", mirrors, got, w)
		}
	}
	wantCtrl := map[int16]wire.VersionRange{
		kmsg.ApiVersions.Int16():                                             {Min: 0, Max: 4},
		kmsg.BrokerRegistration.Int16():                                      {Min: 0, Max: 4},
		kmsg.BrokerHeartbeat.Int16():                                         {Min: 0, Max: 1},
		kmsg.AllocateProducerIDs.Int16():                                     {Min: 0, Max: 0},
		kmsg.DescribeQuorum.Int16():                                          {Min: 0, Max: 2},
		controller.ApplyRecordsKey:                                           {Min: 0, Max: 0},
		mirrorproto.ServedKey(mirrorproto.PrototypeKeys["BumpLeaderEpochs"]): {Min: 0, Max: 0},
	}
	if got := tableOf(controllerAPIs.versions(&Broker{})); !maps.Equal(got, wantCtrl) {
		t.Errorf("controller listener serves %v, want %v", got, wantCtrl)
	}
}

func tableOf(v *wire.Versions) map[int16]wire.VersionRange {
	out := map[int16]wire.VersionRange{}
	for _, k := range v.APIKeys() {
		out[k.ApiKey] = wire.VersionRange{Min: k.MinVersion, Max: k.MaxVersion}
	}
	return out
}
