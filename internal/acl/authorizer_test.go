package acl

import "testing"

const (
	alice = "User:alice"
	bob   = "User:bob"
	host  = "10.0.0.1"
)

func allow(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: Wildcard, Operation: op, Permission: PermissionAllow}
}

func deny(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	b := allow(rt, name, pt, principal, op)
	b.Permission = PermissionDeny
	return b
}

func TestNilAuthorizerAllowsEverything(t *testing.T) {
	var a *Authorizer
	if !a.Authorize(alice, host, OpWrite, ResourceTopic, "t") || !a.AuthorizeByResourceType(alice, host, OpWrite, ResourceTopic) {
		t.Fatal("authorization off refused a request")
	}
}

func TestLiteralAndWildcardAndPrefixed(t *testing.T) {
	a := New(nil, false)
	a.Load([]Binding{
		allow(ResourceTopic, "t", PatternLiteral, alice, OpRead),
		allow(ResourceTopic, "*", PatternLiteral, bob, OpWrite),
		allow(ResourceTopic, "orders-", PatternPrefixed, alice, OpWrite),
	})
	cases := []struct {
		principal string
		op        Operation
		topic     string
		want      bool
	}{
		{alice, OpRead, "t", true},
		{alice, OpRead, "u", false},
		{alice, OpWrite, "t", false},
		{bob, OpWrite, "anything", true},
		{bob, OpRead, "t", false},
		{alice, OpWrite, "orders-eu", true},
		{alice, OpWrite, "orders", false},
		{alice, OpWrite, "order-", false},
	}
	for _, c := range cases {
		if got := a.Authorize(c.principal, host, c.op, ResourceTopic, c.topic); got != c.want {
			t.Errorf("%s %s %s: got %v, want %v", c.principal, c.op, c.topic, got, c.want)
		}
	}
	if a.Authorize(alice, host, OpRead, ResourceGroup, "t") {
		t.Error("a TOPIC binding allowed a GROUP of the same name")
	}
}

func TestDenyOverridesAllow(t *testing.T) {
	a := New(nil, false)
	a.Load([]Binding{
		allow(ResourceTopic, "*", PatternLiteral, WildcardPrincipal, OpAll),
		deny(ResourceTopic, "secret", PatternPrefixed, alice, OpRead),
	})
	if a.Authorize(alice, host, OpRead, ResourceTopic, "secret-1") {
		t.Error("a prefixed DENY READ did not override a wildcard ALLOW ALL")
	}
	if !a.Authorize(alice, host, OpWrite, ResourceTopic, "secret-1") {
		t.Error("a DENY READ refused WRITE")
	}
	if !a.Authorize(alice, host, OpDescribe, ResourceTopic, "secret-1") {
		t.Error("a DENY READ refused DESCRIBE (DENY has no implications in Kafka)")
	}
	if !a.Authorize(bob, host, OpRead, ResourceTopic, "secret-1") {
		t.Error("alice's DENY refused bob")
	}
	a.Load([]Binding{allow(ResourceTopic, "t", PatternLiteral, alice, OpRead), deny(ResourceTopic, "t", PatternLiteral, alice, OpAll)})
	if a.Authorize(alice, host, OpRead, ResourceTopic, "t") {
		t.Error("a DENY ALL did not override an ALLOW READ")
	}
}

func TestImplications(t *testing.T) {
	for _, op := range []Operation{OpRead, OpWrite, OpDelete, OpAlter, OpDescribe, OpAll} {
		a := New(nil, false)
		a.Load([]Binding{allow(ResourceTopic, "t", PatternLiteral, alice, op)})
		if !a.Authorize(alice, host, OpDescribe, ResourceTopic, "t") {
			t.Errorf("ALLOW %s does not imply DESCRIBE", op)
		}
	}
	for _, op := range []Operation{OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs} {
		a := New(nil, false)
		a.Load([]Binding{allow(ResourceTopic, "t", PatternLiteral, alice, op)})
		if a.Authorize(alice, host, OpDescribe, ResourceTopic, "t") {
			t.Errorf("ALLOW %s implies DESCRIBE", op)
		}
	}
	a := New(nil, false)
	a.Load([]Binding{allow(ResourceCluster, ClusterName, PatternLiteral, alice, OpAlterConfigs)})
	if !a.Authorize(alice, host, OpDescribeConfigs, ResourceCluster, ClusterName) {
		t.Error("ALTER_CONFIGS does not imply DESCRIBE_CONFIGS")
	}
	if a.Authorize(alice, host, OpAlter, ResourceCluster, ClusterName) {
		t.Error("ALTER_CONFIGS implies ALTER")
	}
}

