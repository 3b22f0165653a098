// Smoke test of the Apache Kafka Java client (kafka-clients) against kmirror, run by
// test/clients/java.sh: create a 2-partition topic with Admin, produce 6 records, consume them
// in a group and commit, close; produce 4 more, and a new consumer in the same group must
// resume from the commit (exactly the 4 new records). Exits 1 with a one-line reason on failure.
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
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
        }
        produce(0, 6);
        Set<String> first = consume(6);
        check(first, 0, 6);
        produce(6, 10);
        Set<String> second = consume(4);
        check(second, 6, 10);
        try (Admin admin = Admin.create(ap)) {
            long sum = 0;
            for (var e : admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().values()) {
                sum += e.offset();
            }
            if (sum != 10) throw new IllegalStateException("committed offsets sum to " + sum + ", want 10");
        }
    }

    static void produce(int from, int to) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = from; i < to; i++) {
                prod.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
            }
        }
    }

    // consume reads n records in the group, commits them synchronously and closes the consumer.
    static Set<String> consume(int n) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
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

    static void check(Set<String> got, int from, int to) {
        Set<String> want = new TreeSet<>();
        for (int i = from; i < to; i++) want.add("v" + i);
        if (!got.equals(want)) throw new IllegalStateException("consumed " + got + ", want " + want);
    }
}
