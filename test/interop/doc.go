// Package interop holds kmirror's interoperability suite against Apache Kafka 4.x: Kafka's
// own command-line tools (run by class name from the jars that fetch-kafka.sh caches in
// .cache/kafka-VERSION/libs) against in-process kmirror brokers and against clusters of
// kmirror processes (internal/clustertest: any node serves the tools, a killed active
// controller is replaced), and mirroring into kmirror from a real single-node KRaft Apache
// Kafka broker, from a 3-node Apache Kafka cluster (kafkaproc.StartCluster: log
// convergence under broker bounces, source leader moves and epoch raises), and from
// brokers of other releases (2.6.3 on ZooKeeper, with an unclean leader election on two
// brokers; 3.9.1; 4.4.0).
//
// The tests run only with KMIRROR_INTEROP=1 (`make interop` sets it); otherwise each test
// skips at once, so `go test ./...` stays fast and needs neither Java nor Maven. See
// docs/compatibility.md for what is verified.
package interop