func TestSuperUsersAndHosts(t *testing.T) {
	a := New(ParseSuperUsers("User:admin; User:ops"), false)
	a.Load([]Binding{
		deny(ResourceTopic, "*", PatternLiteral, WildcardPrincipal, OpAll),
		{ResourceType: ResourceGroup, ResourceName: "g", PatternType: PatternLiteral, Principal: alice, Host: "10.0.0.2", Operation: OpRead, Permission: PermissionAllow},
	})
	if !a.Authorize("User:ops", host, OpWrite, ResourceTopic, "t") || !a.IsSuperUser("User:admin") {
		t.Error("a super user was refused")
	}
	if a.Authorize(alice, host, OpRead, ResourceGroup, "g") {
		t.Error("a binding for host 10.0.0.2 allowed 10.0.0.1")
	}
	if !a.Authorize(alice, "10.0.0.2", OpRead, ResourceGroup, "g") {
		t.Error("a binding for host 10.0.0.2 refused it")
	}
}

func TestAllowEveryoneIfNoACLFound(t *testing.T) {
	for _, everyone := range []bool{false, true} {
		a := New(nil, everyone)
		a.Load([]Binding{allow(ResourceTopic, "t", PatternLiteral, bob, OpRead)})
		if got := a.Authorize(alice, host, OpRead, ResourceTopic, "u"); got != everyone {
			t.Errorf("allow.everyone.if.no.acl.found=%v: a topic without bindings: got %v", everyone, got)
		}
		// A binding for another principal counts as found: alice is refused on t.
		if a.Authorize(alice, host, OpRead, ResourceTopic, "t") {
			t.Errorf("allow.everyone.if.no.acl.found=%v: bob's binding on t allowed alice", everyone)
		}
	}
}

func TestAuthorizeByResourceType(t *testing.T) {
	a := New(nil, false)
	a.Load([]Binding{allow(ResourceTopic, "t", PatternLiteral, alice, OpWrite), deny(ResourceTopic, "t", PatternLiteral, bob, OpWrite), allow(ResourceTopic, "t", PatternLiteral, bob, OpWrite)})
	if !a.AuthorizeByResourceType(alice, host, OpWrite, ResourceTopic) {
		t.Error("alice may write t but not any topic")
	}
	if a.AuthorizeByResourceType(bob, host, OpWrite, ResourceTopic) {
		t.Error("bob's only ALLOW is denied, yet he may write some topic")
	}
	a.Load([]Binding{allow(ResourceTopic, "a-", PatternPrefixed, alice, OpWrite), deny(ResourceTopic, "a", PatternPrefixed, alice, OpWrite)})
	if a.AuthorizeByResourceType(alice, host, OpWrite, ResourceTopic) {
		t.Error("a prefixed DENY covering the prefixed ALLOW did not refuse")
	}
}

func TestAuthorizedOperations(t *testing.T) {
	a := New(nil, false)
	a.Load([]Binding{allow(ResourceTopic, "t", PatternLiteral, alice, OpRead)})
	want := int32(1<<OpRead | 1<<OpDescribe)
	if got := a.AuthorizedOperations(alice, host, ResourceTopic, "t"); got != want {
		t.Errorf("authorized operations %b, want %b", got, want)
	}
}

