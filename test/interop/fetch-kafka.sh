#!/usr/bin/env bash
# fetch-kafka.sh [--broker] [VERSION] — downloads Apache Kafka's jars (kafka_2.13,
# kafka-tools, kafka-server, connect-mirror, connect-runtime and their dependencies) from
# Maven Central into the git-ignored cache .cache/kafka-VERSION/libs of the project, once.
# With --broker, and always for a version before 4.0, only the broker (kafka_2.13 and its
# dependencies, ZooKeeper among them before 4.0, by pom-broker.xml) is fetched, into
# .cache/kafka-VERSION-broker/libs for 4.x (Maven Central lacks connect-mirror 4.4.0) and
# .cache/kafka-VERSION/libs before 4.0. Prints the libs directory. Idempotent: a finished
# download is marked by libs/.complete and reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
broker=
if [ "${1:-}" = --broker ]; then
	broker=1
	shift
fi
version="${1:-${KAFKA_VERSION:-4.3.1}}"
pom="$here/pom.xml"
dir="kafka-$version"
case "$version" in
[0-3].*) pom="$here/pom-broker.xml" ;;
*) if [ -n "$broker" ]; then
	pom="$here/pom-broker.xml"
	dir="kafka-$version-broker"
fi ;;
esac
libs="$root/.cache/$dir/libs"
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
mvn -q -B -f "$pom" -Dkafka.version="$version" \
	dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs" >&2
touch "$libs/.complete"
echo "$libs"
