package config

import (
	"reflect"
	"strings"
	"testing"
)

func parseNode(t *testing.T, props map[string]string) (*Node, error) {
	t.Helper()
	v, err := NewValues(Broker, props, false)
	if err != nil {
		t.Fatalf("NewValues(%v): %v", props, err)
	}
	return ParseNode(v)
}

// combined is Apache Kafka's stock config/kraft/server.properties (3.9, 4.x): one
// broker,controller node advertising its controller listener too.
func combined() map[string]string {
	return map[string]string{
		"process.roles":                  "broker,controller",
		"node.id":                        "1",
		"controller.quorum.voters":       "1@localhost:9093",
		"listeners":                      "PLAINTEXT://:9092,CONTROLLER://:9093",
		"inter.broker.listener.name":     "PLAINTEXT",
		"advertised.listeners":           "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
		"controller.listener.names":      "CONTROLLER",
		"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
	}
}

// three voters; node.id 4 is a broker-only node of that cluster.
func brokerOnly() map[string]string {
	return map[string]string{
		"process.roles":             "broker",
		"node.id":                   "4",
		"controller.quorum.voters":  "1@c1:9093,2@c2:9093,3@c3:9093",
		"listeners":                 "PLAINTEXT://b4:9092",
		"controller.listener.names": "CONTROLLER",
	}
}

