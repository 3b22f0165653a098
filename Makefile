# kmirror — build, test and benchmark. `make test` is what CI runs (.ci/run).
GO ?= go
BIN := bin/kmirror
# Packages whose state is shared between goroutines run under the race detector.
RACE_PKGS := ./internal/wire/... ./internal/netmux/... ./internal/storage/... ./internal/partition/... ./internal/replication/... ./internal/metadata/... ./internal/controller/... ./internal/group/... ./internal/txn/... ./internal/mirror/... ./internal/broker/... ./internal/acl/... ./internal/security/... ./internal/console/...

.PHONY: build test unit race fuzz checks tour lint deps docs bench bench-cluster bench-replication bench-cleaner bench-security bench-slowlink bench-mirror-rf3 interop bench-broker clients clients-security robustness

build:
	$(GO) build -o $(BIN) ./cmd/kmirror

# deps installs what the tests need on a fresh Debian machine (kcat, staticcheck).
deps:
	./scripts/install-deps.sh

lint:
	$(GO) vet ./...
	./scripts/staticcheck.sh ./...

unit:
	$(GO) test -count=1 ./...

race:
	$(GO) test -count=1 -race $(RACE_PKGS)

# fuzz runs each fuzz target for a bounded time over its committed seed corpus.
fuzz:
	./scripts/fuzz.sh 20s

# checks runs the outside-in acceptance checks shipped in ../shared/checks, if present.
checks: build
	@if [ -x ../shared/checks/run ]; then ../shared/checks/run; else echo "no ../shared/checks here; skipped"; fi

# robustness runs test/robustness, the replication fault matrix of cluster.md §4 (kill -9,
# SIGTERM, SIGSTOP and toxiproxy cuts on 3-node clusters under an acks=all workload and its
# checker), in its long form (KMIRROR_ROBUSTNESS=1: more fault rounds per scenario),
# ROBUSTNESS_COUNT times over (3; about 10 minutes a pass on 2 cores). `make unit` (CI) runs
# the bounded form of every scenario, about 3 minutes. Not part of `make test`.
ROBUSTNESS_COUNT ?= 3
robustness:
	KMIRROR_ROBUSTNESS=1 $(GO) test -count=$(ROBUSTNESS_COUNT) -timeout 120m -v ./test/robustness/

# interop runs test/interop against Apache Kafka 4.3.1, and mirrors from 2.6.3 (ZooKeeper),
# 3.9.1 and 4.4.0 sources (Java 17+ and mvn needed; the jars are fetched once into
# .cache/kafka-VERSION[-broker]/libs by test/interop/fetch-kafka.sh).
interop:
	KMIRROR_INTEROP=1 $(GO) test -count=1 -timeout 20m ./test/interop/...

# clients runs other clients against one kmirror broker (test/clients/run.sh): a smoke test each
# for kafka-clients (Java), confluent-kafka (librdkafka), kafkajs, sarama and kafka-go, and
# franz-go's own pkg/kgo suite. Needs java/mvn, python3, node/npm; dependencies are fetched once
# into test/clients/.cache and test/clients/kafkajs/node_modules. Not part of `make test`.
clients:
	./test/clients/run.sh

# clients-security runs test/clients/security.sh: kafka-clients (Java), confluent-kafka
# (librdkafka) and kafkajs each produce and consume on one kmirror broker over SASL_SSL with
# SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN and SSL with a client certificate, the
# StandardAuthorizer on (about 40 s once the clients are fetched; needs what `make deps`
# installs). Part of `make test`.
clients-security:
	./test/clients/security.sh

# tour runs the README's first command and its tour as written, in an 80x24 tmux session
# from a clean clone (test/tour/readme-tour.sh; needs ports 9091, 9094, 9191 and 9194).
tour:
	./test/tour/readme-tour.sh

test: deps lint unit race fuzz interop clients-security checks tour
	@echo "make test: all passed"

docs:
	$(GO) run ./cmd/kmirror config-docs > docs/configuration.md

# bench-broker measures produce/consume throughput, produce latency and the broker's
# peak RSS with franz-go against the built binary (about a minute); results go to
# bench/results/broker-<date>.json. A benchmark, not a test: CI does not run it.
bench-broker:
	$(GO) run ./bench/broker

