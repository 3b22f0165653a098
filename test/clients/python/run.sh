#!/usr/bin/env bash
# confluent-kafka (librdkafka) smoke test: python/run.sh BOOTSTRAP TOPIC GROUP.
# With --prepare it only fetches and builds. Installs
# requirements.txt into a venv under test/clients/.cache/py once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/../.cache/py"
if [ ! -f "$venv/.done" ]; then
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q -r "$here/requirements.txt" >&2
	touch "$venv/.done"
fi
[ "${1:-}" = --prepare ] && exit 0
exec "$venv/bin/python" "$here/smoke.py" "$@"
