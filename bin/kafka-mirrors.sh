#!/usr/bin/env bash
# kafka-mirrors.sh: the first draft's name of kafka-cluster-mirrors.sh; same tool.
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka-cluster-mirrors.sh" "$@"
