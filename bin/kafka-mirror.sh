#!/usr/bin/env bash
# kafka-mirror.sh: the seed's singular name of kafka-cluster-mirrors.sh; same tool.
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka-cluster-mirrors.sh" "$@"
