#!/usr/bin/env bash
# security.sh — the client security matrix (`make clients-security`, part of `make test`): one
# kmirror broker with three listeners and the StandardAuthorizer on, and each client's smoke
# program (run.sh's scenario) over each listener:
#   SASL_SSL        SCRAM-SHA-512, user alice (bootstrapped with storage format --add-scram)
#   SASL_PLAINTEXT  PLAIN, user bob (the listener's PlainLoginModule user_bob)
#   SSL             ssl.client.auth=required, the client certificate's principal User:CN=carol
# The three principals are the only super users and allow.everyone.if.no.acl.found is false,
# so a client gets through only as the principal its listener gives it. The certificates
# (a CA, the broker's for 127.0.0.1, carol's) are made with openssl in a temp directory.
# Clients: java (kafka-clients), python (librdkafka through confluent-kafka), kafkajs; kcat and
# franz-go run the same matrix in internal/broker/security_test.go. Dependencies are fetched
# as run.sh does. Prints PASS/FAIL per client and listener and `N passed, M failed`; exits 1
# on any failure.
#
#   test/clients/security.sh [client ...]     (default: java python kafkajs)
set -uo pipefail
. "$(dirname "$0")/broker.sh"

CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-120}
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(java python kafkajs)

for c in "${clients[@]}"; do
	"$CLIENTS_DIR/$c/run.sh" --prepare >"$CACHE_DIR/$c.prepare.log" 2>&1 ||
		{ echo "FAIL $c: fetching or building its dependencies failed (log $CACHE_DIR/$c.prepare.log)"; exit 1; }
done

KMIRROR_DATA=$(mktemp -d /tmp/kmirror-clients-security.XXXXXX)
trap kmirror_stop EXIT
tls="$KMIRROR_DATA/tls"
mkdir -p "$tls"

# leaf NAME CN EKU: a P-256 key (PKCS#8) and a certificate signed by the CA, for 127.0.0.1.
leaf() {
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/$1.key" \
		-out "$tls/$1.csr" -subj "/CN=$2" 2>/dev/null &&
		openssl x509 -req -in "$tls/$1.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
			-days 1 -out "$tls/$1.pem" 2>/dev/null \
			-extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=%s\n' "$3")
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tls/ca.key" \
	-out "$tls/ca.pem" -days 1 -subj "/CN=kmirror-clients-ca" 2>/dev/null &&
	leaf server localhost serverAuth && leaf carol carol clientAuth &&
	cat "$tls/server.key" "$tls/server.pem" >"$tls/server-keystore.pem" &&
	openssl pkcs12 -export -inkey "$tls/carol.key" -in "$tls/carol.pem" -out "$tls/carol.p12" -passout pass:changeit ||
	{ echo "FAIL certificates: openssl failed"; exit 1; }

ssl_addr="127.0.0.1:$(free_port)" sasl_ssl_addr="127.0.0.1:$(free_port)" sasl_plain_addr="127.0.0.1:$(free_port)"
ctrl_addr="127.0.0.1:$(free_port)"
listeners="SASL_SSL://$sasl_ssl_addr,SASL_PLAINTEXT://$sasl_plain_addr,SSL://$ssl_addr"
KMIRROR_CONFIG="$KMIRROR_DATA/server.properties"
# A combined broker and controller (several client listeners need process.roles), its
# inter-broker listener SASL_PLAINTEXT as bob.
cat >"$KMIRROR_CONFIG" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$ctrl_addr
controller.listener.names=CONTROLLER
listener.security.protocol.map=SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_PLAINTEXT
sasl.mechanism.inter.broker.protocol=PLAIN
log.dirs=$KMIRROR_DATA/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
listeners=$listeners,CONTROLLER://$ctrl_addr
advertised.listeners=$listeners
ssl.keystore.type=PEM
ssl.keystore.location=$tls/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.pem
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="bob-secret" user_bob="bob-secret";
listener.name.ssl.ssl.client.auth=required
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:alice;User:bob;User:CN=carol
allow.everyone.if.no.acl.found=false
EOF
kmirror_build || { echo "FAIL broker: kmirror did not build"; exit 1; }
"$KMIRROR_BIN" storage format -t "$("$KMIRROR_BIN" storage random-uuid)" -c "$KMIRROR_CONFIG" \
	--add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]' >"$KMIRROR_DATA/format.log" 2>&1 ||
	{ echo "FAIL broker: storage format: $(tail -1 "$KMIRROR_DATA/format.log")"; exit 1; }
