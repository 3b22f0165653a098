package mirror

import (
	"crypto/tls"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/security"
)

// BrokerConfig holds the broker-level mirror.* settings of spec section 11. Start from
// DefaultBrokerConfig; NewManager replaces zero fields by their defaults, except
// RetryMaxAttempts, where 0 disables retries (pass DefaultBrokerConfig().RetryMaxAttempts
// for the default), and ThrottledRate, where 0 means unlimited.
type BrokerConfig struct {
	// RefreshIntervalMs is mirror.metadata.refresh.interval.ms: the period (ms) of the
	// per-mirror source metadata refresh (leaders, topic deletion, cluster ID check).
	RefreshIntervalMs int64
	// RetryInitialBackoffMs is mirror.failed.retry.initial.backoff.ms (ms).
	RetryInitialBackoffMs int64
	// RetryMaxBackoffMs is mirror.failed.retry.max.backoff.ms (ms).
	RetryMaxBackoffMs int64
	// RetryMaxAttempts is mirror.failed.retry.max.attempts; 0 disables retries.
	RetryMaxAttempts int32
	// NumReplicaFetchers is mirror.num.replica.fetchers: fetchers per source broker per
	// mirror.
	NumReplicaFetchers int
	// StateTopicPartitions is mirror.state.topic.num.partitions, the partition count of
	// __mirror_state when it is created.
	StateTopicPartitions int32
	// ThrottledRate is mirror.replication.throttled.rate in bytes/s for all mirror fetches
	// of this broker; 0 or less = unlimited.
	ThrottledRate int64
}

// DefaultBrokerConfig returns the defaults of spec section 11.
func DefaultBrokerConfig() BrokerConfig {
	return BrokerConfig{
		RefreshIntervalMs:     30000,
		RetryInitialBackoffMs: 100,
		RetryMaxBackoffMs:     300000,
		RetryMaxAttempts:      20,
		NumReplicaFetchers:    1,
		StateTopicPartitions:  50,
	}
}

// BrokerConfigFrom reads the mirror.* broker settings (spec section 11) from the broker's
// configuration; a throttled rate of Long.MAX_VALUE (the default) means unlimited.
func BrokerConfigFrom(v *config.Values) BrokerConfig {
	c := BrokerConfig{
		RefreshIntervalMs:     v.Int64("mirror.metadata.refresh.interval.ms"),
		RetryInitialBackoffMs: v.Int64("mirror.failed.retry.initial.backoff.ms"),
		RetryMaxBackoffMs:     v.Int64("mirror.failed.retry.max.backoff.ms"),
		RetryMaxAttempts:      v.Int32("mirror.failed.retry.max.attempts"),
		NumReplicaFetchers:    int(v.Int32("mirror.num.replica.fetchers")),
		StateTopicPartitions:  v.Int32("mirror.state.topic.num.partitions"),
		ThrottledRate:         v.Int64("mirror.replication.throttled.rate"),
	}
	if c.ThrottledRate == math.MaxInt64 {
		c.ThrottledRate = 0
	}
	if c == (BrokerConfig{}) { // all zero would read as "use the defaults", which 0 attempts is not
		c.RetryMaxAttempts = -1
	}
	return c
}

// brokerConfigNames maps the dynamic mirror.* broker configs (spec section 11: "server.properties
// and dynamic") to their fields.
var brokerConfigNames = map[string]func(c *BrokerConfig, v int64){
	"mirror.metadata.refresh.interval.ms":    func(c *BrokerConfig, v int64) { c.RefreshIntervalMs = v },
	"mirror.failed.retry.initial.backoff.ms": func(c *BrokerConfig, v int64) { c.RetryInitialBackoffMs = v },
	"mirror.failed.retry.max.backoff.ms":     func(c *BrokerConfig, v int64) { c.RetryMaxBackoffMs = v },
	"mirror.failed.retry.max.attempts":       func(c *BrokerConfig, v int64) { c.RetryMaxAttempts = int32(v) },
	"mirror.num.replica.fetchers":            func(c *BrokerConfig, v int64) { c.NumReplicaFetchers = int(v) },
	"mirror.state.topic.num.partitions":      func(c *BrokerConfig, v int64) { c.StateTopicPartitions = int32(v) },
	"mirror.replication.throttled.rate": func(c *BrokerConfig, v int64) {
		if v == math.MaxInt64 {
			v = 0
		}
		c.ThrottledRate = v
	},
}

