// Java kafka-clients 4.x against a corral with faults injected (tests/clients/java/test_faults_java.py,
// docs/faults.md): one mode per run, one JSON config argument, one JSON line out ({"error": text}
// on a failure the client reported).
//
//   commit CONFIG         {"bootstrap", "topic", "group", "protocol": "classic"|"consumer", "count"}:
//                         a subscribed KafkaConsumer reads `count` records, then commitSync() once;
//                         prints {"consumed", "commit_ms", "committed": {partition: offset}} (what
//                         committed() reads back afterwards).
//   produce CONFIG        {"bootstrap", "topic", "partition", "count", "warm_up"?}: an idempotent
//                         KafkaProducer (acks=all) sends `count` records ("v<i>") to the
//                         partition, as one batch, each acknowledged; then an assigned consumer
//                         reads the partition from its start to its end; prints {"acked":
//                         [offsets], "read": [values], "retried": record-retry-total}. With
//                         "warm_up": true it first sends one record ("warm"), prints {"warmed":
//                         offset} and waits for a line on stdin; then sends the others as they
//                         come (several batches in flight).
//   fetch-latency CONFIG  {"bootstrap", "topic", "client_id", "count", "fetches"}: an assigned
//                         consumer reads partition 0 from its start, polling until it has `count`
//                         records and has sent at least `fetches` fetches; prints {"first_record_ms"
//                         (from the first poll to the first record), "fetches", "fetch_latency_avg",
//                         "fetch_latency_max"} (the consumer's own fetch-manager metrics, ms).
//
// Compiled once by tests/kits/kafka_java.py: javac -cp "<kafka lib>/*" FaultClients.java

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class FaultClients {
    static final ObjectMapper JSON = new ObjectMapper();

    static KafkaConsumer<byte[], byte[]> consumer(Properties p) {
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static ObjectNode commit(JsonNode cfg) {
        String topic = cfg.get("topic").asText();
        int count = cfg.get("count").asInt();
        Properties p = new Properties();
        p.put("bootstrap.servers", cfg.get("bootstrap").asText());
        p.put("group.id", cfg.get("group").asText());
        p.put("group.protocol", cfg.get("protocol").asText());
        p.put("client.id", "committer");
        ObjectNode out = JSON.createObjectNode();
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            c.subscribe(List.of(topic));
            int consumed = 0;
            long deadline = System.currentTimeMillis() + 30_000;
            while (consumed < count && System.currentTimeMillis() < deadline) {
                consumed += c.poll(Duration.ofMillis(100)).count();
            }
            out.put("consumed", consumed);
            // The one commit of the run: whatever it meets, commitSync either returns once the
            // offsets are committed or throws (retriable errors are retried inside it).
            long start = System.nanoTime();
            c.commitSync();
            out.put("commit_ms", (System.nanoTime() - start) / 1_000_000);
            ObjectNode committed = out.putObject("committed");
            Set<TopicPartition> parts = c.assignment();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : c.committed(parts).entrySet()) {
                committed.put(Integer.toString(e.getKey().partition()), e.getValue() == null ? -1 : e.getValue().offset());
            }
        }
        return out;
    }

    static ObjectNode produce(JsonNode cfg) throws Exception {
        String topic = cfg.get("topic").asText();
        int partition = cfg.get("partition").asInt(), count = cfg.get("count").asInt();
        boolean warmUp = cfg.has("warm_up") && cfg.get("warm_up").asBoolean();
        Properties p = new Properties();
        p.put("bootstrap.servers", cfg.get("bootstrap").asText());
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("retry.backoff.ms", "50");
        // Without a warm-up the records go as one batch (sent by flush(), linger.ms being long),
        // which the fault answers. With one, they go as they come (linger.ms=0), several
        // batches in flight at once, the producer's sequence already known to the partition.
        p.put("linger.ms", warmUp ? "0" : "60000");
        p.put("client.id", "producer");
        ObjectNode out = JSON.createObjectNode();
        ArrayNode acked = out.putArray("acked");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            if (warmUp) {
                RecordMetadata m = producer.send(new ProducerRecord<>(topic, partition, null, "warm".getBytes(StandardCharsets.UTF_8))).get();
                acked.add(m.offset());
                // The test adds its fault now, then says go.
                System.out.println("{\"warmed\": " + m.offset() + "}");
                System.out.flush();
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            }
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, partition, null, ("v" + i).getBytes(StandardCharsets.UTF_8))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) acked.add(f.get().offset());
            for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
                MetricName m = e.getKey();
                if (m.group().equals("producer-metrics") && m.name().equals("record-retry-total")) {
                    out.put("retried", ((Number) e.getValue().metricValue()).doubleValue());
                }
            }
        }
        Properties c = new Properties();
        c.put("bootstrap.servers", cfg.get("bootstrap").asText());
        c.put("client.id", "reader");
        ArrayNode read = out.putArray("read");
        try (KafkaConsumer<byte[], byte[]> reader = consumer(c)) {
            TopicPartition tp = new TopicPartition(topic, partition);
            reader.assign(List.of(tp));
            reader.seekToBeginning(List.of(tp));
            long end = reader.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 30_000;
            while (reader.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : reader.poll(Duration.ofMillis(200))) {
                    read.add(new String(r.value(), StandardCharsets.UTF_8));
                }
            }
        }
        return out;
    }

    static double metric(KafkaConsumer<byte[], byte[]> c, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : c.metrics().entrySet()) {
            MetricName m = e.getKey();
            if (m.group().equals("consumer-fetch-manager-metrics") && m.name().equals(name) && m.tags().get("topic") == null) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        throw new IllegalStateException("no consumer metric " + name);
    }

    static ObjectNode fetchLatency(JsonNode cfg) {
        String topic = cfg.get("topic").asText();
        int count = cfg.get("count").asInt(), fetches = cfg.get("fetches").asInt();
        Properties p = new Properties();
        p.put("bootstrap.servers", cfg.get("bootstrap").asText());
        p.put("client.id", cfg.get("client_id").asText());
        p.put("fetch.max.wait.ms", "50");
        p.put("max.poll.records", "1");
        ObjectNode out = JSON.createObjectNode();
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            int got = 0;
            long start = System.nanoTime(), first = -1;
            long deadline = System.currentTimeMillis() + 30_000;
            while ((got < count || metric(c, "fetch-total") < fetches) && System.currentTimeMillis() < deadline) {
                int n = c.poll(Duration.ofMillis(100)).count();
                if (n > 0 && first < 0) first = System.nanoTime() - start;
                got += n;
            }
            out.put("records", got);
            out.put("first_record_ms", first / 1_000_000);
            out.put("fetches", metric(c, "fetch-total"));
            out.put("fetch_latency_avg", metric(c, "fetch-latency-avg"));
            out.put("fetch_latency_max", metric(c, "fetch-latency-max"));
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        JsonNode cfg = JSON.readTree(args[1]);
        ObjectNode out;
        try {
            out = switch (args[0]) {
                case "commit" -> commit(cfg);
                case "produce" -> produce(cfg);
                case "fetch-latency" -> fetchLatency(cfg);
                default -> throw new IllegalArgumentException("mode " + args[0]);
            };
        } catch (Exception e) {
            out = JSON.createObjectNode();
            out.put("error", e.toString());
        }
        System.out.println(out.toString());
        System.out.flush();
        System.exit(out.has("error") ? 1 : 0);
    }
}
