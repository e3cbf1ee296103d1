// Share-group consumers (KIP-932) on Java kafka-clients 4.4's KafkaShareConsumer, for the share
// group client tests (tests/clients/test_share_groups_clients.py through tests/kits/share_clients.py,
// which also holds the confluent-kafka twin of this program; tests/clients/go/share.go is the
// franz-go one). All three speak one protocol:
//
//   one JSON config argument: {"bootstrap", "group", "topic", "members": [names],
//     "behaviour": "accept" | "poison:<list>" | "hold", "idle_ms"? (20000), "total"?,
//     "max_poll_records"?}
//   every member (one KafkaShareConsumer on a thread of its own, explicit acknowledgement:
//   share.acknowledgement.mode=explicit) polls and, for each delivered record, decides:
//     accept          ACCEPT every record;
//     poison:<list>   RELEASE every record whose value starts with "poison" (each time it is
//                     delivered), REJECT the records listed (entries "OFFSET", any partition, or
//                     "PARTITION:OFFSET", separated by commas), ACCEPT the rest;
//     hold            poll until a poll returns records, acknowledge none of them, print them
//                     (ack "hold") and {"member", "held": n}, then block until killed; "stop"
//                     then ends the process without closing the consumer (a close would
//                     release what it holds; the broker releases it when the connection drops).
//   After acknowledging a poll's records it calls commitSync() and prints one JSON line per
//   record: {"member", "client": "java", "partition", "offset", "delivery_count", "ack", "ts"
//   (wall-clock ms when the poll returned), "acked_ts" (ms when commitSync returned),
//   "ack_error"? (the partition's commit error)}.
//   A member stops after idle_ms without a record, after `total` deliveries of its own, or when a
//   line "stop" arrives on stdin (every member); then it closes and prints
//   {"member", "summary": true, "delivered", "accept", "release", "reject", "hold",
//    "ack_errors", "error"?}.
//
// Compiled once by tests/kits/kafka_java.py: javac -cp "<kafka lib>/*" ShareConsumers.java

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareConsumers {
    static final ObjectMapper JSON = new ObjectMapper();
    static volatile boolean stopping = false;

    static void print(ObjectNode line) {
        String text = line.toString();
        synchronized (System.out) {
            System.out.println(text);
            System.out.flush();
        }
    }

    static class Member implements Runnable {
        final JsonNode cfg;
        final String name;
        final String behaviour;
        final Set<Long> rejectAny = new HashSet<>();
        final Set<String> rejectAt = new HashSet<>();
        long delivered, accepted, released, rejected, held, ackErrors;

        Member(JsonNode cfg, String name) {
            this.cfg = cfg;
            this.name = name;
            this.behaviour = cfg.path("behaviour").asText("accept");
            if (behaviour.startsWith("poison:")) {
                for (String entry : behaviour.substring("poison:".length()).split(",")) {
                    entry = entry.trim();
                    if (entry.isEmpty()) continue;
                    if (entry.contains(":")) rejectAt.add(entry);
                    else rejectAny.add(Long.parseLong(entry));
                }
            } else if (!behaviour.equals("accept") && !behaviour.equals("hold")) {
                throw new IllegalArgumentException("behaviour " + behaviour);
            }
        }

        AcknowledgeType decide(ConsumerRecord<byte[], byte[]> r) {
            if (!behaviour.startsWith("poison:")) return AcknowledgeType.ACCEPT;
            String value = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
            if (value.startsWith("poison")) return AcknowledgeType.RELEASE;
            if (rejectAny.contains(r.offset()) || rejectAt.contains(r.partition() + ":" + r.offset()))
                return AcknowledgeType.REJECT;
            return AcknowledgeType.ACCEPT;
        }

        ObjectNode line(ConsumerRecord<byte[], byte[]> r, String ack, long ts) {
            ObjectNode o = JSON.createObjectNode();
            o.put("member", name);
            o.put("client", "java");
            o.put("partition", r.partition());
            o.put("offset", r.offset());
            Optional<Short> count = r.deliveryCount();
            if (count.isPresent()) o.put("delivery_count", count.get());
            else o.putNull("delivery_count");
            o.put("ack", ack);
            o.put("ts", ts);
            return o;
        }

        public void run() {
            Properties p = new Properties();
            p.put("bootstrap.servers", cfg.get("bootstrap").asText());
            p.put("group.id", cfg.get("group").asText());
            p.put("client.id", name);
            p.put("share.acknowledgement.mode", "explicit");
            if (cfg.has("max_poll_records")) p.put("max.poll.records", cfg.get("max_poll_records").asText());
            long idleMs = cfg.path("idle_ms").asLong(20000);
            long total = cfg.path("total").asLong(0);
            String error = null;
            try (KafkaShareConsumer<byte[], byte[]> consumer =
                    new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                consumer.subscribe(List.of(cfg.get("topic").asText()));
                long last = System.nanoTime();
                while (!stopping) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(250));
                    long ts = System.currentTimeMillis();
                    if (records.isEmpty()) {
                        if ((System.nanoTime() - last) / 1_000_000 > idleMs) break;
                        continue;
                    }
                    last = System.nanoTime();
                    if (behaviour.equals("hold")) {
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            delivered++;
                            held++;
                            print(line(r, "hold", ts));
                        }
                        ObjectNode o = JSON.createObjectNode();
                        o.put("member", name);
                        o.put("held", held);
                        print(o);
                        while (!stopping) Thread.sleep(100);
                        // No close (it would release what is held): the process ends here.
                        print(summary(null));
                        System.exit(0);
                    }
                    List<ObjectNode> lines = new ArrayList<>();
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        AcknowledgeType type = decide(r);
                        consumer.acknowledge(r, type);
                        delivered++;
                        switch (type) {
                            case ACCEPT -> accepted++;
                            case RELEASE -> released++;
                            case REJECT -> rejected++;
                            default -> { }
                        }
                        lines.add(line(r, type.toString().toLowerCase(), ts));
                    }
                    Map<TopicIdPartition, Optional<KafkaException>> results =
                        consumer.commitSync(Duration.ofSeconds(30));
                    long ackedTs = System.currentTimeMillis();
                    for (ObjectNode o : lines) {
                        o.put("acked_ts", ackedTs);
                        int partition = o.get("partition").asInt();
                        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : results.entrySet()) {
                            if (e.getKey().partition() == partition && e.getValue().isPresent()) {
                                o.put("ack_error", e.getValue().get().toString());
                                ackErrors++;
                            }
                        }
                        print(o);
                    }
                    if (total > 0 && delivered >= total) break;
                }
            } catch (Exception e) {
                error = e.toString();
            }
            print(summary(error));
        }

        ObjectNode summary(String error) {
            ObjectNode s = JSON.createObjectNode();
            s.put("member", name);
            s.put("client", "java");
            s.put("summary", true);
            s.put("delivered", delivered);
            s.put("accept", accepted);
            s.put("release", released);
            s.put("reject", rejected);
            s.put("hold", held);
            s.put("ack_errors", ackErrors);
            if (error != null) s.put("error", error);
            return s;
        }
    }

    public static void main(String[] args) throws Exception {
        JsonNode cfg = JSON.readTree(args[0]);
        List<Thread> threads = new ArrayList<>();
        for (JsonNode name : cfg.get("members")) {
            Thread t = new Thread(new Member(cfg, name.asText()), "member-" + name.asText());
            t.start();
            threads.add(t);
        }
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) stopping = true;
                }
            } catch (Exception e) {
                // stdin closed: members stop on their own (idle_ms, total)
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        for (Thread t : threads) t.join();
        System.exit(0);
    }
}