// withDynamic overlays the dynamic broker configs of the metadata image on c, as Kafka's
// DynamicBrokerConfig does: the cluster-wide defaults, then this node's own (BROKER
// resource named by its ID). Values were validated when they were written; one that does
// not parse keeps c's.
func (c BrokerConfig) withDynamic(im *metadata.Image, nodeID int32) BrokerConfig {
	for _, over := range []map[string]string{im.BrokerConfigs, im.NodeConfigs[strconv.Itoa(int(nodeID))]} {
		for name, v := range over {
			set, ok := brokerConfigNames[name]
			if !ok {
				continue
			}
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				set(&c, n)
			}
		}
	}
	return c.withDefaults()
}

func (c BrokerConfig) withDefaults() BrokerConfig {
	if c == (BrokerConfig{}) {
		return DefaultBrokerConfig()
	}
	d := DefaultBrokerConfig()
	if c.RefreshIntervalMs <= 0 {
		c.RefreshIntervalMs = d.RefreshIntervalMs
	}
	if c.RetryInitialBackoffMs <= 0 {
		c.RetryInitialBackoffMs = d.RetryInitialBackoffMs
	}
	if c.RetryMaxBackoffMs <= 0 {
		c.RetryMaxBackoffMs = d.RetryMaxBackoffMs
	}
	if c.RetryMaxAttempts < 0 {
		c.RetryMaxAttempts = 0
	}
	if c.NumReplicaFetchers <= 0 {
		c.NumReplicaFetchers = d.NumReplicaFetchers
	}
	if c.StateTopicPartitions <= 0 {
		c.StateTopicPartitions = d.StateTopicPartitions
	}
	// the config definitions cap these at a day; clamp anyway so that no value can
	// overflow a time.Duration or the backoff doubling
	const day = 86400000
	c.RefreshIntervalMs = min(c.RefreshIntervalMs, day)
	c.RetryMaxBackoffMs = min(c.RetryMaxBackoffMs, day)
	c.RetryInitialBackoffMs = min(c.RetryInitialBackoffMs, c.RetryMaxBackoffMs)
	return c
}

// configDef is one mirror-level config (spec section 11).
type configDef struct {
	name   string
	def    string // "" with hasDef=false: no default
	hasDef bool
	typ    kmsg.ConfigType
	doc    string
}

// cfgThrottledReplicas is the topic-level config naming the mirror partitions that
// mirror.replication.throttled.rate applies to (spec section 11).
const cfgThrottledReplicas = "mirror.replication.throttled.replicas"

// cfgUncleanElection is the topic config that opts a mirror topic in to ULE_RECOVERY and
// makes LOG_ALIGNMENT wait for every replica, not only the ISR (cluster.md §3).
const cfgUncleanElection = "mirror.support.unclean.leader.election"

// Mirror-level config names (spec section 11), canonical spelling.
const (
	cfgBootstrap        = "bootstrap.servers"
	cfgSourceClusterID  = "source.cluster.id"
	cfgSecurityProtocol = "security.protocol"
	cfgSASLMechanism    = "sasl.mechanism"
	cfgSASLJaas         = "sasl.jaas.config"
	cfgSASLUsername     = "sasl.username"
	cfgSASLPassword     = "sasl.password"
	cfgRequestTimeout   = "request.timeout.ms"
	cfgFetchWaitMax     = "fetch.wait.max.ms"
	cfgFetchMinBytes    = "fetch.min.bytes"
	cfgFetchMaxBytes    = "fetch.max.bytes"
	cfgFetchRespMax     = "fetch.response.max.bytes"
	cfgFetchBackoff     = "fetch.backoff.ms"
	cfgReceiveBuffer    = "receive.buffer.bytes"
	cfgTopicsInclude    = "topics.include"
	cfgTopicsExclude    = "topics.exclude"
	cfgStartOffset      = "start.offset"
	cfgGroupsInclude    = "groups.include"
	cfgGroupsExclude    = "groups.exclude"
	cfgTopicPropsExcl   = "topic.properties.exclude"
	cfgACLsInclude      = "acls.include"
)

