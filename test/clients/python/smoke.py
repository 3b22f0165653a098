"""Smoke test of librdkafka through confluent-kafka against kmirror, run by python/run.sh.

Creates a 2-partition topic with AdminClient, produces 6 records, consumes them in a group and
commits, closes; produces 4 more, and a new consumer in the same group must resume from the
commit (exactly the 4 new records). The producer is idempotent and compresses with lz4. Exits 1 with a one-line reason on failure.
SMOKE_CLIENT_CONFIG names a file of librdkafka settings, key=value a line (security.protocol,
sasl.*, ssl.*; test/clients/security.sh), that every client gets.
"""
import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, group = sys.argv[1:4]


def load_settings():
    path = os.environ.get("SMOKE_CLIENT_CONFIG")
    if not path:
        return {}
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


settings = load_settings()


def conf(**kv):
    """The client configuration: settings, then bootstrap.servers and kv (dots as underscores)."""
    c = dict(settings)
    c["bootstrap.servers"] = bootstrap
    c.update({k.replace("_", "."): v for k, v in kv.items()})
    return c


def produce(lo, hi):
    p = Producer(conf(acks="all", enable_idempotence=True, compression_type="lz4"))
    errs = []
    for i in range(lo, hi):
        p.produce(topic, key=f"k{i}", value=f"v{i}", on_delivery=lambda e, m: e and errs.append(e))
    left = p.flush(30)
    if left or errs:
        raise RuntimeError(f"produce: {left} undelivered, errors {errs}")


def consume(n):
    c = Consumer(conf(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False))
    c.subscribe([topic])
    got = set()
    deadline = time.time() + 60
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise RuntimeError(f"consume: {m.error()}")
        v = m.value().decode()
        if v in got:
            raise RuntimeError(f"duplicate {v}")
        got.add(v)
    c.commit(asynchronous=False)
    c.close()
    return got


def check(got, lo, hi):
    want = {f"v{i}" for i in range(lo, hi)}
    if got != want:
        raise RuntimeError(f"consumed {sorted(got)}, want {sorted(want)}")


def main():
    admin = AdminClient(conf())
    for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
        f.result(30)
    produce(0, 6)
    check(consume(6), 0, 6)
    produce(6, 10)
    check(consume(4), 6, 10)
    c = Consumer(conf(group_id=group))
    committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
    c.close()
    total = sum(tp.offset for tp in committed)
    if total != 10:
        raise RuntimeError(f"committed offsets sum to {total}, want 10")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one-line reason for run.sh
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
