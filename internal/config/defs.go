package config

import (
	"strconv"
	"strings"
)

const (
	minute = 60 * 1000 // ms
	hour   = 60 * minute
	day    = 24 * hour
	maxI64 = "9223372036854775807"
)

// Broker holds the broker-level definitions (server.properties and dynamic broker
// configs), following Kafka's KafkaConfig, plus the mirror.* keys of the cluster
// mirroring spec, section 11.
var Broker = define(
	Def{Name: "node.id", Type: TypeInt, Default: "1", Doc: "The broker's node ID."},
	Def{Name: "listeners", Type: TypeString, Default: "PLAINTEXT://localhost:9092", Doc: "Listeners to bind, NAME://HOST:PORT,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL through listener.security.protocol.map; a node without process.roles takes one)."},
	Def{Name: "advertised.listeners", Type: TypeString, Default: "", Doc: "Listener given to clients in Metadata; defaults to listeners."},
	Def{Name: "metrics.listener", Type: TypeString, Default: "", Doc: "host:port of the broker's HTTP listener: the status console at / (docs/console.md), its JSON API, /healthz, /readyz and the Prometheus metrics at /metrics (spec §13); empty disables it, e.g. localhost:9192 (kmirror serve without --config uses localhost:9192). A listener that cannot bind stops the broker at start-up."},
	Def{Name: "log.dirs", Type: TypeString, Default: "./data", Doc: "Data directory (one)."},
	Def{Name: "log.dir", Type: TypeString, Default: "", Doc: "Alias of log.dirs, used when log.dirs is unset."},
	minimum(Def{Name: "num.partitions", Type: TypeInt, Default: "1", Doc: "Partitions of auto-created topics and of CreateTopics with -1."}, 1),
	minimum(Def{Name: "default.replication.factor", Type: TypeShort, Default: "1", Doc: "Replication factor of auto-created topics."}, 1),
	Def{Name: "auto.create.topics.enable", Type: TypeBoolean, Default: "true", Doc: "Create topics on Metadata and Produce requests for unknown topics."},
	minimum(Def{Name: "log.segment.bytes", Type: TypeInt, Default: "1073741824", Unit: "bytes", Doc: "Segment size before rolling."}, 14),
	minimum(Def{Name: "log.roll.ms", Type: TypeLong, Default: strconv.Itoa(7 * day), Unit: "ms", Fallback: []Scaled{{"log.roll.hours", hour}},
		Doc: "Segment age before rolling. Precedence as in Kafka: log.roll.ms, else log.roll.hours."}, 1),
	minimum(Def{Name: "log.roll.hours", Type: TypeInt, Default: "168", Unit: "hours", Doc: "Segment age before rolling, used when log.roll.ms is unset."}, 1),
	Def{Name: "log.retention.ms", Type: TypeLong, Default: strconv.Itoa(7 * day), Unit: "ms", Fallback: []Scaled{{"log.retention.minutes", minute}, {"log.retention.hours", hour}}, Unlimited: true,
		Doc: "Time to keep a segment; -1 (any negative value) keeps forever, 0 is refused. Precedence as in Kafka: log.retention.ms, else log.retention.minutes, else log.retention.hours."},
	Def{Name: "log.retention.minutes", Type: TypeInt, NoDefault: true, Unit: "min", Doc: "Time to keep a segment, used when log.retention.ms is unset; wins over log.retention.hours."},
	Def{Name: "log.retention.hours", Type: TypeInt, Default: "168", Unit: "hours", Doc: "Time to keep a segment, used when log.retention.ms and log.retention.minutes are unset (Kafka's stock server.properties sets it)."},
	Def{Name: "log.retention.bytes", Type: TypeLong, Default: "-1", Unit: "bytes", Doc: "Size to keep per partition; -1 is unlimited."},
	Def{Name: "log.cleaner.enable", Type: TypeBoolean, Default: "true", Doc: "Run the log cleaner for topics with cleanup.policy=compact."},
	minimum(Def{Name: "log.cleaner.backoff.ms", Type: TypeLong, Default: "15000", Unit: "ms", Doc: "Sleep between log cleaner rounds."}, 1),
	minimum(Def{Name: "offsets.topic.segment.bytes", Type: TypeInt, Default: "104857600", Unit: "bytes", Doc: "segment.bytes of __consumer_offsets when it is created."}, 1),
	minimum(Def{Name: "log.retention.check.interval.ms", Type: TypeLong, Default: "300000", Unit: "ms", Doc: "How often retention runs."}, 1),
	minimum(Def{Name: "message.max.bytes", Type: TypeInt, Default: "1048588", Unit: "bytes", Doc: "Largest record batch accepted."}, 0),
	minimum(Def{Name: "socket.request.max.bytes", Type: TypeInt, Default: "104857600", Unit: "bytes", Doc: "Largest request frame; a larger frame closes the connection."}, 1),
	minimum(Def{Name: "max.connections", Type: TypeInt, Default: "2147483647", Unit: "connections", Doc: "Connections the broker listeners hold at once; at the limit they stop accepting until one closes (Kafka's ConnectionQuotas)."}, 0),
	minimum(Def{Name: "max.connections.per.ip", Type: TypeInt, Default: "2147483647", Unit: "connections", Doc: "Connections from one IP address; a new connection beyond it is closed at once."}, 0),
	Def{Name: "max.connections.per.ip.overrides", Type: TypeString, Default: "", Doc: "Per-IP or host name limits overriding max.connections.per.ip, e.g. 127.0.0.1:200,host1:50."},
	Def{Name: "queued.max.request.bytes", Type: TypeLong, Default: "-1", Unit: "bytes", Doc: "Bytes of requests read but not yet answered, across connections; at the limit connections stop reading until requests are answered. -1: no limit."},
	minimum(Def{Name: "log.flush.interval.messages", Type: TypeLong, Default: maxI64, Unit: "records", Doc: "Records appended before an fsync."}, 1),
	Def{Name: "log.flush.interval.ms", Type: TypeLong, Default: maxI64, Unit: "ms", Doc: "Time before an fsync."},
	Def{Name: "log.cleanup.policy", Type: TypeList, Default: "delete", Valid: []string{"delete", "compact"}, Doc: "Default cleanup policy."},
	Def{Name: "log.message.timestamp.type", Type: TypeString, Default: "CreateTime", Valid: []string{"createtime", "logappendtime"}, Doc: "Default timestamp type."},
	Def{Name: "log.message.timestamp.before.max.ms", Type: TypeLong, Default: maxI64, Unit: "ms", Doc: "Largest allowed age of a record timestamp."},
	Def{Name: "log.message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", Unit: "ms", Doc: "Largest allowed future skew of a record timestamp."},
	Def{Name: "log.index.interval.bytes", Type: TypeInt, Default: "4096", Unit: "bytes", Doc: "Bytes between offset index entries."},
	Def{Name: "log.index.size.max.bytes", Type: TypeInt, Default: "10485760", Unit: "bytes", Doc: "Size of an offset index before rolling."},
	Def{Name: "compression.type", Type: TypeString, Default: "producer", Valid: []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}, Doc: "Only 'producer' is applied: batches are stored as produced."},
	minimum(Def{Name: "max.incremental.fetch.session.cache.slots", Type: TypeInt, Default: "1000", Doc: "Fetch sessions (KIP-227) the broker keeps."}, 0),
	minimum(Def{Name: "offsets.topic.num.partitions", Type: TypeInt, Default: "50", Doc: "Partitions of __consumer_offsets."}, 1),
	Def{Name: "offsets.retention.minutes", Type: TypeInt, Default: "10080", Unit: "min", Doc: "Offsets of an empty group are kept this long."},
	Def{Name: "offsets.retention.check.interval.ms", Type: TypeLong, Default: "600000", Unit: "ms", Doc: "How often expired offsets are removed."},
	minimum(Def{Name: "transaction.state.log.num.partitions", Type: TypeInt, Default: "50", Doc: "Partitions of __transaction_state (created on the first transactional request)."}, 1),
	minimum(Def{Name: "transaction.max.timeout.ms", Type: TypeInt, Default: "900000", Unit: "ms", Doc: "Largest transaction timeout a producer may ask for (INVALID_TRANSACTION_TIMEOUT above)."}, 1),
	minimum(Def{Name: "transactional.id.expiration.ms", Type: TypeInt, Default: "604800000", Unit: "ms", Doc: "A transactional ID with no transaction for this long is removed."}, 1),
	minimum(Def{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Type: TypeInt, Default: "10000", Unit: "ms", Doc: "How often timed-out transactions are aborted and expired transactional IDs removed."}, 1),
	Def{Name: "group.initial.rebalance.delay.ms", Type: TypeInt, Default: "3000", Unit: "ms", Doc: "Wait for more members before the first rebalance of an empty group."},
	Def{Name: "group.min.session.timeout.ms", Type: TypeInt, Default: "6000", Unit: "ms", Doc: "Smallest session timeout a member may ask for."},
	Def{Name: "group.max.session.timeout.ms", Type: TypeInt, Default: "1800000", Unit: "ms", Doc: "Largest session timeout a member may ask for."},
	// Authorization (Kafka's StandardAuthorizer settings; docs/authorization.md).
	Def{Name: "authorizer.class.name", Type: TypeString, Default: "",
		Doc: "Empty: no authorization (every request allowed). org.apache.kafka.metadata.authorizer.StandardAuthorizer: ACLs stored in the metadata log, with StandardAuthorizer's semantics. Any other class name is refused at start."},
	Def{Name: "super.users", Type: TypeString, Default: "", Doc: "Principals allowed everything whatever the ACLs, separated by semicolons, e.g. User:admin;User:mirror."},
	Def{Name: "allow.everyone.if.no.acl.found", Type: TypeBoolean, Default: "false", Doc: "Allow a request on a resource no ACL binding applies to (for any principal)."},
	// Clustering (KRaft roles and listeners, Kafka's KRaftConfigs, QuorumConfig and
	// SocketServerConfigs): parsed and checked by ParseNode.
	Def{Name: "process.roles", Type: TypeList, Default: "", Valid: []string{"broker", "controller"},
		Doc: "The roles of this node: broker, controller, or broker,controller (combined). Empty, and controller.quorum.voters empty too: a one-node cluster that formats its log.dirs itself on first start. Checked by `kmirror storage format` and `kmirror serve` (docs/cluster.md)."},
	Def{Name: "controller.quorum.voters", Type: TypeList, Default: "",
		Doc: "The controllers (raft voters) as ID@HOST:PORT,..., e.g. 1@host1:9093,2@host2:9093,3@host3:9093; required with process.roles; every voter lists the same set. A broker-only node reaches the active controller through them and joins the quorum as an observer."},
	Def{Name: "controller.listener.names", Type: TypeList, NoDefault: true,
		Doc: "Names of the listeners used by the controller; required with process.roles. A controller listens on them; a broker reaches the controllers with the first one and must not list them in listeners."},
	Def{Name: "listener.security.protocol.map", Type: TypeString, Default: "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
		Doc: "Listener name to security protocol, NAME:PROTOCOL,... When it is not set and process.roles is, the controller.listener.names map to PLAINTEXT (as Kafka, unless an SSL or SASL name is in use). Broker listeners, the inter-broker one included, may use PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL; the controller listeners of a multi-node cluster only PLAINTEXT (docs/security.md)."},
	// Security (Kafka's BrokerSecurityConfigs, SslConfigs, SaslConfigs): the global keys
	// of every listener; listener.name.<name>.<key> overrides one for a listener
	// (docs/security.md).
	Def{Name: "ssl.keystore.type", Type: TypeString, Default: "JKS", Valid: []string{"jks", "pkcs12", "pem"}, Doc: "Format of the listener's keystore: JKS, PKCS12 or PEM (KIP-651)."},
	Def{Name: "ssl.keystore.location", Type: TypeString, NoDefault: true, Doc: "Keystore file of a TLS listener: its certificate chain and private key."},
	Def{Name: "ssl.keystore.password", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "Password of a JKS or PKCS12 keystore."},
	Def{Name: "ssl.keystore.key", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "PEM private key (PKCS#8, unencrypted) inline, with ssl.keystore.type=PEM."},
	Def{Name: "ssl.keystore.certificate.chain", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "PEM certificate chain inline, with ssl.keystore.type=PEM."},
	Def{Name: "ssl.key.password", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "Password of the private key in a JKS keystore (defaults to ssl.keystore.password); encrypted PEM keys are refused."},
	Def{Name: "ssl.truststore.type", Type: TypeString, Default: "JKS", Valid: []string{"jks", "pkcs12", "pem"}, Doc: "Format of the truststore: JKS, PKCS12 or PEM."},
	Def{Name: "ssl.truststore.location", Type: TypeString, NoDefault: true, Doc: "Truststore file: the CA certificates client certificates are verified against."},
	Def{Name: "ssl.truststore.password", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "Password of a JKS or PKCS12 truststore."},
	Def{Name: "ssl.truststore.certificates", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "PEM CA certificates inline, with ssl.truststore.type=PEM."},
	Def{Name: "ssl.client.auth", Type: TypeString, Default: "none", Valid: []string{"required", "requested", "none"}, Doc: "Client certificates on TLS listeners: required, requested (verified when given) or none."},
	Def{Name: "ssl.enabled.protocols", Type: TypeList, Default: "TLSv1.2,TLSv1.3", Doc: "TLS versions enabled (TLSv1.2, TLSv1.3, TLSv1.1, TLSv1): the range from the lowest to the highest listed."},
	Def{Name: "ssl.cipher.suites", Type: TypeList, Default: "", Doc: "TLS 1.2 cipher suites by IANA name (Java's names); empty: Go's defaults. TLS 1.3 suites are always all enabled."},
	Def{Name: "ssl.endpoint.identification.algorithm", Type: TypeString, Default: "https", Doc: "https verifies the host name of a server certificate on outbound connections; empty disables the check."},
	Def{Name: "ssl.principal.mapping.rules", Type: TypeString, Default: "DEFAULT", Doc: "Rules mapping a client certificate's distinguished name to the user name of its principal: RULE:pattern/replacement/[LU],... or DEFAULT (the full DN)."},
	Def{Name: "sasl.enabled.mechanisms", Type: TypeList, Default: "GSSAPI", Doc: "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI and OAUTHBEARER are not supported and must be removed)."},
	Def{Name: "sasl.mechanism.inter.broker.protocol", Type: TypeString, Default: "GSSAPI", Doc: "SASL mechanism of the brokers' own connections to a SASL inter-broker listener, with the username and password of its listener.name.<name>.<mechanism>.sasl.jaas.config."},
	Def{Name: "sasl.jaas.config", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "JAAS login module of a SASL mechanism; on a broker set per listener and mechanism as listener.name.<name>.<mechanism>.sasl.jaas.config (PlainLoginModule's user_NAME=\"password\" options are the PLAIN users)."},
	minimum(Def{Name: "connection.failed.authentication.delay.ms", Type: TypeInt, Default: "100", Unit: "ms", Doc: "Delay of the response to a failed authentication before the connection is closed."}, 0),
	minimum(Def{Name: "connections.max.reauth.ms", Type: TypeLong, Default: "0", Unit: "ms", Doc: "Session lifetime of SASL connections (KIP-368): clients re-authenticate before it ends, else the connection is closed; 0 disables."}, 0),
	Def{Name: "inter.broker.listener.name", Type: TypeString, NoDefault: true,
		Doc: "Listener brokers use to reach each other; must be an advertised broker listener, not a controller listener. Unset: the listener named after security.inter.broker.protocol (PLAINTEXT), on a one-node cluster its one listener. Brokers forward coordinator and mirror requests to each other on it, and the controller adds broker-only nodes to the quorum at its address."},
	Def{Name: "security.inter.broker.protocol", Type: TypeString, NoDefault: true, Valid: []string{"plaintext", "ssl", "sasl_plaintext", "sasl_ssl"}, Doc: "Names the inter-broker listener by its security protocol when inter.broker.listener.name is unset (Kafka's; PLAINTEXT when both are unset)."},
	Def{Name: "broker.rack", Type: TypeString, NoDefault: true, Doc: "Rack of the broker (registered with the controller), for rack-aware replica placement."},
	minimum(Def{Name: "broker.session.timeout.ms", Type: TypeInt, Default: "9000", Unit: "ms", Doc: "A broker without a heartbeat for this long is fenced by the controller: it leaves the ISRs it is not the last member of, and the partitions it led elect another ISR member (those without one have no leader until it registers again). A broker whose heartbeat connection closed (its process died) is fenced sooner, once twice broker.heartbeat.interval.ms passed without a heartbeat (docs/cluster.md)."}, 1),
	minimum(Def{Name: "broker.heartbeat.interval.ms", Type: TypeInt, Default: "2000", Unit: "ms", Doc: "Time between a broker's heartbeats to the controller. The controller fences a broker whose heartbeat connection closed and that did not heartbeat again within twice this (at most broker.session.timeout.ms)."}, 1),
	minimum(Def{Name: "controller.quorum.election.timeout.ms", Type: TypeInt, Default: "1000", Unit: "ms", Doc: "Longest time without fetching from the leader before a voter starts an election."}, 1),
	minimum(Def{Name: "controller.quorum.fetch.timeout.ms", Type: TypeInt, Default: "2000", Unit: "ms", Doc: "Longest time without a successful fetch from the quorum leader before a voter becomes a candidate."}, 1),
	// Replication (Kafka's ReplicationConfigs, ServerLogConfigs, GroupCoordinatorConfig,
	// TransactionLogConfig).
	minimum(Def{Name: "offsets.topic.replication.factor", Type: TypeShort, Default: "3", Doc: "Replication factor of __consumer_offsets when it is created: the topic waits until this many brokers are registered (a one-node cluster uses 1 unless this is set)."}, 1),
	minimum(Def{Name: "transaction.state.log.replication.factor", Type: TypeShort, Default: "3", Doc: "Replication factor of __transaction_state when it is created: the topic waits until this many brokers are registered (a one-node cluster uses 1 unless this is set)."}, 1),
	minimum(Def{Name: "transaction.state.log.min.isr", Type: TypeInt, Default: "2", Doc: "min.insync.replicas of __transaction_state (as a topic config when kmirror creates it; bounded by its replication factor)."}, 1),
	minimum(Def{Name: "min.insync.replicas", Type: TypeInt, Default: "1", Doc: "Default min.insync.replicas of topics: in-sync replicas an acks=all produce needs (NOT_ENOUGH_REPLICAS below it), and below which the high watermark stops."}, 1),
	Def{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", Doc: "Default unclean.leader.election.enable of topics: when no in-sync replica can lead, the controller elects the first live replica (its ISR becomes that replica alone, leader recovery state RECOVERING; acknowledged records may be lost). Topic config, then the controller's dynamic broker config, then the cluster-wide default, then this static value."},
	Def{Name: "auto.leader.rebalance.enable", Type: TypeBoolean, Default: "true", Doc: "The active controller moves leadership back to each partition's preferred replica (its first) when that replica is in the ISR and live, leader.imbalance.check.interval.seconds after it sees a partition led by another."},
	minimum(Def{Name: "leader.imbalance.check.interval.seconds", Type: TypeLong, Default: "300", Unit: "s", Doc: "Period of the preferred-leader check of auto.leader.rebalance.enable."}, 1),
	minimum(Def{Name: "leader.imbalance.per.broker.percentage", Type: TypeInt, Default: "10", Doc: "Accepted for Kafka's configs; Kafka's KRaft controller does not use it and neither does kmirror's: every imbalanced partition is rebalanced."}, 0),
	Def{Name: "replica.lag.time.max.ms", Type: TypeLong, Default: "30000", Unit: "ms", Doc: "A follower not caught up for this long leaves the ISR (checked every half of it)."},
	minimum(Def{Name: "replica.fetch.max.bytes", Type: TypeInt, Default: "1048576", Unit: "bytes", Doc: "Bytes per partition of a follower fetch (not a hard limit: a larger first batch is still returned)."}, 0),
	minimum(Def{Name: "replica.fetch.response.max.bytes", Type: TypeInt, Default: "10485760", Unit: "bytes", Doc: "Bytes of a whole follower fetch response (not a hard limit)."}, 0),
	Def{Name: "replica.fetch.wait.max.ms", Type: TypeInt, Default: "500", Unit: "ms", Doc: "MaxWaitMs of follower fetches."},
	Def{Name: "replica.fetch.min.bytes", Type: TypeInt, Default: "1", Unit: "bytes", Doc: "MinBytes of follower fetches."},
	minimum(Def{Name: "replica.fetch.backoff.ms", Type: TypeInt, Default: "1000", Unit: "ms", Doc: "Pause after a failed follower fetch."}, 0),
	Def{Name: "num.replica.fetchers", Type: TypeInt, Default: "1", Doc: "Follower fetchers per leader broker, each with its own connection."},
	Def{Name: "replica.high.watermark.checkpoint.interval.ms", Type: TypeLong, Default: "5000", Unit: "ms", Doc: "The frequency with which the high watermark is saved out to disk (replication-offset-checkpoint, also written at shutdown); a replica opened with an external high watermark starts from it."},
	minimum(Def{Name: "producer.id.expiration.ms", Type: TypeInt, Default: "86400000", Unit: "ms", Doc: "The time a partition replica waits before expiring a producer ID with no append (by its last batch's timestamp); producer IDs do not expire while one of their transactions is ongoing, and may expire sooner when retention deletes their last batch. Read at start-up (Kafka also applies it dynamically)."}, 1),
	minimum(Def{Name: "producer.id.expiration.check.interval.ms", Type: TypeInt, Default: "600000", Unit: "ms", Doc: "The interval at which producer IDs that have expired due to producer.id.expiration.ms passing are removed (an internal config in Kafka, for tests)."}, 1),
	minimum(Def{Name: "mirror.state.topic.num.partitions", Dynamic: true, Type: TypeInt, Default: "50", Doc: "Partitions of __mirror_state (spec §4)."}, 1),
	Def{Name: "mirror.state.topic.replication.factor", Type: TypeShort, Default: "3", Doc: "Replication factor of __mirror_state when it is created: the topic waits until this many brokers are registered (a one-node cluster uses 1 unless this is set), as Kafka's internal topics do."},
	minimum(Def{Name: "mirror.num.replica.fetchers", Dynamic: true, Type: TypeInt, Default: "1", Doc: "Mirror fetchers per source broker per mirror."}, 1),
	between(Def{Name: "mirror.metadata.refresh.interval.ms", Dynamic: true, Type: TypeLong, Default: "30000", Unit: "ms", Doc: "Period of the mirror metadata sync tasks (spec §9)."}, 1, 86400000),
	between(Def{Name: "mirror.failed.retry.initial.backoff.ms", Dynamic: true, Type: TypeLong, Default: "100", Unit: "ms", Doc: "First retry backoff of a FAILED mirror partition."}, 1, 86400000),
	between(Def{Name: "mirror.failed.retry.max.backoff.ms", Dynamic: true, Type: TypeLong, Default: "300000", Unit: "ms", Doc: "Largest retry backoff of a FAILED mirror partition."}, 1, 86400000),
	minimum(Def{Name: "mirror.failed.retry.max.attempts", Dynamic: true, Type: TypeInt, Default: "20", Doc: "Retries of a FAILED mirror partition; 0 disables retries."}, 0),
	minimum(Def{Name: "mirror.replication.throttled.rate", Dynamic: true, Type: TypeLong, Default: maxI64, Unit: "bytes/s", Doc: "Cap on the mirror fetch traffic of this broker, for the partitions listed in their topic's mirror.replication.throttled.replicas (as Kafka's follower.replication.throttled.rate)."}, 1),
)

