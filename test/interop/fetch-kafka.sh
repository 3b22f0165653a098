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
# Java 17+ (Kafka 4.x brokers and tools need it) and Maven, from Debian's packages if missing.
if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
	if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
	$SUDO apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless maven >&2
fi
rm -rf "$libs"
mkdir -p "$libs"
mvn -q -B -f "$here/pom.xml" -Dkafka.version="$version" \
	dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs" >&2
touch "$libs/.complete"
echo "$libs"