func TestAuthorizeDoesNotAllocate(t *testing.T) {
	a := New(nil, false)
	a.Load([]Binding{allow(ResourceTopic, "orders-", PatternPrefixed, alice, OpWrite), allow(ResourceTopic, "t", PatternLiteral, alice, OpRead)})
	if n := testing.AllocsPerRun(100, func() { a.Authorize(alice, host, OpWrite, ResourceTopic, "orders-eu-1") }); n != 0 {
		t.Errorf("Authorize allocates %v times", n)
	}
}

func TestFilterMatches(t *testing.T) {
	s := func(v string) *string { return &v }
	lit := allow(ResourceTopic, "t", PatternLiteral, alice, OpRead)
	star := allow(ResourceTopic, "*", PatternLiteral, alice, OpRead)
	pre := allow(ResourceTopic, "t-", PatternPrefixed, alice, OpRead)
	cases := []struct {
		f    Filter
		b    Binding
		want bool
	}{
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, pre, true},
		{Filter{ResourceType: ResourceTopic, ResourceName: s("t"), PatternType: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, lit, true},
		{Filter{ResourceType: ResourceTopic, ResourceName: s("t"), PatternType: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, star, false},
		{Filter{ResourceType: ResourceTopic, ResourceName: s("t-1"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, star, true},
		{Filter{ResourceType: ResourceTopic, ResourceName: s("t-1"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, pre, true},
		{Filter{ResourceType: ResourceTopic, ResourceName: s("t-1"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, lit, false},
		{Filter{ResourceType: ResourceTopic, ResourceName: s("t-"), PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, pre, true},
		{Filter{ResourceType: ResourceGroup, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, lit, false},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: s(bob), Operation: OpAny, Permission: PermissionAny}, lit, false},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpWrite, Permission: PermissionAny}, lit, false},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionDeny}, lit, false},
	}
	for i, c := range cases {
		if got := c.f.Matches(&c.b); got != c.want {
			t.Errorf("case %d: filter %+v on %v: got %v, want %v", i, c.f, c.b, got, c.want)
		}
	}
}

// TestMirrorSourceMinimalRights: the bindings docs/mirroring.md lists as the mirror
// source principal's minimal rights allow every request the mirror sends to its source,
// and nothing that changes the source.
func TestMirrorSourceMinimalRights(t *testing.T) {
	const mirror = "User:mirror"
	a := New(nil, false)
	a.Load([]Binding{
		allow(ResourceTopic, "*", PatternLiteral, mirror, OpRead),
		allow(ResourceTopic, "*", PatternLiteral, mirror, OpDescribeConfigs),
		allow(ResourceGroup, "*", PatternLiteral, mirror, OpDescribe),
		allow(ResourceCluster, ClusterName, PatternLiteral, mirror, OpDescribe),
		allow(ResourceClusterMirror, "*", PatternLiteral, mirror, OpDescribe),
	})
	for _, c := range []struct {
		op   Operation
		rt   ResourceType
		name string
	}{
		{OpRead, ResourceTopic, "orders"},               // Fetch
		{OpDescribe, ResourceTopic, "orders"},           // Metadata, ListOffsets, OffsetForLeaderEpoch, OffsetFetch
		{OpDescribeConfigs, ResourceTopic, "orders"},    // DescribeConfigs
		{OpDescribe, ResourceGroup, "app"},              // ListGroups, OffsetFetch
		{OpDescribe, ResourceCluster, ClusterName},      // DescribeAcls, DescribeCluster
		{OpDescribe, ResourceClusterMirror, "failback"}, // DescribeClusterMirrors, ListClusterMirrors
	} {
		if !a.Authorize(mirror, host, c.op, c.rt, c.name) {
			t.Errorf("the minimal rights refuse %s on %s %s", c.op, c.rt, c.name)
		}
	}
	for _, op := range []Operation{OpWrite, OpCreate, OpDelete, OpAlter, OpAlterConfigs} {
		if a.Authorize(mirror, host, op, ResourceTopic, "orders") {
			t.Errorf("the minimal rights allow %s on a source topic", op)
		}
	}
	if a.Authorize(mirror, host, OpRead, ResourceGroup, "app") {
		t.Error("the minimal rights allow joining a source group")
	}
}