// configDefs are the mirror-level configs, taken from internal/config's Mirror table
// (the one table docs/configuration.md is generated from), in name order.
var configDefs = func() []configDef {
	var out []configDef
	for _, n := range config.Mirror.Names() {
		d := config.Mirror[n]
		out = append(out, configDef{name: n, def: d.Default, hasDef: !d.NoDefault,
			typ: kmsg.ConfigType(d.Type), doc: d.Doc})
	}
	return out
}()

func findDef(name string) (configDef, bool) {
	for _, d := range configDefs {
		if d.name == name {
			return d, true
		}
	}
	return configDef{}, false
}

// canonicalName maps a mirror config name to its canonical spelling: the first draft's
// "mirror."-prefixed aliases (spec section 11) lose the prefix (config.MirrorName, which
// `kmirror mirrors --create` uses too).
func canonicalName(name string) string {
	name, _ = config.MirrorName(name)
	return name
}

// isConnectionConfig reports whether changing name must reconnect the fetchers.
func isConnectionConfig(name string) bool {
	return name == cfgBootstrap || name == cfgSecurityProtocol || name == cfgRequestTimeout ||
		strings.HasPrefix(name, "ssl.") || strings.HasPrefix(name, "sasl.")
}

// mirrorConfig is the parsed configuration of one mirror.
type mirrorConfig struct {
	raw              map[string]string
	bootstrap        []string
	securityProtocol string
	saslMechanism    string
	saslUser         string
	saslPass         string
	requestTimeout   time.Duration
	fetchWaitMaxMs   int32
	fetchMinBytes    int32
	fetchMaxBytes    int32
	fetchRespMax     int32
	receiveBuffer    int32 // SO_RCVBUF of fetch connections, -1: the OS's autotuning
	fetchBackoff     time.Duration
	include          []*regexp.Regexp
	exclude          []*regexp.Regexp
	groupsInclude    []*regexp.Regexp
	groupsExclude    []*regexp.Regexp
	topicPropsExcl   map[string]bool
	aclRules         []aclRule // acls.include (sync_acls.go)
	startOffset      string    // "earliest", "latest" or RFC 3339
	startTimeMs      int64
}

// normalizeConfigs returns configs with canonical names and values (normalizeValue).
func normalizeConfigs(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		k = canonicalName(k)
		out[k] = normalizeValue(k, v)
	}
	return out
}

// normalizeValue returns the value of a known mirror config as Kafka's ConfigDef.parseType
// reads it: surrounding whitespace trimmed (secrets too, and nothing else of them), and a
// LIST split on commas with the whitespace around them, empty entries dropped, joined
// with ",". Values of keys outside config.Mirror are kept as given.
func normalizeValue(name, v string) string {
	d := config.Mirror[name]
	if d == nil {
		return v
	}
	if d.Type == config.TypeList {
		return strings.Join(splitList(v), ",")
	}
	return strings.TrimSpace(v)
}

func (c *mirrorConfig) get(name string) string {
	if v, ok := c.raw[name]; ok {
		return v
	}
	d, _ := findDef(name)
	return d.def
}

