#!/usr/bin/env bash
# run.sh — the client smoke suite (`make clients`): starts one kmirror broker and runs, against
# it, the same scenario with each client (create a 2-partition topic, produce, consume in a group
# and commit, then resume from the commit with a new consumer after producing more):
#   java      Apache Kafka's Java client, kafka-clients (java/, Maven)
#   python    librdkafka through confluent-kafka (python/, PyPI, venv in .cache/py)
#   kafkajs   kafkajs (kafkajs/, npm, kafkajs/node_modules)
#   sarama    IBM/sarama at its default protocol version (2.8) and at 4.0 (go/, own go.mod)
#   kafka-go  segmentio/kafka-go (go/)
#   franz-go  franz-go's own pkg/kgo test suite (franz-go.sh, about a minute); its per-test
#             results are in .cache/franz-go.log
# Dependencies are fetched once into git-ignored folders. Prints `PASS client` or
# `FAIL client: reason` per client and a closing `N passed, M failed`; exits 1 on any failure.
#
#   test/clients/run.sh [client ...]     (default: all)
set -uo pipefail
. "$(dirname "$0")/broker.sh"

CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-300}
ALL=(java python kafkajs sarama sarama-4.0 kafka-go franz-go)
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=("${ALL[@]}")

# The Go clients build from their own module so kmirror's go.mod gains no dependency.
build_go() {
	mkdir -p "$CACHE_DIR/go-bin"
	(cd "$CLIENTS_DIR/go" && GOFLAGS=-mod=mod go build -o "$CACHE_DIR/go-bin/" ./sarama ./kafkago) >"$CACHE_DIR/go.prepare.log" 2>&1
}

cmd_for() {
	case "$1" in
	java) echo "$CLIENTS_DIR/java/run.sh" ;;
	python) echo "$CLIENTS_DIR/python/run.sh" ;;
	kafkajs) echo "$CLIENTS_DIR/kafkajs/run.sh" ;;
	sarama | sarama-4.0) echo "$CACHE_DIR/go-bin/sarama" ;;
	kafka-go) echo "$CACHE_DIR/go-bin/kafkago" ;;
	franz-go) echo "$CLIENTS_DIR/franz-go-seeds.sh" ;;
	*) return 1 ;;
	esac
}

suite_start=$(date +%s)
# Fetch and build every client first, outside the per-client time bound (a first run downloads).
prep_failed=()
for c in "${clients[@]}"; do
	case "$c" in
	java | python | kafkajs | franz-go) "$(cmd_for "$c")" --prepare >"$CACHE_DIR/$c.prepare.log" 2>&1 || prep_failed+=("$c") ;;
	esac
done
case " ${clients[*]} " in
*" sarama "* | *" sarama-4.0 "* | *" kafka-go "*) build_go || prep_failed+=(sarama sarama-4.0 kafka-go) ;;
esac

trap kmirror_stop EXIT
kmirror_start || { echo "FAIL broker: kmirror did not start"; echo "0 passed, ${#clients[@]} failed"; exit 1; }

pass=0 failn=0
for c in "${clients[@]}"; do
	log="$CACHE_DIR/$c.log"
	start=$(date +%s)
	if ! cmd=$(cmd_for "$c"); then
		echo "FAIL $c: unknown client or build failed"; failn=$((failn + 1)); continue
	fi
	if [[ " ${prep_failed[*]} " == *" $c "* ]]; then
		echo "FAIL $c: fetching or building its dependencies failed (logs $CACHE_DIR/*.prepare.log)"
		failn=$((failn + 1)); continue
	fi
	extra=()
	[ "$c" = sarama-4.0 ] && extra=(4.0.0)
	id="smoke-$c-$$"
	timeout "$CLIENT_TIMEOUT" "$cmd" "$KMIRROR_ADDR" "$id" "$id" "${extra[@]}" >"$log" 2>&1
	rc=$?
	took=$(( $(date +%s) - start ))
	if [ $rc -eq 0 ]; then
		echo "PASS $c (${took}s)"; pass=$((pass + 1))
	else
		reason=$(grep -E '^FAIL: ' "$log" | tail -1 | sed 's/^FAIL: //')
		[ $rc -eq 124 ] && reason="timed out after ${CLIENT_TIMEOUT}s"
		[ -n "$reason" ] || reason="exit $rc: $(tail -1 "$log")"
		echo "FAIL $c: $reason (log $log)"; failn=$((failn + 1))
	fi
done
echo "wall time $(( $(date +%s) - suite_start ))s" >&2
echo "$pass passed, $failn failed"
[ $failn -eq 0 ]
