package mirror

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
)

// authzBroker is a broker with Kafka's StandardAuthorizer on and the connections'
// principal (User:ANONYMOUS on PLAINTEXT) as super user.
func authzBroker(t *testing.T) *kbroker {
	return startBrokerWith(t, map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:ANONYMOUS",
	})
}

// aclsOn returns the bindings of a broker (DescribeAcls, ANY filter).
func aclsOn(t *testing.T, cl *kgo.Client) map[acl.Binding]bool {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("DescribeAcls: %v %d", err, resp.ErrorCode)
	}
	out := map[acl.Binding]bool{}
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out[acl.Binding{ResourceType: acl.ResourceType(r.ResourceType), ResourceName: r.ResourceName, PatternType: acl.PatternType(r.ResourcePatternType),
				Principal: a.Principal, Host: a.Host, Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.PermissionType)}] = true
		}
	}
	return out
}

func createBinding(t *testing.T, cl *kgo.Client, b acl.Binding) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
	c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
	req.Creations = append(req.Creations, c)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls %v: %v %+v", b, err, resp)
	}
}

func TestACLSync(t *testing.T) {
	src, dst := authzBroker(t), authzBroker(t)
	scl, dcl := src.client(), dst.client()
	read := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral, Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	prefixed := acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: "app-", PatternType: acl.PatternPrefixed, Principal: "User:alice", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}
	notIncluded := acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral, Principal: "User:bob", Host: "*", Operation: acl.OpWrite, Permission: acl.PermissionAllow}
	mirrorACL := acl.Binding{ResourceType: acl.ResourceClusterMirror, ResourceName: "m", PatternType: acl.PatternLiteral, Principal: "User:alice", Host: "*", Operation: acl.OpAlter, Permission: acl.PermissionAllow}
	for _, b := range []acl.Binding{read, prefixed, notIncluded, mirrorACL} {
		createBinding(t, scl, b)
	}
	// A ClusterMirror binding of the destination's own is never touched.
	localMirrorACL := mirrorACL
	localMirrorACL.Principal = "User:ops"
	createBinding(t, dcl, localMirrorACL)

	e := dst.env()
	e.createMirror("m", src.b.Addr(), "acls.include", "*;*;*;*;User:alice")
	waitSynced(t, dst, "m", TaskACLs)
	got := aclsOn(t, dcl)
	want := map[acl.Binding]bool{read: true, prefixed: true, localMirrorACL: true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("destination bindings after the sync:\n got %v\nwant %v", got, want)
	}
	// A binding removed on the source disappears from the destination.
	if _, err := kadm.NewClient(scl).DeleteACLs(context.Background(), kadm.NewACLs().Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).
		Allow("User:alice").AllowHosts().Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, dst, "m", TaskACLs)
	got = aclsOn(t, dcl)
	delete(want, read)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("destination bindings after the source removed one:\n got %v\nwant %v", got, want)
	}
}

func TestACLSyncSourceWithoutAuthorizer(t *testing.T) {
	src, dst := startBroker(t), authzBroker(t)
	e := dst.env()
	e.createMirror("m", src.b.Addr())
	waitSynced(t, dst, "m", TaskACLs) // a success: nothing to sync
	if got := aclsOn(t, dst.client()); len(got) != 0 {
		t.Fatalf("bindings on the destination: %v", got)
	}
}

func TestParseACLRules(t *testing.T) {
	rules, err := parseACLRules("TOPIC;orders.*;READ;ALLOW;User:.*, GROUP;*;*;*;*")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		b    acl.Binding
		want bool
	}{
		{acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders-eu", Principal: "User:a", Operation: acl.OpRead, Permission: acl.PermissionAllow}, true},
		{acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "orders-eu", Principal: "User:a", Operation: acl.OpWrite, Permission: acl.PermissionAllow}, false},
		{acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: "xorders", Principal: "User:a", Operation: acl.OpRead, Permission: acl.PermissionAllow}, false},
		{acl.Binding{ResourceType: acl.ResourceGroup, ResourceName: "g", Principal: "User:b", Operation: acl.OpDelete, Permission: acl.PermissionDeny}, true},
		{acl.Binding{ResourceType: acl.ResourceClusterMirror, ResourceName: "m", Principal: "User:b", Operation: acl.OpAlter, Permission: acl.PermissionAllow}, false},
	}
	for _, c := range cases {
		if got := syncedACL(rules, &c.b); got != c.want {
			t.Errorf("%v: synced %v, want %v", c.b, got, c.want)
		}
	}
	for _, bad := range []string{"TOPIC;x;READ", "NOPE;*;*;*;*", "TOPIC;(;*;*;*", "TOPIC;*;ANY;*;*"} {
		if _, err := parseACLRules(bad); err == nil {
			t.Errorf("acls.include %q accepted", bad)
		}
	}
	if all, _ := parseACLRules("*"); !syncedACL(all, &cases[3].b) || syncedACL(all, &cases[4].b) {
		t.Error(`acls.include "*" does not sync every binding but ClusterMirror ones`)
	}
}