// parseMirrorConfig validates and parses canonical mirror configs. It first normalizes
// raw's values in place (normalizeValue), so that a caller that stores raw afterwards
// (CreateClusterMirror, AlterMirrorConfigs) stores what Kafka's ConfigDef would have
// parsed. Errors are one-line messages meant for INVALID_CONFIG.
func parseMirrorConfig(raw map[string]string) (*mirrorConfig, error) {
	for k, v := range raw {
		raw[k] = normalizeValue(k, v)
	}
	c := &mirrorConfig{raw: raw}
	for _, s := range strings.Split(c.get(cfgBootstrap), ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.bootstrap = append(c.bootstrap, s)
		}
	}
	if len(c.bootstrap) == 0 {
		return nil, fmt.Errorf("%s is required", cfgBootstrap)
	}
	c.securityProtocol = strings.ToUpper(strings.TrimSpace(c.get(cfgSecurityProtocol)))
	switch c.securityProtocol {
	case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
	default:
		return nil, fmt.Errorf("%s %q is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", cfgSecurityProtocol, c.securityProtocol)
	}
	c.saslMechanism = strings.ToUpper(strings.TrimSpace(c.get(cfgSASLMechanism)))
	if strings.HasPrefix(c.securityProtocol, "SASL") {
		switch c.saslMechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return nil, fmt.Errorf("%s %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", cfgSASLMechanism, c.saslMechanism)
		}
		c.saslUser, c.saslPass = c.get(cfgSASLUsername), c.get(cfgSASLPassword)
		if jaas := c.get(cfgSASLJaas); jaas != "" {
			u, p, err := parseJaas(jaas)
			if err != nil {
				return nil, err
			}
			c.saslUser, c.saslPass = u, p
		}
		if c.saslUser == "" {
			return nil, fmt.Errorf("%s needs %s or %s/%s", c.securityProtocol, cfgSASLJaas, cfgSASLUsername, cfgSASLPassword)
		}
	}
	// numeric configs: ranges from config.Mirror; an error names the key, the value and
	// the allowed range (Kafka's ConfigDef.Range message)
	for _, f := range []struct {
		name string
		dst  *int32
	}{
		{cfgFetchWaitMax, &c.fetchWaitMaxMs},
		{cfgFetchMinBytes, &c.fetchMinBytes},
		{cfgFetchMaxBytes, &c.fetchMaxBytes},
		{cfgFetchRespMax, &c.fetchRespMax},
		{cfgReceiveBuffer, &c.receiveBuffer},
	} {
		v, err := c.intConfig(f.name)
		if err != nil {
			return nil, err
		}
		*f.dst = int32(v)
	}
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{cfgRequestTimeout, &c.requestTimeout}, {cfgFetchBackoff, &c.fetchBackoff}} {
		v, err := c.intConfig(f.name)
		if err != nil {
			return nil, err
		}
		*f.dst = time.Duration(v) * time.Millisecond
	}
	var err error
	if c.include, err = compilePatterns(c.get(cfgTopicsInclude)); err != nil {
		return nil, fmt.Errorf("%s: %v", cfgTopicsInclude, err)
	}
	if c.exclude, err = compilePatterns(c.get(cfgTopicsExclude)); err != nil {
		return nil, fmt.Errorf("%s: %v", cfgTopicsExclude, err)
	}
	if c.groupsInclude, err = compilePatterns(c.get(cfgGroupsInclude)); err != nil {
		return nil, fmt.Errorf("%s: %v", cfgGroupsInclude, err)
	}
	if c.groupsExclude, err = compilePatterns(c.get(cfgGroupsExclude)); err != nil {
		return nil, fmt.Errorf("%s: %v", cfgGroupsExclude, err)
	}
	if c.aclRules, err = parseACLRules(c.get(cfgACLsInclude)); err != nil {
		return nil, fmt.Errorf("%s: %v", cfgACLsInclude, err)
	}
	c.topicPropsExcl = map[string]bool{}
	for _, k := range strings.Split(c.get(cfgTopicPropsExcl), ",") {
		if k = strings.TrimSpace(k); k != "" {
			c.topicPropsExcl[k] = true
		}
	}
	c.startOffset = strings.ToLower(strings.TrimSpace(c.get(cfgStartOffset)))
	switch c.startOffset {
	case "earliest", "latest":
	default:
		t, err := parseISOTime(strings.TrimSpace(c.get(cfgStartOffset)))
		if err != nil {
			return nil, fmt.Errorf("%s %q is not earliest, latest or an ISO-8601 time", cfgStartOffset, c.get(cfgStartOffset))
		}
		c.startOffset = "timestamp"
		c.startTimeMs = t.UnixMilli()
	}
	if _, err := c.tlsConfig(); err != nil {
		return nil, err
	}
	return c, nil
}

