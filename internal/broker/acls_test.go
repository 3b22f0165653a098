package broker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/brokertest"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirrorproto"
	"github.com/kmirror/kmirror/internal/security/securitytest"
)

const standardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// anonymous is the principal of every PLAINTEXT connection.
const anonymous = "User:ANONYMOUS"

// authzProps switches authorization on with the connections' principal as super user.
func authzProps() map[string]string {
	return map[string]string{"authorizer.class.name": standardAuthorizer, "super.users": anonymous, "num.partitions": "1"}
}

// dropSuperUser restarts b with no super user: the ACLs alone decide from then on.
func dropSuperUser(b *brokertest.Broker) {
	b.Props["super.users"] = ""
	b.Restart()
}

func TestACLAdminRPCs(t *testing.T) {
	ctx := context.Background()
	b := brokertest.Start(t, authzProps())
	adm := kadm.NewClient(b.Client())
	add := kadm.NewACLs().Allow(anonymous, "User:bob").Topics("t").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead, kadm.OpDescribe)
	res, err := adm.CreateACLs(ctx, add)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create %+v: %v", r, r.Err)
		}
	}
	pre := kadm.NewACLs().Deny("User:bob").Groups("app-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead)
	if _, err := adm.CreateACLs(ctx, pre); err != nil {
		t.Fatal(err)
	}
	// Creating an existing binding again succeeds and adds nothing.
	if _, err := adm.CreateACLs(ctx, add); err != nil {
		t.Fatal(err)
	}
	all := kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()
	described, err := adm.DescribeACLs(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if n := countDescribed(t, described); n != 5 {
		t.Fatalf("described %d bindings, want 5 (2 principals x 2 operations on t, 1 prefixed DENY)", n)
	}
	// MATCH finds the bindings that apply to group app-1: the prefixed one.
	match := kadm.NewACLs().Groups("app-1").ResourcePatternType(kadm.ACLPatternMatch).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts()
	described, err = adm.DescribeACLs(ctx, match)
	if err != nil {
		t.Fatal(err)
	}
	if n := countDescribed(t, described); n != 1 {
		t.Fatalf("MATCH on group app-1 found %d bindings, want 1", n)
	}
	del := kadm.NewACLs().Topics("t").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpAny).Allow("User:bob").AllowHosts()
	deleted, err := adm.DeleteACLs(ctx, del)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range deleted {
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		n += len(d.Deleted)
	}
	if n != 2 {
		t.Fatalf("deleted %d bindings of bob, want 2", n)
	}
	// The bindings survive a restart (they are in the metadata log).
	b.Restart()
	adm = kadm.NewClient(b.Client())
	described, err = adm.DescribeACLs(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if n := countDescribed(t, described); n != 3 {
		t.Fatalf("described %d bindings after deleting bob's and a restart, want 3", n)
	}
}

func countDescribed(t *testing.T, rs kadm.DescribeACLsResults) int {
	t.Helper()
	n := 0
	for _, r := range rs {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		n += len(r.Described)
	}
	return n
}

func TestAuthorizerClassName(t *testing.T) {
	for _, name := range []string{"kafka.security.authorizer.AclAuthorizer", "com.example.MyAuthorizer"} {
		cfg, err := config.NewValues(config.Broker, map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0",
			"log.dirs": t.TempDir(), "authorizer.class.name": name}, false)
		if err != nil {
			t.Fatal(err)
		}
		b, err := broker.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err == nil {
			b.Shutdown(context.Background())
			t.Fatalf("authorizer.class.name=%s was accepted", name)
		}
		if !strings.Contains(err.Error(), name) {
			t.Fatalf("authorizer.class.name=%s: the error does not name it: %v", name, err)
		}
	}
}

func TestACLRPCsWithoutAuthorizer(t *testing.T) {
	b := brokertest.Start(t, map[string]string{})
	rs, err := kadm.NewClient(b.Client()).DescribeACLs(context.Background(), kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
	if err == nil {
		for _, r := range rs {
			err = r.Err
		}
	}
	if !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeAcls without an authorizer: %v, want SECURITY_DISABLED", err)
	}
}

// createACLs creates bindings, failing the test on any error.
func createACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v", r, r.Err)
		}
	}
}

