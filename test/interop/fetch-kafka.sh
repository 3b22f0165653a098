#!/usr/bin/env bash
# fetch-kafka.sh [VERSION] — downloads Apache Kafka's jars (kafka_2.13, kafka-tools,
# kafka-server, connect-mirror, connect-runtime and their dependencies) from Maven Central
# into the git-ignored cache .cache/kafka-VERSION/libs of the project, once. Prints the libs
# directory. Idempotent: a finished download is marked by libs/.complete and reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version="${1:-${KAFKA_VERSION:-4.3.1}}"
libs="$root/.cache/kafka-$version/libs"
if [ -f "$libs/.complete" ]; then
	echo "$libs"
	exit 0
fi
command -v mvn >/dev/null || { echo "fetch-kafka.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
command -v java >/dev/null || { echo "fetch-kafka.sh: java not found (Kafka 4.x needs Java 17+)" >&2; exit 1; }
rm -rf "$libs"
mkdir -p "$libs"
mvn -q -B -f "$here/pom.xml" -Dkafka.version="$version" \
	dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs" >&2
touch "$libs/.complete"
echo "$libs"