func controllerOnly() map[string]string {
	return map[string]string{
		"process.roles":             "controller",
		"node.id":                   "2",
		"controller.quorum.voters":  "1@c1:9093,2@c2:9093,3@c3:9093",
		"listeners":                 "CONTROLLER://c2:9093",
		"controller.listener.names": "CONTROLLER",
	}
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "<unset>" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

func plain(name, host string, port int) Listener {
	return Listener{Name: name, Host: host, Port: port, SecurityProtocol: ProtocolPlaintext}
}

// TestParseNodeValid checks the parsed node of accepted configs: Legacy as one-node
// kmirror has always run, and the KRaft role combinations with Kafka's defaults.
func TestParseNodeValid(t *testing.T) {
	legacy := func(l, adv Listener) *Node {
		return &Node{NodeID: 1, Roles: Roles{Broker: true, Controller: true}, Legacy: true,
			Listeners: []Listener{l}, AdvertisedListeners: []Listener{adv}, InterBrokerListenerName: "PLAINTEXT"}
	}
	cases := []struct {
		name  string
		props map[string]string
		want  *Node
	}{
		{"legacy defaults", nil, legacy(plain("PLAINTEXT", "localhost", 9092), plain("PLAINTEXT", "localhost", 9092))},
		{"legacy bare host:port", map[string]string{"listeners": "127.0.0.1:0"}, legacy(plain("PLAINTEXT", "127.0.0.1", 0), plain("PLAINTEXT", "127.0.0.1", 0))},
		{"legacy lower-case name, IPv6, advertised", map[string]string{"listeners": "plaintext://[::1]:9092", "advertised.listeners": "PLAINTEXT://broker1.example.com:9092"},
			legacy(plain("PLAINTEXT", "::1", 9092), plain("PLAINTEXT", "broker1.example.com", 9092))},
		{"legacy all interfaces", map[string]string{"listeners": "PLAINTEXT://:9092", "process.roles": ""}, legacy(plain("PLAINTEXT", "", 9092), plain("PLAINTEXT", "", 9092))},
		{"combined, Kafka's stock server.properties", combined(), &Node{NodeID: 1, Roles: Roles{Broker: true, Controller: true},
			Voters:                  []Voter{{1, "localhost", 9093}},
			Listeners:               []Listener{plain("PLAINTEXT", "", 9092), plain("CONTROLLER", "", 9093)},
			AdvertisedListeners:     []Listener{plain("PLAINTEXT", "localhost", 9092)},
			ControllerListenerNames: []string{"CONTROLLER"}, InterBrokerListenerName: "PLAINTEXT"}},
		{"combined, default map gives CONTROLLER PLAINTEXT", with(combined(), "listener.security.protocol.map", "<unset>", "advertised.listeners", "<unset>", "inter.broker.listener.name", "<unset>"),
			&Node{NodeID: 1, Roles: Roles{Broker: true, Controller: true},
				Voters:                  []Voter{{1, "localhost", 9093}},
				Listeners:               []Listener{plain("PLAINTEXT", "", 9092), plain("CONTROLLER", "", 9093)},
				AdvertisedListeners:     []Listener{plain("PLAINTEXT", "", 9092)},
				ControllerListenerNames: []string{"CONTROLLER"}, InterBrokerListenerName: "PLAINTEXT"}},
		{"broker-only", with(brokerOnly(), "broker.rack", " rack-a "), &Node{NodeID: 4, Roles: Roles{Broker: true},
			Voters:                  []Voter{{1, "c1", 9093}, {2, "c2", 9093}, {3, "c3", 9093}},
			Listeners:               []Listener{plain("PLAINTEXT", "b4", 9092)},
			AdvertisedListeners:     []Listener{plain("PLAINTEXT", "b4", 9092)},
			ControllerListenerNames: []string{"CONTROLLER"}, InterBrokerListenerName: "PLAINTEXT", Rack: "rack-a"}},
		{"controller-only", controllerOnly(), &Node{NodeID: 2, Roles: Roles{Controller: true},
			Voters:                  []Voter{{1, "c1", 9093}, {2, "c2", 9093}, {3, "c3", 9093}},
			Listeners:               []Listener{plain("CONTROLLER", "c2", 9093)},
			ControllerListenerNames: []string{"CONTROLLER"}}},
		{"named listeners, lower-case controller name, IPv4 and IPv6 on one port",
			map[string]string{
				"process.roles": "controller,broker", "node.id": "0", "controller.quorum.voters": "0@[::1]:9093",
				"listeners":                      "INTERNAL://127.0.0.1:9092,EXTERNAL://[::1]:9092,CTL://[::1]:9093",
				"listener.security.protocol.map": "internal:plaintext, EXTERNAL:PLAINTEXT ,CTL:PLAINTEXT",
				"controller.listener.names":      "ctl", "inter.broker.listener.name": "internal",
			},
			&Node{NodeID: 0, Roles: Roles{Broker: true, Controller: true},
				Voters:                  []Voter{{0, "::1", 9093}},
				Listeners:               []Listener{plain("INTERNAL", "127.0.0.1", 9092), plain("EXTERNAL", "::1", 9092), plain("CTL", "::1", 9093)},
				AdvertisedListeners:     []Listener{plain("INTERNAL", "127.0.0.1", 9092), plain("EXTERNAL", "::1", 9092)},
				ControllerListenerNames: []string{"CTL"}, InterBrokerListenerName: "INTERNAL"}},
		{"port 0 may repeat", with(combined(), "listeners", "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "advertised.listeners", "<unset>"),
			&Node{NodeID: 1, Roles: Roles{Broker: true, Controller: true},
				Voters:                  []Voter{{1, "localhost", 9093}},
				Listeners:               []Listener{plain("PLAINTEXT", "127.0.0.1", 0), plain("CONTROLLER", "127.0.0.1", 0)},
				AdvertisedListeners:     []Listener{plain("PLAINTEXT", "127.0.0.1", 0)},
				ControllerListenerNames: []string{"CONTROLLER"}, InterBrokerListenerName: "PLAINTEXT"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := parseNode(t, c.props)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(n, c.want) {
				t.Fatalf("got  %+v\nwant %+v", n, c.want)
			}
		})
	}
}

// TestParseNodeErrors checks every rule with Kafka's message (KafkaConfig.validateValues,
// QuorumConfig, CoreUtils.listenerListToEndPoints) or, for kmirror's own limits, a
// one-line message naming the key.
func TestParseNodeErrors(t *testing.T) {
	cases := []struct {
		name  string
		props map[string]string
		want  string // the whole message, or its start when it ends with "…"
	}{
		// process.roles
		{"unknown role", with(combined(), "process.roles", "Broker"), "process.roles: Unknown process role 'Broker' (only 'broker' and 'controller' are allowed roles)"},
		{"duplicate role", with(combined(), "process.roles", "broker,controller,broker"), "Duplicate role names found in `process.roles`: broker,controller,broker"},
		{"voters without roles", with(combined(), "process.roles", "<unset>"), "Missing configuration `process.roles`, which is required when controller.quorum.voters is set (without both, kmirror runs as a one-node cluster)"},
		{"roles without voters", with(combined(), "controller.quorum.voters", "<unset>"), "If using process.roles, controller.quorum.voters must contain a parseable set of voters."},
		{"dynamic quorum", with(combined(), "controller.quorum.voters", "<unset>", "controller.quorum.bootstrap.servers", "localhost:9093"), "controller.quorum.bootstrap.servers (a dynamic quorum, KIP-853) is not supported yet: list the controllers in controller.quorum.voters"},
		// node.id
		{"node.id unset", with(combined(), "node.id", "<unset>"), "Missing configuration `node.id` which is required when `process.roles` is defined (i.e. when running in KRaft mode)."},
		{"node.id negative", with(combined(), "node.id", "-1"), "node.id must be at least 0 when process.roles is defined, got -1"},
		// controller.quorum.voters
		{"voter without @", with(combined(), "controller.quorum.voters", "1localhost:9093"), "Invalid configuration value for controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`."},
		{"voter with two @", with(combined(), "controller.quorum.voters", "1@a@b:9093"), "Invalid configuration value for controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`."},
		{"voter ID not a number", with(combined(), "controller.quorum.voters", "x@localhost:9093"), "controller.quorum.voters: Failed to parse voter ID as a non-negative integer from x"},
		{"voter without port", with(combined(), "controller.quorum.voters", "1@localhost"), "Failed to parse host name from entry 1@localhost for the configuration controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`."},
		{"voter port 0", with(combined(), "controller.quorum.voters", "1@localhost:0"), "Failed to parse host port from entry 1@localhost:0 for the configuration controller.quorum.voters. Each entry should be in the form `{id}@{host}:{port}`."},
		{"voter not routable", with(combined(), "controller.quorum.voters", "1@0.0.0.0:9093"), "controller.quorum.voters: host string (0.0.0.0) of entry 1@0.0.0.0:9093 is not routable"},
		{"duplicate voter ID", with(combined(), "controller.quorum.voters", "1@a:9093,1@b:9093"), "controller.quorum.voters: voter ID 1 appears twice: 1@a:9093 and 1@b:9093"},
		// controller role
		{"controller not a voter", with(controllerOnly(), "node.id", "5"), "If process.roles contains the 'controller' role, the node id 5 must be included in the set of voters controller.quorum.voters=[1, 2, 3]"},
		{"combined not a voter", with(combined(), "controller.quorum.voters", "3@c3:1,2@c2:1"), "If process.roles contains the 'controller' role, the node id 1 must be included in the set of voters controller.quorum.voters=[2, 3]"},
		{"controller without controller.listener.names", with(controllerOnly(), "controller.listener.names", "<unset>", "listener.security.protocol.map", "CONTROLLER:PLAINTEXT"), "controller.listener.names must contain at least one value appearing in the 'listeners' configuration when running the KRaft controller role"},
		{"controller listener not listened on", with(combined(), "controller.listener.names", "CONTROLLER,OTHER", "listener.security.protocol.map", "<unset>"), "controller.listener.names must only contain values appearing in the 'listeners' configuration when running the KRaft controller role"},
		{"controller-only with a broker listener", with(controllerOnly(), "listeners", "CONTROLLER://c2:9093,PLAINTEXT://c2:9092"), "The listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller"},
		{"controller-only advertising a broker listener", with(controllerOnly(), "advertised.listeners", "PLAINTEXT://c2:9092"), "The advertised.listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller"},
		// broker-only role
		{"broker is a voter", with(brokerOnly(), "node.id", "2"), "If process.roles contains just the 'broker' role, the node id 2 must not be included in the set of voters controller.quorum.voters=[1, 2, 3]"},
		{"broker without controller.listener.names", with(brokerOnly(), "controller.listener.names", "<unset>"), "controller.listener.names must contain at least one value when running KRaft with just the broker role"},
		{"broker listening on a controller listener", with(brokerOnly(), "listeners", "PLAINTEXT://b4:9092,CONTROLLER://b4:9093"), "controller.listener.names must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role"},
		{"broker's controller listener not in the map", with(brokerOnly(), "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT"), "Controller listener with name CONTROLLER defined in controller.listener.names not found in listener.security.protocol.map (an explicit security mapping for each controller listener is required if listener.security.protocol.map is non-empty, or if there are security protocols other than PLAINTEXT in use)"},
		{"broker advertising a controller listener", with(brokerOnly(), "advertised.listeners", "PLAINTEXT://b4:9092,CONTROLLER://b4:9093"), "The advertised.listeners config must not contain KRaft controller listeners from controller.listener.names when process.roles contains the broker role because Kafka clients that send requests via advertised listeners do not send requests to KRaft controllers -- they only send requests to KRaft brokers."},
		{"broker's controller listener not PLAINTEXT", with(brokerOnly(), "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"), "controller.listener.names: controller listener CONTROLLER uses security protocol SSL, which kmirror does not support yet between nodes (only PLAINTEXT; client listeners may use SSL, SASL_PLAINTEXT, SASL_SSL)"},
		// broker listeners
		{"no broker listener", with(combined(), "listeners", "CONTROLLER://:9093", "advertised.listeners", "<unset>"), "There must be at least one broker advertised listener. Perhaps all listeners appear in controller.listener.names?"},
		{"inter.broker.listener.name not a listener", with(combined(), "inter.broker.listener.name", "REPLICATION"), "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are PLAINTEXT"},
		{"default inter.broker.listener.name missing", with(brokerOnly(), "listeners", "INTERNAL://b4:9092", "listener.security.protocol.map", "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"), "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are INTERNAL"},
		{"inter.broker.listener.name a controller listener", with(combined(), "inter.broker.listener.name", "controller"), "inter.broker.listener.name CONTROLLER is a controller listener (controller.listener.names): brokers reach each other on a broker listener, one of PLAINTEXT"},
		{"advertised unparsable", with(combined(), "advertised.listeners", "PLAINTEXT://h:9092,SASL:// h:9094", "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL:PLAINTEXT"), "advertised.listeners: Unable to parse SASL:// h:9094 to a broker endpoint (NAME://HOST:PORT)"},
		{"advertised name not in listeners", with(combined(), "advertised.listeners", "PLAINTEXT://h:9092,OTHER://h:9094", "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,OTHER:PLAINTEXT"), "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. Found PLAINTEXT,OTHER. The valid options based on the current configuration are PLAINTEXT,CONTROLLER"},
		{"advertised 0.0.0.0", with(combined(), "advertised.listeners", "PLAINTEXT://0.0.0.0:9092"), "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."},
		// listeners
		{"duplicate listener name", with(combined(), "listeners", "PLAINTEXT://:9092,CONTROLLER://:9093,PLAINTEXT://:9094"), "listeners: Each listener must have a different name, listeners: PLAINTEXT://:9092,CONTROLLER://:9093,PLAINTEXT://:9094"},
		{"duplicate advertised name", with(combined(), "advertised.listeners", "PLAINTEXT://a:9092,PLAINTEXT://b:9092"), "advertised.listeners: Each listener must have a different name, listeners: PLAINTEXT://a:9092,PLAINTEXT://b:9092"},
		{"duplicate port", with(combined(), "listeners", "PLAINTEXT://:9092,CONTROLLER://:9092"), "listeners: Each listener must have a different port, listeners: PLAINTEXT://:9092,CONTROLLER://:9092"},
		{"duplicate port, two IPv4", with(combined(), "listeners", "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.2:9092"), "listeners: If you have two listeners on the same port then one needs to be IPv4 and the other IPv6, listeners: PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.2:9092, port: 9092"},
		{"no protocol for the name", with(combined(), "listeners", "PLAINTEXT://:9092,CONTROLLER://:9093,CLIENT://:9094"), "listeners: No security protocol defined for listener CLIENT (set listener.security.protocol.map)"},
		{"not a listener", with(combined(), "listeners", "PLAINTEXT:/:9092"), "listeners: Unable to parse PLAINTEXT:/:9092 to a broker endpoint (NAME://HOST:PORT)"},
		{"port out of range", with(combined(), "listeners", "PLAINTEXT://:70000,CONTROLLER://:9093"), "listeners: port of PLAINTEXT://:70000 is out of range (0 to 65535)"},
		{"SSL controller listener not supported", with(combined(), "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"), "controller.listener.names: controller listener CONTROLLER uses security protocol SSL, which kmirror does not support yet between nodes (only PLAINTEXT; client listeners may use SSL, SASL_PLAINTEXT, SASL_SSL)"},
		// listener.security.protocol.map
		{"no PLAINTEXT default for the controller when an SSL listener is in use", with(combined(), "listener.security.protocol.map", "<unset>", "listeners", "PLAINTEXT://:9092,CONTROLLER://:9093,SSL://:9094"), "listeners: No security protocol defined for listener CONTROLLER (set listener.security.protocol.map)"},
		{"no PLAINTEXT default when a controller listener is named SASL_SSL", with(brokerOnly(), "controller.listener.names", "CONTROLLER,SASL_SSL"), "Controller listener with name CONTROLLER defined in controller.listener.names not found in listener.security.protocol.map (an explicit security mapping for each controller listener is required if listener.security.protocol.map is non-empty, or if there are security protocols other than PLAINTEXT in use)"},
		{"unknown protocol", with(combined(), "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:TLS"), "Invalid security protocol `TLS` defined in listener.security.protocol.map"},
		{"map entry without protocol", with(combined(), "listener.security.protocol.map", "PLAINTEXT"), `listener.security.protocol.map: entry "PLAINTEXT" is not NAME:PROTOCOL`},
		{"map name twice", with(combined(), "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,plaintext:SSL"), "listener.security.protocol.map: listener name PLAINTEXT appears twice"},
		// Legacy
		{"legacy with two listeners", map[string]string{"listeners": "PLAINTEXT://:9092,OTHER://:9093", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"}, `listeners: a node without process.roles serves one listener, got 2 in "PLAINTEXT://:9092,OTHER://:9093"`},
		{"legacy without a listener", map[string]string{"listeners": " "}, `listeners: a node without process.roles serves one listener, got 0 in ""`},
		{"legacy with controller.listener.names", map[string]string{"controller.listener.names": "CONTROLLER"}, "controller.listener.names must be empty when process.roles is not set: CONTROLLER"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := parseNode(t, c.props)
			if err == nil {
				t.Fatalf("accepted: %+v", n)
			}
			if err.Error() != c.want {
				t.Fatalf("error\n  %s\nwant\n  %s", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error has several lines: %q", err)
			}
		})
	}
}

// TestNodeLookups checks the accessors the broker and the controller use.
func TestNodeLookups(t *testing.T) {
	n, err := parseNode(t, combined())
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := n.ControllerListener(); !ok || l.Addr() != ":9093" || l.String() != "CONTROLLER://:9093" {
		t.Errorf("ControllerListener() = %v, %v", l, ok)
	}
	if l, ok := n.Listener("plaintext"); !ok || l.Port != 9092 {
		t.Errorf("Listener(plaintext) = %v, %v", l, ok)
	}
	if v, ok := n.Voter(1); !ok || v.Addr() != "localhost:9093" {
		t.Errorf("Voter(1) = %v, %v", v, ok)
	}
	if _, ok := n.Voter(2); ok {
		t.Error("Voter(2) found")
	}
	if got := n.Roles.String(); got != "broker,controller" {
		t.Errorf("Roles = %q", got)
	}
	b, err := parseNode(t, brokerOnly())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.ControllerListener(); ok || b.Roles.String() != "broker" || (Roles{}).String() != "" {
		t.Errorf("broker-only: ControllerListener found or roles %q", b.Roles)
	}
	six := Listener{Name: "PLAINTEXT", Host: "::1", Port: 9092}
	if six.String() != "PLAINTEXT://[::1]:9092" {
		t.Errorf("IPv6 listener = %s", six)
	}
}

// TestLogDir checks Kafka's precedence log.dirs > log.dir and the one-directory limit.
func TestLogDir(t *testing.T) {
	cases := []struct {
		set  map[string]string
		want string
		err  string
	}{
		{nil, "./data", ""},
		{map[string]string{"log.dir": "/var/kmirror"}, "/var/kmirror", ""},
		{map[string]string{"log.dir": "/x", "log.dirs": " /y "}, "/y", ""},
		{map[string]string{"log.dirs": "/a,/b"}, "", `log.dirs: kmirror uses one data directory, got "/a,/b"`},
		{map[string]string{"log.dirs": ""}, "", "At least one log directory must be defined via log.dirs or log.dir."},
	}
	for _, c := range cases {
		v, err := NewValues(Broker, c.set, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := LogDir(v)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && err.Error() != c.err) {
			t.Errorf("LogDir(%v) = %q, %v; want %q, %s", c.set, got, err, c.want, c.err)
		}
	}
}