func TestReadOnlyPrincipal(t *testing.T) {
	ctx := context.Background()
	b := brokertest.Start(t, authzProps())
	adm := kadm.NewClient(b.Client())
	var uID [16]byte
	for _, topic := range []string{"t", "u"} {
		r, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		if err != nil {
			t.Fatal(err)
		}
		if topic == "u" {
			uID = r.ID
		}
	}
	produceN(t, b.Client(), "t", 0, 5)
	produceN(t, b.Client(), "u", 0, 1)
	createACLs(t, adm, kadm.NewACLs().Allow(anonymous).Topics("t").Groups("g").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	dropSuperUser(b)

	// READ on t and on g: consume t in g and commit.
	cl := b.Client(kgo.ConsumeTopics("t"), kgo.ConsumerGroup("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < 5 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consuming t in g: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing in g: %v", err)
	}

	raw := b.Client(kgo.DisableIdempotentWrite())
	// Producing to t: TOPIC_AUTHORIZATION_FAILED.
	err := raw.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("producing to t: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// An idempotent producer has neither IDEMPOTENT_WRITE nor WRITE on any topic.
	ipr := kmsg.NewPtrInitProducerIDRequest()
	ipr.TransactionTimeoutMillis = -1
	if r, err := ipr.RequestWith(ctx, raw); err != nil || r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("InitProducerId: %v %v, want CLUSTER_AUTHORIZATION_FAILED", r, err)
	}
	// Reading u: TOPIC_AUTHORIZATION_FAILED on Fetch, and u is hidden from Metadata.
	fr := kmsg.NewPtrFetchRequest()
	fr.MaxWaitMillis, fr.MaxBytes, fr.ReplicaID = 0, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "u", uID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch = 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	resp, err := raw.Request(ctx, fr)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetching u: error %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	md, err := kadm.NewClient(raw).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := md.Topics["u"]; ok {
		t.Fatal("Metadata for all topics lists u, which the principal may not describe")
	}
	if _, ok := md.Topics["t"]; !ok {
		t.Fatal("Metadata for all topics does not list t (READ implies DESCRIBE)")
	}
	mr := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("u")
	mr.Topics = append(mr.Topics, mt)
	if r, err := mr.RequestWith(ctx, raw); err != nil || r.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Metadata for u: %+v %v, want TOPIC_AUTHORIZATION_FAILED", r, err)
	}
	// Auto-creating a topic needs CREATE.
	mt.Topic = kmsg.StringPtr("new-topic")
	mr.AllowAutoTopicCreation = true
	if r, err := mr.RequestWith(ctx, raw); err != nil || r.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Metadata auto-creating new-topic: %+v %v, want TOPIC_AUTHORIZATION_FAILED", r, err)
	}
	// Joining group h: GROUP_AUTHORIZATION_FAILED, from JoinGroup itself (sent to the
	// broker directly: franz-go would stop at its FindCoordinator, refused too).
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Group, jr.ProtocolType, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = "h", "consumer", 10000, 10000
	jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	jresp, err := raw.Broker(1).Request(ctx, jr)
	if err != nil || jresp.(*kmsg.JoinGroupResponse).ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("JoinGroup h: %+v %v, want GROUP_AUTHORIZATION_FAILED", jresp, err)
	}
	// The consumer of group h fails the same way.
	hc := b.Client(kgo.ConsumeTopics("t"), kgo.ConsumerGroup("h"))
	if err := hc.PollFetches(ctx).Err(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("consuming t in h: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "h", []string{"h"}
	if r, err := fc.RequestWith(ctx, raw); err != nil || findCoordinatorCode(r) != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("FindCoordinator h: %+v %v, want GROUP_AUTHORIZATION_FAILED", r, err)
	}
	// Creating ACLs needs ALTER on the cluster.
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow(anonymous).Topics("u").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	if err == nil {
		for _, r := range res {
			err = r.Err
		}
	}
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("CreateAcls without ALTER on the cluster: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

func findCoordinatorCode(r *kmsg.FindCoordinatorResponse) int16 {
	if len(r.Coordinators) > 0 {
		return r.Coordinators[0].ErrorCode
	}
	return r.ErrorCode
}

func TestPrefixedACLsAndDenyOverAllow(t *testing.T) {
	ctx := context.Background()
	b := brokertest.Start(t, authzProps())
	adm := kadm.NewClient(b.Client())
	for _, topic := range []string{"p-open", "p-secret", "q"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	createACLs(t, adm, kadm.NewACLs().Allow(anonymous).Topics("p-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	createACLs(t, adm, kadm.NewACLs().Deny(anonymous).Topics("p-secret").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite))
	createACLs(t, adm, kadm.NewACLs().Allow(anonymous).Clusters().ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpAlter))
	dropSuperUser(b)
	adm = kadm.NewClient(b.Client())
	cl := b.Client(kgo.DisableIdempotentWrite())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "p-open", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("producing to p-open under the prefixed ALLOW: %v", err)
	}
	for _, topic := range []string{"p-secret", "q"} {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("producing to %s: %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
		}
	}
	// Removing the DENY takes effect at once (no restart): p-secret is writable.
	if _, err := adm.DeleteACLs(ctx, kadm.NewACLs().Deny(anonymous).DenyHosts().Topics("p-secret").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite)); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "p-secret", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("producing to p-secret once the DENY is removed: %v", err)
	}
	// The idempotent producer may write some topic: InitProducerId succeeds.
	if err := b.Client().ProduceSync(ctx, &kgo.Record{Topic: "p-open", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("idempotent produce to p-open: %v", err)
	}
}

func TestAuthorizedOperations(t *testing.T) {
	ctx := context.Background()
	b := brokertest.Start(t, authzProps())
	adm := kadm.NewClient(b.Client())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	createACLs(t, adm, kadm.NewACLs().Allow(anonymous).Topics("t").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	createACLs(t, adm, kadm.NewACLs().Allow(anonymous).Clusters().ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe))
	createACLs(t, adm, kadm.NewACLs().Allow(anonymous).Groups("g").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	dropSuperUser(b)
	cl := b.Client()
	mr := kmsg.NewPtrMetadataRequest()
	mr.IncludeTopicAuthorizedOperations = true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("t")
	mr.Topics = append(mr.Topics, mt)
	r, err := mr.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if want := int32(1<<3 | 1<<8); r.Topics[0].AuthorizedOperations != want { // READ, DESCRIBE
		t.Fatalf("topic authorized operations %b, want %b", r.Topics[0].AuthorizedOperations, want)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	d, err := dc.RequestWith(ctx, cl)
	if err != nil || d.ErrorCode != 0 || d.ClusterAuthorizedOperations != 1<<8 {
		t.Fatalf("DescribeCluster: %+v %v, want DESCRIBE only", d, err)
	}
}

// createRawACL creates one binding with CreateAcls as given (kadm cannot name the
// ClusterMirror resource type).
func createRawACL(t *testing.T, cl *kgo.Client, rt int8, name string, pt int8, principal string, op int8) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(rt), name, kmsg.ACLResourcePatternType(pt)
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", kmsg.ACLOperation(op), kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Results[0].ErrorCode; code != 0 {
		t.Fatalf("CreateAcls %s %q: %v", kmsg.ACLResourceType(rt), name, kerr.ErrorForCode(code))
	}
}

func TestClusterMirrorACLs(t *testing.T) {
	ctx := context.Background()
	src := brokertest.Start(t, nil)
	dst := brokertest.Start(t, authzProps())
	const clusterMirror, literal = 64, 3
	createRawACL(t, dst.Client(), clusterMirror, "allowed", literal, anonymous, 5) // CREATE
	dropSuperUser(dst)
	adm := dst.Client(kgo.MaxVersions(mirrorproto.ClientVersions()))
	create := func(name string) int16 {
		t.Helper()
		r, err := adm.Request(ctx, &mirrorproto.CreateClusterMirrorRequest{MirrorName: name,
			Config: []mirrorproto.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: src.Addr()}}})
		if err != nil {
			t.Fatal(err)
		}
		return r.(*mirrorproto.CreateClusterMirrorResponse).ErrorCode
	}
	if code := create("other"); code != mirrorproto.ClusterMirrorAuthorizationFailed {
		t.Fatalf("CreateClusterMirror without CREATE: %v, want CLUSTER_MIRROR_AUTHORIZATION_FAILED", mirrorproto.ErrorFor(code, nil))
	}
	if code := create("allowed"); code != 0 {
		t.Fatalf("CreateClusterMirror with CREATE: %v", mirrorproto.ErrorFor(code, nil))
	}
	// CREATE does not imply DESCRIBE: the mirror is left out of ListClusterMirrors.
	r, err := adm.Request(ctx, &mirrorproto.ListClusterMirrorsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ms := r.(*mirrorproto.ListClusterMirrorsResponse).Mirrors; len(ms) != 0 {
		t.Fatalf("ListClusterMirrors without DESCRIBE lists %+v", ms)
	}
	// Starting topics needs ALTER on the mirror.
	sreq := mirrorproto.NewStartMirrorTopicsRequest()
	sreq.MirrorName = "allowed"
	sreq.Topics = []mirrorproto.StartMirrorTopicsRequestTopic{{TopicName: "t"}}
	sr, err := adm.Request(ctx, sreq)
	if err != nil {
		t.Fatal(err)
	}
	if code := sr.(*mirrorproto.StartMirrorTopicsResponse).ErrorCode; code != mirrorproto.ClusterMirrorAuthorizationFailed {
		t.Fatalf("StartMirrorTopics without ALTER: %v, want CLUSTER_MIRROR_AUTHORIZATION_FAILED", mirrorproto.ErrorFor(code, nil))
	}
	// The inter-broker mirror RPCs need CLUSTER_ACTION.
	rr, err := adm.Request(ctx, &mirrorproto.ReadMirrorStatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if code := rr.(*mirrorproto.ReadMirrorStatesResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("ReadMirrorStates without CLUSTER_ACTION: %v", kerr.ErrorForCode(code))
	}
}

func TestCreateTopicsAuthorization(t *testing.T) {
	ctx := context.Background()
	b := brokertest.Start(t, authzProps())
	createACLs(t, kadm.NewClient(b.Client()), kadm.NewACLs().Allow(anonymous).Topics("new-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpCreate))
	dropSuperUser(b)
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"new-1", "other"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, b.Client())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]kmsg.CreateTopicsResponseTopic{}
	for _, rt := range resp.Topics {
		byName[rt.Topic] = rt
	}
	// CREATE on the prefix creates new-1; without DESCRIBE_CONFIGS its configs are withheld.
	if r := byName["new-1"]; r.ErrorCode != 0 || r.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || len(r.Configs) != 0 {
		t.Fatalf("CreateTopics new-1: %+v, want created with configs TOPIC_AUTHORIZATION_FAILED", r)
	}
	if r := byName["other"]; r.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("CreateTopics other: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestACLsForSASLPrincipals: over SASL_PLAINTEXT with SCRAM-SHA-512, the ACLs decide for
// the authenticated principal. admin (bootstrapped as storage format --add-scram does,
// and a super user) creates alice with AlterUserScramCredentials and gives her READ on
// topic t and group g, WRITE on the topics prefixed p- and a DENY of WRITE on p-secret.
// alice consumes t in g and commits; producing to t, reading u and joining group h are
// refused with TOPIC_ and GROUP_AUTHORIZATION_FAILED; she writes p-open (prefixed match)
// but not p-secret (DENY over ALLOW) nor q; User:ANONYMOUS's bindings are not hers.
func TestACLsForSASLPrincipals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	securitytest.BootstrapScram(t, dir, "SCRAM-SHA-512", map[string]string{"admin": "admin-secret"})
	b := brokertest.Start(t, map[string]string{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"log.dirs":                dir,
		"sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"authorizer.class.name":   standardAuthorizer,
		"super.users":             "User:admin",
		"num.partitions":          "1",
	})
	as := func(user, pw string) kgo.Opt { return kgo.SASL(scram.Auth{User: user, Pass: pw}.AsSha512Mechanism()) }
	admin := b.Client(as("admin", "admin-secret"))
	adm := kadm.NewClient(admin)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}})
	if err != nil || res.AllFailed() {
		t.Fatalf("AlterUserScramCredentials alice: %v %+v", err, res)
	}
	for _, topic := range []string{"t", "u", "p-open", "p-secret", "q"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	produceN(t, admin, "t", 0, 5)
	produceN(t, admin, "u", 0, 1)
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("t").Groups("g").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("p-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	createACLs(t, adm, kadm.NewACLs().Deny("User:alice").Topics("p-secret").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite))
	createACLs(t, adm, kadm.NewACLs().Allow(anonymous).Topics("u").Groups("h").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	alice := as("alice", "alice-secret")

	c := b.Client(alice, kgo.ConsumeTopics("t"), kgo.ConsumerGroup("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if got := len(consumeN(t, c, 5)); got != 5 {
		t.Fatalf("alice consumed %d records of t in g, want 5", got)
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice committing in g: %v", err)
	}
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("t", 0); o.At != 5 {
		t.Fatalf("g's committed offset of t/0 is %d, want 5", o.At)
	}

	p := b.Client(alice, kgo.DisableIdempotentWrite())
	for topic, want := range map[string]error{"t": kerr.TopicAuthorizationFailed, "p-open": nil,
		"p-secret": kerr.TopicAuthorizationFailed, "q": kerr.TopicAuthorizationFailed} {
		err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("alice producing to %s: %v, want %v", topic, err, want)
		}
	}

	u := b.Client(alice, kgo.ConsumeTopics("u"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := u.PollFetches(ctx).Err(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice reading u: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	h := b.Client(alice, kgo.ConsumeTopics("t"), kgo.ConsumerGroup("h"))
	if err := h.PollFetches(ctx).Err(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("alice consuming t in group h: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Group, jr.ProtocolType, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = "h", "consumer", 10000, 10000
	jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	jresp, err := p.Broker(1).Request(ctx, jr)
	if err != nil || jresp.(*kmsg.JoinGroupResponse).ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("alice's JoinGroup h: %+v %v, want GROUP_AUTHORIZATION_FAILED", jresp, err)
	}
}
