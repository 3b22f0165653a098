package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ServedAPIs is what the API registry serves on b's broker listeners and on its
// controller listener, in ApiVersions form.
func ServedAPIs(b *Broker) (brokerListeners, controllerListener []kmsg.ApiVersionsResponseApiKey) {
	return brokerAPIs.versions(b).APIKeys(), controllerAPIs.versions(b).APIKeys()
}
