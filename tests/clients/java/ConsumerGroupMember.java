// Consumer-group members (Java kafka-clients 4.x) in one JVM, KIP-848 (group.protocol=consumer, the
// default) or classic, for the consumer group tests: the Java twin of tests/kits/cg_member.py, speaking
// the same protocol (see that file): one JSON config argument; JSON lines out ("owned", "records",
// "error", "closed", each with the member's name "m" and System.nanoTime "t"); "close NAME" lines
// in, EOF closes every member. Java members also report their member epoch, or generation for a
// classic member (groupMetadata().generationId()).
//
// "protocol": "classic" runs a JoinGroup/SyncGroup member: "strategy" (default "range") is a
// comma-separated list of range, roundrobin, sticky, cooperative-sticky, turned into the
// assignor classes of partition.assignment.strategy in that order of preference;
// "session_timeout_ms" (default 6000) and "heartbeat_interval_ms" (default 1000). The client
// rebalances cooperatively only if every listed assignor is cooperative (cooperative-sticky),
// else eagerly: onPartitionsAssigned then carries the whole assignment (after an
// onPartitionsRevoked of everything). "assignor" (group.remote.assignor) is set for consumer
// members only, the classic settings for classic members only (the client refuses either with
// the other protocol).
//
// Compiled once by tests/kits/kafka_java.py: javac -cp "<kafka lib>/*" ConsumerGroupMember.java
//
// "regex" subscribes with a SubscriptionPattern (RE2J, resolved by the broker); with
// "regex_kind": "client" it subscribes with a java.util.regex.Pattern (resolved by the client,
// which sends topic names).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ConsumerGroupMember {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Map<String, Member> MEMBERS = new ConcurrentHashMap<>();

    static synchronized void emit(ObjectNode event) {
        System.out.println(event.toString());
        System.out.flush();
    }

    static ObjectNode event(String name, String ev) {
        ObjectNode e = JSON.createObjectNode();
        e.put("m", name);
        e.put("t", System.nanoTime());
        e.put("ev", ev);
        return e;
    }

    static final class Member implements Runnable, ConsumerRebalanceListener {
        final JsonNode cfg;
        final JsonNode spec;
        final String name;
        final KafkaConsumer<byte[], byte[]> consumer;
        final List<TopicPartition> ownedParts = new ArrayList<>();
        // Eager (classic range...): onPartitionsAssigned carries the whole assignment.
        final boolean eager;
        volatile boolean stop;

        Member(JsonNode cfg, JsonNode spec) {
            this.cfg = cfg;
            this.spec = spec;
            this.name = spec.get("name").asText();
            Properties p = new Properties();
            p.put("bootstrap.servers", cfg.get("bootstrap").asText());
            p.put("group.id", cfg.get("group").asText());
            String protocol = opt("protocol") == null ? "consumer" : opt("protocol").asText();
            p.put("group.protocol", protocol);
            p.put("enable.auto.commit", "false");
            p.put("auto.offset.reset", "earliest");
            p.put("client.id", spec.has("client_id") ? spec.get("client_id").asText() : name);
            p.put("metadata.max.age.ms", "1000");
            boolean eager = false;
            if (protocol.equals("classic")) {
                String strategy = opt("strategy") == null ? "range" : opt("strategy").asText();
                List<String> classes = new ArrayList<>();
                for (String s : strategy.split(",")) {
                    String assignorName = s.trim();
                    if (!assignorName.equals("cooperative-sticky")) eager = true;
                    classes.add(switch (assignorName) {
                        case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
                        case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
                        case "sticky" -> "org.apache.kafka.clients.consumer.StickyAssignor";
                        case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
                        default -> throw new IllegalArgumentException("strategy " + assignorName);
                    });
                }
                p.put("partition.assignment.strategy", String.join(",", classes));
                p.put("session.timeout.ms", opt("session_timeout_ms") == null ? "6000" : opt("session_timeout_ms").asText());
                p.put("heartbeat.interval.ms", opt("heartbeat_interval_ms") == null ? "1000" : opt("heartbeat_interval_ms").asText());
            } else if (protocol.equals("consumer")) {
                if (opt("assignor") != null) p.put("group.remote.assignor", opt("assignor").asText());
            } else {
                throw new IllegalArgumentException("protocol " + protocol);
            }
            this.eager = eager;
            if (opt("max_poll_interval_ms") != null) p.put("max.poll.interval.ms", opt("max_poll_interval_ms").asText());
            if (spec.hasNonNull("instance_id")) p.put("group.instance.id", spec.get("instance_id").asText());
            consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        }

        // A member's own setting, else the process-wide one (null if neither).
        JsonNode opt(String key) {
            if (spec.hasNonNull(key)) return spec.get(key);
            boolean subscription = key.equals("topics") || key.equals("regex") || key.equals("regex_kind");
            if (subscription && (spec.hasNonNull("topics") || spec.hasNonNull("regex"))) return null;
            return cfg.hasNonNull(key) ? cfg.get(key) : null;
        }

        void report(String why) {
            ObjectNode e = event(name, "owned");
            e.put("why", why);
            ArrayNode list = e.putArray("owned");
            for (TopicPartition tp : ownedParts) {
                list.addArray().add(tp.topic()).add(tp.partition());
            }
            try {
                e.put("epoch", consumer.groupMetadata().generationId());
            } catch (RuntimeException ignored) {
                // groupMetadata() before the first join
            }
            emit(e);
        }

        void sortOwned() {
            ownedParts.sort((a, b) -> a.topic().equals(b.topic())
                    ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            // KIP-848 and cooperative rebalances are incremental: `parts` is what is added. An
            // eager one hands the whole assignment over (after revoking everything).
            if (eager) ownedParts.clear();
            for (TopicPartition tp : parts) if (!ownedParts.contains(tp)) ownedParts.add(tp);
            sortOwned();
            report("assigned");
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            ownedParts.removeAll(parts);
            report("revoked");
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            ownedParts.removeAll(parts);
            report("lost");
        }

        @Override
        public void run() {
            try {
                if (opt("regex") != null) {
                    String regex = opt("regex").asText();
                    if (opt("regex_kind") != null && opt("regex_kind").asText().equals("client")) {
                        consumer.subscribe(Pattern.compile(regex), this);
                    } else {
                        consumer.subscribe(new SubscriptionPattern(regex), this);
                    }
                } else {
                    List<String> topics = new ArrayList<>();
                    for (JsonNode t : opt("topics")) topics.add(t.asText());
                    consumer.subscribe(topics, this);
                }
                boolean commit = opt("commit") == null || opt("commit").asBoolean();
                // The last commit failed: tried again at the next poll, records or not.
                boolean retryCommit = false;
                while (!stop) {
                    ConsumerRecords<byte[], byte[]> records;
                    try {
                        records = consumer.poll(Duration.ofMillis(50));
                    } catch (RuntimeException e) {
                        ObjectNode err = event(name, "error");
                        err.put("error", e.toString());
                        emit(err);
                        continue;
                    }
                    if (records.isEmpty() && !retryCommit) continue;
                    if (commit) {
                        try {
                            consumer.commitSync();
                            retryCommit = false;
                        } catch (RuntimeException e) {
                            retryCommit = true;
                            ObjectNode err = event(name, "error");
                            err.put("error", "commit: " + e);
                            emit(err);
                        }
                    }
                    if (records.isEmpty()) continue;
                    ObjectNode e = event(name, "records");
                    ArrayNode list = e.putArray("records");
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        list.addArray().add(r.topic()).add(r.partition()).add(r.offset());
                    }
                    emit(e);
                }
                consumer.close();
                emit(event(name, "closed"));
            } catch (RuntimeException e) {
                ObjectNode err = event(name, "error");
                err.put("error", "member thread: " + e);
                emit(err);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        JsonNode cfg = JSON.readTree(args[0]);
        List<Thread> threads = new ArrayList<>();
        for (JsonNode spec : cfg.get("members")) {
            Member m = new Member(cfg, spec);
            MEMBERS.put(m.name, m);
            Thread t = new Thread(m, "member-" + m.name);
            threads.add(t);
            t.start();
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words.length == 2 && words[0].equals("close") && MEMBERS.containsKey(words[1])) {
                // No wakeup(): a wakeup pending when the thread is not in poll would hit
                // whatever blocking call comes next (commitSync, close). Polls last 50 ms.
                MEMBERS.get(words[1]).stop = true;
            }
        }
        for (Member m : MEMBERS.values()) m.stop = true;
        for (Thread t : threads) t.join();
    }
}
