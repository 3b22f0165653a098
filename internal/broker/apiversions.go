package broker

// ApiVersions, on every listener: internal/wire answers it from the listener's version
// table, before any handler (an unknown version gets the v0 answer with
// UNSUPPORTED_VERSION, as Kafka's), so only its range is registered here.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() {
	for _, t := range []apiTable{brokerAPIs, controllerAPIs} {
		t.add(kmsg.ApiVersions, 0, 4, nil)
	}
}
