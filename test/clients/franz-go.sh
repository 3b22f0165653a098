#!/usr/bin/env bash
# franz-go.sh — runs franz-go's own pkg/kgo test suite (module version FRANZ_VERSION) against
# one kmirror broker, through the variables the suite reads for an external cluster
# (pkg/kgo/helpers_test.go: KGO_SEEDS, KGO_TEST_RF, KGO_TEST_RECORDS, ...), and prints one line
# per test (PASS/FAIL/SKIP name) and a closing "N passed, M failed, K skipped".
#
#   test/clients/franz-go.sh [go test -run regexp | --prepare (fetch and build only)]
#
# Env: KGO_SEEDS (an already running broker; default: start one), FRANZ_VERSION (v1.22.3), KGO_TEST_RECORDS (20000; the suite's default is 500000),
# FRANZ_TIMEOUT (go test -timeout, 20m), KGO_TEST_UNSAFE (set by default: kmirror, like Apache
# Kafka, accepts EndAndBeginTransaction with EndBeginTxnUnsafe). The go test -json stream and the broker log are kept
# in test/clients/.cache/franz-go/ for reading failures.
set -uo pipefail
. "$(dirname "$0")/broker.sh"

FRANZ_VERSION=${FRANZ_VERSION:-v1.22.3}
RUN=${1:-.}
OUT="$CACHE_DIR/franz-go"
mkdir -p "$OUT"

# A throwaway module that requires franz-go, so `go test` runs the module's own test files
# from the module cache; the kmirror module gains no dependency.
MOD="$OUT/mod"
mkdir -p "$MOD"
cat >"$MOD/go.mod" <<EOM
module kmirror.test/franzgo

go 1.26

require github.com/twmb/franz-go $FRANZ_VERSION
EOM
printf 'package franzgo\n\nimport _ "github.com/twmb/franz-go/pkg/kgo"\n' >"$MOD/deps.go"
(cd "$MOD" && GOFLAGS=-mod=mod go mod download && GOFLAGS=-mod=mod go test -count=1 -run '^$' github.com/twmb/franz-go/pkg/kgo >/dev/null) \
	|| { echo "FAIL franz-go: cannot build the kgo test binary"; exit 1; }
[ "$RUN" = --prepare ] && exit 0

# With KGO_SEEDS set (run.sh), the suite runs against that broker; otherwise against its own.
if [ -n "${KGO_SEEDS:-}" ]; then
	KMIRROR_ADDR=$KGO_SEEDS
else
	trap 'KEEP_DATA=1 kmirror_stop; cp -f "${KMIRROR_DATA:-/nonexistent}/broker.log" "$OUT/broker.log" 2>/dev/null; rm -rf "${KMIRROR_DATA:-/nonexistent}"' EXIT
	kmirror_start || { echo "FAIL franz-go: broker did not start"; exit 1; }
fi

start=$(date +%s)
(cd "$MOD" && KGO_SEEDS="$KMIRROR_ADDR" KGO_TEST_RF=1 KGO_TEST_UNSAFE=1 KGO_TEST_RECORDS="${KGO_TEST_RECORDS:-20000}" \
	KGO_LOG_LEVEL="${KGO_LOG_LEVEL:-none}" GOFLAGS=-mod=mod \
	go test -count=1 -json -timeout "${FRANZ_TIMEOUT:-20m}" -run "$RUN" github.com/twmb/franz-go/pkg/kgo) >"$OUT/test.json" 2>"$OUT/test.stderr"
rc=$?
echo "go test exit $rc after $(( $(date +%s) - start ))s; stream in $OUT/test.json" >&2

python3 - "$OUT/test.json" <<'PY'
import json, sys
res, out = {}, {}
for line in open(sys.argv[1]):
    try:
        ev = json.loads(line)
    except ValueError:
        continue
    t = ev.get("Test")
    if not t or "/" in t:
        continue
    a = ev.get("Action")
    if a == "output":
        out.setdefault(t, []).append(ev.get("Output", ""))
    elif a in ("pass", "fail", "skip"):
        res[t] = a
    elif a == "run":
        res.setdefault(t, "run")
n = {"pass": 0, "fail": 0, "skip": 0}
for t in sorted(res):
    a = res[t]
    if a == "run":  # still running when the binary died or timed out
        a = "fail"
    n[a] += 1
    line = "%s %s" % (a.upper(), t)
    if a != "pass":
        why = [l.strip() for l in out.get(t, []) if l.strip() and not l.startswith(("=== ", "--- "))]
        if why:
            line += ": " + why[-1][:200]
    print(line)
print("%d passed, %d failed, %d skipped" % (n["pass"], n["fail"], n["skip"]))
sys.exit(1 if n["fail"] else 0)
PY
