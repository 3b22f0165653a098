package config

import (
	"cmp"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Security protocols, Kafka's SecurityProtocol names.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// Roles are a node's KRaft roles (process.roles).
type Roles struct {
	Broker     bool
	Controller bool
}

// String spells the roles as process.roles does: "broker", "controller",
// "broker,controller", or "" for none.
func (r Roles) String() string {
	var s []string
	if r.Broker {
		s = append(s, "broker")
	}
	if r.Controller {
		s = append(s, "controller")
	}
	return strings.Join(s, ",")
}

// Voter is one controller.quorum.voters entry, ID@HOST:PORT.
type Voter struct {
	ID   int32
	Host string
	Port int
}

// Addr is the voter's host:port, to dial.
func (v Voter) Addr() string { return net.JoinHostPort(v.Host, strconv.Itoa(v.Port)) }

// Listener is one listeners or advertised.listeners entry, NAME://HOST:PORT, with the
// security protocol listener.security.protocol.map gives its name.
type Listener struct {
	Name             string // upper case, as Kafka's ListenerName.normalised
	Host             string // "": all interfaces when binding (Kafka's convention)
	Port             int    // 0 in listeners: a port the kernel chooses
	SecurityProtocol string
}

// Addr is host:port, to bind or dial; ":PORT" when Host is empty.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// String is the listener in Kafka's NAME://HOST:PORT form.
func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// Node is the validated identity and network setup of one kmirror process, parsed from
// server.properties by ParseNode with Apache Kafka's names and KafkaConfig's rules.
type Node struct {
	NodeID int32
	// Roles are the process.roles. A Legacy node has both, without a quorum config.
	Roles Roles
	// Legacy is a node without process.roles and controller.quorum.voters: the one-node
	// cluster that formats its log.dirs on first start and serves one listener.
	Legacy bool
	// Voters are the controller.quorum.voters in their configured order; nil when Legacy.
	Voters []Voter
	// Listeners are the listeners to bind, in configured order.
	Listeners []Listener
	// AdvertisedListeners are the broker's endpoints given to clients and other brokers:
	// advertised.listeners (else listeners) without the controller listeners, as Kafka's
	// effectiveAdvertisedBrokerListeners. A Host of "" stands for this machine's name.
	// Empty for a controller-only node.
	AdvertisedListeners []Listener
	// ControllerListenerNames are controller.listener.names, upper case; a broker reaches
	// the controllers with the first.
	ControllerListenerNames []string
	// InterBrokerListenerName names the advertised listener brokers use to reach each
	// other (inter.broker.listener.name, PLAINTEXT when unset); "" without the broker role.
	InterBrokerListenerName string
	// Rack is broker.rack; "" when unset.
	Rack string
}

// Listener returns the node's listener with the given name (case-insensitive).
func (n *Node) Listener(name string) (Listener, bool) {
	name = strings.ToUpper(strings.TrimSpace(name))
	for _, l := range n.Listeners {
		if l.Name == name {
			return l, true
		}
	}
	return Listener{}, false
}

// ControllerListener returns the listener a controller serves the quorum on: the first
// controller.listener.names entry among its listeners. False on a broker-only or Legacy
// node.
func (n *Node) ControllerListener() (Listener, bool) {
	for _, name := range n.ControllerListenerNames {
		if l, ok := n.Listener(name); ok {
			return l, true
		}
	}
	return Listener{}, false
}

// Voter returns the controller.quorum.voters entry with the given ID.
func (n *Node) Voter(id int32) (Voter, bool) {
	for _, v := range n.Voters {
		if v.ID == id {
			return v, true
		}
	}
	return Voter{}, false
}

// kafkaError is an error worded as Apache Kafka's ConfigException, capitals and final
// full stop included, so that operators find it in Kafka's documentation and forums.
type kafkaError struct{ msg string }

func (e *kafkaError) Error() string { return e.msg }

func kafkaErrorf(format string, a ...any) error { return &kafkaError{fmt.Sprintf(format, a...)} }

// LogDir returns the one data directory: log.dirs if set, else log.dir if set, else the
// log.dirs default (Kafka's precedence). kmirror uses one directory: a list of several
// is an error naming the key.
func LogDir(v *Values) (string, error) {
	key := "log.dirs"
	dir, set := v.Get(key)
	if !set {
		if d, ok := v.Get("log.dir"); ok {
			key, dir = "log.dir", d
		}
	}
	dir = strings.TrimSpace(dir)
	if dir == "" {
		return "", kafkaErrorf("At least one log directory must be defined via log.dirs or log.dir.")
	}
	if strings.Contains(dir, ",") {
		return "", fmt.Errorf("%s: kmirror uses one data directory, got %q", key, dir)
	}
	return dir, nil
}

// ParseNode parses and validates the node's roles, quorum voters and listeners from v
// with Apache Kafka's rules (KafkaConfig.validateValues) and one-line errors naming the
// key. Without process.roles and controller.quorum.voters the node is Legacy and keeps
// what one-node kmirror accepts: one listener, which may be a bare HOST:PORT. Broker
// listeners, the inter-broker one included, may use any security protocol; the
// controller listeners of a multi-node cluster only PLAINTEXT.
func ParseNode(v *Values) (*Node, error) {
	n := &Node{NodeID: v.Int32("node.id"), Rack: strings.TrimSpace(v.String("broker.rack"))}
	roles, err := parseRoles(v.String("process.roles"))
	if err != nil {
		return nil, err
	}
	n.Roles = roles
	if n.Voters, err = parseVoters(v.String("controller.quorum.voters")); err != nil {
		return nil, err
	}
	kraft := roles.Broker || roles.Controller
	switch {
	case !kraft && len(n.Voters) == 0:
		n.Legacy = true
		n.Voters = nil
		n.Roles = Roles{Broker: true, Controller: true}
	case !kraft:
		return nil, kafkaErrorf("Missing configuration `process.roles`, which is required when controller.quorum.voters is set (without both, kmirror runs as a one-node cluster)")
	case len(n.Voters) == 0:
		if bs, _ := v.Get("controller.quorum.bootstrap.servers"); strings.TrimSpace(bs) != "" {
			return nil, fmt.Errorf("controller.quorum.bootstrap.servers (a dynamic quorum, KIP-853) is not supported yet: list the controllers in controller.quorum.voters")
		}
		return nil, kafkaErrorf("If using process.roles, controller.quorum.voters must contain a parseable set of voters.")
	}
	if !n.Legacy {
		if _, set := v.Get("node.id"); !set {
			return nil, kafkaErrorf("Missing configuration `node.id` which is required when `process.roles` is defined (i.e. when running in KRaft mode).")
		}
		if n.NodeID < 0 {
			return nil, fmt.Errorf("node.id must be at least 0 when process.roles is defined, got %d", n.NodeID)
		}
	}
	n.ControllerListenerNames = splitList(v.String("controller.listener.names"), true)
	if n.Legacy && len(n.ControllerListenerNames) > 0 {
		return nil, fmt.Errorf("controller.listener.names must be empty when process.roles is not set: %s", strings.Join(n.ControllerListenerNames, ","))
	}
	protocols, err := protocolMap(v, n)
	if err != nil {
		return nil, err
	}
	listenersValue := v.String("listeners")
	if n.Listeners, err = parseListeners("listeners", listenersValue, protocols, n.Legacy, true); err != nil {
		return nil, err
	}
	if n.Legacy && len(n.Listeners) != 1 {
		return nil, fmt.Errorf("listeners: a node without process.roles serves one listener, got %d in %q", len(n.Listeners), listenersValue)
	}
	advertised := n.Listeners
	if adv, _ := v.Get("advertised.listeners"); strings.TrimSpace(adv) != "" {
		if advertised, err = parseListeners("advertised.listeners", adv, protocols, n.Legacy, false); err != nil {
			return nil, err
		}
	}
	isController := func(name string) bool { return slices.Contains(n.ControllerListenerNames, name) }
	var controllerListeners []Listener
	for _, l := range n.Listeners {
		if isController(l.Name) {
			controllerListeners = append(controllerListeners, l)
		}
	}
	for _, l := range advertised {
		if !isController(l.Name) {
			n.AdvertisedListeners = append(n.AdvertisedListeners, l)
		}
	}
	if err := n.validateRoles(advertised, controllerListeners, protocols); err != nil {
		return nil, err
	}
	if n.Roles.Broker {
		if err := n.validateBroker(v); err != nil {
			return nil, err
		}
	}
	if !n.Legacy {
		for _, l := range advertised {
			if l.Host == "0.0.0.0" {
				return nil, kafkaErrorf("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.")
			}
		}
	}
	if err := n.validateSupported(protocols); err != nil {
		return nil, err
	}
	return n, nil
}

// validateRoles applies KafkaConfig's rules for the broker-only, controller-only and
// combined roles.
func (n *Node) validateRoles(advertised, controllerListeners []Listener, protocols map[string]string) error {
	if n.Legacy {
		return nil
	}
	_, voter := n.Voter(n.NodeID)
	if n.Roles.Controller {
		if !voter {
			return kafkaErrorf("If process.roles contains the 'controller' role, the node id %d must be included in the set of voters controller.quorum.voters=%s", n.NodeID, n.voterIDs())
		}
		if len(controllerListeners) == 0 {
			return fmt.Errorf("controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role")
		}
		for _, name := range n.ControllerListenerNames {
			if _, ok := n.Listener(name); !ok {
				return fmt.Errorf("controller.listener.names must only contain values appearing in the 'listeners' configuration when running the KRaft controller role")
			}
		}
	}
	switch {
	case n.Roles.Controller && !n.Roles.Broker:
		if len(controllerListeners) != len(n.Listeners) {
			return kafkaErrorf("The listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller")
		}
		if len(n.AdvertisedListeners) > 0 {
			return kafkaErrorf("The advertised.listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller")
		}
	case n.Roles.Broker && !n.Roles.Controller:
		if voter {
			return kafkaErrorf("If process.roles contains just the 'broker' role, the node id %d must not be included in the set of voters controller.quorum.voters=%s", n.NodeID, n.voterIDs())
		}
		if len(n.ControllerListenerNames) == 0 {
			return fmt.Errorf("controller.listener.names must contain at least one value when running KRaft with just the broker role")
		}
		if len(controllerListeners) > 0 {
			return fmt.Errorf("controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role")
		}
		for _, name := range n.ControllerListenerNames {
			if _, ok := protocols[name]; !ok {
				return kafkaErrorf("Controller listener with name %s defined in controller.listener.names not found in listener.security.protocol.map (an explicit security mapping for each controller listener is required if listener.security.protocol.map is non-empty, or if there are security protocols other than PLAINTEXT in use)", name)
			}
		}
		// A combined node may list its controller listener in advertised.listeners (the
		// controller's endpoint, Kafka 3.9+); a broker-only node has none to advertise.
		if len(advertised) != len(n.AdvertisedListeners) {
			return kafkaErrorf("The advertised.listeners config must not contain KRaft controller listeners from controller.listener.names when process.roles contains the broker role because Kafka clients that send requests via advertised listeners do not send requests to KRaft controllers -- they only send requests to KRaft brokers.")
		}
	}
	return nil
}

// validateBroker applies KafkaConfig's listener rules for every node with the broker
// role (Legacy included) and sets InterBrokerListenerName.
func (n *Node) validateBroker(v *Values) error {
	names := make([]string, len(n.AdvertisedListeners))
	for i, l := range n.AdvertisedListeners {
		names[i] = l.Name
	}
	if len(names) == 0 {
		return kafkaErrorf("There must be at least one broker advertised listener. Perhaps all listeners appear in controller.listener.names?")
	}
	ib := ProtocolPlaintext // Kafka: the listener named after security.inter.broker.protocol
	if s, _ := v.Get("security.inter.broker.protocol"); strings.TrimSpace(s) != "" {
		ib = strings.ToUpper(strings.TrimSpace(s))
	} else if n.Legacy {
		ib = names[0] // a one-node cluster has no inter-broker traffic: its one listener
	}
	if s, _ := v.Get("inter.broker.listener.name"); strings.TrimSpace(s) != "" {
		ib = strings.ToUpper(strings.TrimSpace(s))
	}
	if slices.Contains(n.ControllerListenerNames, ib) {
		return fmt.Errorf("inter.broker.listener.name %s is a controller listener (controller.listener.names): brokers reach each other on a broker listener, one of %s", ib, strings.Join(names, ","))
	}
	if !slices.Contains(names, ib) {
		return fmt.Errorf("inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are %s", strings.Join(names, ","))
	}
	for _, name := range names {
		if _, ok := n.Listener(name); !ok {
			var all []string
			for _, l := range n.Listeners {
				all = append(all, l.Name)
			}
			return fmt.Errorf("advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. Found %s. The valid options based on the current configuration are %s", strings.Join(names, ","), strings.Join(all, ","))
		}
	}
	n.InterBrokerListenerName = ib
	return nil
}

// validateSupported refuses a security protocol other than PLAINTEXT on the controller
// listeners of a multi-node cluster, which kmirror's nodes do not dial securely yet.
func (n *Node) validateSupported(protocols map[string]string) error {
	if n.Legacy {
		return nil
	}
	// The raft streams share the controller listener and the controller channel dials it:
	// neither speaks TLS or SASL yet (docs/security.md).
	for _, name := range n.ControllerListenerNames {
		if p, ok := protocols[name]; ok && p != ProtocolPlaintext {
			return fmt.Errorf("controller.listener.names: controller listener %s uses security protocol %s, which kmirror does not support yet between nodes (only PLAINTEXT; client listeners may use SSL, SASL_PLAINTEXT, SASL_SSL)", name, p)
		}
	}
	return nil
}

func (n *Node) voterIDs() string {
	ids := make([]string, 0, len(n.Voters))
	for _, v := range slices.SortedFunc(slices.Values(n.Voters), func(a, b Voter) int { return cmp.Compare(a.ID, b.ID) }) {
		ids = append(ids, strconv.Itoa(int(v.ID)))
	}
	return "[" + strings.Join(ids, ", ") + "]"
}

// parseRoles parses process.roles as Kafka's KafkaConfig.parseProcessRoles.
func parseRoles(s string) (Roles, error) {
	var r Roles
	list := splitList(s, false)
	for _, role := range list {
		seen := false
		switch role {
		case "broker":
			seen, r.Broker = r.Broker, true
		case "controller":
			seen, r.Controller = r.Controller, true
		default:
			return Roles{}, fmt.Errorf("process.roles: Unknown process role '%s' (only 'broker' and 'controller' are allowed roles)", role)
		}
		if seen {
			return Roles{}, kafkaErrorf("Duplicate role names found in `process.roles`: %s", strings.Join(list, ","))
		}
	}
	return r, nil
}

// parseVoters parses controller.quorum.voters as Kafka's QuorumConfig.parseVoterConnections,
// with routable addresses, and refuses a voter ID given twice.
func parseVoters(s string) ([]Voter, error) {
	const form = "Each entry should be in the form `{id}@{host}:{port}`."
	var voters []Voter
	for _, entry := range splitList(s, false) {
		id, addr, ok := strings.Cut(entry, "@")
		if !ok || strings.Contains(addr, "@") {
			return nil, kafkaErrorf("Invalid configuration value for controller.quorum.voters. %s", form)
		}
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("controller.quorum.voters: Failed to parse voter ID as a non-negative integer from %s", id)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || !validHost.MatchString(host) {
			return nil, kafkaErrorf("Failed to parse host name from entry %s for the configuration controller.quorum.voters. %s", entry, form)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return nil, kafkaErrorf("Failed to parse host port from entry %s for the configuration controller.quorum.voters. %s", entry, form)
		}
		if host == "0.0.0.0" {
			return nil, fmt.Errorf("controller.quorum.voters: host string (0.0.0.0) of entry %s is not routable", entry)
		}
		for _, v := range voters {
			if v.ID == int32(n) {
				return nil, fmt.Errorf("controller.quorum.voters: voter ID %d appears twice: %d@%s and %s", n, v.ID, v.Addr(), entry)
			}
		}
		voters = append(voters, Voter{ID: int32(n), Host: host, Port: p})
	}
	return voters, nil
}

// validHost is the host part Kafka's listener and voter patterns accept.
var validHost = regexp.MustCompile(`^[0-9a-zA-Z\-%._:]+$`)

// protocolMap returns Kafka's effectiveListenerSecurityProtocolMap: listener.security.
// protocol.map by upper-case listener name, plus, when the map is not set and
// process.roles is, PLAINTEXT for the controller listener names as long as no SSL or
// SASL name is in use.
func protocolMap(v *Values, n *Node) (map[string]string, error) {
	value, set := v.Get("listener.security.protocol.map")
	m := map[string]string{}
	for _, entry := range splitList(value, false) {
		i := strings.LastIndex(entry, ":")
		if i < 0 {
			return nil, fmt.Errorf("listener.security.protocol.map: entry %q is not NAME:PROTOCOL", entry)
		}
		name, proto := strings.ToUpper(strings.TrimSpace(entry[:i])), strings.ToUpper(strings.TrimSpace(entry[i+1:]))
		switch proto {
		case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		default:
			return nil, kafkaErrorf("Invalid security protocol `%s` defined in listener.security.protocol.map", entry[i+1:])
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener.security.protocol.map: listener name %s appears twice", name)
		}
		m[name] = proto
	}
	if set || n.Legacy {
		return m, nil
	}
	secure := func(name string) bool {
		return name == ProtocolSSL || name == ProtocolSASLSSL || name == ProtocolSASLPlaintext
	}
	if slices.ContainsFunc(n.ControllerListenerNames, secure) {
		return m, nil
	}
	for _, l := range splitList(v.String("listeners"), false) {
		if name, _, ok := strings.Cut(l, ":"); ok && secure(strings.ToUpper(name)) {
			return m, nil
		}
	}
	for _, name := range n.ControllerListenerNames {
		m[name] = ProtocolPlaintext
	}
	return m, nil
}

// listenerPattern is Kafka's SocketServerConfigs.URI_PARSE_REGEXP.
var listenerPattern = regexp.MustCompile(`^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$`)

// parseListeners parses a listeners-style value as Kafka's
// CoreUtils.listenerListToEndPoints: NAME://HOST:PORT entries with distinct names and,
// when distinctPorts, distinct ports (port 0 and an IPv4/IPv6 pair excepted). legacy
// also accepts a bare HOST:PORT as PLAINTEXT, as one-node kmirror always has.
func parseListeners(key, value string, protocols map[string]string, legacy, distinctPorts bool) ([]Listener, error) {
	var out []Listener
	for _, entry := range splitList(value, false) {
		e := entry
		if legacy && !strings.Contains(e, "://") {
			e = ProtocolPlaintext + "://" + e
		}
		m := listenerPattern.FindStringSubmatch(e)
		if m == nil {
			return nil, fmt.Errorf("%s: Unable to parse %s to a broker endpoint (NAME://HOST:PORT)", key, entry)
		}
		port, err := strconv.Atoi(m[3])
		if err != nil || port < 0 || port > 65535 {
			return nil, fmt.Errorf("%s: port of %s is out of range (0 to 65535)", key, entry)
		}
		l := Listener{Name: strings.ToUpper(m[1]), Host: m[2], Port: port}
		if l.SecurityProtocol = protocols[l.Name]; l.SecurityProtocol == "" {
			return nil, fmt.Errorf("%s: No security protocol defined for listener %s (set listener.security.protocol.map)", key, l.Name)
		}
		out = append(out, l)
	}
	for i, l := range out {
		for _, o := range out[:i] {
			if o.Name == l.Name {
				return nil, fmt.Errorf("%s: Each listener must have a different name, listeners: %s", key, value)
			}
		}
	}
	if distinctPorts {
		return out, checkPorts(key, value, out)
	}
	return out, nil
}

// checkPorts is Kafka's duplicate-port rule: listeners share a port only as one IPv4 and
// one IPv6 address; port 0 is exempt.
func checkPorts(key, value string, ls []Listener) error {
	byPort := map[int][]Listener{}
	for _, l := range ls {
		if l.Port != 0 {
			byPort[l.Port] = append(byPort[l.Port], l)
		}
	}
	for port, same := range byPort {
		if len(same) < 2 {
			continue
		}
		var v4, v6, named int
		for _, l := range same {
			switch ip := net.ParseIP(l.Host); {
			case ip == nil:
				named++
			case ip.To4() != nil:
				v4++
			default:
				v6++
			}
		}
		if named > 1 {
			return fmt.Errorf("%s: Each listener must have a different port, listeners: %s", key, value)
		}
		if v4+v6 > 0 && (v4 != 1 || v6 != 1 || named > 0) {
			return fmt.Errorf("%s: If you have two listeners on the same port then one needs to be IPv4 and the other IPv6, listeners: %s, port: %d", key, value, port)
		}
	}
	return nil
}

// splitList splits a comma-separated value, trimming entries and dropping empty ones
// (Kafka's Csv.parseCsvList); upper upper-cases them, as listener names are.
func splitList(s string, upper bool) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			if upper {
				p = strings.ToUpper(p)
			}
			out = append(out, p)
		}
	}
	return out
}