// Topic holds the topic-level definitions (Kafka's TopicConfig / LogConfig), each with
// the broker key that supplies its default.
var Topic = define(
	Def{Name: "cleanup.policy", Type: TypeList, Default: "delete", Synonym: "log.cleanup.policy", Valid: []string{"delete", "compact"}, Doc: "delete, compact, or both."},
	Def{Name: "compression.type", Type: TypeString, Default: "producer", Synonym: "compression.type", Valid: []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}, Doc: "Only 'producer' is applied."},
	Def{Name: "delete.retention.ms", Type: TypeLong, Default: strconv.Itoa(day), Unit: "ms", Doc: "How long tombstones survive compaction."},
	minimum(Def{Name: "max.message.bytes", Type: TypeInt, Default: "1048588", Synonym: "message.max.bytes", Unit: "bytes", Doc: "Largest record batch accepted."}, 0),
	Def{Name: "message.timestamp.type", Type: TypeString, Default: "CreateTime", Synonym: "log.message.timestamp.type", Valid: []string{"createtime", "logappendtime"}, Doc: "CreateTime or LogAppendTime."},
	Def{Name: "message.timestamp.before.max.ms", Type: TypeLong, Default: maxI64, Synonym: "log.message.timestamp.before.max.ms", Unit: "ms", Doc: "Largest allowed age of a record timestamp."},
	Def{Name: "message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", Synonym: "log.message.timestamp.after.max.ms", Unit: "ms", Doc: "Largest allowed future skew of a record timestamp."},
	Def{Name: "message.timestamp.difference.max.ms", Type: TypeLong, Default: maxI64, Unit: "ms", Doc: "Deprecated alias kept for tools."},
	Def{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5", Doc: "Dirty ratio that triggers compaction."},
	Def{Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", Unit: "ms", Doc: "Minimum age before a record may be compacted."},
	Def{Name: "max.compaction.lag.ms", Type: TypeLong, Default: maxI64, Unit: "ms", Doc: "Maximum age before a record must be compacted."},
	minimum(Def{Name: "min.insync.replicas", Type: TypeInt, Default: "1", Synonym: "min.insync.replicas", Doc: "In-sync replicas an acks=all produce needs (NOT_ENOUGH_REPLICAS below it, bounded by the replication factor); below it the high watermark does not move."}, 1),
	Def{Name: "retention.bytes", Type: TypeLong, Default: "-1", Synonym: "log.retention.bytes", Unit: "bytes", Doc: "Size kept per partition; -1 is unlimited."},
	Def{Name: "retention.ms", Type: TypeLong, Default: strconv.Itoa(7 * day), Synonym: "log.retention.ms", Unit: "ms", Doc: "Time a segment is kept; -1 keeps forever."},
	minimum(Def{Name: "segment.bytes", Type: TypeInt, Default: "1073741824", Synonym: "log.segment.bytes", Unit: "bytes", Doc: "Segment size before rolling."}, 14),
	minimum(Def{Name: "segment.ms", Type: TypeLong, Default: strconv.Itoa(7 * day), Synonym: "log.roll.ms", Unit: "ms", Doc: "Segment age before rolling."}, 1),
	Def{Name: "segment.index.bytes", Type: TypeInt, Default: "10485760", Synonym: "log.index.size.max.bytes", Unit: "bytes", Doc: "Offset index size before rolling."},
	Def{Name: "index.interval.bytes", Type: TypeInt, Default: "4096", Synonym: "log.index.interval.bytes", Unit: "bytes", Doc: "Bytes between offset index entries."},
	Def{Name: "flush.messages", Type: TypeLong, Default: maxI64, Synonym: "log.flush.interval.messages", Unit: "records", Doc: "Records appended before an fsync."},
	Def{Name: "flush.ms", Type: TypeLong, Default: maxI64, Synonym: "log.flush.interval.ms", Unit: "ms", Doc: "Time before an fsync."},
	Def{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", Synonym: "unclean.leader.election.enable", Doc: "Elect a replica outside the ISR as a last resort (its ISR becomes that replica alone, leader recovery state RECOVERING; acknowledged records may be lost)."},
	Def{Name: "mirror.support.unclean.leader.election", Type: TypeBoolean, Default: "false", Doc: "Opt in to ULE_RECOVERY (spec §4): a truncation the source's history forces (an unclean leader election there) waits, in ULE_RECOVERY, until every replica truncated before the partition is MIRRORING again; LOG_ALIGNMENT of the topic's mirror partitions also waits for every replica, not only the ISR (cluster.md §3)."},
	Def{Name: "mirror.replication.throttled.replicas", Type: TypeList, Default: "", Doc: "Mirror partitions throttled by mirror.replication.throttled.rate: * for all, or partition:brokerID pairs; empty throttles none."},
)

// Mirror holds the cluster mirror definitions (the `--mirror-config` file, spec §11):
// the one table the mirror manager validates, defaults and describes from, and that
// docs/configuration.md is generated from. Canonical names have no prefix; the first
// draft's `mirror.`-prefixed spellings are accepted as aliases by the mirror manager.
var Mirror = define(
	Def{Name: "bootstrap.servers", Type: TypeList, NoDefault: true, Doc: "Source cluster bootstrap servers (host:port,...). Required."},
	Def{Name: "source.cluster.id", Type: TypeString, NoDefault: true, Doc: "Source cluster ID; resolved at create time when absent, checked every refresh."},
	Def{Name: "security.protocol", Type: TypeString, Default: "PLAINTEXT", Valid: []string{"plaintext", "ssl", "sasl_plaintext", "sasl_ssl"}, Doc: "Protocol used to reach the source: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."},
	Def{Name: "sasl.mechanism", Type: TypeString, Default: "PLAIN", Valid: []string{"plain", "scram-sha-256", "scram-sha-512"}, Doc: "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."},
	Def{Name: "sasl.jaas.config", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "JAAS login module line with username and password (never returned by DescribeConfigs)."},
	Def{Name: "sasl.username", Type: TypeString, NoDefault: true, Doc: "SASL user (alternative to sasl.jaas.config)."},
	Def{Name: "sasl.password", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "SASL password (alternative to sasl.jaas.config; never returned)."},
	Def{Name: "ssl.truststore.type", Type: TypeString, Default: "PEM", Valid: []string{"jks", "pkcs12", "pem"}, Doc: "Format of the truststore: PEM (the default here; Kafka's is JKS), PKCS12 or JKS."},
	Def{Name: "ssl.truststore.location", Type: TypeString, NoDefault: true, Doc: "Truststore file of the CA certificates trusted for the source; unset: the system roots."},
	Def{Name: "ssl.truststore.password", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "Password of a PKCS12 or JKS truststore (never returned)."},
	Def{Name: "ssl.truststore.certificates", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "PEM CA certificates (inline, with ssl.truststore.type=PEM)."},
	Def{Name: "ssl.keystore.type", Type: TypeString, Default: "PEM", Valid: []string{"jks", "pkcs12", "pem"}, Doc: "Format of the client keystore: PEM (the default here; Kafka's is JKS), PKCS12 or JKS."},
	Def{Name: "ssl.keystore.location", Type: TypeString, NoDefault: true, Doc: "Keystore file holding the client certificate chain and private key."},
	Def{Name: "ssl.keystore.password", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "Password of a PKCS12 or JKS keystore (never returned)."},
	Def{Name: "ssl.keystore.certificate.chain", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "PEM client certificate chain (inline, with ssl.keystore.type=PEM)."},
	Def{Name: "ssl.keystore.key", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "PEM client private key (inline, unencrypted PKCS#8; never returned)."},
	Def{Name: "ssl.key.password", Type: TypePassword, NoDefault: true, Sensitive: true, Doc: "Password of the key in a JKS keystore (defaults to ssl.keystore.password); encrypted PEM keys are refused (never returned)."},
	Def{Name: "ssl.enabled.protocols", Type: TypeList, Default: "TLSv1.2,TLSv1.3", Doc: "TLS versions enabled: the range from the lowest to the highest listed."},
	Def{Name: "ssl.cipher.suites", Type: TypeList, Default: "", Doc: "TLS 1.2 cipher suites by IANA name; empty: Go's defaults."},
	Def{Name: "ssl.endpoint.identification.algorithm", Type: TypeString, Default: "https", Doc: "https verifies the source host name; empty disables that check (the chain is still verified, as Kafka)."},
	minimum(Def{Name: "request.timeout.ms", Type: TypeInt, Default: "30000", Unit: "ms", Doc: "Timeout of requests to the source."}, 1),
	minimum(Def{Name: "fetch.wait.max.ms", Type: TypeInt, Default: "1000", Unit: "ms", Doc: "MaxWaitMs of mirror fetches."}, 0),
	minimum(Def{Name: "fetch.min.bytes", Type: TypeInt, Default: "1", Unit: "bytes", Doc: "MinBytes of mirror fetches."}, 0),
	minimum(Def{Name: "fetch.max.bytes", Type: TypeInt, Default: "1048576", Unit: "bytes", Doc: "Per-partition bytes of a mirror fetch (PartitionMaxBytes) to start with: it doubles while the source holds more than a response returned, up to the partition's share of fetch.response.max.bytes, and halves back once caught up while responses are under a quarter of it."}, 1),
	minimum(Def{Name: "fetch.response.max.bytes", Type: TypeInt, Default: "10485760", Unit: "bytes", Doc: "Bytes of a whole mirror fetch response (MaxBytes); one request is in flight per fetcher, so across a slow link a fetcher moves at most this per round trip: set it to about twice rate × RTT (docs/operations.md, Mirroring across a slow link)."}, 1),
	minimum(Def{Name: "receive.buffer.bytes", Type: TypeInt, Default: "-1", Unit: "bytes", Doc: "SO_RCVBUF of the mirror's fetch connections (Kafka's client config); -1 leaves it to the OS, whose TCP autotuning grows it to the bandwidth-delay product up to net.ipv4.tcp_rmem's maximum (a set value turns autotuning off and is capped by net.core.rmem_max)."}, -1),
	minimum(Def{Name: "fetch.backoff.ms", Type: TypeInt, Default: "1000", Unit: "ms", Doc: "Pause after a failed fetch."}, 0),
	Def{Name: "topics.include", Type: TypeList, Default: "", Doc: "Regexes of source topics started automatically (spec §8)."},
	Def{Name: "topics.exclude", Type: TypeList, Default: "__.*", Doc: "Regexes of source topics never mirrored; wins over include."},
	Def{Name: "groups.include", Type: TypeList, Default: ".*", Doc: "Regexes of consumer groups whose offsets are synced."},
	Def{Name: "groups.exclude", Type: TypeList, Default: "", Doc: "Regexes of consumer groups never synced."},
	Def{Name: "acls.include", Type: TypeList, Default: "*", Doc: "ACL bindings synced from the source (spec §9): rules resourceType;resourceName;operation;permissionType;principal, comma-separated, * a wildcard field, name and principal regexes; * alone syncs every binding except ClusterMirror ones."},
	Def{Name: "topic.properties.exclude", Type: TypeList, Default: "follower.replication.throttled.replicas,leader.replication.throttled.replicas,message.timestamp.difference.max.ms,message.timestamp.before.max.ms,message.timestamp.after.max.ms,message.timestamp.type,unclean.leader.election.enable,min.insync.replicas,mirror.replication.throttled.replicas,mirror.support.unclean.leader.election", Doc: "Topic configs never synced (spec §9)."},
	Def{Name: "start.offset", Type: TypeString, Default: "earliest", Doc: "Where new mirror partitions start: earliest, latest, or an ISO-8601 time."},
)

// MirrorSecret reports whether the value of the canonical mirror config name is a secret,
// never returned by DescribeConfigs nor printed by the CLI: a Sensitive Mirror key, or a
// name Kafka treats as a password (sasl.jaas.config, "*password*", "*.key").
func MirrorSecret(name string) bool {
	if d := Mirror[name]; d != nil && d.Sensitive {
		return true
	}
	return name == "sasl.jaas.config" || strings.Contains(name, "password") || strings.HasSuffix(name, ".key")
}

// MirrorName returns the canonical spelling of a cluster mirror config name and whether
// it is a Mirror key. The name is trimmed, and a first-draft "mirror."-prefixed alias loses
// its prefix when the rest is a Mirror key or an ssl.* / sasl.* name (spec section 11).
func MirrorName(name string) (canonical string, known bool) {
	name = strings.TrimSpace(name)
	if rest, ok := strings.CutPrefix(name, "mirror."); ok {
		if Mirror[rest] != nil || strings.HasPrefix(rest, "ssl.") || strings.HasPrefix(rest, "sasl.") {
			name = rest
		}
	}
	return name, Mirror[name] != nil
}
