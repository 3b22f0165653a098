// Smoke test of the Apache Kafka Java client (kafka-clients) against kmirror, run by
// test/clients/java.sh: create a 2-partition topic with Admin, produce 6 records, consume them
// in a group and commit, close; produce 4 more, and a new consumer in the same group must
// resume from the commit (exactly the 4 new records). The producer is idempotent and compresses
// with zstd; the second 4 records are written in a committed transaction after an aborted one,
// and the read_committed consumer must not see the aborted records. Exits 1 with a one-line
// reason on failure. SMOKE_CLIENT_CONFIG names a properties file of client settings
// (security.protocol, sasl.*, ssl.*) every client gets.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.*;

public class Smoke {
    static String bootstrap, topic, group;

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        topic = args[1];
        group = args[2];
        try {
            run();
        } catch (Throwable e) {
            System.err.println("FAIL: " + e);
            System.exit(1);
        }
        System.exit(0);
    }

    static void run() throws Exception {
        Properties ap = props();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
        }
        produce(0, 6);
        Set<String> first = consume(6);
        check(first, 0, 6);
        produceTxn(6, 10);
        Set<String> second = consume(4);
        check(second, 6, 10);
        try (Admin admin = Admin.create(ap)) {
            // Each committed offset must be the partition's log end offset (records and
            // transaction markers alike): the group has consumed everything.
            var committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            var latest = new HashMap<org.apache.kafka.common.TopicPartition, OffsetSpec>();
            for (var tp : committed.keySet()) latest.put(tp, OffsetSpec.latest());
            var ends = admin.listOffsets(latest).all().get();
            if (committed.size() != 2) throw new IllegalStateException("committed " + committed);
            for (var e : committed.entrySet()) {
                long end = ends.get(e.getKey()).offset();
                if (e.getValue().offset() != end) {
                    throw new IllegalStateException(e.getKey() + " committed " + e.getValue().offset() + ", log end offset " + end);
                }
            }
        }
    }

    static void produce(int from, int to) throws Exception {
        Properties p = props();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "zstd");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = from; i < to; i++) {
                prod.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
            }
        }
    }

    // produceTxn aborts a transaction of records "aborted-i", then commits one of "v<from>".."v<to-1>".
    static void produceTxn(int from, int to) throws Exception {
        Properties p = props();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic + "-txn");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "zstd");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            prod.initTransactions();
            prod.beginTransaction();
            for (int i = from; i < to; i++) {
                prod.send(new ProducerRecord<>(topic, "k" + i, "aborted-" + i)).get();
            }
            prod.abortTransaction();
            prod.beginTransaction();
            for (int i = from; i < to; i++) {
                prod.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            }
            prod.commitTransaction();
        }
    }

    // consume reads n records in the group, commits them synchronously and closes the consumer.
    static Set<String> consume(int n) {
        Properties c = props();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (System.getenv("SMOKE_GROUP_PROTOCOL") != null) {
            c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, System.getenv("SMOKE_GROUP_PROTOCOL"));
        }
        Set<String> got = new TreeSet<>();
        try (KafkaConsumer<String, String> cons = new KafkaConsumer<>(c)) {
            cons.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : cons.poll(Duration.ofMillis(500))) {
                    if (!got.add(r.value())) throw new IllegalStateException("duplicate " + r.value());
                }
            }
            cons.commitSync();
        }
        return got;
    }

    // props are the client properties every client starts from: those of the file named by
    // SMOKE_CLIENT_CONFIG (security.protocol, sasl.*, ssl.*; test/clients/security.sh), if set.
    static Properties props() {
        Properties p = new Properties();
        String f = System.getenv("SMOKE_CLIENT_CONFIG");
        if (f != null) {
            try (var in = new java.io.FileInputStream(f)) {
                p.load(in);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        return p;
    }

    static void check(Set<String> got, int from, int to) {
        Set<String> want = new TreeSet<>();
        for (int i = from; i < to; i++) want.add("v" + i);
        if (!got.equals(want)) throw new IllegalStateException("consumed " + got + ", want " + want);
    }
}
