#!/usr/bin/env bash
# franz-go-seeds.sh BOOTSTRAP TOPIC GROUP — run.sh's adapter: franz-go's pkg/kgo suite
# (franz-go.sh) against the broker at BOOTSTRAP; prints FAIL: with the failed tests' names.
here=$(cd "$(dirname "$0")" && pwd)
[ "${1:-}" = --prepare ] && exec "$here/franz-go.sh" --prepare
out=$(KGO_SEEDS="$1" "$here/franz-go.sh" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ]; then
	failed=$(printf '%s\n' "$out" | sed -n 's/^FAIL \([A-Za-z0-9_]*\).*/\1/p' | tr '\n' ' ')
	echo "FAIL: $(printf '%s\n' "$out" | tail -1); failed: ${failed:-none listed}"
fi
exit $rc
