// The Java client (kafka-clients 4.x) over a secured listener: produce COUNT records to TOPIC,
// consume them in GROUP (subscribe) and commit synchronously. The client's security settings
// (security.protocol, ssl.*, sasl.*) come from a properties file. Prints one JSON line:
// {"ok": true, "consumed": N, "committed": N} or {"ok": false, "error": "<exception>: <message>"}
// and exits 1 on failure.
//
// Run as a single-file program:
//   java -cp "<kafka lib>/*" SecureClients.java HOST:PORT SECURITY.properties TOPIC GROUP COUNT

import java.io.FileInputStream;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecureClients {
    static void finish(boolean ok, String json) {
        System.out.println(json);
        System.exit(ok ? 0 : 1);
    }

    public static void main(String[] args) {
        String bootstrap = args[0], topic = args[2], group = args[3];
        int count = Integer.parseInt(args[4]);
        try {
            Properties security = new Properties();
            try (FileInputStream in = new FileInputStream(args[1])) {
                security.load(in);
            }
            Properties p = new Properties();
            p.putAll(security);
            p.put("bootstrap.servers", bootstrap);
            p.put("acks", "all");
            p.put("max.block.ms", "15000");
            p.put("delivery.timeout.ms", "20000");
            p.put("request.timeout.ms", "10000");
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < count; i++) {
                    producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
                }
            }
            Properties c = new Properties();
            c.putAll(security);
            c.put("bootstrap.servers", bootstrap);
            c.put("group.id", group);
            c.put("auto.offset.reset", "earliest");
            c.put("enable.auto.commit", "false");
            c.put("default.api.timeout.ms", "15000");
            int consumed = 0;
            long committed = 0;
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 30000;
                while (consumed < count && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                    consumed += records.count();
                }
                consumer.commitSync();
                Map<TopicPartition, OffsetAndMetadata> offsets = consumer.committed(consumer.assignment());
                for (OffsetAndMetadata offset : offsets.values()) {
                    committed += offset == null ? 0 : offset.offset();
                }
            }
            finish(consumed == count && committed == count,
                   "{\"ok\": " + (consumed == count && committed == count) + ", \"consumed\": " + consumed + ", \"committed\": " + committed + "}");
        } catch (Throwable e) {
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            String text = e.getClass().getName() + ": " + e.getMessage() + " / " + root.getClass().getName() + ": " + root.getMessage();
            finish(false, "{\"ok\": false, \"error\": \"" + text.replace("\\", "/").replace("\"", "'").replace("\n", " ") + "\"}");
        }
    }
}
