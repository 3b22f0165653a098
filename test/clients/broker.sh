# broker.sh — sourced by run.sh and franz-go.sh: builds kmirror and starts one broker on a free
# loopback port with a temp data dir. Sets KMIRROR_ADDR; kmirror_stop ends the broker.
# Extra broker settings: KMIRROR_OVERRIDES (space-separated key=value, Kafka config names).
# With KMIRROR_CONFIG (a server.properties file, passed as --config) its listeners stand: set
# KMIRROR_ADDR to the one to wait for, and KMIRROR_DATA to a directory already formatted
# (kmirror_build first) as the caller needs; log.dirs is KMIRROR_DATA/data.

CLIENTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$CLIENTS_DIR/../.." && pwd)
CACHE_DIR="$CLIENTS_DIR/.cache"
mkdir -p "$CACHE_DIR"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# kmirror_build builds KMIRROR_BIN into the cache (not the shared bin/).
kmirror_build() {
	KMIRROR_BIN="$CACHE_DIR/kmirror"
	(cd "$REPO_DIR" && go build -o "$KMIRROR_BIN" ./cmd/kmirror)
}

# kmirror_start builds kmirror and starts the broker.
kmirror_start() {
	kmirror_build || return 1
	KMIRROR_DATA=${KMIRROR_DATA:-$(mktemp -d /tmp/kmirror-clients.XXXXXX)}
	local args=(serve --node-id 1 --log-dirs "$KMIRROR_DATA/data" --log-level warn)
	if [ -n "${KMIRROR_CONFIG:-}" ]; then
		args+=(--config "$KMIRROR_CONFIG")
	else
		KMIRROR_ADDR="127.0.0.1:$(free_port)"
		args+=(--listeners "PLAINTEXT://$KMIRROR_ADDR" --advertised-listeners "PLAINTEXT://$KMIRROR_ADDR")
	fi
	local port=${KMIRROR_ADDR##*:}
	args+=(
		--override auto.create.topics.enable=true
		--override group.initial.rebalance.delay.ms=0)
	local kv
	for kv in ${KMIRROR_OVERRIDES:-}; do args+=(--override "$kv"); done
	(cd "$KMIRROR_DATA" && exec "$KMIRROR_BIN" "${args[@]}") >"$KMIRROR_DATA/broker.log" 2>&1 &
	KMIRROR_PID=$!
	local i
	for i in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "kmirror broker pid $KMIRROR_PID on $KMIRROR_ADDR (data $KMIRROR_DATA)" >&2
			return 0
		fi
		if ! kill -0 "$KMIRROR_PID" 2>/dev/null; then
			echo "kmirror exited; log:" >&2; cat "$KMIRROR_DATA/broker.log" >&2; return 1
		fi
		sleep 0.1
	done
	echo "kmirror did not listen on $KMIRROR_ADDR" >&2
	return 1
}

kmirror_stop() {
	if [ -n "${KMIRROR_PID:-}" ]; then
		kill "$KMIRROR_PID" 2>/dev/null
		wait "$KMIRROR_PID" 2>/dev/null
		KMIRROR_PID=
	fi
	if [ -n "${KMIRROR_DATA:-}" ] && [ -z "${KEEP_DATA:-}" ]; then rm -rf "$KMIRROR_DATA"; fi
}