KMIRROR_ADDR=$sasl_ssl_addr
kmirror_start || { echo "FAIL broker: kmirror did not start"; exit 1; }

# settings CLIENT MODE FILE: write the client's security settings for MODE to FILE.
settings() {
	local scram=(alice alice-secret) plain=(bob bob-secret)
	case "$1:$2" in
	java:sasl_ssl) printf '%s\n' security.protocol=SASL_SSL sasl.mechanism=SCRAM-SHA-512 \
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"${scram[0]}\" password=\"${scram[1]}\";" \
		ssl.truststore.type=PEM "ssl.truststore.location=$tls/ca.pem" ;;
	java:sasl_plaintext) printf '%s\n' security.protocol=SASL_PLAINTEXT sasl.mechanism=PLAIN \
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"${plain[0]}\" password=\"${plain[1]}\";" ;;
	java:ssl) printf '%s\n' security.protocol=SSL ssl.truststore.type=PEM "ssl.truststore.location=$tls/ca.pem" \
		ssl.keystore.type=PKCS12 "ssl.keystore.location=$tls/carol.p12" ssl.keystore.password=changeit ;;
	python:sasl_ssl) printf '%s\n' security.protocol=SASL_SSL sasl.mechanisms=SCRAM-SHA-512 \
		"sasl.username=${scram[0]}" "sasl.password=${scram[1]}" "ssl.ca.location=$tls/ca.pem" ;;
	python:sasl_plaintext) printf '%s\n' security.protocol=SASL_PLAINTEXT sasl.mechanisms=PLAIN \
		"sasl.username=${plain[0]}" "sasl.password=${plain[1]}" ;;
	python:ssl) printf '%s\n' security.protocol=SSL "ssl.ca.location=$tls/ca.pem" \
		"ssl.certificate.location=$tls/carol.pem" "ssl.key.location=$tls/carol.key" ;;
	kafkajs:sasl_ssl) printf '{"ssl": {"ca": "%s"}, "sasl": {"mechanism": "scram-sha-512", "username": "%s", "password": "%s"}}\n' \
		"$tls/ca.pem" "${scram[@]}" ;;
	kafkajs:sasl_plaintext) printf '{"sasl": {"mechanism": "plain", "username": "%s", "password": "%s"}}\n' "${plain[@]}" ;;
	kafkajs:ssl) printf '{"ssl": {"ca": "%s", "cert": "%s", "key": "%s"}}\n' "$tls/ca.pem" "$tls/carol.pem" "$tls/carol.key" ;;
	*) return 1 ;;
	esac >"$3"
}

suite_start=$(date +%s)
pass=0 failn=0
for c in "${clients[@]}"; do
	for mode in sasl_ssl sasl_plaintext ssl; do
		case $mode in
		sasl_ssl) addr=$sasl_ssl_addr ;;
		sasl_plaintext) addr=$sasl_plain_addr ;;
		ssl) addr=$ssl_addr ;;
		esac
		what="$c over ${mode^^}"
		log="$CACHE_DIR/security-$c-$mode.log"
		conf="$KMIRROR_DATA/$c-$mode.conf"
		if ! settings "$c" "$mode" "$conf"; then
			echo "FAIL $what: unknown client"; failn=$((failn + 1)); continue
		fi
		start=$(date +%s)
		id="security-$c-$mode-$$"
		SMOKE_CLIENT_CONFIG=$conf timeout "$CLIENT_TIMEOUT" "$CLIENTS_DIR/$c/run.sh" "$addr" "$id" "$id" >"$log" 2>&1
		rc=$?
		took=$(($(date +%s) - start))
		if [ $rc -eq 0 ]; then
			echo "PASS $what (${took}s)"; pass=$((pass + 1))
		else
			reason=$(grep -E '^FAIL: ' "$log" | tail -1 | sed 's/^FAIL: //')
			[ $rc -eq 124 ] && reason="timed out after ${CLIENT_TIMEOUT}s"
			[ -n "$reason" ] || reason="exit $rc: $(tail -1 "$log")"
			echo "FAIL $what: $reason (log $log)"; failn=$((failn + 1))
		fi
	done
done
echo "wall time $(($(date +%s) - suite_start))s" >&2
echo "$pass passed, $failn failed"
[ $failn -eq 0 ]