// intConfig returns an integer mirror config, checked against its range in config.Mirror:
// `invalid value "-5" for configuration fetch.max.bytes: value must be between 1 and
// 2147483647`.
func (c *mirrorConfig) intConfig(name string) (int64, error) {
	v := strings.TrimSpace(c.get(name))
	if err := config.Mirror[name].Validate(v); err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

func parseISOTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad time %q", s)
}

// parseJaas extracts username and password from a PlainLoginModule or ScramLoginModule
// JAAS line.
func parseJaas(s string) (user, pass string, err error) {
	j, err := security.ParseJAAS(s)
	if err != nil {
		return "", "", err
	}
	if user, pass = j.Credentials(); user == "" {
		return "", "", fmt.Errorf("%s has no username=\"...\"", cfgSASLJaas)
	}
	return user, pass, nil
}

// compilePatterns compiles a comma-separated list of regexes, each anchored to the whole
// name like Java's String.matches.
func compilePatterns(list string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		re, err := compileAnchored(p)
		if err != nil {
			return nil, err
		}
		out = append(out, re)
	}
	return out, nil
}

// compileAnchored compiles p so that it must match a whole name (Java matches()).
func compileAnchored(p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + p + `)$`)
	if err != nil {
		return nil, fmt.Errorf("invalid regex %q: %v", p, err)
	}
	return re, nil
}

func matchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// tlsConfig returns the TLS config for SSL and SASL_SSL, nil otherwise: the listeners'
// ssl.* keys (security.ClientTLSConfig), with PEM the default store type (the mirror's
// stores were PEM files before the type keys existed).
func (c *mirrorConfig) tlsConfig() (*tls.Config, error) {
	if c.securityProtocol != "SSL" && c.securityProtocol != "SASL_SSL" {
		return nil, nil
	}
	return security.ClientTLSConfig(c.get)
}

// clientOpts returns the kgo options of the mirror's source connection.
func (c *mirrorConfig) clientOpts(mirrorName string) ([]kgo.Opt, error) {
	// franz-go refuses request keys its version table does not know: add the mirror RPCs
	// so that DescribeClusterMirrors reaches a kmirror source (sources that do not list
	// them in ApiVersions still refuse them: one-way mirroring).
	versions := kversion.Stable()
	for _, api := range mirrorproto.APIs() {
		versions.SetMaxKeyVersion(api.Key, api.MaxVersion)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.bootstrap...),
		kgo.MaxVersions(versions),
		kgo.ClientID("kmirror-mirror-" + mirrorName),
		kgo.RequestTimeoutOverhead(c.requestTimeout),
		kgo.RetryTimeout(c.requestTimeout),
		kgo.MetadataMinAge(time.Second),
	}
	tcfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tcfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tcfg))
	}
	if m := c.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// mechanism returns franz-go's SASL mechanism for SASL_PLAINTEXT and SASL_SSL, nil
// otherwise. The admin client and the fetch connections both use it.
func (c *mirrorConfig) mechanism() sasl.Mechanism {
	if !strings.HasPrefix(c.securityProtocol, "SASL") {
		return nil
	}
	switch c.saslMechanism {
	case "PLAIN":
		return plain.Auth{User: c.saslUser, Pass: c.saslPass}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.saslUser, Pass: c.saslPass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: c.saslUser, Pass: c.saslPass}.AsSha512Mechanism()
	}
	return nil
}

// describeSecurity names the security settings of the source connection for error
// messages, without secrets: "PLAINTEXT", "SSL" or "SASL_SSL (SASL SCRAM-SHA-512 as user
// bob; a source that rejects the credentials closes the connection)".
func (c *mirrorConfig) describeSecurity() string {
	if !strings.HasPrefix(c.securityProtocol, "SASL") {
		return c.securityProtocol
	}
	return fmt.Sprintf("%s (SASL %s as user %s; a source that rejects the credentials closes the connection)", c.securityProtocol, c.saslMechanism, c.saslUser)
}

// connectionKey is a fingerprint of the connection settings: a change reconnects.
func connectionKey(raw map[string]string) string {
	var keys []string
	for k := range raw {
		if isConnectionConfig(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + raw[k] + "\n")
	}
	return b.String()
}
