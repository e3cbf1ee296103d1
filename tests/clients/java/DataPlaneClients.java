// The Java client (kafka-clients 4.x, idempotent by default) against a broker: produce COUNT keyed
// records with headers over PARTITIONS partitions (acks=all), then read them back with assign
// (no group) and check order, keys, values and headers. Also checks offsetsForTimes and
// endOffsets (ListOffsets). Prints one JSON line; exits 1 on any mismatch.
//
// Run as a single-file program: java -cp "<kafka lib>/*" DataPlaneClients.java HOST:PORT TOPIC COUNT PARTITIONS

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class DataPlaneClients {
    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static void fail(String why) {
        System.out.println("{\"ok\": false, \"error\": \"" + why.replace("\"", "'") + "\"}");
        System.exit(1);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]), partitions = Integer.parseInt(args[3]);

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("compression.type", "lz4");
        long firstSend = System.currentTimeMillis();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < count; i++) {
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, i % partitions, bytes("k" + i), bytes("v" + i));
                r.headers().add("i", bytes(Integer.toString(i)));
                sent.add(producer.send(r));
            }
            producer.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata m = sent.get(i).get();
                if (m.partition() != i % partitions || m.offset() != i / partitions) {
                    fail("record " + i + " acknowledged at " + m.partition() + "/" + m.offset());
                }
            }
        }

        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("enable.auto.commit", "false");
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        Map<Integer, Integer> next = new HashMap<>();
        for (int i = 0; i < partitions; i++) next.put(i, i);
        int got = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (got < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    int i = next.get(r.partition());
                    Header h = r.headers().lastHeader("i");
                    if (r.offset() != i / partitions
                            || !new String(r.key(), StandardCharsets.UTF_8).equals("k" + i)
                            || !new String(r.value(), StandardCharsets.UTF_8).equals("v" + i)
                            || h == null || !new String(h.value(), StandardCharsets.UTF_8).equals(Integer.toString(i))) {
                        fail("unexpected record at " + r.partition() + "/" + r.offset());
                    }
                    next.put(r.partition(), i + partitions);
                    got++;
                }
            }
            if (got != count) fail("consumed " + got + " of " + count);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
            long total = 0;
            for (long e : ends.values()) total += e;
            if (total != count) fail("end offsets add up to " + total);
            Map<TopicPartition, Long> query = new HashMap<>();
            query.put(tps.get(0), firstSend - 60_000);
            OffsetAndTimestamp first = consumer.offsetsForTimes(query).get(tps.get(0));
            if (first == null || first.offset() != 0) fail("offsetsForTimes gave " + first);
        }
        System.out.println("{\"ok\": true, \"produced\": " + count + ", \"consumed\": " + got + "}");
    }
}