# bench runs bench/versus: kmirror against a single-node Apache Kafka 4.x broker and kmirror
# Cluster Mirroring against MirrorMaker 2, on loopback, in one run (about 10 minutes on 2
# cores; the Kafka jars come from test/interop/fetch-kafka.sh). It prints the comparison
# tables with ratios kmirror / reference and writes bench/results/versus-<date>.{json,md}.
# A benchmark, not a test: CI does not run it.
bench:
	$(GO) run ./bench/versus $(BENCH_FLAGS)

# bench-cluster runs bench/versus -only cluster: a 3-node kmirror cluster against a 3-node
# Apache Kafka 4.x KRaft cluster (combined broker+controller nodes, RF 1, loopback), one after
# the other (about 2 minutes on 2 cores); writes bench/results/cluster-<date>.{json,md}.
# A benchmark, not a test: CI does not run it.
bench-cluster:
	$(GO) run ./bench/versus -only cluster $(BENCH_FLAGS)

# bench-replication runs bench/versus -only replication (issue 14): the same two 3-node
# clusters, one after the other, with replication factor 3, min.insync.replicas 2, acks=all
# and 1 KiB records: produce and consume throughput and fixed-rate produce latency (medians
# of short rounds), each node's peak RSS, and leader failover (kill -9 of a partition
# leader under a steady producer → the first acknowledged write to each partition it led;
# broker.session.timeout.ms and the other failure-detection keys set the same for both).
# About 7 minutes on 2 cores; writes bench/results/replication-<date>.{json,md}.
# A benchmark, not a test: CI does not run it.
bench-replication:
	$(GO) run ./bench/versus -only replication $(BENCH_FLAGS)

# bench-cleaner runs bench/versus -only cleaner (issue 18): produce latency (acks=all, a
# fixed rate) on a compacted 2 GB partition while the log cleaner works on it, against the
# same without cleaning, for kmirror built at 3f101bc (the pass under the append lock) and
# at HEAD. About 3 minutes on 2 cores; writes bench/results/cleaner-<date>.{json,md}.
# A benchmark, not a test: CI does not run it.
bench-cleaner:
	$(GO) run ./bench/versus -only cleaner $(BENCH_FLAGS)

# bench-security runs bench/versus -only security (issue 16): produce and consume
# throughput and produce latency over SASL_SSL (SCRAM-SHA-512) against PLAINTEXT, on one
# kmirror broker and on one Apache Kafka 4.x broker. About 3 minutes on 2 cores; writes
# bench/results/security-<date>.{json,md}. A benchmark, not a test: CI does not run it.
bench-security:
	$(GO) run ./bench/versus -only security $(BENCH_FLAGS)

# bench-slowlink runs bench/versus -only slowlink (issue 15): kmirror (default, and tuned
# with fetch.response.max.bytes=32 MiB) and MirrorMaker 2 mirroring a 1- and a
# 16-partition backlog from one Apache Kafka broker through a toxiproxy proxy adding 0, 25
# and 50 ms of round-trip time, as ratios to the 0 ms rate and to MirrorMaker 2. About 8
# minutes on 2 cores; writes bench/results/slowlink-<date>.{json,md}. A benchmark, not a
# test: CI does not run it.
bench-slowlink:
	$(GO) run ./bench/versus -only slowlink $(BENCH_FLAGS)

# bench-mirror-rf3 runs bench/versus -only mirror-rf3 (issue 15): an Apache Kafka broker's
# 16-partition 2 GB backlogs mirrored into one 3-node kmirror cluster by kmirror into RF 1 mirror
# topics, by kmirror into RF 3 mirror topics, and by MirrorMaker 2 with replication factor
# 3: catch-up MB/s, end-to-end lag p50/p99 at a fixed live rate and CPU per GB, as ratios
# RF 3 / RF 1 and kmirror / MirrorMaker 2. About 4 minutes on 2 cores; writes
# bench/results/mirror-rf3-<date>.{json,md}. A benchmark, not a test: CI does not run it.
bench-mirror-rf3:
	$(GO) run ./bench/versus -only mirror-rf3 $(BENCH_FLAGS)
