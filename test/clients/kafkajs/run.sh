#!/usr/bin/env bash
# kafkajs smoke test: kafkajs/run.sh BOOTSTRAP TOPIC GROUP.
# With --prepare it only fetches and builds. npm ci into kafkajs/node_modules once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/node_modules/kafkajs" ]; then
	(cd "$here" && npm ci --no-audit --no-fund >&2)
fi
export KAFKAJS_NO_PARTITIONER_WARNING=1
[ "${1:-}" = --prepare ] && exit 0
exec node "$here/smoke.js" "$@"
