#!/usr/bin/env bash
# Java client smoke test: java/run.sh BOOTSTRAP TOPIC GROUP.
# With --prepare it only fetches and builds. Fetches kafka-clients with Maven into
# test/clients/.cache/java/libs once, compiles Smoke.java, runs it with java -cp.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache="$here/../.cache/java"
if [ ! -f "$cache/libs/.done" ]; then
	(cd "$here" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$cache/libs" >&2)
	touch "$cache/libs/.done"
fi
if [ ! -f "$cache/classes/Smoke.class" ] || [ "$here/Smoke.java" -nt "$cache/classes/Smoke.class" ]; then
	javac -nowarn -cp "$cache/libs/*" -d "$cache/classes" "$here/Smoke.java"
fi
[ "${1:-}" = --prepare ] && exit 0
exec java -cp "$cache/classes:$cache/libs/*" Smoke "$@"
